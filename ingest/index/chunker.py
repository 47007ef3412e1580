"""Cut a room's messages into windows, and give each window its text, id and payload (§4).

Pure: no I/O. Timeline rule: a message with a `thread_root` belongs to that thread's timeline;
every other message, a thread's root included, belongs to the main timeline. So every message
sits in exactly one timeline and therefore in exactly one window, and a root never moves when its
first reply arrives (moving it would rewrite an already closed main-timeline window). A thread
window cites its root through `thread_root`, not by holding a copy of the root's text.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ingest.rules.stamps import utc_minute
from ingest.types import EventID, Message, RoomAlias, RoomID, UserID, Window

__all__ = [
    "CHUNKER_VERSION",
    "DENSE_LINE",
    "FULL_LINE",
    "LineFormat",
    "Names",
    "chunk",
    "content_hash",
    "display_name",
    "message_line",
    "point_id",
    "short_name",
    "speakers_line",
    "split_timelines",
    "truncate_utf8",
    "window_payload",
    "window_text",
]

# Bump when boundaries, line format or payload shape change: the collection records it (§3.13).
# 2: the embedded text has no minute on its lines (DENSE_LINE).
# 3: a message's `m.mentions` user ids in its payload (`mentions:`, `ingest.search.filters`).
# 4: the embedded text names the window's speakers first and says who said each line.
# 5: each message's line vector from the window's one pass (`lines`, rule 22b).
# 6: each message's `msgtype` in its payload; files, images, video and audio are messages
#    (their filename and caption: `ingest.rules.media`), so every room is read again.
CHUNKER_VERSION: int = 6

# mxid → display name. Either key type, so `dict(state.display_names)` passes as it is.
Names = Mapping[UserID, str] | Mapping[str, str]

# Fixed forever: changing it would give every existing window a new point id.
_POINT_NAMESPACE = uuid.UUID("6d756e69-6e6e-5f63-6861-745f77696e64")


def split_timelines(messages: Iterable[Message]) -> dict[EventID | None, list[Message]]:
    """Group messages by timeline, keeping their order; the main timeline's key is None.

    Timelines appear in the order of their first message; empty timelines are absent.
    """
    timelines: dict[EventID | None, list[Message]] = {}
    for message in messages:
        timelines.setdefault(message.thread_root, []).append(message)
    return timelines


def display_name(sender: UserID, names: Names) -> str:
    """The sender's display name, else the localpart of the mxid (`@alice:hs` → `alice`)."""
    name = names.get(sender)
    if name is None or not name.strip():
        name = sender.removeprefix("@").split(":", 1)[0] or sender
    return _fold(name)


SHORT_NAME_CHARS = 16


def short_name(sender: UserID, names: Names) -> str:
    """The first word of the sender's display name (else of the localpart), at most 16
    characters: `Alice Smith (she/her)` → `Alice`."""
    words = display_name(sender, names).split()
    return (words[0] if words else sender)[:SHORT_NAME_CHARS]


def _fold(text: str) -> str:
    # One line a message: any line break inside a body or a name becomes a space.
    return " ".join(text.splitlines())


@dataclass(frozen=True)
class LineFormat:
    """What a window's line carries before the body: the minute it was sent, and who sent it
    (`name`: the display name, else the localpart; `short`: its first word; `none`: nobody),
    with `said` as `alice said: …`; with `speakers`, the text opens with a line naming the
    window's senders (`Alice and Bob:`)."""

    date: bool = True
    label: Literal["name", "short", "none"] = "name"
    said: bool = False
    speakers: bool = False


# Window boundaries and the lexical vector read every line whole.
FULL_LINE = LineFormat()
# The text the embedder reads (the payload's `text`): no minute, a third fewer tokens a window
# at equal recall (bench/RESULTS.md §9); the speakers named first and `said:` on each line,
# which both models read far better (dense alone 0.60 → 0.65 MiniLM, 0.61 → 0.71 e5; §11).
# The lexical vector and the payload keep the minute.
DENSE_LINE = LineFormat(date=False, label="name", said=True, speakers=True)


def message_line(message: Message, names: Names, fmt: LineFormat = FULL_LINE) -> str:
    """`[2026-11-01 16:34] alice: message text`, time in UTC; `fmt` drops or shortens parts."""
    prefix = ""
    if fmt.date:
        prefix = f"[{utc_minute(message.ts)}] "
    said = " said: " if fmt.said else ": "
    if fmt.label == "name":
        prefix += display_name(message.sender, names) + said
    elif fmt.label == "short":
        prefix += short_name(message.sender, names) + said
    return prefix + _fold(message.body)


SPEAKERS_NAMED = 5


def speakers_line(messages: Sequence[Message], names: Names) -> str:
    """The senders of `messages` by their first word, in order of appearance: `Alice and Bob:`,
    `Ann, Bo, Cy, Di, Ed and 2 more:` (at most SPEAKERS_NAMED named, so its length is bounded)."""
    firsts = list(dict.fromkeys(short_name(m.sender, names) for m in messages))
    shown, more = firsts[:SPEAKERS_NAMED], len(firsts) - SPEAKERS_NAMED
    if more > 0:
        return f"{', '.join(shown)} and {more} more:"
    if len(shown) == 1:
        return f"{shown[0]}:"
    return f"{', '.join(shown[:-1])} and {shown[-1]}:"


def _line_bytes(message: Message, names: Names) -> int:
    return len(message_line(message, names).encode("utf-8"))


def chunk(
    messages: Sequence[Message],
    *,
    gap_seconds: int,
    max_bytes: int,
    names: Names,
    room_alias: RoomAlias | None = None,
) -> list[Window]:
    """Cut ONE timeline, in order, into windows greedily.

    A new window starts when the gap to the previous message exceeds `gap_seconds`, or when
    adding the message's line (plus its newline) would make the window's text exceed
    `max_bytes` UTF-8 bytes. A message whose line alone exceeds `max_bytes` is a window alone
    (its embedded text is truncated, its payload body is not). The decision for each message
    depends only on the messages since the current window's start, so chunking from any
    window's first message reproduces the windows that follow it.

    Raises:
        ValueError: the messages are not all of one room and one timeline.
    """
    if not messages:
        return []
    room_id, thread_root = messages[0].room_id, messages[0].thread_root
    for m in messages:
        if m.room_id != room_id or m.thread_root != thread_root:
            raise ValueError(f"{m.event_id}: chunk() takes one timeline; split_timelines() first")
    groups: list[list[Message]] = []
    size = 0
    gap_ms = gap_seconds * 1000
    for m in messages:
        line = _line_bytes(m, names)
        if groups and _continues(groups[-1][-1], m, size + 1 + line, gap_ms, max_bytes):
            groups[-1].append(m)
            size += 1 + line
        else:
            groups.append([m])
            size = line
    return [Window(room_id, thread_root, tuple(g), room_alias=room_alias) for g in groups]


def _continues(prev: Message, m: Message, new_size: int, gap_ms: int, max_bytes: int) -> bool:
    # A timestamp that goes backwards (backdated or skewed senders) is a gap of zero, not a split.
    return m.ts - prev.ts <= gap_ms and new_size <= max_bytes


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that fits in `max_bytes` UTF-8 bytes (no split character)."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def window_text(
    window: Window, names: Names, max_bytes: int | None = None, fmt: LineFormat = FULL_LINE
) -> str:
    """A window's text: one line a message in `fmt`, cut to `max_bytes` if given."""
    lines = [message_line(m, names, fmt) for m in window.messages]
    if fmt.speakers:  # first, so a cut takes the end of the last line, never the speakers
        lines.insert(0, speakers_line(window.messages, names))
    text = "\n".join(lines)
    return text if max_bytes is None else truncate_utf8(text, max_bytes)


def point_id(room_id: RoomID, thread_root: EventID | None, first_event_id: EventID) -> str:
    """Deterministic point id: uuid5 over room, thread (empty for main) and first event id."""
    # \x1f cannot occur in Matrix ids, so distinct triples never join to the same name.
    name = f"{room_id}\x1f{thread_root or ''}\x1f{first_event_id}"
    return str(uuid.uuid5(_POINT_NAMESPACE, name))


def content_hash(text: str, versions: Mapping[str, Any]) -> str:
    """sha256 hex of the embedded text and the versions that produced its vectors.

    Equal hashes mean the stored vectors can be reused; they do not mean the payload is equal
    (an applied edit id, say, changes `event_ids` and not the text).
    """
    canonical = json.dumps(
        {"text": text, "versions": versions},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def window_payload(
    window: Window,
    *,
    names: Names,
    versions: Mapping[str, Any],
    max_bytes: int | None = None,
    extra_event_ids: Iterable[EventID] = (),
    dense: LineFormat = DENSE_LINE,
) -> dict[str, Any]:
    """The §4 point payload of a window.

    Args:
        names: mxid → display name, for the embedded text only (the payload keeps mxids).
        versions: chunker, scrub, lexical and embedder versions; stored and hashed.
        max_bytes: the chunker's `max_bytes`; `text` is cut to it, message bodies are not.
        extra_event_ids: more ids whose change must find this window, such as the ids of the
            edits applied to its messages; appended to `event_ids` after the message ids.
        dense: the line format of `text`, the text embedded (boundaries use `FULL_LINE`).
    """
    text = window_text(window, names, max_bytes, dense)
    stamps = [m.ts for m in window.messages]
    return {
        "corpus": "chat",
        "room_id": window.room_id,
        "room_alias": window.room_alias,
        "thread_root": window.thread_root,
        "event_ids": _unique([m.event_id for m in window.messages], extra_event_ids),
        "first_event_id": window.first_event_id,
        "last_event_id": window.last_event_id,
        # min/max rather than first/last so time filters hold even if a sender backdated.
        "first_ts": min(stamps),
        "last_ts": max(stamps),
        "senders": _unique([m.sender for m in window.messages]),
        "messages": [_message_payload(m) for m in window.messages],
        "text": text,
        "content_hash": content_hash(text, versions),
        "versions": dict(versions),
    }


def _message_payload(m: Message) -> dict[str, Any]:
    said: dict[str, Any] = {
        "event_id": m.event_id,
        "sender": m.sender,
        "ts": m.ts,
        "body": m.body,  # media: its filename and caption (`ingest.rules.media`)
        "msgtype": m.msgtype,  # `has:image` and the others read it (`ingest.search.filters`)
    }
    if m.mentions is not None:  # `mentions:` reads it (`ingest.search.filters`); absent: the text
        said["mentions"] = list(m.mentions)
    return said


def _unique(*parts: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for part in parts:
        for item in part:
            seen.setdefault(item, None)
    return list(seen)
