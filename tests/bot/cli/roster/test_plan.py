"""bot.cli.roster.plan: the pure plan, and the verdicts it reads before a join."""

from __future__ import annotations

from typing import Any

import pytest

from bot.cli.roster.plan import ActionKind, Target, plan, prejoin_verdict, recorded_refusal
from bot.roster import RosterError
from ingest.config import ScopeConfig
from ingest.rules.scope import RoomScope
from ingest.types import Refusal, RoomAlias, RoomID, RoomState, Verdict
from tests.bot.cli.roster.rosterkit import SERVER

# ---------------------------------------------------------------- the pure plan

A, B, C = RoomID("!a"), RoomID("!b"), RoomID("!c")


def refused(room_id: RoomID, reason: Refusal = Refusal.BRIDGED) -> Verdict:
    return Verdict(room_id, reason, "a detail")


def kinds(targets: list[Target], joined: set[RoomID], **kw: Any) -> dict[str, ActionKind]:
    return {a.room_id or a.room: a.action for a in plan(targets, joined, **kw).actions}


def test_plan_joins_keeps_and_leaves_by_the_roster() -> None:
    """Unjoined eligible rooms join, joined ones are kept, unlisted joined rooms leave."""
    targets = [Target("#a", "", A, verdict=Verdict(A)), Target("!b", "", B, verdict=Verdict(B))]
    assert kinds(targets, {B, C}) == {
        A: ActionKind.JOIN,
        B: ActionKind.KEEP,
        C: ActionKind.LEAVE,
    }


def test_plan_unknown_verdict_joins_and_says_so() -> None:
    """A room whose state cannot be read before joining is a join with the verdict unknown."""
    (action,) = plan([Target("#a", "n", A)], set()).actions
    assert (action.action, action.verdict_known) == (ActionKind.JOIN, False)
    assert "unknown until joined" in action.reason
    assert action.note == "n"


def test_plan_refuses_without_joining_and_leaves_a_joined_refused_room() -> None:
    """A refused room is never joined; a joined one that scope refuses is left, reason kept."""
    targets = [
        Target("#a", "", A, verdict=refused(A, Refusal.DM)),
        Target("#b", "", B, verdict=refused(B, Refusal.BRIDGED)),
    ]
    actions = {a.room_id: a for a in plan(targets, {B}).actions}
    assert actions[A].action is ActionKind.REFUSE and actions[A].refusal is Refusal.DM
    assert actions[B].action is ActionKind.LEAVE and actions[B].refusal is Refusal.BRIDGED
    assert "bridged: a detail" in actions[B].reason


def test_plan_never_leaves_the_command_room() -> None:
    """The command room stays joined, whether unlisted or refused by scope (not indexed)."""
    assert kinds([], {A}, command_room=A) == {A: ActionKind.KEEP}
    target = Target("#a", "", A, verdict=refused(A, Refusal.EXCLUDED))
    (action,) = plan([target], {A}, command_room=A).actions
    assert action.action is ActionKind.KEEP and "bot.command_room" in action.reason


def test_plan_unresolved_alias_is_reported_not_joined() -> None:
    """An alias that resolves to nothing is `unresolved`, with no room id."""
    (action,) = plan([Target("#gone:x", "", None)], set()).actions
    assert (action.action, action.room_id) == (ActionKind.UNRESOLVED, None)


def test_plan_leave_warns_when_rejoining_needs_an_invite() -> None:
    """Leaving an invite-only room says that coming back needs a new invite."""
    states = {A: RoomState(A, join_rule="invite", canonical_alias=RoomAlias("#a:x"))}
    (action,) = plan([], {A}, joined_states=states).actions
    assert action.room == "#a:x" and "needs a new invite" in action.reason


def test_plan_two_entries_for_one_room_is_a_roster_error() -> None:
    """An alias and a room id naming the same room are both named in the error."""
    with pytest.raises(RosterError, match=r"'#a:x' and '!a'|'!a' and '#a:x'"):
        plan([Target("!a", "", A), Target("#a:x", "", A)], set())


def test_plan_json_has_the_contract_keys() -> None:
    """Each action carries room, room_id, action, reason and note."""
    doc = plan([Target("#a", "why", A, verdict=Verdict(A))], set()).as_json()
    (action,) = doc["actions"]
    assert {"room", "room_id", "action", "reason", "note"} <= action.keys()
    assert (action["action"], action["note"]) == ("join", "why")


SCOPE = RoomScope.from_config(ScopeConfig(exclude_aliases=("#members",)), SERVER)


@pytest.mark.parametrize(
    ("alias", "state", "direct", "recorded", "expected"),
    [
        (f"#members:{SERVER}", None, set(), None, Refusal.EXCLUDED),
        (None, None, {A}, None, Refusal.DM),
        (None, RoomState(A, joined=False, bridge_state_keys=("k",)), set(), None, Refusal.BRIDGED),
        (None, RoomState(A, joined=False, encrypted=True), set(), None, Refusal.ENCRYPTED),
        (None, RoomState(A, joined=False), set(), Refusal.DM, Refusal.DM),
        (None, None, set(), None, None),
        (None, RoomState(A, joined=False), set(), None, None),
    ],
    ids=["alias", "m.direct", "bridged", "encrypted", "recorded", "unknown", "stale-eligible"],
)
def test_prejoin_verdict_refuses_what_is_known_and_leaves_the_rest_unknown(
    alias: str | None,
    state: RoomState | None,
    direct: set[RoomID],
    recorded: Refusal | None,
    expected: Refusal | None,
) -> None:
    """Before joining, only a refusal can be known; eligibility waits for the current state."""
    a = RoomAlias(alias) if alias else None
    verdict = prejoin_verdict(SCOPE, A, a, state, direct, recorded)
    assert (verdict.reason if verdict else None) == expected


@pytest.mark.parametrize(
    ("membership", "expected"),
    [
        ({"membership": "leave", "reason": "muninn roster: refused (dm)"}, Refusal.DM),
        ({"membership": "leave", "reason": "muninn roster: not in the roster"}, None),
        ({"membership": "invite", "reason": "muninn roster: refused (dm)"}, None),
        ({"membership": "leave"}, None),
        (None, None),
    ],
    ids=["refused", "unlisted", "re-invited", "plain-leave", "never-member"],
)
def test_recorded_refusal_reads_only_muninns_own_leave(
    membership: dict[str, str] | None, expected: Refusal | None
) -> None:
    """A refusal is recorded by Muninn's leave reason; an invite since clears it."""
    assert recorded_refusal(membership) == expected
