"""The shell of `roster plan|apply`: resolve aliases, read what state may be read, and (for
`apply`) join and leave. Nothing else in Muninn joins rooms (docs/ARCHITECTURE.md §1)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mautrix.api import ClientPath
from mautrix.types import EventType

from bot.cli.roster.plan import (
    COMMAND_ROOM_NOTE,
    REFUSED_MARK,
    UNLISTED_MARK,
    Action,
    ActionKind,
    RosterPlan,
    Target,
    joined_verdict,
    plan,
    prejoin_verdict,
    recorded_refusal,
    refusal_text,
)
from bot.config import ServiceConfig
from bot.roster import Roster, normal_room
from ingest.errors import MatrixError, MatrixForbidden, MatrixNotFound
from ingest.matrix import MatrixReader
from ingest.rules.scope import RoomScope
from ingest.types import RoomAlias, RoomID, RoomState, Verdict

__all__ = ["RosterReader", "apply_plan", "build_plan"]


class RosterReader(MatrixReader):
    """The reader plus the two membership calls only the roster makes."""

    async def leave_because(self, room_id: RoomID, reason: str) -> None:
        path = f"/{ClientPath.v3.rooms[room_id].leave}"
        await self._request("POST", path, body={"reason": reason})

    async def resolve_alias(self, alias: RoomAlias | str) -> RoomID | None:
        # A 5xx here is the homeserver's answer after asking the alias's own server ("Failed
        # to fetch alias"): tried twice, not five times (the roster resolves one at a time).
        kept, self.retry = self.retry, replace(self.retry, attempts=min(2, self.retry.attempts))
        try:
            return await super().resolve_alias(alias)
        finally:
            self.retry = kept

    async def needs_invite(self, room_id: RoomID) -> bool:
        """True when the homeserver says the room is not open to the reader (invite-only, not
        invited): its room summary (`/v1/room_summary`, Matrix 1.15) is "not accessible"."""
        path = f"/{ClientPath.v1.room_summary[room_id]}"
        try:
            summary = await self._get_object(path)
        except MatrixNotFound:
            return True
        except MatrixError:
            return False  # no summary endpoint, or a remote room: the join will tell
        closed = summary.get("join_rule") in {"invite", "knock", "private"}
        return closed and summary.get("membership") not in ("invite", "join")

    async def own_membership(self, room_id: RoomID) -> Mapping[str, Any] | None:
        """The content of the reader's own member event; None if it never had one visible."""
        path = f"/{ClientPath.v3.rooms[room_id].state[EventType.ROOM_MEMBER.t][self.user_id]}"
        try:
            return await self._get_object(path)
        except (MatrixForbidden, MatrixNotFound):
            return None


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
    try:
        room_id = await _resolve(reader, room)
    except MatrixError as e:  # a remote alias its server would not resolve: plan the rest
        return Target(room, note, None, unresolved=f"the alias could not be resolved: {e}")
    if room_id is None:
        return Target(room, note, None)
    state = await _readable_state(reader, room_id)
    if state is not None and state.joined and room_id in ctx.joined:
        verdict = joined_verdict(ctx.scope, state, _alias(room), ctx.direct)
        return Target(room, note, room_id, state, verdict)
    recorded = recorded_refusal(await reader.own_membership(room_id))
    verdict_ = prejoin_verdict(ctx.scope, room_id, _alias(room), state, ctx.direct, recorded)
    closed = verdict_ is None and room_id not in ctx.joined and await reader.needs_invite(room_id)
    invite = reader.user_id if closed else None
    return Target(room, note, room_id, state, verdict_, invite_first=invite)


async def build_plan(
    reader: RosterReader, roster: Roster, cfg: ServiceConfig
) -> tuple[RosterPlan, _Context]:
    """Resolve the roster against the homeserver and plan (reads only; joins nothing)."""
    server = cfg.homeserver.server_name
    ctx = _Context(
        RoomScope.from_config(cfg.scope, server),
        frozenset(await reader.direct_rooms()),
        frozenset(await reader.joined_rooms()),
    )
    targets = [
        await _target(reader, ctx, normal_room(e.room, server), e.note) for e in roster.rooms
    ]
    command = normal_room(cfg.bot.command_room, server) if cfg.bot.command_room else None
    command_id = await _resolve(reader, command) if command else None
    if command and command_id and command_id not in {t.room_id for t in targets}:
        targets.append(await _target(reader, ctx, command, COMMAND_ROOM_NOTE))
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
    except MatrixForbidden as e:
        why = f"join failed: invite {reader.user_id} to the room first (it is invite-only)"
        return replace(a, reason=why, error=str(e))
    except MatrixNotFound as e:  # issue 36: not a raw `404 M_UNKNOWN`
        why = (
            f"join failed: the homeserver knows no room {a.room} (check the id or alias; a "
            "room on another server joins through its alias)"
        )
        return replace(a, reason=why, error=str(e))
    except MatrixError as e:
        return replace(a, reason="join failed", error=str(e))
    try:
        verdict = await check(room_id, _alias(a.room))
    except MatrixError as e:
        await _leave_quietly(reader, room_id)
        return replace(a, reason="joined, state unreadable: left at once", error=str(e))
    if verdict.eligible:
        return replace(a, room_id=room_id, reason="joined, eligible", verdict_known=True)
    why = refusal_text(verdict)
    try:
        await reader.leave_because(room_id, f"{REFUSED_MARK} ({verdict.reason})")
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
    mark = f"{REFUSED_MARK} ({a.refusal})" if a.refusal is not None else UNLISTED_MARK
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


def scope_checker(reader: MatrixReader, ctx: _Context) -> Check:
    async def check(room_id: RoomID, alias: RoomAlias | None) -> Verdict:
        state = await reader.room_state(room_id)
        return joined_verdict(ctx.scope, state, alias, ctx.direct)

    return check
