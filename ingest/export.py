"""A room export read as if it were the homeserver: the source of `muninn import`.

Two formats: Element's JSON export (`{"room_name", …, "messages": [raw events]}`) and JSONL with
one raw Matrix event a line. `ExportReader` offers the calls the writer makes of the reader
(whoami, joined_rooms, direct_rooms, room_state, walk, get_event, relations), so an import goes
through exactly the same scope rules, normalisation, scrub, windows and store as a refresh.

What an export cannot tell: Element writes only the events it renders, so `m.bridge` state and
`m.direct` account data are usually missing. Scope therefore also refuses an export in which any
membership ever carried `is_direct`, and treats every sender as a member for the puppet check.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ingest.errors import MuninnError
from ingest.matrix import Page, room_state_from
from ingest.records import EXPORT_PREFIX
from ingest.revalidate import LiveCheck
from ingest.rooms import RoomCache
from ingest.scope import RoomScope
from ingest.types import RoomID, RoomState, UserID

JSONDict = dict[str, Any]
_TOKEN_PREFIX = "import:"


class ExportError(MuninnError):
    """The export file cannot be read as a room export; the message names the cause."""


def load_export(path: Path) -> list[JSONDict]:
    """The raw events of an Element JSON export or a JSONL file, in file order."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ExportError(f"{path}: cannot read: {e}") from None
    stripped = text.lstrip()
    if stripped.startswith("{") and not _looks_like_jsonl(stripped):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ExportError(f"{path}: not valid JSON: {e}") from None
        messages = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(messages, list):
            raise ExportError(f"{path}: an Element export has a 'messages' list; none found")
        return [e for e in messages if isinstance(e, dict)]
    events: list[JSONDict] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as e:
            raise ExportError(f"{path}:{n}: not a JSON event: {e}") from None
        if isinstance(event, dict):
            events.append(event)
    return events


def _looks_like_jsonl(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    try:
        obj = json.loads(first)
    except ValueError:
        return False
    return isinstance(obj, dict) and "messages" not in obj and "type" in obj


class ExportReader:
    """One exported room, answering the writer's reader calls from the file."""

    def __init__(self, events: Sequence[JSONDict], *, user_id: str) -> None:
        rooms = {e.get("room_id") for e in events if isinstance(e.get("room_id"), str)}
        if len(rooms) != 1:
            found = ", ".join(sorted(str(r) for r in rooms)) or "none"
            raise ExportError(f"an export must hold one room's events; room ids found: {found}")
        self.room_id = RoomID(str(rooms.pop()))
        self.user_id = UserID(user_id)
        # The writer never needs the raw export of another room; redactions are applied here,
        # as the homeserver applies them to what it serves.
        self.events = list(events)
        self._by_id = {str(e["event_id"]): e for e in self.events if "event_id" in e}
        self._redacted = {
            str(_redacts(e)) for e in self.events if e.get("type") == "m.room.redaction"
        }

    @classmethod
    def from_file(cls, path: Path, *, user_id: str) -> ExportReader:
        return cls(load_export(path), user_id=user_id)

    async def whoami(self) -> UserID:
        return self.user_id

    async def joined_rooms(self) -> list[RoomID]:
        return [self.room_id]

    async def direct_rooms(self) -> set[RoomID]:
        return set()

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        state_events = [e for e in self.events if "state_key" in e]
        base = room_state_from(self.room_id, state_events, self.user_id)
        senders = {str(e["sender"]) for e in self.events if isinstance(e.get("sender"), str)}
        direct = base.direct_flag or any(
            e.get("type") == "m.room.member" and _is_direct(e) for e in state_events
        )
        # An export may hold senders without their membership events: each counts as a member.
        members = tuple(sorted({*base.members, *(UserID(s) for s in senders)}))
        return dataclasses.replace(base, joined=True, members=members, direct_flag=direct)

    async def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]:
        """Pages of the file's events; a token is the position after a page."""
        start = _position(from_token)
        for i in range(start, len(self.events), page_size):
            end = min(i + page_size, len(self.events))
            page = [self._served(e) for e in self.events[i:end]]
            yield Page(events=page, start=f"{_TOKEN_PREFIX}{i}", end=f"{_TOKEN_PREFIX}{end}")

    async def get_event(self, room_id: RoomID | str, event_id: str) -> JSONDict | None:
        event = self._by_id.get(event_id)
        return self._served(event) if event is not None else None

    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[JSONDict]:
        out = []
        for e in self.events:
            rel = _content(e).get("m.relates_to")
            if (
                isinstance(rel, dict)
                and rel.get("rel_type") == rel_type
                and (
                    rel.get("event_id") == event_id
                    and str(e.get("event_id")) not in self._redacted
                )
            ):
                out.append(self._served(e))
        return out

    async def close(self) -> None:
        """Nothing to release."""

    def _served(self, event: JSONDict) -> JSONDict:
        """The event as a homeserver would serve it now: a redacted one has no content."""
        if (
            str(event.get("event_id")) in self._redacted
            and event.get("type") != "m.room.redaction"
        ):
            unsigned = dict(event.get("unsigned") or {})
            unsigned.setdefault("redacted_because", {"type": "m.room.redaction"})
            return {**event, "content": {}, "unsigned": unsigned}
        return event


def export_record(path: Path) -> JSONDict:
    """The meta value `muninn import` keeps under `EXPORT_PREFIX + room_id`."""
    return {"path": str(path.resolve())}


def exported_rooms(
    exports: Mapping[str, Mapping[str, Any]],
    cursors: Mapping[str, Mapping[str, Any]],
    *,
    cursor_prefix: str,
) -> dict[RoomID, Path]:
    """Rooms whose index was built from an export: an export record names the file, and the
    room's cursor is still the export's (a refresh from the homeserver since replaces it, and
    then the homeserver is the record again)."""
    out: dict[RoomID, Path] = {}
    for key, record in exports.items():
        room_id = key.removeprefix(EXPORT_PREFIX)
        token = str((cursors.get(cursor_prefix + room_id) or {}).get("token", ""))
        if token.startswith(_TOKEN_PREFIX) and isinstance(record.get("path"), str):
            out[RoomID(room_id)] = Path(record["path"])
    return out


async def export_check(path: Path, *, user_id: str, scope: RoomScope) -> LiveCheck:
    """Revalidation of an imported room against its export: the same check as against the
    homeserver, its state and events read from the file (a redaction there hides the hit)."""
    try:
        reader = await asyncio.to_thread(ExportReader.from_file, path, user_id=user_id)
    except ExportError as e:
        raise ExportError(
            f"{e}. This room was indexed from that export and its hits are revalidated against "
            "it: restore the file, or import the room again"
        ) from None
    return LiveCheck(reader, RoomCache(reader, scope))


def _position(token: str | None) -> int:
    if token is None:
        return 0
    if not token.startswith(_TOKEN_PREFIX) or not token[len(_TOKEN_PREFIX) :].isdigit():
        # A homeserver's token: this room was refreshed before; walk the file from its start
        # (events already held are recognised by id and cost no embedding).
        return 0
    return int(token[len(_TOKEN_PREFIX) :])


def _content(event: Mapping[str, Any]) -> Mapping[str, Any]:
    content = event.get("content")
    return content if isinstance(content, dict) else {}


def _redacts(event: Mapping[str, Any]) -> Any:
    return _content(event).get("redacts") or event.get("redacts")


def _is_direct(event: Mapping[str, Any]) -> bool:
    unsigned = event.get("unsigned")
    prev = unsigned.get("prev_content") if isinstance(unsigned, dict) else None
    return bool(_content(event).get("is_direct")) or (
        isinstance(prev, dict) and bool(prev.get("is_direct"))
    )
