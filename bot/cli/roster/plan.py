"""The pure plan: from the resolved roster and the reader's joined rooms to a list of actions,
and the verdicts that can be known before and after joining. No I/O."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from bot.roster import RosterError
from ingest.rules.scope import RoomScope
from ingest.types import Refusal, RoomAlias, RoomID, RoomState, Verdict

__all__ = [
    "Action",
    "ActionKind",
    "RosterPlan",
    "Target",
    "joined_verdict",
    "plan",
    "prejoin_verdict",
    "recorded_refusal",
]

COMMAND_ROOM_NOTE = "bot.command_room (implicit: the bot answers there)"
REJOIN_NEEDS_INVITE = {"invite", "knock", "private", "restricted", "knock_restricted"}


# Muninn records why it left a refused room in its own leave event (the homeserver owns
# membership, so the record lives there, not in a second journal). Synapse drops `is_direct`
# from the state once the reader has left a DM, so without this a second apply would try to
# re-join a DM it cannot even enter. An invite replaces that leave event: re-inviting the
# reader is how a room asks to be checked again.
REFUSED_MARK = "muninn roster: refused"
UNLISTED_MARK = "muninn roster: not in the roster"
_RECORDED = re.compile(r"^muninn roster: refused \((\w+)\)")


class ActionKind(enum.StrEnum):
    JOIN = "join"  # not joined, eligible (or eligible as far as can be known before joining)
    REFUSE = "refuse"  # scope refuses it: never joined
    LEAVE = "leave"  # joined, but not in the roster, or in it and refused by scope
    KEEP = "keep"  # joined and staying
    UNRESOLVED = "unresolved"  # an alias no room has


@dataclass(frozen=True)
class Target:
    """A roster entry as the shell found it.

    `room_id` None: the alias resolves to nothing. `state` None: not readable before joining.
    `verdict` None: unknown until joined (only what needs the room's state is left unknown).
    """

    room: str
    note: str
    room_id: RoomID | None
    state: RoomState | None = None
    verdict: Verdict | None = None
    # Set when the room is invite-only and the reader not invited: whom to invite first.
    invite_first: str | None = None
    unresolved: str = "no room has this alias"  # why `room_id` is None


@dataclass(frozen=True)
class Action:
    room: str  # as the roster names it (alias expanded), or the room's alias or id
    room_id: RoomID | None
    action: ActionKind
    reason: str
    note: str = ""
    verdict_known: bool = True
    refusal: Refusal | None = None  # the scope rule that refuses the room, when one does
    error: str | None = None  # apply only: what the homeserver said when the action failed

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "room": self.room,
            "room_id": self.room_id,
            "action": str(self.action),
            "reason": self.reason,
            "note": self.note,
            "verdict_known": self.verdict_known,
            "refusal": str(self.refusal) if self.refusal else None,
        }
        if self.error is not None:
            doc["error"] = self.error
        return doc


@dataclass(frozen=True)
class RosterPlan:
    actions: tuple[Action, ...]

    def count(self, kind: ActionKind) -> int:
        return sum(1 for a in self.actions if a.action is kind)

    @property
    def changes(self) -> int:
        """Joins and leaves: what `apply` would do (zero after a successful apply)."""
        return self.count(ActionKind.JOIN) + self.count(ActionKind.LEAVE)

    @property
    def failed(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.error is not None)

    def as_json(self) -> dict[str, Any]:
        return {"actions": [a.as_json() for a in self.actions]}


def refusal_text(v: Verdict) -> str:
    # Scope's details mostly name their rule already ("bridged: ..."); say it once.
    return v.detail if v.detail.startswith(str(v.reason)) else f"{v.reason}: {v.detail}"


def _target_action(t: Target, joined: Set[RoomID], command_room: RoomID | None) -> Action:
    if t.room_id is None:
        return Action(t.room, None, ActionKind.UNRESOLVED, t.unresolved, t.note)
    is_joined = t.room_id in joined
    v = t.verdict
    if v is not None and not v.eligible:
        why = refusal_text(v)
        kind = ActionKind.REFUSE
        if is_joined and t.room_id == command_room:
            kind, why = ActionKind.KEEP, why + "; not indexed, but kept joined: bot.command_room"
        elif is_joined:
            # The reader must not sit in a refused room: it would receive its events.
            kind, why = ActionKind.LEAVE, f"refused by scope, {why}"
        return Action(t.room, t.room_id, kind, why, t.note, refusal=v.reason)
    if is_joined:
        return Action(t.room, t.room_id, ActionKind.KEEP, "joined, eligible", t.note)
    if v is None:
        why = "scope verdict unknown until joined: apply joins, reads state, leaves if refused"
        if t.invite_first is not None:
            why = f"invite-only, the reader not invited: invite {t.invite_first} first; " + why
        return Action(t.room, t.room_id, ActionKind.JOIN, why, t.note, verdict_known=False)
    return Action(t.room, t.room_id, ActionKind.JOIN, "eligible", t.note)


def _leave_action(room_id: RoomID, state: RoomState | None, command_room: RoomID | None) -> Action:
    name = (state.canonical_alias if state else None) or room_id
    if room_id == command_room:
        return Action(name, room_id, ActionKind.KEEP, "not in the roster, but bot.command_room")
    why = "joined, not in the roster"
    if state is not None and state.join_rule in REJOIN_NEEDS_INVITE:
        why += f" (join rule {state.join_rule}: re-joining needs a new invite)"
    return Action(name, room_id, ActionKind.LEAVE, why)


def plan(
    targets: Sequence[Target],
    joined: Set[RoomID],
    *,
    command_room: RoomID | None = None,
    joined_states: Mapping[RoomID, RoomState] | None = None,
) -> RosterPlan:
    """The actions that bring the reader's rooms to the roster (pure; no I/O).

    Roster order first, then the joined rooms the roster does not name (sorted). Two entries
    resolving to the same room are a roster error. The command room is never left.
    """
    by_room: dict[RoomID, str] = {}
    problems = []
    for t in targets:
        if t.room_id is None:
            continue
        if t.room_id in by_room:
            problems.append(f"{t.room!r} and {by_room[t.room_id]!r} are the same room {t.room_id}")
        by_room.setdefault(t.room_id, t.room)
    if problems:
        raise RosterError(problems, "roster")
    actions = [_target_action(t, joined, command_room) for t in targets]
    states = joined_states or {}
    for room_id in sorted(joined - by_room.keys()):
        actions.append(_leave_action(room_id, states.get(room_id), command_room))
    return RosterPlan(tuple(actions))


def recorded_refusal(membership: Mapping[str, Any] | None) -> Refusal | None:
    """The refusal Muninn wrote on its own leave event, if that is the current membership."""
    if not membership or membership.get("membership") != "leave":
        return None
    match = _RECORDED.match(str(membership.get("reason", "")))
    if match is None:
        return None
    try:
        return Refusal(match.group(1))
    except ValueError:
        return Refusal.EXCLUDED  # a marker from a newer Muninn: still a refusal


def prejoin_verdict(
    scope: RoomScope,
    room_id: RoomID,
    alias: RoomAlias | None,
    state: RoomState | None,
    direct: Set[RoomID],
    recorded: Refusal | None = None,
) -> Verdict | None:
    """A refusal known without joining, or None: "verdict unknown until joined".

    The alias the roster names is an alias of the room, so it counts for exclusion even when
    the room's canonical_alias event does not list it (a deny-list errs towards refusing).
    A state readable from outside (world_readable, or as of the reader's leave) may be stale,
    so it can only refuse; eligibility is decided after joining, from the current state.
    """
    seen = state or RoomState(room_id)
    as_member = replace(seen, joined=True, alt_aliases=seen.alt_aliases + _unlisted(alias, seen))
    verdict = _roster_alias_named(scope.decide(as_member, direct), alias, seen)
    if not verdict.eligible:
        return verdict
    if recorded is not None:
        why = "when the reader last joined (its leave event says so); invite it to re-check"
        return Verdict(room_id, recorded, f"refused {why}")
    return None


def joined_verdict(
    scope: RoomScope, state: RoomState, alias: RoomAlias | None, direct: Set[RoomID]
) -> Verdict:
    """The verdict of a room the reader is in, counting the roster's alias for exclusion."""
    named = replace(state, alt_aliases=state.alt_aliases + _unlisted(alias, state))
    return _roster_alias_named(scope.decide(named, direct), alias, state)


def _unlisted(alias: RoomAlias | None, state: RoomState) -> tuple[RoomAlias, ...]:
    """The roster's alias, unless the room's state already lists it (canonical or alt)."""
    if alias is None or alias == state.canonical_alias or alias in state.alt_aliases:
        return ()
    return (alias,)


def _roster_alias_named(verdict: Verdict, alias: RoomAlias | None, state: RoomState) -> Verdict:
    """Scope names an excluding alias canonical or alt; the roster's own alias, which the
    state does not list (not readable before joining, or not published there), is known to be
    neither: it is named as the roster's (issue 44: a canonical alias shown as "alt alias")."""
    if alias is None or not _unlisted(alias, state) or verdict.reason is not Refusal.EXCLUDED:
        return verdict
    detail = verdict.detail.replace(f"alt alias {alias} ", f"alias {alias} (the roster's) ", 1)
    return replace(verdict, detail=detail)
