"""A room's windows while the writer changes them: the pure core of `ingest.index.refresh`.

`WindowSet` applies normalised events, in timeline order, to the windows the index holds.
It reads the index through a `WindowLookup` (the store, or a dict in tests) and never writes:
the shell asks it for `changes()` and does the upserts and deletes. Every lookup goes through
the working set first, so within a page the working set is the truth and a stale stored copy
of a window that was already changed here is never used again.

Why the result does not depend on page boundaries or crashes: each event's effect is a
deterministic function of the windows it touches, and applying an event twice changes nothing
the second time (a message already held is not appended again; an applied edit is not newer
than itself; a removed message cannot be removed again). A replay after a crash therefore
converges to the collection an uninterrupted run builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mautrix.types import MessageType

from ingest.index.chunker import chunk, point_id
from ingest.types import Edit, EventID, Message, Redaction, RoomID

TimelineKey = EventID | None  # a thread root, or None for the main timeline


@dataclass(frozen=True)
class StoredWindow:
    """A window as the index holds it, with the content hash it was stored under."""

    point_id: str
    messages: tuple[Message, ...]
    thread_root: EventID | None
    content_hash: str | None = None


class WindowLookup(Protocol):
    """Read access to the windows the index holds for one room."""

    def windows_of_events(self, event_ids: Sequence[EventID]) -> list[StoredWindow]:
        """Every stored window whose event ids (messages or applied edits) meet `event_ids`."""

    def window_by_id(self, point_id: str) -> StoredWindow | None:
        """The stored window with this point id, or None."""


@dataclass(frozen=True)
class ChunkParams:
    gap_seconds: int
    max_bytes: int


@dataclass(frozen=True)
class RevertEdit:
    """A redacted edit was the applied one: the shell must re-read the message's valid text."""

    target: EventID
    sender: str


class EditOutcome:
    APPLIED = "applied"
    UNKNOWN_TARGET = "unknown_target"
    OTHER_SENDER = "other_sender"
    NOT_NEWER = "not_newer"


def _event_ids(messages: Iterable[Message]) -> list[EventID]:
    ids: list[EventID] = []
    for m in messages:
        ids.append(m.event_id)
        if m.edit_event_id is not None:
            ids.append(m.edit_event_id)
    return ids


@dataclass
class WindowSet:
    """The working set of one room's windows during a refresh."""

    room_id: RoomID
    lookup: WindowLookup
    params: ChunkParams
    tails: dict[str, str] = field(default_factory=dict)  # timeline key ("" = main) -> point id
    _windows: dict[str, tuple[Message, ...] | None] = field(default_factory=dict)
    _threads: dict[str, EventID | None] = field(default_factory=dict)
    _stored_hash: dict[str, str | None] = field(default_factory=dict)
    _index: dict[EventID, set[str]] = field(default_factory=dict)
    _checked: set[EventID] = field(default_factory=set)
    _dirty: set[str] = field(default_factory=set)

    # ------------------------------------------------------------ loading

    def prefetch(self, event_ids: Sequence[EventID]) -> None:
        """Load, in one lookup, every stored window that holds any of these events."""
        wanted = [e for e in event_ids if e not in self._checked]
        if not wanted:
            return
        for sw in self.lookup.windows_of_events(wanted):
            self._load(sw)
        self._checked.update(wanted)

    def _load(self, sw: StoredWindow) -> None:
        if sw.point_id in self._windows:
            return  # the working copy supersedes the stored one
        self._windows[sw.point_id] = sw.messages
        self._threads[sw.point_id] = sw.thread_root
        self._stored_hash[sw.point_id] = sw.content_hash
        for eid in _event_ids(sw.messages):
            self._index.setdefault(eid, set()).add(sw.point_id)

    def _holders(self, event_id: EventID) -> list[str]:
        """Point ids of working windows that hold this event, in a deterministic order."""
        self.prefetch([event_id])
        return sorted(p for p in self._index.get(event_id, ()) if self._windows.get(p))

    def _tail(self, key: TimelineKey) -> str | None:
        pid = self.tails.get(key or "")
        if pid is None:
            return None
        if pid not in self._windows:
            sw = self.lookup.window_by_id(pid)
            if sw is None:
                return None
            self._load(sw)
        return pid if self._windows.get(pid) else None

    # ------------------------------------------------------------ changing

    def _replace(
        self, pid: str | None, key: TimelineKey, messages: Sequence[Message]
    ) -> list[str]:
        """Re-chunk `messages` in place of window `pid`; returns the new windows' point ids."""
        # Boundaries are measured with localparts, not display names, so that they depend on
        # the message sequence alone and a renamed member does not move closed windows.
        windows = chunk(
            messages,
            gap_seconds=self.params.gap_seconds,
            max_bytes=self.params.max_bytes,
            names={},
        )
        # What an event's content can make raise is above: the working set changes only below,
        # so a writer that skips the event goes on from an intact set.
        pids = [point_id(self.room_id, key, w.messages[0].event_id) for w in windows]
        if pid is not None:
            for eid in _event_ids(self._windows.get(pid) or ()):
                self._index.get(eid, set()).discard(pid)
            self._windows[pid] = None
            self._dirty.add(pid)
        new_ids: list[str] = []
        for w, new_pid in zip(windows, pids, strict=True):
            if new_pid not in self._stored_hash and new_pid not in self._windows:
                sw = self.lookup.window_by_id(new_pid)
                self._stored_hash[new_pid] = sw.content_hash if sw else None
            self._windows[new_pid] = w.messages
            self._threads[new_pid] = key
            self._dirty.add(new_pid)
            for eid in _event_ids(w.messages):
                self._index.setdefault(eid, set()).add(new_pid)
            new_ids.append(new_pid)
        if pid is not None and self.tails.get(key or "") == pid:
            if new_ids:
                self.tails[key or ""] = new_ids[-1]
            else:
                del self.tails[key or ""]
        return new_ids

    def add_message(self, message: Message) -> bool:
        """Append a new message to its timeline's open tail. False if it is already held."""
        key = message.thread_root
        holders = self._holders(message.event_id)
        if holders:
            # A replayed page: the window holding it is the timeline's latest so far.
            self.tails[key or ""] = holders[0]
            return False
        tail = self._tail(key)
        before = (self._windows[tail] or ()) if tail is not None else ()
        new_ids = self._replace(tail, key, (*before, message))
        self.tails[key or ""] = new_ids[-1]
        return True

    def apply_edit(self, edit: Edit, new_body: str) -> str:
        """Replace a message's text by a valid, newer edit (spec: same sender, not an edit)."""
        applied = False
        outcome = EditOutcome.UNKNOWN_TARGET
        for pid in self._holders(edit.target):
            messages = self._windows[pid] or ()
            for i, m in enumerate(messages):
                if m.event_id != edit.target:
                    continue  # holding it as an applied edit id: an edit of an edit
                if m.sender != edit.sender:
                    return EditOutcome.OTHER_SENDER
                if (m.edit_ts or -1, m.edit_event_id or "") >= (edit.ts, edit.event_id):
                    outcome = EditOutcome.NOT_NEWER
                    continue
                new = dataclasses.replace(
                    m,
                    body=new_body,
                    msgtype=edit.msgtype,
                    edit_event_id=edit.event_id,
                    edit_ts=edit.ts,
                )
                self._replace(pid, self._threads[pid], (*messages[:i], new, *messages[i + 1 :]))
                applied = True
                break
        return EditOutcome.APPLIED if applied else outcome

    def redact(self, redaction: Redaction) -> RevertEdit | bool:
        """Remove a redacted message; for a redacted applied edit, ask the shell to revert."""
        removed = False
        for pid in self._holders(redaction.redacts):
            messages = self._windows[pid] or ()
            for m in messages:
                if m.edit_event_id == redaction.redacts:
                    return RevertEdit(target=m.event_id, sender=m.sender)
            kept = tuple(m for m in messages if m.event_id != redaction.redacts)
            if len(kept) != len(messages):
                self._replace(pid, self._threads[pid], kept)
                removed = True
        return removed

    def set_message(self, target: EventID, message: Message | None) -> None:
        """Put a message's re-read version in place (None: it is gone)."""
        for pid in self._holders(target):
            messages = self._windows[pid] or ()
            kept: list[Message] = []
            for m in messages:
                if m.event_id != target:
                    kept.append(m)
                elif message is not None:
                    kept.append(message)
            self._replace(pid, self._threads[pid], kept)

    def sender_of(self, event_id: EventID) -> str | None:
        """Who sent a held message (None: not held)."""
        for pid in self._holders(event_id):
            for m in self._windows[pid] or ():
                if m.event_id == event_id:
                    return m.sender
        return None

    def purge(self, windows: Iterable[StoredWindow], from_ts: int, to_ts: int) -> int:
        """Drop every message with from_ts <= ts <= to_ts from these windows; returns the count."""
        dropped = 0
        for sw in windows:
            self._load(sw)
        for pid in sorted({sw.point_id for sw in windows}):
            messages = self._windows.get(pid) or ()
            kept = tuple(m for m in messages if not from_ts <= m.ts <= to_ts)
            if len(kept) != len(messages):
                dropped += len(messages) - len(kept)
                self._replace(pid, self._threads[pid], kept)
        return dropped

    # ------------------------------------------------------------ results

    def changes(self) -> tuple[dict[str, tuple[EventID | None, tuple[Message, ...]]], list[str]]:
        """(windows to write: point id -> (thread root, messages), point ids to delete)."""
        upserts: dict[str, tuple[EventID | None, tuple[Message, ...]]] = {}
        deletes: list[str] = []
        for pid in sorted(self._dirty):
            messages = self._windows.get(pid)
            if messages:
                upserts[pid] = (self._threads[pid], messages)
            else:
                deletes.append(pid)  # deleting an id the store never held is harmless
        return upserts, deletes

    def stored_hash(self, pid: str) -> str | None:
        return self._stored_hash.get(pid)


def messages_from_payload(room_id: RoomID, payload: Mapping[str, object]) -> tuple[Message, ...]:
    """Rebuild a stored window's messages (bodies are already scrubbed) from its payload."""
    thread_root = payload.get("thread_root")
    out: list[Message] = []
    raw_messages = payload.get("messages")
    for raw in raw_messages if isinstance(raw_messages, list) else []:
        out.append(
            Message(
                event_id=EventID(str(raw["event_id"])),
                room_id=room_id,
                sender=raw["sender"],
                ts=int(raw["ts"]),
                body=str(raw["body"]),
                thread_root=EventID(str(thread_root)) if thread_root else None,
                msgtype=str(raw.get("msgtype") or MessageType.TEXT.value),
                edit_event_id=raw.get("edit_event_id"),
                edit_ts=raw.get("edit_ts"),
                mentions=tuple(raw["mentions"]) if isinstance(raw.get("mentions"), list) else None,
            )
        )
    return tuple(out)
