"""The DATE of `before:`, `after:` and `during:`: a UTC calendar span or a span back from now.

Pure: `period` maps the argument's text and the command's clock to a `Period`, or raises
`ArgumentError`. The CLI's times (`--after`, `--before`, `--from`, `--to`) are the same
grammar read as an instant (`instant`): a span's first moment, plus milliseconds and full ISO
datetimes; `shown` prints an instant back the way people read it.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.chat.commands.arguments import ArgumentError, echo

__all__ = ["DATE_HELP", "TIME_HELP", "Period", "instant", "period", "shown"]

DATE_HELP = (
    "YYYY-MM-DD, YYYY-MM, YYYY-MM-DDTHH:MM, 7d, 12h, now, today, yesterday or tomorrow (UTC)"
)
TIME_HELP = (
    "T is a date as in chat (YYYY-MM-DD, YYYY-MM, YYYY-MM-DDTHH:MM, 7d, 12h, 2w, now, today, "
    "yesterday, tomorrow; UTC, a span meaning its first moment, 7d meaning 7 days ago), an "
    "ISO datetime with seconds or a UTC offset (2026-11-01T16:34:05+01:00), or milliseconds "
    "since 1970"
)
_MAX_MS = 2**53  # stored times are ints under 2^53 (larger ones become floats, never matching)
_MAX_RELATIVE_DAYS = 36_500
_MINUTE_MS, _HOUR_MS, _DAY_MS = 60_000, 3_600_000, 86_400_000

_DATE_FORMATS = (
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})"), "minute"),
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), "day"),
    (re.compile(r"(\d{4})-(\d{2})"), "month"),
    (re.compile(r"(\d{4})"), "year"),
)
_RELATIVE = re.compile(r"(\d{1,6})([hdw])", re.IGNORECASE)
_UNIT_MS = {"h": _HOUR_MS, "d": _DAY_MS, "w": 7 * _DAY_MS}
_DAYS = {"yesterday": -1, "today": 0, "tomorrow": 1}  # UTC calendar days from today


@dataclass(frozen=True)
class Period:
    """A time span [start, end). An instant (a minute, `7d`) is `after` from its start."""

    start: int
    end: int
    instant: bool


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _calendar_period(match: re.Match[str], unit: str) -> Period:
    parts = [int(g) for g in match.groups()]
    year, month, day, hour, minute = parts + [0, 1, 1, 0, 0][len(parts) :]
    start = datetime(year, month, day, hour, minute, tzinfo=UTC)  # ValueError if impossible
    if unit == "minute":
        return Period(_ms(start), _ms(start) + _MINUTE_MS, instant=True)
    if unit == "day":
        return Period(_ms(start), _ms(start) + _DAY_MS, instant=False)
    if unit == "month":
        days = calendar.monthrange(year, month)[1]
        return Period(_ms(start), _ms(start) + days * _DAY_MS, instant=False)
    return Period(_ms(start), _ms(start.replace(year=year + 1)), instant=False)


def period(value: str, now_ms: int) -> Period:
    """A DATE argument; relative forms count back from `now_ms`, calendar forms are UTC."""
    word = value.casefold()
    today = now_ms - now_ms % _DAY_MS
    if word == "now":
        return Period(now_ms, now_ms + 1, instant=True)
    if word in _DAYS:
        start = today + _DAYS[word] * _DAY_MS
        return Period(start, start + _DAY_MS, instant=False)
    if relative := _RELATIVE.fullmatch(value):
        span = int(relative.group(1)) * _UNIT_MS[relative.group(2).lower()]
        if span > _MAX_RELATIVE_DAYS * _DAY_MS:
            raise ArgumentError(f"{echo(value)} reaches back too far")
        return Period(now_ms - span, now_ms + 1, instant=True)
    for pattern, unit in _DATE_FORMATS:
        if match := pattern.fullmatch(value):
            try:
                return _calendar_period(match, unit)
            except (ValueError, OverflowError):
                break
    raise ArgumentError(f"not a date: {echo(value)} (use {DATE_HELP})")


def instant(value: str, now_ms: int) -> int:
    """A CLI time T (`TIME_HELP`) in ms: the chat DATE's first moment, ms, or ISO datetime."""
    text = value.strip()
    if text.isascii() and text.isdigit():
        # ASCII digits only (`²` passes `isdigit`, not `int`); a 5,000-digit one is no time.
        if len(text) > 16:
            raise ArgumentError(f"not a time from 1970 on: {echo(value)}")
        ms = int(text)
    else:
        try:
            ms = period(text, now_ms).start
        except ArgumentError:
            try:
                dt = datetime.fromisoformat(text)
            except ValueError:
                raise ArgumentError(f"not a time: {echo(value)} ({TIME_HELP})") from None
            ms = _ms(dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC))
    if not 0 <= ms < _MAX_MS:
        raise ArgumentError(f"not a time from 1970 on: {echo(value)}")
    return ms


def shown(ms: int) -> str:
    """An instant as people read it: `2026-11-01 16:34:05 UTC` (seconds kept, ms dropped)."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
