"""`muninn roster plan|apply --roster FILE`: the roster decides which rooms the reader joins.

The roster is data (`rooms: [{room: "#alias:server" | "!id", note: "..."}]`). `plan` is a pure
fold from the resolved roster and the reader's joined rooms to a list of actions; the shell
resolves aliases, reads what state it may, and (for `apply`) joins and leaves. Nothing else in
Muninn joins rooms (DESIGN.md §1).

Scope before joining: Synapse answers 403 to `/rooms/{id}/state` for a room the reader is not
in (unless its history is world_readable, or the reader was a member before). What can be
known without state is still decided up front: an excluded room id, an excluded alias named by
the roster entry itself, a room in the reader's `m.direct`. Everything else (is_direct on the
invite, bridge state, puppets, encryption) is "verdict unknown until joined": `apply` joins,
reads the state, and leaves at once if scope refuses, before any event of the room is read.
A refresh racing that window is safe on its own: it decides scope before reading events too.
"""

from __future__ import annotations

import contextlib
import enum
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ingest.config import Config, operator_message
from ingest.errors import ConfigError, MatrixError, MatrixForbidden, MatrixNotFound
from ingest.matrix import MatrixReader
from ingest.scope import RoomScope, expand_alias
from ingest.types import Refusal, RoomAlias, RoomID, RoomState, Verdict

__all__ = [
    "Action",
    "ActionKind",
    "Roster",
    "RosterEntry",
    "RosterError",
    "RosterPlan",
    "RosterReader",
    "Target",
    "apply_plan",
    "build_plan",
    "joined_verdict",
    "load_roster",
    "plan",
    "prejoin_verdict",
    "recorded_refusal",
    "render",
    "roster_apply",
    "roster_plan",
]

EXIT_OK = 0
EXIT_INCOMPLETE = 1  # an apply that could not do everything, or left aliases unresolved

_COMMAND_ROOM_NOTE = "bot.command_room (implicit: the bot answers there)"
_REJOIN_NEEDS_INVITE = {"invite", "knock", "private", "restricted", "knock_restricted"}


class RosterError(ConfigError):
    """The roster file is invalid; the message lists every problem, naming the entries."""


# ---------------------------------------------------------------- the roster file


class RosterEntry(BaseModel):
    """One room the reader should be in: an alias (`#name:server`) or a room id (`!id`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    room: str
    note: str = ""  # free text for the operator; shown in the plan

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """`- "#townhall:example.org"` is shorthand for `- {room: "#townhall:example.org"}`."""
        return {"room": data} if isinstance(data, str) else data

    @field_validator("room")
    @classmethod
    def _room(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("#"):
            localpart = v[1:].split(":", 1)[0]
            if not localpart or any(c.isspace() for c in v):
                raise ValueError(f"not a room alias: {v!r}")
        elif v.startswith("!"):
            if len(v) < 2 or any(c.isspace() for c in v):
                raise ValueError(f"not a room id: {v!r}")
        else:
            raise ValueError(f"must be an alias (#name:server) or a room id (!id), got {v!r}")
        return v


class Roster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rooms: tuple[RosterEntry, ...]


_ENTRY_FORM = (
    'must be a room alias or id (- "#townhall:example.org") '
    'or a mapping (- {room: "#townhall:example.org", note: "why"})'
)


def _entry_label(raw: Any, index: int) -> str:
    room = raw.get("room") if isinstance(raw, dict) else raw
    return f"rooms[{index}] ({room!r})" if isinstance(room, str) else f"rooms[{index}]"


def _problems(err: ValidationError, raw: Mapping[str, Any]) -> list[str]:
    rooms = raw.get("rooms")
    entries: list[Any] = rooms if isinstance(rooms, list) else []
    out = []
    for e in err.errors():
        loc = list(e["loc"])
        msg = operator_message(e)
        if len(loc) == 2 and loc[0] == "rooms" and e["type"] in ("model_type", "dict_type"):
            msg = f"{_ENTRY_FORM}, got {e.get('input')!r}"
        if len(loc) >= 2 and loc[0] == "rooms" and isinstance(loc[1], int):
            where = _entry_label(entries[loc[1]] if loc[1] < len(entries) else None, loc[1])
            field = ".".join(str(p) for p in loc[2:])
            out.append(f"{where}{' ' + field if field else ''}: {msg}")
        else:
            out.append(f"{'.'.join(str(p) for p in loc) or 'roster'}: {msg}")
    return out


def _duplicates(roster: Roster, server_name: str) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    for i, entry in enumerate(roster.rooms):
        key = _normal(entry.room, server_name).casefold()
        if key in seen:
            problems.append(f"rooms[{i}] ({entry.room!r}): repeats rooms[{seen[key]}]")
        else:
            seen[key] = i
    return problems


def _normal(room: str, server_name: str) -> str:
    """An alias without a server part means this homeserver's, as in the scope config."""
    return expand_alias(room, server_name) if room.startswith("#") else room


def load_roster(path: Path, server_name: str) -> Roster:
    """Read and validate a roster file; raise `RosterError` listing every problem at once."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RosterError([f"no roster file at {path}"], str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise RosterError([f"cannot read the roster: {e}"], str(path)) from None
    except yaml.YAMLError as e:
        raise RosterError([f"not valid YAML: {e}"], str(path)) from None
    if not isinstance(raw, dict):
        raise RosterError(
            ['the roster must be a mapping with a `rooms` list: rooms: ["#townhall:example.org"]'],
            str(path),
        )
    try:
        roster = Roster.model_validate(raw)
    except ValidationError as e:
        raise RosterError(_problems(e, raw), str(path)) from None
    if problems := _duplicates(roster, server_name):
        raise RosterError(problems, str(path))
    return roster


# ---------------------------------------------------------------- the pure plan


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


def _why(v: Verdict) -> str:
    # Scope's details mostly name their rule already ("bridged: ..."); say it once.
    return v.detail if v.detail.startswith(str(v.reason)) else f"{v.reason}: {v.detail}"


def _target_action(t: Target, joined: Set[RoomID], command_room: RoomID | None) -> Action:
    if t.room_id is None:
        return Action(t.room, None, ActionKind.UNRESOLVED, "no room has this alias", t.note)
    is_joined = t.room_id in joined
    v = t.verdict
    if v is not None and not v.eligible:
        why = _why(v)
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
        return Action(t.room, t.room_id, ActionKind.JOIN, why, t.note, verdict_known=False)
    return Action(t.room, t.room_id, ActionKind.JOIN, "eligible", t.note)


def _leave_action(room_id: RoomID, state: RoomState | None, command_room: RoomID | None) -> Action:
    name = (state.canonical_alias if state else None) or room_id
    if room_id == command_room:
        return Action(name, room_id, ActionKind.KEEP, "not in the roster, but bot.command_room")
    why = "joined, not in the roster"
    if state is not None and state.join_rule in _REJOIN_NEEDS_INVITE:
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


# ---------------------------------------------------------------- the shell: reading

_CS = "/_matrix/client/v3"
# Muninn records why it left a refused room in its own leave event (the homeserver owns
# membership, so the record lives there, not in a second journal). Synapse drops `is_direct`
# from the state once the reader has left a DM, so without this a second apply would try to
# re-join a DM it cannot even enter. An invite replaces that leave event: re-inviting the
# reader is how a room asks to be checked again.
_REFUSED_MARK = "muninn roster: refused"
_UNLISTED_MARK = "muninn roster: not in the roster"
_RECORDED = re.compile(r"^muninn roster: refused \((\w+)\)")


class RosterReader(MatrixReader):
    """The reader plus the two membership calls only the roster makes."""

    async def leave_because(self, room_id: RoomID, reason: str) -> None:
        path = f"{_CS}/rooms/{_q(room_id)}/leave"
        await self._request("POST", path, body={"reason": reason})

    async def own_membership(self, room_id: RoomID) -> Mapping[str, Any] | None:
        """The content of the reader's own member event; None if it never had one visible."""
        path = f"{_CS}/rooms/{_q(room_id)}/state/m.room.member/{_q(self.user_id)}"
        try:
            return await self._get_object(path)
        except (MatrixForbidden, MatrixNotFound):
            return None


def _q(segment: str) -> str:
    return quote(segment, safe="")


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
    extra = (alias,) if alias else ()
    seen = state or RoomState(room_id)
    as_member = replace(seen, joined=True, alt_aliases=seen.alt_aliases + extra)
    verdict = scope.decide(as_member, direct)
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
    extra = (alias,) if alias else ()
    return scope.decide(replace(state, alt_aliases=state.alt_aliases + extra), direct)


async def _readable_state(reader: MatrixReader, room_id: RoomID) -> RoomState | None:
    try:
        return await reader.room_state(room_id)
    except (MatrixForbidden, MatrixNotFound):
        return None  # not a member (and not world_readable): only joining can tell


async def _resolve(reader: MatrixReader, room: str) -> RoomID | None:
    return await reader.resolve_alias(room) if room.startswith("#") else RoomID(room)


def _alias(room: str) -> RoomAlias | None:
    return RoomAlias(room) if room.startswith("#") else None


@dataclass(frozen=True)
class _Context:
    """What planning and applying share: the scope, the reader's DM rooms, its joined rooms."""

    scope: RoomScope
    direct: frozenset[RoomID]
    joined: frozenset[RoomID]


async def _target(reader: RosterReader, ctx: _Context, room: str, note: str) -> Target:
    room_id = await _resolve(reader, room)
    if room_id is None:
        return Target(room, note, None)
    state = await _readable_state(reader, room_id)
    if state is not None and state.joined and room_id in ctx.joined:
        verdict = joined_verdict(ctx.scope, state, _alias(room), ctx.direct)
        return Target(room, note, room_id, state, verdict)
    recorded = recorded_refusal(await reader.own_membership(room_id))
    verdict_ = prejoin_verdict(ctx.scope, room_id, _alias(room), state, ctx.direct, recorded)
    return Target(room, note, room_id, state, verdict_)


async def build_plan(
    reader: RosterReader, roster: Roster, cfg: Config
) -> tuple[RosterPlan, _Context]:
    """Resolve the roster against the homeserver and plan (reads only; joins nothing)."""
    server = cfg.homeserver.server_name
    ctx = _Context(
        RoomScope.from_config(cfg.scope, server),
        frozenset(await reader.direct_rooms()),
        frozenset(await reader.joined_rooms()),
    )
    targets = [await _target(reader, ctx, _normal(e.room, server), e.note) for e in roster.rooms]
    command = _normal(cfg.bot.command_room, server) if cfg.bot.command_room else None
    command_id = await _resolve(reader, command) if command else None
    if command and command_id and command_id not in {t.room_id for t in targets}:
        targets.append(await _target(reader, ctx, command, _COMMAND_ROOM_NOTE))
    named = {t.room_id for t in targets}
    states = {r: s for r in ctx.joined - named if (s := await _readable_state(reader, r))}
    result = plan(targets, ctx.joined, command_room=command_id, joined_states=states)
    return result, ctx


# ---------------------------------------------------------------- the shell: applying

Check = Callable[[RoomID, RoomAlias | None], Awaitable[Verdict]]


async def _apply_join(reader: RosterReader, a: Action, check: Check) -> Action:
    assert a.room_id is not None
    try:
        # Join by alias where the roster gives one: the alias lets the server find a route.
        room_id = await reader.join(a.room if a.room.startswith("#") else a.room_id)
    except MatrixError as e:
        return replace(a, reason="join failed", error=str(e))
    try:
        verdict = await check(room_id, _alias(a.room))
    except MatrixError as e:
        await _leave_quietly(reader, room_id)
        return replace(a, reason="joined, state unreadable: left at once", error=str(e))
    if verdict.eligible:
        return replace(a, room_id=room_id, reason="joined, eligible", verdict_known=True)
    why = _why(verdict)
    try:
        await reader.leave_because(room_id, f"{_REFUSED_MARK} ({verdict.reason})")
    except MatrixError as e:
        refused = replace(a, action=ActionKind.REFUSE, refusal=verdict.reason)
        return replace(refused, reason=f"{why}; leave failed", error=str(e))
    why += " (joined to read its state, left at once)"
    return replace(
        a,
        room_id=room_id,
        action=ActionKind.REFUSE,
        reason=why,
        verdict_known=True,
        refusal=verdict.reason,
    )


async def _leave_quietly(reader: RosterReader, room_id: RoomID) -> None:
    # The caller already reports the first failure, which is the one that matters.
    with contextlib.suppress(MatrixError):
        await reader.leave_because(room_id, "muninn roster: left at once, state unreadable")


async def _apply_leave(reader: RosterReader, a: Action) -> Action:
    assert a.room_id is not None
    mark = f"{_REFUSED_MARK} ({a.refusal})" if a.refusal is not None else _UNLISTED_MARK
    try:
        await reader.leave_because(a.room_id, mark)
    except MatrixError as e:
        return replace(a, error=str(e))
    return a


async def apply_plan(reader: RosterReader, planned: RosterPlan, check: Check) -> RosterPlan:
    """Do the joins and leaves of a plan; the result says what happened to each room.

    A leave records why on the leave event, so the next plan knows a refusal without joining.
    """
    done = []
    for a in planned.actions:
        if a.action is ActionKind.JOIN:
            done.append(await _apply_join(reader, a, check))
        elif a.action is ActionKind.LEAVE:
            done.append(await _apply_leave(reader, a))
        else:
            done.append(a)
    return RosterPlan(tuple(done))


def _checker(reader: MatrixReader, ctx: _Context) -> Check:
    async def check(room_id: RoomID, alias: RoomAlias | None) -> Verdict:
        state = await reader.room_state(room_id)
        return joined_verdict(ctx.scope, state, alias, ctx.direct)

    return check


# ---------------------------------------------------------------- printing and entry points

_MARK = {
    ActionKind.JOIN: "+",
    ActionKind.LEAVE: "-",
    ActionKind.REFUSE: "x",
    ActionKind.KEEP: "=",
    ActionKind.UNRESOLVED: "?",
}


def render(result: RosterPlan, *, applied: bool) -> str:
    """A readable diff: one line an action, a summary first."""
    verbs = ("joined", "left") if applied else ("to join", "to leave")
    n = {kind: result.count(kind) for kind in ActionKind}
    head = (
        f"{n[ActionKind.JOIN]} {verbs[0]}, {n[ActionKind.LEAVE]} {verbs[1]}, "
        f"{n[ActionKind.REFUSE]} refused, {n[ActionKind.KEEP]} kept, "
        f"{n[ActionKind.UNRESOLVED]} unresolved"
    )
    width = max((len(a.room) for a in result.actions), default=0)
    lines = [head]
    for a in result.actions:
        room_id = f" ({a.room_id})" if a.room_id and a.room_id != a.room else ""
        note = f"  # {a.note}" if a.note else ""
        error = f"  FAILED: {a.error}" if a.error else ""
        lines.append(
            f"{_MARK[a.action]} {a.action:<10} {a.room:<{width}}{room_id}  {a.reason}{note}{error}"
        )
    return "\n".join(lines)


def _emit(result: RosterPlan, *, as_json: bool, applied: bool) -> None:
    if as_json:
        json.dump(result.as_json(), sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(result, applied=applied))


def _incomplete(result: RosterPlan) -> Iterable[str]:
    for a in result.actions:
        if a.error is not None:
            yield f"{a.action} {a.room}: {a.error}"
        elif a.action is ActionKind.UNRESOLVED:
            yield f"unresolved {a.room}: no room has this alias"


def _reader(cfg: Config) -> RosterReader:
    reader = RosterReader.from_config(cfg)
    assert isinstance(reader, RosterReader)  # from_config builds `cls`
    return reader


async def roster_plan(cfg: Config, roster_path: Path, *, as_json: bool) -> int:
    """`muninn roster plan`: print what `apply` would do; joins and leaves nothing."""
    roster = load_roster(roster_path, cfg.homeserver.server_name)
    reader = _reader(cfg)
    try:
        result, _ = await build_plan(reader, roster, cfg)
    finally:
        await reader.close()
    _emit(result, as_json=as_json, applied=False)
    return EXIT_OK


async def roster_apply(cfg: Config, roster_path: Path, *, as_json: bool) -> int:
    """`muninn roster apply`: join and leave until the reader's rooms match the roster.

    Idempotent: a second apply finds every room kept or refused and changes nothing. Exits 1
    when a join or leave failed or an alias resolved to nothing, naming each on stderr.
    """
    roster = load_roster(roster_path, cfg.homeserver.server_name)
    reader = _reader(cfg)
    try:
        planned, ctx = await build_plan(reader, roster, cfg)
        result = await apply_plan(reader, planned, _checker(reader, ctx))
    finally:
        await reader.close()
    _emit(result, as_json=as_json, applied=True)
    problems = list(_incomplete(result))
    for p in problems:
        print(f"muninn roster: {p}", file=sys.stderr)
    return EXIT_INCOMPLETE if problems else EXIT_OK
