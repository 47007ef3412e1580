"""The progress display of the long CLI commands (`refresh`, `import`), drawn by `rich`.

One line on stderr: the room (k of n) by its alias, the events read, the rate, and, where the
total is known (`import` has counted its file), a bar and the time left. Off without a
terminal: a pipe, a cron job or a journal gets the report only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from bot.chat.replies.words import plural
from ingest.index.refresh import Progress as Shown
from ingest.index.refresh import Tick

__all__ = ["Whereabouts", "progress_display"]


class _Rate(ProgressColumn):
    """Events a second (rich's speed columns speak of bytes or iterations)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} events/s")


class _Events(ProgressColumn):
    """The events read so far, once a room is being read (before, the index is opened and the
    model loaded: seconds of "0 events" named nothing, issue 44)."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.completed:,.0f} events" if task.fields.get("reading") else "")


# What the line says before the pass names its first room.
OPENING = "opening the index and the embedder…"


def _label(tick: Tick) -> str:
    room = tick.room_alias or tick.room_id
    return f"room {tick.room}/{tick.rooms} {room}" if tick.rooms > 1 else str(room)


@contextmanager
def progress_display(
    total_events: int | None = None, *, console: Console | None = None
) -> Iterator[Shown | None]:
    """A writer's `progress` callback drawing the line, or None without a terminal.

    `total_events`: the events the pass will read, when known (an export's); then the line
    has a bar, a percentage and the time left."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    known = total_events is not None
    columns: list[ProgressColumn] = [TextColumn("{task.description}")]
    if known:
        columns += [BarColumn(), TaskProgressColumn()]
    columns += [
        _Events(),
        _Rate(),
        TimeRemainingColumn() if known else TimeElapsedColumn(),
    ]
    # The file before the line is drawn: drawing redirects sys.stderr; the loggers hold the
    # real one.
    logs = _logs_above(console, console.file)
    with Progress(*columns, console=console, transient=True) as bar, logs:
        task = bar.add_task(OPENING, total=total_events, reading=False)
        done = {"room": 0, "events": 0}  # events of the rooms already passed

        def show(tick: Tick) -> None:
            new_room = tick.room != done["room"]
            if new_room:
                done["events"] = int(bar.tasks[0].completed)
                done["room"] = tick.room
            completed = done["events"] + tick.events
            # Drawn ~10 times a second, and at once when a room begins (a short room shows).
            label = _label(tick)
            bar.update(
                task, description=label, completed=completed, refresh=new_room, reading=True
            )

        yield show


class Whereabouts:
    """Where a pass stands, kept for when it is interrupted (issue 44: Ctrl-C said nothing of
    how far it got), whether or not a line is drawn."""

    def __init__(self) -> None:
        self.last: Tick | None = None

    def noting(self, show: Shown | None) -> Shown:
        """The writer's `progress`: note each tick, and draw it where there is a line."""

        def note(tick: Tick) -> None:
            self.last = tick
            if show is not None:
                show(tick)

        return note

    def stopped(self) -> str:
        """How far the pass got: the rooms done, the room it stopped in."""
        tick = self.last
        if tick is None:
            return "stopped before the first room was read"
        room = tick.room_alias or tick.room_id
        done = plural(tick.room - 1, "room")
        return (
            f"stopped in room {tick.room} of {tick.rooms}, {room} "
            f"({plural(tick.events, 'event')} read in it); {done} done before it"
        )


class _Above:
    """A log handler's stream that prints each line above the live progress line (issue 36:
    log lines written to stderr directly broke it in two)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def write(self, text: str) -> int:
        for line in text.rstrip("\n").split("\n"):
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        pass


@contextmanager
def _logs_above(console: Console, file: Any) -> Iterator[None]:
    """While the line is drawn, the root logger's stream handlers on the console's file write
    through the console instead, which keeps the line whole below them."""
    moved: list[tuple[logging.StreamHandler[Any], Any]] = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is file:
            moved.append((handler, handler.setStream(_Above(console))))
    try:
        yield
    finally:
        for handler, stream in moved:
            handler.setStream(stream)
