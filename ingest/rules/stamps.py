"""A homeserver timestamp as text: the one owner of turning `origin_server_ts` into a date.

Every timestamp from a homeserver is untrusted: an appservice user backdates or postdates
with `?ts=`, a federated server stamps its own events, and canonical JSON allows integers up
to 2^53. `datetime` stops at the year 9999 (and raises on the way), so `utc_minute` counts the
civil calendar itself: any integer in (-2^53, 2^53) ms is formatted, the year 10000 and
before the year 1 included, and anything else is `UNKNOWN_MINUTE`. It never raises.
"""

from __future__ import annotations

import math

__all__ = ["TS_LIMIT", "UNKNOWN_MINUTE", "event_ts", "utc_minute"]

# Canonical JSON's integers lie strictly inside ±2^53; an event's ts is in [0, TS_LIMIT).
TS_LIMIT = 2**53
UNKNOWN_MINUTE = "????-??-?? ??:??"
_DAY_MS = 86_400_000


def event_ts(ts: object) -> int | None:
    """`ts` if it can be an event's `origin_server_ts` (an integer in [0, 2^53)), else None: a
    negative or larger one is malformed (rule 10), never a date to show."""
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < TS_LIMIT:
        return None
    return ts


def utc_minute(ts: object) -> str:
    """`2026-11-01 16:34`: the UTC minute of a millisecond timestamp, else `UNKNOWN_MINUTE`."""
    if isinstance(ts, float) and math.isfinite(ts):
        ts = int(ts)  # a payload read back may carry it as a float
    if not isinstance(ts, int) or isinstance(ts, bool) or not -TS_LIMIT < ts < TS_LIMIT:
        return UNKNOWN_MINUTE
    days, ms = divmod(ts, _DAY_MS)
    hour, minute = divmod(ms // 60_000, 60)
    year, month, day = _civil_from_days(days)
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count from 1970-01-01 in the proleptic Gregorian calendar
    (H. Hinnant's `civil_from_days`: whole 400-year eras, then the year from 1 March)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day
