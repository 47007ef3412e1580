"""bot.chat.command_room: who may ask in the command room, and whether it may be served
(docs/ARCHITECTURE.md §3 rule 14's command room)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from bot.chat.command_room import (
    CommandRoomPolicy,
    CommandRoomRefusal,
    CommandRoomVerdict,
    RefusalsTold,
)
from ingest.config import ScopeConfig
from ingest.rules.scope import RoomScope
from ingest.types import Refusal, RoomState, Verdict

SERVER = "example.org"
SCOPE_RULES = RoomScope.from_config(ScopeConfig(), SERVER)  # the defaults: #members excluded
ASKERS = (r"@persona-.*:example\.org",)  # the example allow-list, escaped
BOT = "@muninn:example.org"
POLICY = CommandRoomPolicy.of(ASKERS, BOT)
NO_DMS: frozenset[str] = frozenset()
# Excluded from the index (common for it), invite-only, only a Persona and the bot in it.
COMMAND_ROOM = RoomState(
    room_id="!general:example.org",
    canonical_alias="#members:example.org",
    join_rule="invite",
    history_visibility="joined",
    members=("@persona-ada:example.org", BOT),
)


def verdict(state: RoomState, direct: frozenset[str] = NO_DMS) -> Verdict:
    """The room's scope verdict (rules 1–5), exclusions included."""
    return SCOPE_RULES.decide(state, direct)


def serves(state: RoomState, direct: frozenset[str] = NO_DMS) -> CommandRoomVerdict:
    return POLICY.serves(state, SCOPE_RULES.readable(state, direct))


@pytest.mark.parametrize(
    ("change", "direct", "reason"),
    [
        ({"joined": False}, NO_DMS, Refusal.NOT_JOINED),
        ({"direct_flag": True}, NO_DMS, Refusal.DM),
        ({}, frozenset({COMMAND_ROOM.room_id}), Refusal.DM),
        ({"bridge_state_keys": ("irc/#p",)}, NO_DMS, Refusal.BRIDGED),
        ({"members": (*COMMAND_ROOM.members, "@discord_7:example.org")}, NO_DMS, Refusal.BRIDGED),
        ({"encrypted": True}, NO_DMS, Refusal.ENCRYPTED),
    ],
    ids=["not_joined", "dm_is_direct", "dm_m_direct", "bridged", "puppet", "encrypted"],
)
def test_serves_commands_refuses_what_would_carry_results_off_or_in_the_clear(
    change: dict[str, object], direct: frozenset[str], reason: Refusal
) -> None:
    """The command room's replies carry every room's text: a DM, a bridge or encryption
    refuses it, and an exclusion from the index (common for it) hides none of these."""
    excluded = replace(COMMAND_ROOM, **change)
    assert serves(excluded, direct).reason is reason
    assert verdict(excluded, direct).reason in (Refusal.NOT_JOINED, Refusal.EXCLUDED)


def test_serves_commands_accepts_an_excluded_room() -> None:
    """Excluded from the index, the room may still be the command room."""
    assert verdict(COMMAND_ROOM).reason is Refusal.EXCLUDED
    assert serves(COMMAND_ROOM).eligible


def test_serves_commands_accepts_the_command_room_left_out_of_the_index() -> None:
    """Issue 44: left out of the index as the command room (`bot.index_command_room` false),
    the room is still served: being where people ask is no reason not to answer there."""
    rules = RoomScope.from_config(
        ScopeConfig(exclude_aliases=()), SERVER, command_room=COMMAND_ROOM.room_id
    )
    assert rules.decide(COMMAND_ROOM, NO_DMS).reason is Refusal.COMMAND_ROOM
    assert POLICY.serves(COMMAND_ROOM, rules.readable(COMMAND_ROOM, NO_DMS)).eligible


@pytest.mark.parametrize(
    ("change", "reason", "named"),
    [
        ({"join_rule": "public"}, CommandRoomRefusal.PUBLIC, "join rule public"),
        ({"join_rule": "restricted"}, CommandRoomRefusal.PUBLIC, "join rule restricted"),
        (
            {"join_rule": "knock_restricted"},
            CommandRoomRefusal.PUBLIC,
            "join rule knock_restricted",
        ),
        ({"join_rule": "some.future.rule"}, CommandRoomRefusal.PUBLIC, "some.future.rule"),
        (
            {"history_visibility": "world_readable"},
            CommandRoomRefusal.WORLD_READABLE,
            "world_readable",
        ),
        (
            {"history_visibility": "shared"},
            CommandRoomRefusal.SHARED_HISTORY,
            "history visibility shared",
        ),
        (
            {"history_visibility": None},
            CommandRoomRefusal.SHARED_HISTORY,
            "shared (no history visibility",
        ),
        (
            {"members": (*COMMAND_ROOM.members, "@eve:example.org")},
            CommandRoomRefusal.OUTSIDER,
            "member @eve:example.org",
        ),
        (
            {"invited": ("@eve:example.org",)},
            CommandRoomRefusal.OUTSIDER,
            "invited user @eve:example.org",
        ),
        (
            {"members": (*COMMAND_ROOM.members, "@persona-ada:example.org.evil.test")},
            CommandRoomRefusal.OUTSIDER,
            "@persona-ada:example.org.evil.test",
        ),
        (
            {"members": (*COMMAND_ROOM.members, "@persona-ada:exampleXorg")},
            CommandRoomRefusal.OUTSIDER,
            "@persona-ada:exampleXorg",
        ),
    ],
    ids=[
        "public",
        "restricted",
        "knock_restricted",
        "unknown_rule",
        "world_readable",
        "shared_history",
        "no_history_visibility",
        "outsider_member",
        "outsider_invited",
        "unanchored_suffix",
        "unescaped_dot",
    ],
)
def test_serves_commands_refuses_a_room_others_can_read(
    change: dict[str, object], reason: CommandRoomRefusal, named: str
) -> None:
    """Regression: whoever can read the command room reads every room's results, so a room
    anyone may join or read, whose `shared` history a later member reads back (issue 37 item
    1), or with a member who is not an allowed asker or the bot, is refused, and the verdict
    names the cause."""
    refused = serves(replace(COMMAND_ROOM, **change))
    assert refused.reason is reason
    assert named in refused.detail


@pytest.mark.parametrize("join_rule", [None, "invite", "knock", "private"])
def test_serves_commands_accepts_invite_only_rooms_of_askers_and_the_bot(
    join_rule: str | None,
) -> None:
    """A knock is a request until a member invites; the knocker reads nothing before."""
    invited = ("@persona-bo:example.org",)
    assert serves(replace(COMMAND_ROOM, join_rule=join_rule, invited=invited)).eligible


@pytest.mark.parametrize(
    ("user_id", "allowed"),
    [
        ("@persona-ada:example.org", True),
        ("@persona-ada:exampleXorg", False),  # the `.` is escaped
        ("@persona-ada:example.org.evil.test", False),  # matched whole
        ("@eve-persona-ada:example.org", False),
    ],
)
def test_asker_allowed_matches_the_whole_user_id(user_id: str, allowed: bool) -> None:
    assert POLICY.asker_allowed(user_id) is allowed


def test_example_configs_escape_the_allow_list() -> None:
    """Regression: the shipped examples said `@persona-.*:example.org`, whose `.` matches any
    character; every example the operator copies escapes it."""
    root = Path(__file__).resolve().parents[3]
    for name in ("config.example.yaml", "deploy/config.compose.yaml"):
        askers = yaml.safe_load((root / name).read_text())["bot"]["command_room_askers"]
        policy = CommandRoomPolicy.of(askers, BOT)
        assert policy.asker_allowed("@persona-ada:example.org"), name
        assert not policy.asker_allowed("@persona-ada:exampleXorg"), name


@pytest.mark.parametrize(
    ("change", "told"),
    [
        ({"join_rule": "public"}, ('join rule is "public"', 'invite-only (join rule "invite"')),
        (
            {"history_visibility": "world_readable"},
            ('history visibility is "world_readable"', 'Set it to "joined" or "invited"'),
        ),
        (
            {"history_visibility": "shared"},
            ('history visibility is "shared"', 'Set it to "joined" or "invited"'),
        ),
        (
            {"history_visibility": None},
            ('history visibility is "shared"', 'Set it to "joined" or "invited"'),
        ),
        (
            {"members": (*COMMAND_ROOM.members, "@eve:example.org")},
            ("@eve:example.org is a member of this room", "bot.command_room_askers"),
        ),
        (
            {"invited": ("@eve:example.org",)},
            ("@eve:example.org is invited to this room", "Remove them from the room"),
        ),
    ],
    ids=["public", "world_readable", "shared", "no_history_visibility", "member", "invited"],
)
def test_refused_command_room_tells_its_asker_the_cause_and_the_fix(
    change: dict[str, object], told: tuple[str, str]
) -> None:
    """Issue 44: a command room refused by its own rule carries what its askers are told, in
    plain words: the cause, then the fix and "then ask again"."""
    notice = serves(replace(COMMAND_ROOM, **change)).notice
    assert notice.startswith("Muninn does not answer here: ")
    assert all(part in notice for part in told), notice
    assert notice.endswith("then ask again.")


@pytest.mark.parametrize(
    ("change", "direct"),
    [
        ({"joined": False}, NO_DMS),
        ({}, frozenset({COMMAND_ROOM.room_id})),
        ({"bridge_state_keys": ("irc/#p",)}, NO_DMS),
        ({"encrypted": True}, NO_DMS),
        ({}, NO_DMS),
    ],
    ids=["not_joined", "dm", "bridged", "encrypted", "served"],
)
def test_a_room_never_answered_in_tells_nothing(
    change: dict[str, object], direct: frozenset[str]
) -> None:
    """A scope refusal (a DM, a bridge, encryption) is never answered in; a served room has
    nothing to tell."""
    assert serves(replace(COMMAND_ROOM, **change), direct).notice == ""


def test_refusals_told_once_a_cause_and_anew_after_the_room_was_served() -> None:
    """Each refusal of a room is told once, however many commands meet it; another cause is
    told too; once served, a refusal met again is told again; one that did not reach the room
    (`forget`) is told on the next command."""
    told = RefusalsTold()
    shared = serves(replace(COMMAND_ROOM, history_visibility="shared"))
    outsider = serves(replace(COMMAND_ROOM, invited=("@eve:example.org",)))
    other_room = replace(shared, room_id="!other:example.org")
    assert [told.first(v) for v in (shared, shared, outsider, outsider, other_room)] == [
        True,
        False,
        True,
        False,
        True,
    ]
    assert told.first(serves(COMMAND_ROOM)) is False
    assert told.first(shared) is True
    told.forget(shared)
    assert told.first(shared) is True
    assert told.first(serves(COMMAND_ROOM, frozenset({COMMAND_ROOM.room_id}))) is False
