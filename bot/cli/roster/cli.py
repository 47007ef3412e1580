"""`muninn roster plan|apply --roster FILE`: load, plan, (apply), print; the exit code says
whether everything was done."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from bot.cli.roster.apply import RosterReader, apply_plan, build_plan, scope_checker
from bot.cli.roster.plan import ActionKind, RosterPlan
from bot.config import ServiceConfig
from bot.operations.common import CLI_RETRY, print_json
from bot.roster import load_roster

__all__ = ["render", "roster_apply", "roster_plan"]

EXIT_OK = 0
EXIT_INCOMPLETE = 1  # an apply that could not do everything, or left aliases unresolved


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
    # Applied: a join or leave that failed is counted as failed, not as done.
    n = {kind: result.count(kind) - _failed(result, kind, applied) for kind in ActionKind}
    head = (
        f"{n[ActionKind.JOIN]} {verbs[0]}, {n[ActionKind.LEAVE]} {verbs[1]}, "
        f"{n[ActionKind.REFUSE]} refused, {n[ActionKind.KEEP]} kept, "
        f"{n[ActionKind.UNRESOLVED]} unresolved"
    )
    if applied and result.failed:
        head += f", {len(result.failed)} FAILED"
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


def _failed(result: RosterPlan, kind: ActionKind, applied: bool) -> int:
    return sum(1 for a in result.failed if a.action is kind) if applied else 0


def _emit(result: RosterPlan, *, as_json: bool, applied: bool) -> None:
    if as_json:
        print_json(result.as_json())
    else:
        print(render(result, applied=applied))


def _incomplete(result: RosterPlan) -> Iterable[str]:
    for a in result.actions:
        if a.error is not None:
            yield f"{a.action} {a.room}: {a.error}"
        elif a.action is ActionKind.UNRESOLVED:
            yield f"unresolved {a.room}: {a.reason}"


def _reader(cfg: ServiceConfig) -> RosterReader:
    reader = RosterReader.from_config(cfg, retry=CLI_RETRY)
    assert isinstance(reader, RosterReader)  # from_config builds `cls`
    return reader


async def roster_plan(cfg: ServiceConfig, roster_path: Path, *, as_json: bool) -> int:
    """`muninn roster plan`: print what `apply` would do; joins and leaves nothing."""
    roster = load_roster(roster_path, cfg.homeserver.server_name)
    reader = _reader(cfg)
    try:
        result, _ = await build_plan(reader, roster, cfg)
    finally:
        await reader.close()
    _emit(result, as_json=as_json, applied=False)
    return EXIT_OK


async def roster_apply(cfg: ServiceConfig, roster_path: Path, *, as_json: bool) -> int:
    """`muninn roster apply`: join and leave until the reader's rooms match the roster.

    Idempotent: a second apply finds every room kept or refused and changes nothing. Exits 1
    when a join or leave failed or an alias resolved to nothing, naming each on stderr.
    """
    roster = load_roster(roster_path, cfg.homeserver.server_name)
    reader = _reader(cfg)
    try:
        planned, ctx = await build_plan(reader, roster, cfg)
        result = await apply_plan(reader, planned, scope_checker(reader, ctx))
    finally:
        await reader.close()
    _emit(result, as_json=as_json, applied=True)
    problems = list(_incomplete(result))
    for p in problems:
        print(f"muninn roster: {p}", file=sys.stderr)
    return EXIT_INCOMPLETE if problems else EXIT_OK
