"""`bot.operations.progress`: the long commands' progress line (rich), off without a terminal."""

from __future__ import annotations

import io
import logging
import re
import time

from rich.console import Console

from bot.operations.progress import progress_display
from ingest.index.refresh import Tick


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=160, color_system=None), out


def test_progress_with_a_known_total_shows_the_alias_rate_and_time_left() -> None:
    """`import` knows its file's events: a bar, a percentage, events/s and the time left,
    the room named by its alias (regression: "N events read", no total, the room id)."""
    console, out = _terminal()
    with progress_display(4007, console=console) as show:
        assert show is not None
        show(Tick("!a:x", "#dev:x", 1, 1, 200))
        time.sleep(0.05)  # a second sample, so that there is a rate
        show(Tick("!a:x", "#dev:x", 1, 1, 400))
    text = out.getvalue()
    assert "#dev:x" in text and "!a:x" not in text
    assert "10%" in text and "400 events" in text and "events/s" in text
    assert "-:--:--" in text or "0:00:" in text  # the time-left column


def test_progress_of_a_pass_counts_rooms_and_all_their_events() -> None:
    """A refresh: room k of n, and the events of the pass so far (no total, no ETA)."""
    console, out = _terminal()
    with progress_display(console=console) as show:
        assert show is not None
        show(Tick("!a:x", "#dev:x", 1, 3, 200))
        show(Tick("!b:x", None, 2, 3, 100))
    text = out.getvalue()
    assert "room 1/3 #dev:x" in text and "room 2/3 !b:x 300 events" in text
    assert "%" not in text


def test_progress_is_off_without_a_terminal() -> None:
    """A pipe, cron or journal gets no progress line at all."""
    out = io.StringIO()
    with progress_display(10, console=Console(file=out)) as show:
        assert show is None
    assert out.getvalue() == ""


def test_progress_keeps_a_log_line_apart_from_the_line() -> None:
    """Issue 36 item 9: a log line written while the line is drawn stands on its own line
    above it, instead of being glued to the progress text and the line redrawn after it."""
    console, out = _terminal()
    handler = logging.StreamHandler(out)  # the log and the line share stderr, as at a shell
    logging.getLogger().addHandler(handler)
    try:
        with progress_display(console=console) as show:
            assert show is not None
            show(Tick("!a:x", "#dev:x", 1, 3, 200))
            logging.getLogger("muninn.index").warning("a log line in the middle")
            show(Tick("!a:x", "#dev:x", 1, 3, 300))
    finally:
        logging.getLogger().removeHandler(handler)
    assert handler.stream is out  # given back
    pieces = re.split(r"\r\x1b\[2K|\n", out.getvalue())
    assert "a log line in the middle" in pieces, pieces
