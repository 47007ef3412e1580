"""The DATE of `before:`, `after:` and `during:`: a UTC calendar span or a span back from now.

Pure: `period` maps the argument's text and the command's clock to a `Period`, or raises
`ArgumentError`.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.arguments import ArgumentError, echo

__all__ = ["DATE_HELP", "Period", "period"]

DATE_HELP = "YYYY-MM-DD, YYYY-MM, YYYY-MM-DDTHH:MM, 7d, 12h, today or yesterday (UTC)"
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
    if word in ("today", "yesterday"):
        start = today if word == "today" else today - _DAY_MS
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
