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

A room refused by its own policy (not by scope: a DM, a bridged or encrypted room is never
answered in) tells an allowed asker why and what would fix it (`CommandRoomVerdict.notice`),
once a cause (`RefusalsTold`): only the service log said so before (issue 44). The notice quotes
no room, so it may be read by whoever can read the room.

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

__all__ = ["CommandRoomPolicy", "CommandRoomRefusal", "CommandRoomVerdict", "RefusalsTold"]

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
    # What an allowed asker is told, the cause and the fix in plain words; "" for a refusal
    # no asker is told (scope's: the room is never answered in)
    notice: str = ""

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
                detail = (
                    f"{kind} {outsider} is not on bot.command_room_askers and would read "
                    "every room's results"
                )
                where = "a member of" if kind == "member" else "invited to"
                what = f"{outsider} is {where} this room"
                return _refused(state, CommandRoomRefusal.OUTSIDER, detail, what)
        return CommandRoomVerdict(state.room_id)


class RefusalsTold:
    """The command room's refusals its askers were told, so each cause is told once, not
    on every command; a room served again forgets them (a later refusal is told anew)."""

    def __init__(self) -> None:
        self._told: dict[str, set[str]] = {}  # room -> the refusals told there

    def first(self, verdict: CommandRoomVerdict) -> bool:
        """True the first time this refusal is met in its room (and it has a notice)."""
        if verdict.eligible:
            self._told.pop(verdict.room_id, None)
            return False
        told = self._told.setdefault(verdict.room_id, set())
        if not verdict.notice or str(verdict.reason) in told:
            return False
        told.add(str(verdict.reason))
        return True

    def forget(self, verdict: CommandRoomVerdict) -> None:
        """The notice did not reach the room: tell it on the next command."""
        self._told.get(verdict.room_id, set()).discard(str(verdict.reason))


# What an allowed asker is told (`CommandRoomVerdict.notice`): the cause, then the fix.
_HISTORY_FIX = (
    'Set it to "joined" or "invited" (in Element: Room settings, Security & Privacy, "Who can '
    'read history?", "Members only (since they joined)"), then ask again.'
)
_NOTICES = {
    CommandRoomRefusal.PUBLIC: (
        'this room\'s join rule is "{what}", so people can join without an invite and would '
        'read every room\'s results. Make it invite-only (join rule "invite" or "knock"; in '
        'Element: Room settings, Security & Privacy, "Private (invite only)"), then ask again.'
    ),
    CommandRoomRefusal.WORLD_READABLE: (
        'this room\'s history visibility is "world_readable", so anyone can read its answers, '
        "and every room's results in them, without joining. " + _HISTORY_FIX
    ),
    CommandRoomRefusal.SHARED_HISTORY: (
        'this room\'s history visibility is "{what}", so anyone added later would read every '
        "earlier answer, and every room's results in them. " + _HISTORY_FIX
    ),
    CommandRoomRefusal.OUTSIDER: (
        "{what} but not an allowed asker (bot.command_room_askers), and would read every "
        "room's results. Remove them from the room, or ask the operator to add them to "
        "bot.command_room_askers, then ask again."
    ),
}


def _refused(
    state: RoomState, reason: CommandRoomRefusal, detail: str, what: str = ""
) -> CommandRoomVerdict:
    """A refusal by the command room's own rule, with the notice its askers are told."""
    notice = "Muninn does not answer here: " + _NOTICES[reason].format(what=what)
    return CommandRoomVerdict(state.room_id, reason, detail, notice)


def _open(state: RoomState) -> CommandRoomVerdict | None:
    """The command room's history must not be readable without an invite."""
    if state.join_rule not in _INVITE_ONLY:
        detail = f"join rule {state.join_rule} lets anyone in without an invite"
        return _refused(state, CommandRoomRefusal.PUBLIC, detail, str(state.join_rule))
    if state.history_visibility == "world_readable":
        detail = "history visibility world_readable lets anyone read it without joining"
        return _refused(state, CommandRoomRefusal.WORLD_READABLE, detail)
    if state.history_visibility not in _MEMBERS_ONLY:
        seen = state.history_visibility or "shared (no history visibility event)"
        detail = (
            f"history visibility {seen} lets a member added later read every earlier reply; "
            "set it to joined"
        )
        what = state.history_visibility or "shared"
        return _refused(state, CommandRoomRefusal.SHARED_HISTORY, detail, what)
    return None
