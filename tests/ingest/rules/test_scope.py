"""ingest.rules.scope: which rooms are never read (docs/ARCHITECTURE.md §3 rules 1–5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ingest.config import ScopeConfig
from ingest.rules.scope import RoomScope, decide, expand_alias, is_puppet, puppet_senders
from ingest.types import Refusal, RoomAlias, RoomState, Verdict

SERVER = "example.org"
SCOPE = ScopeConfig()  # the defaults: #users, #members, #patrons; discord puppets
ROOM = RoomState(
    room_id="!general:example.org",
    canonical_alias="#general:example.org",
    members=("@alice:example.org", "@bob:example.org"),
)
NO_DMS: frozenset[str] = frozenset()


def verdict(
    state: RoomState, direct: frozenset[str] = NO_DMS, scope: ScopeConfig = SCOPE
) -> Verdict:
    return decide(state, direct_rooms=direct, scope=scope, server_name=SERVER)


def test_decide_ordinary_room_is_eligible() -> None:
    """A joined, unexcluded, non-DM, unbridged, unencrypted room is read."""
    result = verdict(ROOM)
    assert result == Verdict(ROOM.room_id)
    assert result.eligible


@pytest.mark.parametrize(
    ("state", "direct", "reason", "named"),
    [
        (replace(ROOM, joined=False), NO_DMS, Refusal.NOT_JOINED, "not joined"),
        (
            replace(ROOM, canonical_alias="#members:example.org"),
            NO_DMS,
            Refusal.EXCLUDED,
            "#members:example.org",
        ),
        (replace(ROOM, direct_flag=True), NO_DMS, Refusal.DM, "is_direct"),
        (ROOM, frozenset({ROOM.room_id}), Refusal.DM, "m.direct"),
        (replace(ROOM, bridge_state_keys=("irc://x/#y",)), NO_DMS, Refusal.BRIDGED, "irc://x/#y"),
        (
            replace(ROOM, members=(*ROOM.members, "@_discord_123:example.org")),
            NO_DMS,
            Refusal.BRIDGED,
            "@_discord_123:example.org",
        ),
        (
            replace(ROOM, past_members=("@discord_77:example.org",)),
            NO_DMS,
            Refusal.BRIDGED,
            "past member @discord_77:example.org",
        ),
        (replace(ROOM, encrypted=True), NO_DMS, Refusal.ENCRYPTED, "m.room.encryption"),
    ],
    ids=[
        "not_joined",
        "excluded",
        "dm_is_direct",
        "dm_m_direct",
        "bridged",
        "puppet",
        "puppet_that_left",
        "encrypted",
    ],
)
def test_decide_each_refusal(
    state: RoomState, direct: frozenset[str], reason: Refusal, named: str
) -> None:
    """Each rule refuses on its own, and the detail names the cause for the journal."""
    result = verdict(state, direct)
    assert result.reason is reason
    assert not result.eligible
    assert named in result.detail


def test_decide_refusal_order() -> None:
    """With every rule tripped, the fixed order decides: not joined wins, then excluded, …."""
    state = replace(
        ROOM,
        joined=False,
        canonical_alias="#users:example.org",
        direct_flag=True,
        bridge_state_keys=("k",),
        encrypted=True,
    )
    order = [Refusal.NOT_JOINED, Refusal.EXCLUDED, Refusal.DM, Refusal.BRIDGED, Refusal.ENCRYPTED]
    clear = [
        {"joined": True},
        {"canonical_alias": "#general:example.org"},
        {"direct_flag": False},
        {"bridge_state_keys": ()},
    ]
    for expected, fix in zip(order, [*clear, {}], strict=True):
        assert verdict(state).reason is expected
        state = replace(state, **fix)


# ---------------------------------------------------------------- exclusion by alias and id


@pytest.mark.parametrize(
    ("configured", "room_alias", "excluded"),
    [
        ("#members", "#members:example.org", True),
        ("#members", "#members:other.org", False),
        ("#members:other.org", "#members:other.org", True),
        ("#members:example.org", "#members:example.org", True),
        ("#members", "#Members:Example.ORG", True),
        ("#members", "#members-lounge:example.org", False),
        ("#members", "#member:example.org", False),
    ],
)
def test_decide_alias_with_and_without_server(
    configured: str, room_alias: str, excluded: bool
) -> None:
    """A bare alias means the local server; the compare is case-insensitive and exact otherwise."""
    scope = ScopeConfig(exclude_aliases=(configured,))
    result = verdict(replace(ROOM, canonical_alias=room_alias), scope=scope)
    assert (result.reason is Refusal.EXCLUDED) is excluded


def test_decide_alt_alias_excludes() -> None:
    """An excluded alias among the alt aliases refuses the room too."""
    state = replace(ROOM, alt_aliases=("#chat:example.org", "#patrons:example.org"))
    result = verdict(state)
    assert result.reason is Refusal.EXCLUDED
    assert "alt alias #patrons:example.org" in result.detail


def test_decide_alias_only_in_alt_without_canonical() -> None:
    """A room without a canonical alias is still checked by its alt aliases."""
    state = replace(ROOM, canonical_alias=None, alt_aliases=("#users:example.org",))
    assert verdict(state).reason is Refusal.EXCLUDED


def test_decide_room_id_excluded() -> None:
    """A configured room id refuses the room whatever its aliases."""
    scope = ScopeConfig(exclude_room_ids=(ROOM.room_id,))
    result = verdict(ROOM, scope=scope)
    assert result.reason is Refusal.EXCLUDED
    assert ROOM.room_id in result.detail


def test_decide_defaults_exclude_users_members_patrons() -> None:
    """The default exclusions are the local #users, #members and #patrons."""
    for local in ("users", "members", "patrons"):
        state = replace(ROOM, canonical_alias=f"#{local}:{SERVER}")
        assert verdict(state).reason is Refusal.EXCLUDED


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("#members", "#members:example.org"),
        ("#members:other.org", "#members:other.org"),
        ("#m:example.org:8448", "#m:example.org:8448"),
    ],
)
def test_expand_alias_cases(alias: str, expected: str) -> None:
    """Only an alias without a server part gets the homeserver's server_name."""
    assert expand_alias(alias, SERVER) == expected


# ---------------------------------------------------------------- DMs


def test_decide_dm_refused_even_when_named_in_roster_terms() -> None:
    """A DM is refused even with an ordinary alias: the DM rule does not look at aliases."""
    state = replace(ROOM, direct_flag=True, canonical_alias="#team:example.org")
    assert verdict(state).reason is Refusal.DM


def test_decide_m_direct_of_other_room_is_ignored() -> None:
    """m.direct listing other rooms does not refuse this one."""
    assert verdict(ROOM, frozenset({"!dm:example.org"})).eligible


def test_decide_accepts_plain_set_of_direct_rooms() -> None:
    """direct_rooms may be a plain set."""
    result = decide(ROOM, direct_rooms={ROOM.room_id}, scope=SCOPE, server_name=SERVER)
    assert result.reason is Refusal.DM


# ---------------------------------------------------------------- bridges


@pytest.mark.parametrize(
    "state_key",
    [
        "org.matrix.appservice-irc://irc/freenode/#friends",  # an m.bridge event
        "uk.half-shot.matrix-github://github/matrix-org%2Fmatrix-doc/2346",  # uk.half-shot.bridge
    ],
)
def test_decide_bridge_state_event_refuses(state_key: str) -> None:
    """Either bridge event type (reported as its state_key) refuses the room and is named."""
    result = verdict(replace(ROOM, bridge_state_keys=(state_key,)))
    assert result.reason is Refusal.BRIDGED
    assert state_key in result.detail


@pytest.mark.parametrize(
    ("user_id", "expected"),
    [
        ("@_discord_123:example.org", True),
        ("@_discord_123456789012345678:other.org", True),
        ("@discord_bot:example.org", True),
        ("@alice:example.org", False),
        ("@alice_discord_:example.org", False),
        ("@x_discord_1:example.org", False),
    ],
)
def test_is_puppet_full_match(user_id: str, expected: bool) -> None:
    """Patterns are fully matched against the mxid; `.*` covers the server part."""
    assert is_puppet(user_id, SCOPE.bridge_puppet_patterns) is expected


def test_is_puppet_anchored_pattern_with_server() -> None:
    """A pattern naming a server matches that server only."""
    patterns = (r"@telegram_\d+:example\.org",)
    assert is_puppet("@telegram_42:example.org", patterns)
    assert not is_puppet("@telegram_42:example.org.evil", patterns)


def test_decide_no_puppet_patterns_configured() -> None:
    """With no puppet patterns, only bridge state events mark a room bridged."""
    scope = ScopeConfig(bridge_puppet_patterns=())
    state = replace(ROOM, members=("@_discord_1:example.org",))
    assert verdict(state, scope=scope).eligible


def test_puppet_senders_finds_non_members() -> None:
    """A puppet that sent events but left the room is found among senders."""
    room_scope = RoomScope.from_config(SCOPE, SERVER)
    senders = ["@alice:example.org", "@discord_99:example.org"]
    assert puppet_senders(senders, room_scope) == ["@discord_99:example.org"]


def test_puppet_in_events_finds_a_sender_who_left() -> None:
    """Rule 4 by sender: a puppet's message in the log refuses the room, members aside."""
    from ingest.config import ScopeConfig
    from ingest.rules.scope import RoomScope, puppet_in_events

    scope = RoomScope.from_config(ScopeConfig(), "x")
    plain = [{"type": "m.room.message", "sender": "@a:x"}]
    assert puppet_in_events(plain, scope) is None
    bridged = [*plain, {"type": "m.room.message", "sender": "@discord_42:x"}]
    assert puppet_in_events(bridged, scope) == "@discord_42:x"
    member = [{"type": "m.room.member", "sender": "@a:x", "state_key": "@_discord_7:x"}]
    assert puppet_in_events(member, scope) == "@_discord_7:x"


def test_room_scope_compiles_once_and_decides_like_decide() -> None:
    """RoomScope.decide gives the same verdicts as the decide function."""
    room_scope = RoomScope.from_config(SCOPE, SERVER)
    states = [ROOM, replace(ROOM, encrypted=True), replace(ROOM, joined=False)]
    assert [room_scope.decide(s, NO_DMS) for s in states] == [verdict(s) for s in states]


# ---------------------------------------------------------------- the command room

ALIAS = RoomAlias("#muninn:example.org")
COMMANDS = replace(ROOM, room_id="!commands:example.org", canonical_alias=ALIAS)


@pytest.mark.parametrize(
    ("configured", "state", "left_out"),
    [
        ("!commands:example.org", COMMANDS, True),
        ("#muninn", COMMANDS, True),
        ("#MUNINN:Example.org", COMMANDS, True),
        ("#muninn", replace(COMMANDS, canonical_alias=None, alt_aliases=(ALIAS,)), True),
        ("#muninn:other.org", COMMANDS, False),
        ("#muninn", ROOM, False),
        ("!commands:example.org", ROOM, False),
    ],
    ids=["id", "short_alias", "alias_any_case", "alt_alias", "other_server", "other", "other_id"],
)
def test_decide_the_command_room_is_left_out_of_the_index(
    configured: str, state: RoomState, left_out: bool
) -> None:
    """Issue 44: the command room (`bot.command_room`: its id, or an alias its state lists,
    short for this homeserver's and case-folded as exclusions are) is refused as
    `command_room`, naming the opt-in; it may still be read, so served (`readable`)."""
    scope = RoomScope.from_config(SCOPE, SERVER, command_room=configured)
    result = scope.decide(state, NO_DMS)
    assert (result.reason is Refusal.COMMAND_ROOM) is left_out
    assert ("bot.index_command_room: true" in result.detail) is left_out
    assert scope.readable(state, NO_DMS).eligible


def test_decide_the_command_room_by_the_id_its_alias_resolved_to() -> None:
    """An alias the state does not list (a local address) names the room by the id it
    resolved to; with no command room to leave out (none, or opted in) an id adds nothing."""
    unlisted = replace(COMMANDS, canonical_alias=None)
    scope = RoomScope.from_config(SCOPE, SERVER, command_room="#muninn")
    assert scope.decide(unlisted, NO_DMS).eligible
    resolved = scope.with_command_room_id(unlisted.room_id)
    assert resolved.decide(unlisted, NO_DMS).reason is Refusal.COMMAND_ROOM
    assert resolved.with_command_room_id(unlisted.room_id) is resolved
    assert scope.with_command_room_id(None) is scope
    opted_in = RoomScope.from_config(SCOPE, SERVER)
    assert opted_in.with_command_room_id(unlisted.room_id).decide(unlisted, NO_DMS).eligible
    assert opted_in.decide(COMMANDS, NO_DMS).eligible


def test_decide_the_command_room_comes_after_the_exclusions_before_the_rest() -> None:
    """The operator's own exclusion is named first; the command room before DM, bridged and
    encrypted, which `readable` (where the command room's policy starts) still names."""
    excluding = ScopeConfig(exclude_room_ids=(COMMANDS.room_id,))
    scope = RoomScope.from_config(excluding, SERVER, command_room="#muninn")
    assert scope.decide(COMMANDS, NO_DMS).reason is Refusal.EXCLUDED
    scope = RoomScope.from_config(SCOPE, SERVER, command_room="#muninn")
    tripped = replace(COMMANDS, direct_flag=True, bridge_state_keys=("k",), encrypted=True)
    assert scope.decide(tripped, NO_DMS).reason is Refusal.COMMAND_ROOM
    assert scope.readable(tripped, NO_DMS).reason is Refusal.DM
