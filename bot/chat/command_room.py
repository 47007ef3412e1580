"""The command room's policy: who may ask there, and whether the room may be served at all.

Every reply in the command room carries other rooms' text, so whoever can read the room reads
every room. It is served only when the reader may read it at all (`RoomScope.readable`: joined,
not a DM (rule 14), not bridged (a bridge would relay every room's results off the
homeserver), not encrypted (the bot holds no keys: it would read none of the commands and
answer in plaintext where members expect encryption); its exclusion from the index does not
matter, operators often exclude it) and nobody but the allowed askers and the bot can read it:
its join rule needs an invite (`invite`, `knock`, `private`; `knock` too, since a knock is only
a request until a member invites, and the knocker then is a member this check names), its
history is `joined` or `invited` (under `shared`, the default, whoever is added later reads
every earlier reply; `world_readable` anyone), and every joined or invited member is an allowed
asker or the bot. The allow-list (`bot.command_room_askers`) is matched whole (`fullmatch`), like
the puppet patterns: an unanchored `@persona-.*:example\\.org` must not let
`@persona-x:example.org.evil` in.

Pure: a `RoomState` and its scope verdict in, a `CommandRoomVerdict` out (rule 14's command
room, docs/ARCHITECTURE.md §3).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ingest.matrix.rooms import RoomInfo
from ingest.types import Refusal, RoomID, RoomState, Verdict

__all__ = ["CommandRoomPolicy", "CommandRoomRefusal", "CommandRoomVerdict"]

# Join rules that need an invite (None: no join rules event, and then the auth rules admit
# no one uninvited). `public`, `restricted` and `knock_restricted` let people in without one.
_INVITE_ONLY = frozenset({None, "invite", "knock", "private"})
# History a newcomer cannot read back (the command room's replies stay with who was there).
_MEMBERS_ONLY = frozenset({"joined", "invited"})


class CommandRoomRefusal(enum.StrEnum):
    """Why a room the reader may read is still not served as the command room: who could read
    its replies."""

    PUBLIC = "public"  # a join rule that lets someone in without an invite
    WORLD_READABLE = "world_readable"  # history readable without joining
    SHARED_HISTORY = "shared_history"  # a member added later reads the earlier replies
    OUTSIDER = "outsider"  # a joined or invited member who is neither an asker nor the bot


@dataclass(frozen=True)
class CommandRoomVerdict:
    """Served, or refused by a scope rule or by the command room's own, with a human detail."""

    room_id: RoomID
    reason: Refusal | CommandRoomRefusal | None = None
    detail: str = ""

    @property
    def eligible(self) -> bool:
        return self.reason is None

    @classmethod
    def of(cls, verdict: Verdict) -> CommandRoomVerdict:
        return cls(verdict.room_id, verdict.reason, verdict.detail)


@dataclass(frozen=True)
class CommandRoomPolicy:
    """`bot.command_room_askers` compiled once, and the bot's own users (not an audience)."""

    askers: tuple[re.Pattern[str], ...]
    own_users: frozenset[str]

    @classmethod
    def of(cls, askers: Iterable[str], own_user: str) -> CommandRoomPolicy:
        return cls(tuple(re.compile(p) for p in askers), frozenset({own_user}))

    def asker_allowed(self, user_id: str) -> bool:
        """True when `user_id` fully matches one of `bot.command_room_askers`."""
        return any(p.fullmatch(user_id) for p in self.askers)

    def serves_room(self, info: RoomInfo) -> CommandRoomVerdict:
        """`serves` over the room verdicts' cached read (`RoomCache`)."""
        return self.serves(info.state, info.readable)

    def serves(self, state: RoomState | None, readable: Verdict) -> CommandRoomVerdict:
        """Whether the room may be the command room; `readable` is its scope verdict with the
        operator's exclusions set aside (`RoomScope.readable`); `state` None: not read."""
        if not readable.eligible or state is None:
            return CommandRoomVerdict.of(readable)
        refused = _open(state)
        if refused is not None:
            return refused
        for kind, users in (("member", state.members), ("invited user", state.invited)):
            outsider = next(
                (u for u in users if u not in self.own_users and not self.asker_allowed(u)), None
            )
            if outsider is not None:
                return CommandRoomVerdict(
                    state.room_id,
                    CommandRoomRefusal.OUTSIDER,
                    f"{kind} {outsider} is not on bot.command_room_askers and would read "
                    "every room's results",
                )
        return CommandRoomVerdict(state.room_id)


def _open(state: RoomState) -> CommandRoomVerdict | None:
    """The command room's history must not be readable without an invite."""
    if state.join_rule not in _INVITE_ONLY:
        return CommandRoomVerdict(
            state.room_id,
            CommandRoomRefusal.PUBLIC,
            f"join rule {state.join_rule} lets anyone in without an invite",
        )
    if state.history_visibility == "world_readable":
        return CommandRoomVerdict(
            state.room_id,
            CommandRoomRefusal.WORLD_READABLE,
            "history visibility world_readable lets anyone read it without joining",
        )
    if state.history_visibility not in _MEMBERS_ONLY:
        seen = state.history_visibility or "shared (no history visibility event)"
        return CommandRoomVerdict(
            state.room_id,
            CommandRoomRefusal.SHARED_HISTORY,
            f"history visibility {seen} lets a member added later read every earlier "
            "reply; set it to joined",
        )
    return None
