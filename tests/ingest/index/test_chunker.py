"""ingest.index.chunker: timelines, window boundaries, text, ids and payloads
(docs/ARCHITECTURE.md §3
rules 7, 11)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.index.chunker import (
    CHUNKER_VERSION,
    DENSE_LINE,
    FULL_LINE,
    LineFormat,
    chunk,
    content_hash,
    message_line,
    point_id,
    speakers_line,
    split_timelines,
    truncate_utf8,
    window_payload,
    window_text,
)
from ingest.types import EventID, Message, RoomAlias, RoomID, UserID, Window

ROOM = RoomID("!room:example.org")
ALICE = UserID("@alice:example.org")
BOB = UserID("@bob:example.org")
T0 = 1_793_550_840_000  # 2026-11-01 16:34 UTC, in milliseconds
VERSIONS = {"chunker": CHUNKER_VERSION, "scrub": 1}


def msg(
    n: int,
    body: str = "hello",
    *,
    ts: int | None = None,
    sender: UserID = ALICE,
    thread_root: str | None = None,
) -> Message:
    return Message(
        event_id=EventID(f"$e{n}"),
        room_id=ROOM,
        sender=sender,
        ts=T0 + n * 1000 if ts is None else ts,
        body=body,
        thread_root=EventID(thread_root) if thread_root else None,
    )


def ids(windows: Sequence[Window]) -> list[list[str]]:
    return [[m.event_id for m in w.messages] for w in windows]


def test_message_line_of_a_far_future_message_is_written() -> None:
    """Regression: a message stamped in the year 10000 has a line (the writer chunked it into
    `ValueError: year 10000 is out of range` and failed its room on every pass)."""
    line = message_line(msg(1, "from the future", ts=253_402_300_800_000), {})
    assert line == "[10000-01-01 00:00] alice: from the future"
    far = [msg(1, ts=T0), msg(2, ts=2**53 - 1), msg(3, ts=T0 + 2000)]
    assert ids(chunk(far, gap_seconds=60, max_bytes=4000, names={})) == [["$e1"], ["$e2", "$e3"]]


# ---------------------------------------------------------------- timelines


def test_split_timelines_root_in_main_replies_in_thread() -> None:
    """A thread root stays in the main timeline; its replies form the thread's timeline."""
    root, reply, other, reply2 = (
        msg(1),
        msg(2, thread_root="$e1"),
        msg(3),
        msg(4, thread_root="$e1"),
    )
    timelines = split_timelines([root, reply, other, reply2])
    assert timelines == {None: [root, other], EventID("$e1"): [reply, reply2]}


def test_split_timelines_every_message_in_exactly_one_window() -> None:
    """Chunking all timelines places each message in exactly one window."""
    messages = [msg(i, thread_root="$e0" if i % 3 == 1 else None) for i in range(30)]
    windows = [
        w
        for timeline in split_timelines(messages).values()
        for w in chunk(timeline, gap_seconds=60, max_bytes=120, names={})
    ]
    placed = [m.event_id for w in windows for m in w.messages]
    assert sorted(placed) == sorted(m.event_id for m in messages)
    assert all(w.thread_root == w.messages[0].thread_root for w in windows)


def test_split_timelines_empty() -> None:
    """No messages, no timelines."""
    assert split_timelines([]) == {}


# ---------------------------------------------------------------- boundaries


def test_chunk_gap_starts_new_window() -> None:
    """A silence longer than gap_seconds starts a window; exactly gap_seconds does not."""
    messages = [msg(1, ts=T0), msg(2, ts=T0 + 60_000), msg(3, ts=T0 + 120_001)]
    assert ids(chunk(messages, gap_seconds=60, max_bytes=1000, names={})) == [
        ["$e1", "$e2"],
        ["$e3"],
    ]


def test_chunk_backwards_timestamp_does_not_split() -> None:
    """A timestamp earlier than the previous one counts as no gap."""
    messages = [msg(1, ts=T0), msg(2, ts=T0 - 3_600_000)]
    assert ids(chunk(messages, gap_seconds=60, max_bytes=1000, names={})) == [["$e1", "$e2"]]


def test_chunk_max_bytes_bounds_window_text() -> None:
    """A window's text never exceeds max_bytes, and adding the next line would have."""
    messages = [msg(i, "x" * 40) for i in range(10)]
    windows = chunk(messages, gap_seconds=3600, max_bytes=200, names={})
    assert len(windows) > 1
    for w, following in pairwise(windows):
        size = len(window_text(w, {}).encode())
        assert size <= 200
        next_line = window_text(Window(ROOM, None, following.messages[:1]), {})
        assert size + 1 + len(next_line.encode()) > 200


def test_chunk_counts_utf8_bytes_not_characters() -> None:
    """The size limit is in UTF-8 bytes: multi-byte text fills a window sooner."""
    ascii_windows = chunk(
        [msg(i, "a" * 30) for i in range(6)], gap_seconds=60, max_bytes=200, names={}
    )
    cjk_windows = chunk(
        [msg(i, "語" * 30) for i in range(6)], gap_seconds=60, max_bytes=200, names={}
    )
    assert len(cjk_windows) > len(ascii_windows)


def test_chunk_oversize_message_is_a_window_alone() -> None:
    """A message longer than max_bytes sits alone; its payload keeps the whole body."""
    big = "ü" * 500
    messages = [msg(1), msg(2, big), msg(3)]
    windows = chunk(messages, gap_seconds=60, max_bytes=150, names={})
    assert ids(windows) == [["$e1"], ["$e2"], ["$e3"]]
    payload = window_payload(windows[1], names={}, versions=VERSIONS, max_bytes=150)
    assert payload["messages"][0]["body"] == big
    assert len(payload["text"].encode()) <= 150
    payload["text"].encode().decode("utf-8")  # cut on a character boundary


def test_chunk_display_names_count_toward_size() -> None:
    """Boundaries are computed on the embedded text, display names included."""
    messages = [msg(i, "x" * 20) for i in range(8)]
    short = chunk(messages, gap_seconds=60, max_bytes=200, names={})
    long = chunk(messages, gap_seconds=60, max_bytes=200, names={ALICE: "A" * 40})
    assert len(long) > len(short)


def test_chunk_carries_room_thread_and_alias() -> None:
    """Windows carry the timeline's room, thread root and the given alias."""
    alias = RoomAlias("#dev:example.org")
    (w,) = chunk(
        [msg(2, thread_root="$e1")], gap_seconds=60, max_bytes=500, names={}, room_alias=alias
    )
    assert (w.room_id, w.thread_root, w.room_alias) == (ROOM, "$e1", alias)


def test_chunk_refuses_mixed_timelines() -> None:
    """chunk() takes one timeline; a thread reply among main messages is an error."""
    with pytest.raises(ValueError, match="one timeline"):
        chunk([msg(1), msg(2, thread_root="$e1")], gap_seconds=60, max_bytes=500, names={})


def test_chunk_empty() -> None:
    """No messages, no windows."""
    assert chunk([], gap_seconds=60, max_bytes=500, names={}) == []


_bodies = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "語", "🙂"]), min_size=0, max_size=120
)
_steps = st.lists(
    st.tuples(st.integers(min_value=-5_000, max_value=200_000), _bodies, st.booleans()),
    min_size=0,
    max_size=60,
)


def _sequence(steps: list[tuple[int, str, bool]]) -> list[Message]:
    out, ts = [], T0
    for n, (delta, body, is_bob) in enumerate(steps):
        ts += delta
        out.append(msg(n, body, ts=ts, sender=BOB if is_bob else ALICE))
    return out


@settings(max_examples=300, deadline=None)
@given(steps=_steps, max_bytes=st.integers(min_value=30, max_value=400))
def test_chunk_rechunk_from_any_window_start_reproduces_tail(
    steps: list[tuple[int, str, bool]], max_bytes: int
) -> None:
    """Re-chunking from any window's first message reproduces the windows after it exactly."""
    messages = _sequence(steps)
    names = {BOB: "Bob Ünïcode"}
    windows = chunk(messages, gap_seconds=60, max_bytes=max_bytes, names=names)
    assert [m for w in windows for m in w.messages] == messages
    start = 0
    for i, w in enumerate(windows):
        again = chunk(messages[start:], gap_seconds=60, max_bytes=max_bytes, names=names)
        assert again == windows[i:]
        start += len(w.messages)


@settings(max_examples=300, deadline=None)
@given(steps=_steps, max_bytes=st.integers(min_value=30, max_value=400))
def test_chunk_windows_respect_size_and_gap(
    steps: list[tuple[int, str, bool]], max_bytes: int
) -> None:
    """Inside a window no gap exceeds the limit, and only a lone message exceeds max_bytes."""
    windows = chunk(_sequence(steps), gap_seconds=60, max_bytes=max_bytes, names={})
    for w in windows:
        assert len(w.messages) == 1 or len(window_text(w, {}).encode()) <= max_bytes
        assert all(b.ts - a.ts <= 60_000 for a, b in pairwise(w.messages))


# ---------------------------------------------------------------- text


def test_window_text_line_format() -> None:
    """One line a message: UTC minute, display name or localpart, body with newlines folded."""
    w = Window(ROOM, None, (msg(0, "first\nsecond\r\nthird"), msg(60, "hi", sender=BOB)))
    assert window_text(w, {BOB: "Bob B."}) == (
        "[2026-11-01 16:34] alice: first second third\n[2026-11-01 16:35] Bob B.: hi"
    )


@pytest.mark.parametrize(
    ("sender", "names", "shown"),
    [
        ("@alice:example.org", {}, "alice"),
        ("@alice:example.org", {"@alice:example.org": "Alice\nLiddell"}, "Alice Liddell"),
        ("@alice:example.org", {"@alice:example.org": "  "}, "alice"),
        ("@carol:other.net", {"@alice:example.org": "Alice"}, "carol"),
    ],
)
def test_window_text_sender_name(sender: str, names: dict[str, str], shown: str) -> None:
    """Display name if known and not blank, else the mxid's localpart; names stay on one line."""
    w = Window(ROOM, None, (msg(0, "x", sender=UserID(sender)),))
    assert window_text(w, names) == f"[2026-11-01 16:34] {shown}: x"


@pytest.mark.parametrize(
    ("fmt", "line"),
    [
        (LineFormat(date=True, label="name"), "[2026-11-01 16:34] Alice Liddell (she/her): x"),
        (LineFormat(date=False, label="name"), "Alice Liddell (she/her): x"),
        (LineFormat(date=True, label="short"), "[2026-11-01 16:34] Alice: x"),
        (LineFormat(date=False, label="short"), "Alice: x"),
        (LineFormat(date=False, label="none"), "x"),
    ],
)
def test_window_text_line_formats(fmt: LineFormat, line: str) -> None:
    """A line format drops the minute, shortens the name to its first word, or drops it."""
    w = Window(ROOM, None, (msg(0, "x"),))
    assert window_text(w, {ALICE: "Alice Liddell (she/her)"}, fmt=fmt) == line


def test_dense_text_names_the_speakers_first_and_who_said_each_line() -> None:
    """The embedded text opens with the window's senders in order of appearance (`Alice and
    Bob:`), and each line says who said it (`Alice Liddell said: …`); no minute."""
    w = Window(ROOM, None, (msg(0, "hi"), msg(1, "yo", sender=BOB), msg(2, "so")))
    assert window_text(w, {ALICE: "Alice Liddell", BOB: "Bob"}, fmt=DENSE_LINE) == (
        "Alice and Bob:\nAlice Liddell said: hi\nBob said: yo\nAlice Liddell said: so"
    )


@pytest.mark.parametrize(
    ("count", "line"),
    [
        (1, "u0:"),
        (3, "u0, u1 and u2:"),
        (5, "u0, u1, u2, u3 and u4:"),
        (8, "u0, u1, u2, u3, u4 and 3 more:"),
    ],
)
def test_speakers_line_is_bounded_whatever_the_crowd(count: int, line: str) -> None:
    """At most five names (first words, ≤ 16 characters each), then how many more: a window of
    a busy room does not spend its text on a roll call."""
    messages = [msg(i, sender=UserID(f"@u{i}:hs")) for i in range(count)]
    assert speakers_line(messages, {}) == line


def test_dense_text_cut_keeps_the_speakers_line() -> None:
    """`max_bytes` cuts the end of the text, never the speakers' line in front of it."""
    w = Window(ROOM, None, (msg(0, "x" * 400),))
    text = window_text(w, {}, max_bytes=100, fmt=DENSE_LINE)
    assert text.startswith("alice:\nalice said: xxx") and len(text.encode()) == 100


def test_short_label_without_display_name_is_the_capped_localpart() -> None:
    """No display name: the localpart, at most 16 characters."""
    w = Window(ROOM, None, (msg(0, "x", sender=UserID("@a_very_long_localpart_indeed:hs")),))
    assert window_text(w, {}, fmt=LineFormat(date=False, label="short")) == ("a_very_long_loca: x")


def test_payload_text_follows_the_dense_format_and_keeps_the_rest() -> None:
    """Only the embedded text changes with the dense format: the payload keeps every sender,
    timestamp and body."""
    messages = [msg(i, f"message {i} " * 3) for i in range(12)]
    windows = chunk(messages, gap_seconds=1800, max_bytes=150, names={})
    short = LineFormat(date=False, label="short")
    names = {ALICE: "Alice Liddell"}
    for w in windows:
        full = window_payload(w, names=names, versions=VERSIONS, max_bytes=150, dense=FULL_LINE)
        cut = window_payload(w, names=names, versions=VERSIONS, max_bytes=150, dense=short)
        assert cut["text"] == "\n".join(f"Alice: {m.body}" for m in w.messages)
        assert window_payload(w, names=names, versions=VERSIONS)["text"].startswith("Alice:\n")
        assert full["text"].startswith("[2026-11-01 16:3")
        assert {k: v for k, v in cut.items() if k not in ("text", "content_hash")} == {
            k: v for k, v in full.items() if k not in ("text", "content_hash")
        }


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("abc", 10, "abc"), ("abcdef", 3, "abc"), ("aé", 2, "a"), ("aé", 3, "aé"), ("🙂🙂", 5, "🙂")],
)
def test_truncate_utf8_cuts_on_character_boundary(text: str, limit: int, expected: str) -> None:
    """Truncation keeps the longest prefix of whole characters within the byte limit."""
    assert truncate_utf8(text, limit) == expected


# ---------------------------------------------------------------- ids, hashes, payloads


def test_point_id_deterministic_uuid_and_distinct() -> None:
    """Point ids are stable uuid5 strings that differ when room, thread or first event differ."""
    a = point_id(ROOM, None, EventID("$e1"))
    assert a == point_id(ROOM, None, EventID("$e1"))
    assert uuid.UUID(a).version == 5
    others = {
        point_id(RoomID("!other:example.org"), None, EventID("$e1")),
        point_id(ROOM, EventID("$root"), EventID("$e1")),
        point_id(ROOM, None, EventID("$e2")),
    }
    assert a not in others and len(others) == 3


def test_content_hash_changes_with_text_and_versions() -> None:
    """The hash is sha256 hex and changes with the text or any version, not with key order."""
    h = content_hash("text", {"chunker": 1, "scrub": 1})
    assert len(h) == 64 and int(h, 16) >= 0
    assert h == content_hash("text", {"scrub": 1, "chunker": 1})
    assert h != content_hash("text!", {"chunker": 1, "scrub": 1})
    assert h != content_hash("text", {"chunker": 1, "scrub": 2})


def test_window_payload_fields() -> None:
    """The payload has exactly the §4 fields, mxids as senders and full bodies."""
    alias = RoomAlias("#dev:example.org")
    messages = (msg(1, "a\nb"), msg(2, "c", sender=BOB), msg(3, "d"))
    w = Window(ROOM, EventID("$root"), messages, room_alias=alias)
    p = window_payload(w, names={ALICE: "Alice"}, versions=VERSIONS, max_bytes=1000)
    assert set(p) == {
        "corpus", "room_id", "room_alias", "thread_root", "event_ids", "first_event_id",
        "last_event_id", "first_ts", "last_ts", "senders", "messages", "text",
        "content_hash", "versions",
    }  # fmt: skip
    assert p["corpus"] == "chat"
    assert (p["room_id"], p["room_alias"], p["thread_root"]) == (ROOM, alias, "$root")
    assert p["event_ids"] == ["$e1", "$e2", "$e3"]
    assert (p["first_event_id"], p["last_event_id"]) == ("$e1", "$e3")
    assert (p["first_ts"], p["last_ts"]) == (T0 + 1000, T0 + 3000)
    assert p["senders"] == [ALICE, BOB]
    assert p["messages"][0] == {
        "event_id": "$e1",
        "sender": ALICE,
        "ts": T0 + 1000,
        "body": "a\nb",
        "msgtype": "m.text",
    }
    assert p["text"] == window_text(w, {ALICE: "Alice"}, fmt=DENSE_LINE)  # no minute
    assert p["content_hash"] == content_hash(p["text"], VERSIONS)
    assert p["versions"] == VERSIONS


def test_window_payload_extra_event_ids_appended_once() -> None:
    """Extra ids (applied edits) follow the message ids, without duplicates."""
    w = Window(ROOM, None, (msg(1), msg(2)))
    p = window_payload(
        w, names={}, versions=VERSIONS, extra_event_ids=[EventID("$edit"), EventID("$e1")]
    )
    assert p["event_ids"] == ["$e1", "$e2", "$edit"]
    assert p["first_event_id"] == "$e1"


def test_window_payload_hash_follows_names() -> None:
    """A changed display name changes the embedded text and so the content hash."""
    w = Window(ROOM, None, (msg(1),))
    a = window_payload(w, names={}, versions=VERSIONS)
    b = window_payload(w, names={ALICE: "Alice"}, versions=VERSIONS)
    assert a["content_hash"] != b["content_hash"]
    assert a["messages"] == b["messages"]
