"""`ingest.matrix.export`: a room export read as if it were the homeserver, the source of
`muninn import` (and what the read path checks an imported room's hits against, rule 15).

Two formats: Element's JSON export (`{"room_name", …, "messages": [raw events]}`) and JSONL with
one raw Matrix event a line. `ExportReader` offers the calls the writer makes of the reader
(whoami, joined_rooms, direct_rooms, room_state, walk, get_event, relations), so an import goes
through exactly the same scope rules, normalisation, scrub, windows and store as a refresh.

What an export cannot tell: Element writes only the events it renders, so `m.bridge` state and
`m.direct` account data are usually missing. Scope therefore also refuses an export in which any
membership ever carried `is_direct`, and treats every sender as a member for the puppet check.
The meta record an import leaves (`export:<room id>`) and which rooms are still built from their
export are the writer's records, `ingest.index.records`.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import json
import re
from array import array
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast, overload

from mautrix.types import EventType

from ingest.errors import MuninnError
from ingest.event import ClientEvent, as_event, content_of, relation_of
from ingest.matrix.membership import was_direct
from ingest.matrix.state import room_state_from
from ingest.matrix.timeline import Page
from ingest.types import RoomID, RoomState, UserID

# A position in an export as a walk's token: `import:<index of the next event>`. A room whose
# cursor holds one is still built from its export (`ingest.index.records.exported_rooms`).
EXPORT_TOKEN_PREFIX = "import:"


class ExportError(MuninnError):
    """The export file cannot be read as a room export; the message names the cause."""


def load_export(path: Path) -> list[ClientEvent]:
    """The raw events of an Element JSON export or a JSONL file, in file order, all in memory
    (for small files; `ExportReader.from_file` reads them from the file as it goes instead)."""
    return list(ExportFile.scan(path))


class ExportFile(Sequence[ClientEvent]):
    """The events of an export file, read from it when asked for: only each event's byte span
    is held, so an import's memory does not grow with the file."""

    def __init__(self, path: Path, starts: array[int], ends: array[int]) -> None:
        self.path = path
        self._starts = starts
        self._ends = ends

    @classmethod
    def scan(cls, path: Path) -> ExportFile:
        """Find every event of the file, checking each is JSON (the error names the cause)."""
        starts, ends = array("q"), array("q")
        try:
            with path.open("rb") as f:
                first = f.readline(_MAX_EVENT_BYTES).lstrip()
                f.seek(0)
                element = first.startswith(b"{") and not _looks_like_jsonl(first)
                for a, b in _element_spans(f, path) if element else _jsonl_spans(f, path):
                    starts.append(a)
                    ends.append(b)
        except OSError as e:
            raise ExportError(f"{path}: cannot read: {e}") from None
        return cls(path, starts, ends)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> ClientEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[ClientEvent]: ...

    def __getitem__(self, index: int | slice) -> ClientEvent | list[ClientEvent]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("an export is read in runs of consecutive events")
            return self.read(start, stop)
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        i = index % len(self)
        return self.read(i, i + 1)[0]

    def __iter__(self) -> Iterator[ClientEvent]:
        for i in range(0, len(self), _READ_EVENTS):
            yield from self.read(i, i + _READ_EVENTS)

    def read(self, start: int, stop: int) -> list[ClientEvent]:
        """Events `start` to `stop` (exclusive), in one read of the file."""
        stop = min(stop, len(self))
        if start >= stop:
            return []
        base = self._starts[start]
        try:
            with self.path.open("rb") as f:
                f.seek(base)
                data = f.read(self._ends[stop - 1] - base)
        except OSError as e:
            raise ExportError(f"{self.path}: cannot read: {e}") from None
        out: list[ClientEvent] = []
        for i in range(start, stop):
            try:
                event = as_event(json.loads(data[self._starts[i] - base : self._ends[i] - base]))
            except (ValueError, RecursionError):
                event = None
            if event is None:
                raise ExportError(f"{self.path}: the file changed while it was read; import again")
            out.append(event)
        return out


_MAX_EVENT_BYTES = 70_000  # the spec caps an event at 65,536 bytes: a longer line is no event
_READ_EVENTS = 500  # events one read of the file brings in at most
_CHUNK = 1 << 20  # bytes an Element export is read in


def _jsonl_spans(f: BinaryIO, path: Path) -> Iterator[tuple[int, int]]:
    pos = 0
    for n, line in enumerate(f, start=1):
        start, pos = pos, pos + len(line)
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as e:
            raise ExportError(f"{path}:{n}: not a JSON event: {e}") from None
        except RecursionError:  # `[[[[…` thousands deep: json's decoder recurses
            raise ExportError(f"{path}:{n}: not a JSON event: nested too deeply") from None
        if isinstance(event, dict):
            yield start, pos


def _element_spans(f: BinaryIO, path: Path) -> Iterator[tuple[int, int]]:
    """The byte spans of the objects in an Element export's top-level `messages` list."""
    doc = _Forward(f, path)
    doc.expect("{")
    found = False
    while not doc.consume("}"):
        key = doc.value()
        doc.expect(":")
        if key == "messages" and doc.consume("["):
            found = True
            while not doc.consume("]"):
                start = doc.offset()
                if isinstance(doc.value(), dict):
                    yield start, doc.offset()
                doc.consume(",")
        else:
            doc.value()
        doc.consume(",")
    if not found:
        raise ExportError(f"{path}: an Element export has a 'messages' list; none found")


class _Forward:
    """A JSON document read forward a chunk at a time, keeping only the unread tail: json's
    raw_decode over that tail, and the byte offset in the file of what was consumed."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0  # the next character of text to read
        self.base = 0  # the byte offset of text[pos] in the file
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.f.read(_CHUNK)
        self.eof = not chunk
        try:
            tail = self.decoder.decode(chunk, final=self.eof)
        except UnicodeDecodeError as e:
            raise ExportError(f"{self.path}: cannot read: {e}") from None
        self.text, self.pos = self.text[self.pos :] + tail, 0
        return True

    def _advance(self, to: int) -> None:
        self.base += len(self.text[self.pos : to].encode("utf-8"))
        self.pos = to

    def offset(self) -> int:
        """The byte offset of the next token (space skipped)."""
        while True:
            space = _SPACE.match(self.text, self.pos)
            self._advance(space.end() if space else self.pos)
            if self.pos < len(self.text) or not self._more():
                return self.base

    def consume(self, char: str) -> bool:
        self.offset()
        if self.pos >= len(self.text):
            raise ExportError(f"{self.path}: not valid JSON: the file ends early")
        if self.text.startswith(char, self.pos):
            self._advance(self.pos + 1)
            return True
        return False

    def expect(self, char: str) -> None:
        if not self.consume(char):
            at = f"expected {char!r} at byte {self.base}"
            raise ExportError(f"{self.path}: not valid JSON: {at}")

    def value(self) -> Any:
        self.offset()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.text, self.pos)
            except RecursionError:
                at = f"byte {self.base}"
                raise ExportError(
                    f"{self.path}: not valid JSON: nested too deeply at {at}"
                ) from None
            except ValueError as e:
                if self._more():  # cut at the chunk's end, most likely: read on
                    continue
                raise ExportError(f"{self.path}: not valid JSON: {e}") from None
            if end == len(self.text) and self._more():
                continue  # a number or literal may go on in the next chunk
            self._advance(end)
            return obj


_SPACE = re.compile(r"[ \t\n\r]+")
_DECODER = json.JSONDecoder()


def _looks_like_jsonl(first_line: bytes) -> bool:
    try:
        obj = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "messages" not in obj and "type" in obj


class ExportReader:
    """One exported room, answering the writer's reader calls from the file.

    Holds the room's state events, its senders and an index of event ids, relations and
    redactions; the events themselves are read from `events` (an `ExportFile`) a page at a time.
    """

    def __init__(self, events: Sequence[ClientEvent], *, user_id: str) -> None:
        self.events = events
        self.user_id = UserID(user_id)
        rooms: set[str] = set()
        self._by_id: dict[str, int] = {}
        # The writer never needs the raw export of another room; redactions are applied here,
        # as the homeserver applies them to what it serves.
        self._redacted: set[str] = set()
        self._relations: dict[str, list[int]] = {}  # target event id -> its relating events
        self._state: list[ClientEvent] = []
        self._senders: set[str] = set()
        for i, e in enumerate(events):
            if isinstance(e.get("room_id"), str):
                rooms.add(e["room_id"])
            if "event_id" in e:
                self._by_id[str(e["event_id"])] = i
            if e.get("type") == EventType.ROOM_REDACTION.t:
                self._redacted.add(str(_redacts(e)))
            target = relation_of(content_of(e)).get("event_id")
            if isinstance(target, str):
                self._relations.setdefault(target, []).append(i)
            if "state_key" in e:
                self._state.append(e)
            if isinstance(e.get("sender"), str):
                self._senders.add(e["sender"])
        if len(rooms) != 1:
            found = ", ".join(sorted(rooms)) or "none"
            raise ExportError(f"an export must hold one room's events; room ids found: {found}")
        self.room_id = RoomID(rooms.pop())

    @classmethod
    def from_file(cls, path: Path, *, user_id: str) -> ExportReader:
        return cls(ExportFile.scan(path), user_id=user_id)

    @classmethod
    async def load(cls, path: Path, *, user_id: str) -> ExportReader:
        """`from_file` off the loop: the scan reads the whole file once."""
        return await asyncio.to_thread(cls.from_file, path, user_id=user_id)

    async def whoami(self) -> UserID:
        return self.user_id

    async def joined_rooms(self) -> list[RoomID]:
        return [self.room_id]

    async def direct_rooms(self) -> set[RoomID]:
        return set()

    async def resolve_alias(self, alias: str) -> RoomID | None:
        """An export holds no room directory: which room an alias names is not known here."""
        return None

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        base = room_state_from(self.room_id, self._state, self.user_id)
        direct = base.direct_flag or any(
            e.get("type") == EventType.ROOM_MEMBER.t and was_direct(e) for e in self._state
        )
        # An export may hold senders without their membership events: each counts as a member.
        members = tuple(sorted({*base.members, *(UserID(s) for s in self._senders)}))
        return dataclasses.replace(base, joined=True, members=members, direct_flag=direct)

    async def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]:
        """Pages of the file's events; a token is the position after a page."""
        start = _position(from_token)
        for i in range(start, len(self.events), page_size):
            end = min(i + page_size, len(self.events))
            raw = await asyncio.to_thread(self.events.__getitem__, slice(i, end))
            page = [self._served(e) for e in raw]
            yield Page(
                events=page, start=f"{EXPORT_TOKEN_PREFIX}{i}", end=f"{EXPORT_TOKEN_PREFIX}{end}"
            )

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None:
        i = self._by_id.get(event_id)
        return self._served(self.events[i]) if i is not None else None

    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[ClientEvent]:
        out = []
        for i in self._relations.get(event_id, ()):
            e = self.events[i]
            if (
                relation_of(content_of(e)).get("rel_type") == rel_type
                and str(e.get("event_id")) not in self._redacted
            ):
                out.append(self._served(e))
        return out

    async def close(self) -> None:
        """Nothing to release: the file is opened for each read."""

    def _served(self, event: ClientEvent) -> ClientEvent:
        """The event as a homeserver would serve it now: a redacted one has no content."""
        if (
            str(event.get("event_id")) in self._redacted
            and event.get("type") != EventType.ROOM_REDACTION.t
        ):
            unsigned = dict(event.get("unsigned") or {})
            unsigned.setdefault("redacted_because", {"type": EventType.ROOM_REDACTION.t})
            return cast(ClientEvent, {**event, "content": {}, "unsigned": unsigned})
        return event


def _position(token: str | None) -> int:
    if token is None:
        return 0
    digits = token.removeprefix(EXPORT_TOKEN_PREFIX)
    if digits == token or not (digits.isascii() and digits.isdigit() and len(digits) < 19):
        # A homeserver's token: this room was refreshed before; walk the file from its start
        # (events already held are recognised by id and cost no embedding).
        return 0
    return int(digits)


def _redacts(event: ClientEvent) -> object:
    return content_of(event).get("redacts") or event.get("redacts")
