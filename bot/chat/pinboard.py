"""The pinboard: a fold over a room's `!pin`/`!unpin` marker events (docs/ARCHITECTURE.md §3
rule 17).

There is no table and no state event: the room log is the record, and the board is what folding
its markers gives. Markers are folded in timeline order, never by `ts` (appservice senders may
backdate `ts`, and clocks skew). Rules:

- later markers win: re-pinning a target replaces its label and note and moves it to the top;
- the board holds `CAPACITY` pins, most recently pinned first; a pin arriving at a full board
  drops the least recently pinned one (for good: a later unpin does not bring it back);
- `!unpin` removes its target, another's pin only from a user the room's power levels let send
  `m.room.pinned_events` (`unpin_rule`: by default a moderator); a marker without a target
  changes nothing;
- a redacted marker is excluded, so the board is as if it had never been sent. A redaction
  rewrites history, which `apply` cannot do on a 12-pin value: on a redaction, refold the log.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from bot.chat.commands.grammar import command_name
from bot.chat.commands.records import PinCommand, UnpinCommand
from ingest.search.logs.transcript import fold_text
from ingest.types import RoomState

__all__ = [
    "CAPACITY",
    "Board",
    "Marker",
    "MarkerKind",
    "MayUnpin",
    "Pin",
    "TimelineEvent",
    "apply",
    "fold",
    "marker_from_command",
    "resolve_offset",
    "select",
    "unpin_rule",
]

CAPACITY = 12


class MarkerKind(enum.StrEnum):
    PIN = "pin"
    UNPIN = "unpin"


@dataclass(frozen=True)
class Marker:
    """One `!pin` or `!unpin` event, its target already resolved by the caller."""

    event_id: str
    sender: str
    ts: int
    kind: MarkerKind
    target: str | None  # from the reply relation, or ^N via `resolve_offset`; None if neither
    label: str | None = None
    note: str = ""
    redacted: bool = False
    thread_root: str | None = None  # informational: thread markers count on the room's board


@dataclass(frozen=True)
class Pin:
    target: str
    label: str | None
    note: str
    pinned_by: str
    pinned_ts: int
    marker_id: str


@dataclass(frozen=True)
class Board:
    pins: tuple[Pin, ...] = ()  # most recently pinned first
    capacity: int = CAPACITY

    def get(self, target: str) -> Pin | None:
        return next((pin for pin in self.pins if pin.target == target), None)


# May this user unpin a pin another user made? (The room's power levels: `unpin_rule`.)
MayUnpin = Callable[[str], bool]


def _anyone(user_id: str) -> bool:
    return True


def apply(board: Board, marker: Marker, may_unpin: MayUnpin = _anyone) -> Board:
    """The board after one more marker (appended to the log; see the module note on redactions)."""
    if marker.redacted or marker.target is None:
        return board
    others = tuple(pin for pin in board.pins if pin.target != marker.target)
    if marker.kind is MarkerKind.UNPIN:
        pinned = board.get(marker.target)
        if pinned is None or (pinned.pinned_by != marker.sender and not may_unpin(marker.sender)):
            return board
        return replace(board, pins=others)
    pin = Pin(marker.target, marker.label, marker.note, marker.sender, marker.ts, marker.event_id)
    return replace(board, pins=(pin, *others)[: board.capacity])


def fold(
    markers: Iterable[Marker], capacity: int = CAPACITY, may_unpin: MayUnpin = _anyone
) -> Board:
    """The board of a room: every marker in timeline order (oldest first), redacted ones out;
    an `!unpin` of another's pin counts only from a user `may_unpin`."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    step = functools.partial(_apply_with, may_unpin=may_unpin)
    return functools.reduce(step, markers, Board(capacity=capacity))


def _apply_with(board: Board, marker: Marker, *, may_unpin: MayUnpin) -> Board:
    return apply(board, marker, may_unpin)


def unpin_rule(state: RoomState | None) -> MayUnpin:
    """Who may unpin another's pin: whoever the room's power levels let send
    `m.room.pinned_events`, the spec's own pinning (by default a moderator, 50)."""
    if state is None:
        return lambda user_id: False
    return lambda user_id: state.level_of(user_id) >= state.pins_level


def marker_from_command(
    event_id: str,
    sender: str,
    ts: int,
    command: PinCommand | UnpinCommand,
    target: str | None,
    *,
    redacted: bool = False,
    thread_root: str | None = None,
) -> Marker:
    """A marker from a parsed command. For a `!pin` with neither a reply nor ^N the target is
    the command event itself; an `!unpin` without either has target None and does nothing."""
    if isinstance(command, PinCommand):
        kind, label, note = MarkerKind.PIN, command.label, command.note
    else:
        kind, label, note = MarkerKind.UNPIN, None, ""
    return Marker(event_id, sender, ts, kind, target, label, note, redacted, thread_root)


def select(
    board: Board,
    *,
    label: str | None = None,
    text: str | None = None,
    bodies: Mapping[str, str] | None = None,
) -> tuple[Pin, ...]:
    """`!pins [#label] [text]`: pins with that label whose label, note or pinned message has
    the text.

    Args:
        bodies: the pinned messages' bodies by event id, fetched by the caller.
    """
    want = label.removeprefix("#").casefold() if label else None
    needle = fold_text(text) if text else ""
    bodies = bodies or {}
    kept = []
    for pin in board.pins:
        if want is not None and (pin.label or "").casefold() != want:
            continue
        # The label too: `!pins outage` finds a pin labelled #outage (issue 36).
        haystacks = (
            fold_text(pin.label or ""),
            fold_text(pin.note),
            fold_text(bodies.get(pin.target, "")),
        )
        if needle and not any(needle in hay for hay in haystacks):
            continue
        kept.append(pin)
    return tuple(kept)


class TimelineEvent(Protocol):
    """What `resolve_offset` reads of a timeline event; `ingest.types.Message` fits."""

    @property
    def event_id(self) -> str: ...
    @property
    def sender(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def thread_root(self) -> str | None: ...


def _redacted_before(event: TimelineEvent, command: TimelineEvent) -> bool:
    """`event` was redacted no later than the command was sent: gone when `^N` was typed.
    A message redacted since (or at an unknown time) still counts, so a pin never moves."""
    redacted_ts = getattr(event, "redacted_ts", None)
    ts = getattr(command, "ts", None)
    return redacted_ts is not None and isinstance(ts, int) and redacted_ts <= ts


def _same_timeline(event: TimelineEvent, thread_root: str | None) -> bool:
    if thread_root is None:
        return event.thread_root is None
    # A thread's timeline is its root followed by its replies.
    return event.thread_root == thread_root or event.event_id == thread_root


def resolve_offset(
    history: Sequence[TimelineEvent],
    command_index: int,
    n: int,
    *,
    bot_user_id: str,
    prefix: str = "!",
) -> str | None:
    """The event `^n` names: the n-th message above the command in the command's own timeline.

    Muninn commands and the bot's own replies are skipped, so `!pin ^1` right after a `!search`
    and its answer still pins the message people were talking about.

    Args:
        history: the room's events, oldest first, the command at `command_index`.

    Returns:
        The target's event id, or None when the timeline has fewer than n messages above.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    command = history[command_index]
    thread_root = command.thread_root
    seen = 0
    for index in range(command_index - 1, -1, -1):
        event = history[index]
        if not _same_timeline(event, thread_root):
            continue
        if event.sender == bot_user_id or command_name(event.body, prefix) is not None:
            continue
        if _redacted_before(event, command):
            continue
        seen += 1
        if seen == n:
            return event.event_id
    return None
