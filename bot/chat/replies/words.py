"""How replies word a time, a count and how far a read looked: the phrases every reply (and
the CLI's text) shares."""

from __future__ import annotations

from ingest.rules.stamps import utc_minute
from ingest.search.logs.roomlog import ScanInfo

__all__ = ["plural", "scan_sentence", "when"]


def when(ts: int) -> str:
    """A time as replies show it, with its zone: people read it wherever they are."""
    return f"{utc_minute(ts)} UTC"


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 pin`, `2 pins`: a count with its noun (`many` when the plural is not `one` + s)."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def scan_sentence(scan: ScanInfo) -> str:
    """How far the transcript fold looked, as a reply's footer says it."""
    if scan.scanned < scan.bound and not scan.cut:
        return f"scanned the whole room ({plural(scan.scanned, 'event')})"
    back = f", back to {when(scan.oldest_ts)}" if scan.oldest_ts is not None else ""
    why = " (as much text as one command reads)" if scan.cut else ""
    return f"scanned the latest {plural(scan.scanned, 'event')}{back}{why}"
