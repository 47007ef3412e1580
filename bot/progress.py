"""The progress display of the long CLI commands (`refresh`, `import`), drawn by `rich`.

One line on stderr: the room (k of n) by its alias, the events read, the rate, and, where the
total is known (`import` has counted its file), a bar and the time left. Off without a
terminal: a pipe, a cron job or a journal gets the report only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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

from ingest.refresh import Progress as Shown
from ingest.refresh import Tick

__all__ = ["progress_display"]


class _Rate(ProgressColumn):
    """Events a second (rich's speed columns speak of bytes or iterations)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} events/s")


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
        TextColumn("{task.completed:,.0f} events"),
        _Rate(),
        TimeRemainingColumn() if known else TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=total_events)
        done = {"room": 0, "events": 0}  # events of the rooms already passed

        def show(tick: Tick) -> None:
            new_room = tick.room != done["room"]
            if new_room:
                done["events"] = int(bar.tasks[0].completed)
                done["room"] = tick.room
            completed = done["events"] + tick.events
            # Drawn ~10 times a second, and at once when a room begins (a short room shows).
            bar.update(task, description=_label(tick), completed=completed, refresh=new_room)

        yield show
