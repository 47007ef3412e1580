"""The pinboard fold, docs/ARCHITECTURE.md §3 rule 17: later markers win, 12 pins, redacted pins
never happened."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.chat.commands.records import PinCommand, UnpinCommand
from bot.chat.pinboard import (
    CAPACITY,
    Board,
    Marker,
    MarkerKind,
    apply,
    fold,
    marker_from_command,
    resolve_offset,
    select,
)
from bot.chat.pins import markers
from ingest.search.logs.roomlog import TimelineItem
from ingest.types import EventID, Message, RoomID, UserID

ALICE = "@alice:example.org"
BOT = UserID("@muninn:example.org")
ROOM = RoomID("!room:example.org")


def pin(
    n: int,
    target: str,
    *,
    label: str | None = None,
    note: str = "",
    redacted: bool = False,
    thread_root: str | None = None,
) -> Marker:
    return Marker(f"$m{n}", ALICE, n, MarkerKind.PIN, target, label, note, redacted, thread_root)


def unpin(n: int, target: str | None, *, redacted: bool = False) -> Marker:
    return Marker(f"$m{n}", ALICE, n, MarkerKind.UNPIN, target, redacted=redacted)


def targets(board: Board) -> list[str]:
    return [p.target for p in board.pins]


def test_fold_most_recently_pinned_first() -> None:
    """The board lists pins newest first."""
    assert targets(fold([pin(1, "$a"), pin(2, "$b"), pin(3, "$c")])) == ["$c", "$b", "$a"]


def test_fold_repin_updates_and_moves_to_top_without_duplicating() -> None:
    """Re-pinning replaces label and note, moves the pin up, and never duplicates it."""
    board = fold([pin(1, "$a", label="x", note="old"), pin(2, "$b"), pin(3, "$a", note="new")])
    assert targets(board) == ["$a", "$b"]
    top = board.pins[0]
    assert (top.label, top.note, top.marker_id) == (None, "new", "$m3")


def test_fold_thirteenth_pin_drops_the_least_recently_pinned() -> None:
    """A full board drops its oldest pin when a new one arrives."""
    board = fold([pin(n, f"$t{n}") for n in range(CAPACITY + 1)])
    assert len(board.pins) == CAPACITY
    assert "$t0" not in targets(board)
    assert targets(board)[0] == f"$t{CAPACITY}"


def test_fold_repin_of_oldest_saves_it_from_eviction() -> None:
    """Re-pinning the oldest pin makes the next-oldest the one that drops."""
    markers = [pin(n, f"$t{n}") for n in range(CAPACITY)] + [pin(20, "$t0"), pin(21, "$new")]
    assert "$t0" in targets(fold(markers))
    assert "$t1" not in targets(fold(markers))


def test_fold_unpin_removes_the_target() -> None:
    """`!unpin` of a pinned target takes it off the board."""
    assert targets(fold([pin(1, "$a"), pin(2, "$b"), unpin(3, "$a")])) == ["$b"]


@pytest.mark.parametrize("target", [None, "$never-pinned"])
def test_fold_unpin_without_pinned_target_does_nothing(target: str | None) -> None:
    """An unpin with no target, or of something not on the board, changes nothing."""
    board = fold([pin(1, "$a")])
    assert apply(board, unpin(2, target)) is board


def test_fold_redacted_pin_never_pinned() -> None:
    """A redacted `!pin` leaves the board as if it had never been sent."""
    assert targets(fold([pin(1, "$a"), pin(2, "$b", redacted=True)])) == ["$a"]


def test_fold_redacted_pin_brings_back_the_pin_it_evicted() -> None:
    """Refolding without a redacted 13th pin restores the pin it had pushed off."""
    markers = [pin(n, f"$t{n}") for n in range(CAPACITY)] + [pin(99, "$evictor")]
    assert "$t0" not in targets(fold(markers))
    markers[-1] = pin(99, "$evictor", redacted=True)
    assert targets(fold(markers)) == [f"$t{n}" for n in reversed(range(CAPACITY))]


def test_fold_redacted_unpin_no_longer_unpins() -> None:
    """A redacted `!unpin` is excluded too."""
    assert targets(fold([pin(1, "$a"), unpin(2, "$a", redacted=True)])) == ["$a"]


def test_fold_redacted_repin_keeps_the_earlier_pin() -> None:
    """Redacting a re-pin restores the earlier pin's note and position."""
    markers = [
        pin(1, "$a", note="first"),
        pin(2, "$b"),
        pin(3, "$a", note="second", redacted=True),
    ]
    board = fold(markers)
    assert targets(board) == ["$b", "$a"]
    assert board.pins[1].note == "first"


def test_fold_pin_in_a_thread_counts_on_the_room_board() -> None:
    """Markers sent inside a thread pin on the room's one board."""
    board = fold([pin(1, "$a"), pin(2, "$reply", thread_root="$root")])
    assert targets(board) == ["$reply", "$a"]


def test_marker_from_command_carries_label_and_note() -> None:
    """A parsed `!pin` becomes a pin marker; `!unpin` an unpin marker."""
    made = marker_from_command("$c", ALICE, 5, PinCommand(None, "docs", "read me"), "$c")
    assert (made.kind, made.target, made.label, made.note) == (
        MarkerKind.PIN,
        "$c",
        "docs",
        "read me",
    )
    gone = marker_from_command("$d", ALICE, 6, UnpinCommand(None), None)
    assert apply(fold([made]), gone) == fold([made])


def test_select_filters_by_label_case_insensitively() -> None:
    """`!pins #Docs` shows only pins labelled docs."""
    board = fold([pin(1, "$a", label="docs"), pin(2, "$b", label="ops"), pin(3, "$c")])
    assert [p.target for p in select(board, label="#Docs")] == ["$a"]


def test_select_text_searches_notes_and_pinned_bodies() -> None:
    """The text filter finds a pin by its note or by the pinned message's body."""
    board = fold([pin(1, "$a", note="Backup runbook"), pin(2, "$b"), pin(3, "$c")])
    bodies = {"$b": "the BACKUP key is in the vault", "$c": "lunch?"}
    assert [p.target for p in select(board, text="backup", bodies=bodies)] == ["$b", "$a"]
    assert select(board, label="docs", text="backup", bodies=bodies) == ()


def test_fold_rejects_zero_capacity() -> None:
    """A board must hold at least one pin."""
    with pytest.raises(ValueError):
        fold([], capacity=0)


# ---------------------------------------------------------------- properties

MARKERS = st.lists(
    st.tuples(
        st.sampled_from([MarkerKind.PIN, MarkerKind.PIN, MarkerKind.UNPIN]),
        st.one_of(st.none(), st.integers(0, 19).map(lambda n: f"$t{n}")),
        st.booleans(),
        st.sampled_from([None, "docs", "ops"]),
    ),
    max_size=60,
).map(
    lambda rows: [
        Marker(f"$m{i}", ALICE, i, kind, target, label, f"note {i}", redacted)
        for i, (kind, target, redacted, label) in enumerate(rows)
    ]
)


@given(MARKERS, st.integers(0, 60))
def test_fold_incremental_equals_full(markers: list[Marker], split: int) -> None:
    """Applying the tail to a board folded from the head equals folding everything."""
    board = fold(markers[:split])
    for marker in markers[split:]:
        board = apply(board, marker)
    assert board == fold(markers)


@given(MARKERS)
def test_fold_invariants(markers: list[Marker]) -> None:
    """At most 12 pins, no duplicates, redacted markers are as if absent, order is recency."""
    board = fold(markers)
    live = [m for m in markers if not m.redacted and m.target is not None]
    assert board == fold(live)
    assert len(board.pins) <= CAPACITY
    assert len(set(targets(board))) == len(board.pins)
    last = {m.target: m for m in live}
    for shown in board.pins:
        assert last[shown.target].kind is MarkerKind.PIN
        assert last[shown.target].event_id == shown.marker_id
    positions = [int(p.marker_id[2:]) for p in board.pins]
    assert positions == sorted(positions, reverse=True)


@given(MARKERS)
def test_fold_missing_live_pin_was_evicted(markers: list[Marker]) -> None:
    """A target whose last marker is a pin is missing only if 12 others were pinned after it."""
    board = fold(markers)
    live = [m for m in markers if not m.redacted and m.target is not None]
    last = {m.target: i for i, m in enumerate(live) if m.target is not None}
    for target, index in last.items():
        if live[index].kind is MarkerKind.PIN and board.get(target) is None:
            later = {m.target for m in live[index + 1 :] if m.kind is MarkerKind.PIN}
            assert len(later - {target}) >= CAPACITY


# ---------------------------------------------------------------- ^N


def event(n: int, body: str, *, sender: str = ALICE, thread: str | None = None) -> Message:
    root = EventID(thread) if thread else None
    return Message(EventID(f"$e{n}"), ROOM, UserID(sender), n, body, thread_root=root)


HISTORY = [
    event(0, "first"),
    event(1, "second"),
    event(2, "!search second"),
    event(3, "found: second", sender=BOT),
    event(4, "in thread", thread="$e1"),
    event(5, "!important looks like a command but is not one"),
    event(6, "!pin ^2"),
]


@pytest.mark.parametrize(("n", "expected"), [(1, "$e5"), (2, "$e1"), (3, "$e0"), (4, None)])
def test_resolve_offset_skips_commands_bot_replies_and_threads(
    n: int, expected: str | None
) -> None:
    """^N counts main-timeline messages up, skipping Muninn commands and the bot's notices."""
    assert resolve_offset(HISTORY, 6, n, bot_user_id=BOT) == expected


def test_resolve_offset_inside_a_thread_counts_the_thread() -> None:
    """A command in a thread counts that thread's replies, then its root."""
    history = [*HISTORY, event(7, "reply two", thread="$e1"), event(8, "!pin ^3", thread="$e1")]
    assert resolve_offset(history, 8, 1, bot_user_id=BOT) == "$e7"
    assert resolve_offset(history, 8, 2, bot_user_id=BOT) == "$e4"
    assert resolve_offset(history, 8, 3, bot_user_id=BOT) == "$e1"
    assert resolve_offset(history, 8, 4, bot_user_id=BOT) is None


def test_resolve_offset_rejects_zero() -> None:
    """^0 is not an offset."""
    with pytest.raises(ValueError):
        resolve_offset(HISTORY, 6, 0, bot_user_id=BOT)


def test_markers_skip_a_poisoned_marker_and_fold_the_other_pins() -> None:
    """Regression: one `!pin ^²` in the log (`str.isdigit` took `²`, `int` raised) broke every
    later `!pins`, `!pin` and `!unpin` of the room and `muninn pins`; a marker that cannot be
    read is skipped and the board folds the others."""
    history = [
        TimelineItem(event_id, ALICE, n, body, None, {"body": body}, False)
        for n, (event_id, body) in enumerate(
            [
                ("$m1", "the deploy checklist"),
                ("$p1", "!pin ^1 #ops"),
                ("$p2", "!pin ^²"),
                ("$p3", "!pin ^" + "9" * 5000),
                ("$p4", "!unpin ^³"),
                ("$p5", "!pin keep this one"),
            ]
        )
    ]
    board = fold(markers(history, BOT, "!"))
    assert [(p.target, p.label) for p in board.pins] == [("$p5", None), ("$m1", "ops")]


@pytest.mark.parametrize(
    ("levels", "user", "may"),
    [
        (None, "@mod:x", False),  # no power levels: a moderator's 50 needed, users have 0
        ({"users": {"@mod:x": 50}}, "@mod:x", True),  # state_default unset: 50
        ({"users": {"@mod:x": 50}, "events": {"m.room.pinned_events": 75}}, "@mod:x", False),
        ({"users": {"@u:x": "100"}}, "@u:x", True),  # an older room version's string level
        ({"users_default": 50}, "@anyone:x", True),
        ({"state_default": 0}, "@anyone:x", True),
        ({"events": {"m.room.pinned_events": True}, "users": {"@u:x": 1}}, "@u:x", False),
    ],
)
def test_unpin_rule_follows_the_rooms_pinning_level(
    levels: dict[str, object] | None, user: str, may: bool
) -> None:
    """Who may unpin another's pin: the power levels' `m.room.pinned_events` (else
    `state_default`, else 50) against the user's level (issue 37 item 10)."""
    from bot.chat.pinboard import unpin_rule
    from ingest.matrix import room_state_from

    state_events = [
        {"type": "m.room.member", "state_key": "@bot:x", "content": {"membership": "join"}}
    ]
    if levels is not None:
        state_events.append({"type": "m.room.power_levels", "state_key": "", "content": levels})
    state = room_state_from(RoomID("!r:x"), state_events, UserID("@bot:x"))
    assert unpin_rule(state)(user) is may
