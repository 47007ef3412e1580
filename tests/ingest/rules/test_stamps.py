"""ingest.rules.stamps: every homeserver timestamp becomes a date or a placeholder, never an error
(issue 21 item 1)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.rules.stamps import TS_LIMIT, UNKNOWN_MINUTE, utc_minute

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        (1_793_550_840_000, "2026-11-01 16:34"),
        (0, "1970-01-01 00:00"),
        (-1, "1969-12-31 23:59"),
        (951_782_400_000, "2000-02-29 00:00"),
        (253_402_300_799_999, "9999-12-31 23:59"),
        (253_402_300_800_000, "10000-01-01 00:00"),  # where `datetime` raises
        (TS_LIMIT - 1, "287396-10-12 08:59"),
        (-(TS_LIMIT - 1), "-283457-03-21 15:00"),
        (1_793_550_840_000.0, "2026-11-01 16:34"),
    ],
)
def test_utc_minute_formats_every_representable_value(ts: int, text: str) -> None:
    """Regression: the year 10000, canonical JSON's last integer and negative times format."""
    assert utc_minute(ts) == text


@pytest.mark.parametrize(
    "ts", [TS_LIMIT, -TS_LIMIT, 10**400, -(10**400), True, None, "1", float("inf"), 1e300]
)
def test_utc_minute_is_a_placeholder_for_what_no_homeserver_can_send(ts: Any) -> None:
    """Beyond ±2^53, or not a number: a clear placeholder, not an exception."""
    assert utc_minute(ts) == UNKNOWN_MINUTE


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_utc_minute_agrees_with_datetime_where_it_reaches(ts: int) -> None:
    """Inside `datetime`'s years 1-9999 the calendar arithmetic gives its minute."""
    assert utc_minute(ts) == (_EPOCH + timedelta(milliseconds=ts)).isoformat(" ")[:16]
