"""Which rooms may be read at all (docs/ARCHITECTURE.md §3 rules 1–5).

Pure: `RoomState` in, `Verdict` out. The refusal order is fixed and is also the order the journal
reports: not joined → excluded → command room → DM → bridged → encrypted. The first rule that
refuses wins, so the detail names one concrete cause (which alias, which member, which bridge
state key).

Alias matching: the spec's grammar gives an alias localpart no case rule and Synapse stores and
resolves aliases byte-for-byte, so `#Members:x` and `#members:x` can be two rooms. This is a
deny-list, though, and the safe failure of a deny-list is refusing one room too many, never
indexing a members-only room because somebody capitalised its alias. So the exclusion compares
case-folded aliases (the server part is a DNS name and case-insensitive anyway).

Puppets: every sender of a room's timeline has a membership event, and it stays in the state
after the user leaves or is banned, so a puppet that spoke and left is refused here, by its
past membership, before any event is read. The writer and the bot still check every sender of
what they read (`puppet_in_events`, `puppet_senders`): a state may be partial (a faster join)
or, for an import, hold no membership at all.

The command room (`bot.command_room`) is where people ask, not where answers live: its askers'
notes and an agent's earlier questions would come back as the top hits of every cross-room
search, so it is left out of the index like an excluded room (rule 2, `Refusal.COMMAND_ROOM`),
unless the operator opts in (`bot.index_command_room`). It is known by its id, or by an alias
its state lists (case-folded, as exclusions are), or by the id its alias resolved to where the
caller could ask (`with_command_room_id`). Whether it is served is the bot's policy
(`bot.chat.command_room`): it starts from `readable`, this room's verdict with the operator's
exclusions, this one included, set aside.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, replace

from mautrix.types import EventType

from ingest.config import ScopeConfig
from ingest.event import ClientEvent
from ingest.types import Refusal, RoomAlias, RoomID, RoomState, UserID, Verdict

__all__ = ["RoomScope", "decide", "expand_alias", "is_puppet", "puppet_senders"]


def expand_alias(alias: str, server_name: str) -> RoomAlias:
    """`#members` → `#members:<server_name>`; an alias with a server part is returned unchanged."""
    if ":" in alias:
        return RoomAlias(alias)
    return RoomAlias(f"{alias}:{server_name}")


def _alias_key(alias: str) -> str:
    return alias.casefold()


def _compile(patterns: Iterable[str | re.Pattern[str]]) -> tuple[re.Pattern[str], ...]:
    return tuple(p if isinstance(p, re.Pattern) else re.compile(p) for p in patterns)


def is_puppet(user_id: str, patterns: Iterable[str | re.Pattern[str]]) -> bool:
    """True when `user_id` fully matches one of the puppet namespace regexes.

    A full match, like an appservice namespace: `@_discord_.*` matches `@_discord_123:server`
    (the `.*` covers the server part) but not `@alice_discord_:server`.
    """
    return any(p.fullmatch(user_id) for p in _compile(patterns))


@dataclass(frozen=True)
class RoomScope:
    """The scope rules compiled once: exclusions expanded, puppet patterns compiled."""

    server_name: str
    exclude_room_ids: frozenset[str]
    # case-folded full alias → the alias as the operator configured it (for the journal)
    exclude_aliases: dict[str, str]
    puppet_patterns: tuple[re.Pattern[str], ...]
    # The command room left out of the index: its id and case-folded full alias as configured,
    # and the id that alias resolved to; empty: none configured, or indexed by the operator's
    # choice (`bot.index_command_room`).
    command_room: frozenset[str] = frozenset()

    @classmethod
    def from_config(
        cls, scope: ScopeConfig, server_name: str, *, command_room: str | None = None
    ) -> RoomScope:
        """`command_room`: the room `bot.command_room` names (an id or an alias, `#muninn`
        being this homeserver's), to be left out of the index; None: none to leave out."""
        aliases = {_alias_key(expand_alias(a, server_name)): a for a in scope.exclude_aliases}
        command: frozenset[str] = frozenset()
        if command_room is not None:
            key = command_room if command_room.startswith("!") else None
            command = frozenset({key or _alias_key(expand_alias(command_room, server_name))})
        return cls(
            server_name=server_name,
            exclude_room_ids=frozenset(scope.exclude_room_ids),
            exclude_aliases=aliases,
            puppet_patterns=_compile(scope.bridge_puppet_patterns),
            command_room=command,
        )

    def with_command_room_id(self, room_id: str | None) -> RoomScope:
        """The same rules, the command room also known by `room_id`, the id its configured
        alias resolved to (an alias the room's state does not list still names it). Unchanged
        without a command room to leave out, or without an id."""
        if not self.command_room or room_id is None or room_id in self.command_room:
            return self
        return replace(self, command_room=self.command_room | {room_id})

    def is_puppet(self, user_id: str) -> bool:
        """True when `user_id` is in a configured bridge puppet namespace."""
        return any(p.fullmatch(user_id) for p in self.puppet_patterns)

    def decide(self, state: RoomState, direct_rooms: Set[RoomID]) -> Verdict:
        """Eligible, or the first refusal in the fixed order with a sentence for the journal."""
        checks = (
            self._joined,
            self._excluded,
            self._command,
            self._direct,
            self._bridged,
            self._encrypted,
        )
        return _first_refusal(checks, state, direct_rooms)

    def readable(self, state: RoomState, direct_rooms: Set[RoomID]) -> Verdict:
        """`decide` with the operator's exclusions (the command room's too) set aside (rules 1,
        3–5): whether the reader may read the room at all, indexed or not (the command room,
        `bot.chat.command_room`)."""
        checks = (self._joined, self._direct, self._bridged, self._encrypted)
        return _first_refusal(checks, state, direct_rooms)

    # Each check returns a refusal or None; they share a signature so `decide` is one loop.

    def _joined(self, state: RoomState, _direct: Set[RoomID]) -> Verdict | None:
        if state.joined:
            return None
        return Verdict(state.room_id, Refusal.NOT_JOINED, "the reader has not joined this room")

    def _excluded(self, state: RoomState, _direct: Set[RoomID]) -> Verdict | None:
        if state.room_id in self.exclude_room_ids:
            return Verdict(
                state.room_id, Refusal.EXCLUDED, f"room id {state.room_id} is excluded by config"
            )
        aliases = ((state.canonical_alias,) if state.canonical_alias else ()) + state.alt_aliases
        for alias in aliases:
            configured = self.exclude_aliases.get(_alias_key(alias))
            if configured is not None:
                kind = "canonical alias" if alias == state.canonical_alias else "alt alias"
                return Verdict(
                    state.room_id,
                    Refusal.EXCLUDED,
                    f"{kind} {alias} matches excluded alias {configured}",
                )
        return None

    def _command(self, state: RoomState, _direct: Set[RoomID]) -> Verdict | None:
        if not self.command_room:
            return None
        aliases = ((state.canonical_alias,) if state.canonical_alias else ()) + state.alt_aliases
        if state.room_id in self.command_room or any(
            _alias_key(a) in self.command_room for a in aliases
        ):
            return Verdict(
                state.room_id,
                Refusal.COMMAND_ROOM,
                "the command room (bot.command_room) is where people ask, not where answers "
                "live: not indexed (bot.index_command_room: true indexes it)",
            )
        return None

    def _direct(self, state: RoomState, direct_rooms: Set[RoomID]) -> Verdict | None:
        if state.direct_flag:
            why = "a membership event in the room has is_direct"
        elif state.room_id in direct_rooms:
            why = "the room is in the reader's m.direct account data"
        else:
            return None
        return Verdict(state.room_id, Refusal.DM, f"direct message room: {why}")

    def _bridged(self, state: RoomState, _direct: Set[RoomID]) -> Verdict | None:
        if state.bridge_state_keys:
            key = state.bridge_state_keys[0]
            return Verdict(
                state.room_id, Refusal.BRIDGED, f"bridged: bridge state event with state_key {key}"
            )
        for members, kind in ((state.members, "member"), (state.past_members, "past member")):
            puppet = next((m for m in members if self.is_puppet(m)), None)
            if puppet is not None:
                return Verdict(
                    state.room_id,
                    Refusal.BRIDGED,
                    f"bridged: {kind} {puppet} is in a bridge puppet namespace",
                )
        return None

    def _encrypted(self, state: RoomState, _direct: Set[RoomID]) -> Verdict | None:
        if not state.encrypted:
            return None
        # Muninn holds no keys; every event would be ciphertext, so the room is refused whole.
        return Verdict(state.room_id, Refusal.ENCRYPTED, "the room has m.room.encryption enabled")


_Check = Callable[[RoomState, Set[RoomID]], Verdict | None]


def _first_refusal(checks: Iterable[_Check], state: RoomState, direct: Set[RoomID]) -> Verdict:
    for check in checks:
        verdict = check(state, direct)
        if verdict is not None:
            return verdict
    return Verdict(state.room_id)


def decide(
    state: RoomState,
    *,
    direct_rooms: frozenset[RoomID] | set[RoomID],
    scope: ScopeConfig,
    server_name: str,
) -> Verdict:
    """Decide one room; build a `RoomScope` once instead when deciding many."""
    return RoomScope.from_config(scope, server_name).decide(state, direct_rooms)


def puppet_senders(senders: Iterable[UserID], scope: RoomScope) -> list[UserID]:
    """The senders in a bridge puppet namespace (a sender need not be a current member)."""
    return [s for s in senders if scope.is_puppet(s)]


def puppet_in_events(events: Iterable[ClientEvent], scope: RoomScope) -> str | None:
    """The first sender or member of raw events in a bridge puppet namespace, or None.

    Room state names only current members; a puppet that spoke and left shows here.
    """
    asked: set[str] = set()  # a room's 2,048 latest events have a few hundred senders
    for e in events:
        member = e.get("state_key") if e.get("type") == EventType.ROOM_MEMBER.t else None
        for who in (e.get("sender"), member):
            if isinstance(who, str) and who not in asked:
                if scope.is_puppet(who):
                    return who
                asked.add(who)
    return None
