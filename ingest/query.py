"""`ingest.query`: a search request, validated before anything is read (`ingest.search`).

The bounds are the public contract of `!search`, the CLI and the HTTP API alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ingest.errors import QueryError
from ingest.store import PointFilter

MAX_TEXTS = 8
MAX_TEXT_BYTES = 1000
DEFAULT_LIMIT = 5
MAX_LIMIT = 50


@dataclass(frozen=True)
class SearchQuery:
    """A validated request: build with `SearchQuery.build`, which names the bad field."""

    texts: tuple[str, ...]
    room_ids: tuple[str, ...] | None = None
    senders: tuple[str, ...] | None = None
    after_ts: int | None = None
    before_ts: int | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        *,
        room_ids: Sequence[str] | None = None,
        senders: Sequence[str] | None = None,
        after_ts: int | None = None,
        before_ts: int | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> SearchQuery:
        if isinstance(texts, str):
            raise QueryError("texts", "must be a list of strings, not one string")
        if not 1 <= len(texts) <= MAX_TEXTS:
            raise QueryError("texts", f"give 1 to {MAX_TEXTS} texts, got {len(texts)}")
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise QueryError("texts", f"text {i + 1} is empty")
            if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
                raise QueryError("texts", f"text {i + 1} is over {MAX_TEXT_BYTES} bytes")
        if not 1 <= limit <= MAX_LIMIT:
            raise QueryError("limit", f"must be 1 to {MAX_LIMIT}, got {limit}")
        if after_ts is not None and before_ts is not None and after_ts > before_ts:
            raise QueryError("after", "is later than before")
        return cls(
            texts=tuple(texts),
            room_ids=tuple(room_ids) if room_ids is not None else None,
            senders=tuple(senders) if senders is not None else None,
            after_ts=after_ts,
            before_ts=before_ts,
            limit=limit,
        )

    def point_filter(self) -> PointFilter:
        return PointFilter(
            room_ids=self.room_ids,
            senders=self.senders,
            after_ts=self.after_ts,
            before_ts=self.before_ts,
        )
