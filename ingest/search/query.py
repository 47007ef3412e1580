"""`ingest.search.query`: a search request, validated before anything is read (`ingest.search`).

The bounds are the public contract of `!search`, the CLI and the HTTP API alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import regex

from ingest.errors import QueryError
from ingest.search.filters import NO_FILTER, MessageFilter
from ingest.store import PointFilter

MAX_TEXTS = 8
MAX_TEXT_BYTES = 1000
DEFAULT_LIMIT = 5
MAX_LIMIT = 50
MAX_OFFSET = 200  # how deep a next page may reach: the candidate pool grows with it
SORTS = ("relevance", "recent")  # `recent`: relevance decides what matches, the clock the order
# `words`: the lexical list alone, and only messages holding every word of a text (a form of it:
# any case, an identifier's part, a `word*`'s words; `ingest.search.matches.Terms`), no model.
MATCHES = ("meaning", "words")
MIN_PREFIX = 3  # `word*` needs at least this many characters before the `*`


_STEM = regex.compile(r"[\w][\w.\-]*")  # what a `word*` may start with: `**bold**` is no prefix


def _stem(word: str) -> str | None:
    """The stem of `word*` (`word`), or None when the word is no prefix search."""
    if not word.endswith("*"):
        return None
    stem = word.rstrip("*").strip("\"'“”„")
    return stem if _STEM.fullmatch(stem) else None


def prefix_problem(text: str) -> str | None:
    """Why a text's `word*` cannot be searched, if it cannot: a prefix of fewer than
    `MIN_PREFIX` characters would match half the room."""
    for word in text.split():
        stem = _stem(word)
        if stem is not None and len(stem) < MIN_PREFIX:
            return f"word* needs at least {MIN_PREFIX} characters before the *, not {word[:20]!r}"
    return None


def prefixes(text: str) -> tuple[str, ...]:
    """The `word*` stems of a text (without the `*`)."""
    stems = (_stem(w) for w in text.split())
    return tuple(s for s in stems if s is not None and len(s) >= MIN_PREFIX)


def plain_text(text: str) -> str:
    """The text with its `word*` marks removed: what the embedder and the transcript read."""
    return " ".join(w.rstrip("*") if _stem(w) else w for w in text.split())


@dataclass(frozen=True)
class SearchQuery:
    """A validated request: build with `SearchQuery.build`, which names the bad field."""

    texts: tuple[str, ...]
    room_ids: tuple[str, ...] | None = None
    senders: tuple[str, ...] | None = None
    after_ts: int | None = None
    before_ts: int | None = None
    limit: int = DEFAULT_LIMIT
    filter: MessageFilter = NO_FILTER
    sort: str = "relevance"
    offset: int = 0  # hits of earlier pages to pass over
    # A person's view (chat, the CLI's text; any `sort: recent`): only the close matches, or when
    # none is close the nearest, said to be only the nearest. Else every candidate in the
    # ranker's order, each marked close or not (`--json`, the HTTP API, agents:
    # docs/ARCHITECTURE.md §3 rule 22c).
    close_only: bool = False
    match: str = "meaning"  # `MATCHES`: "words" reads no dense list and keeps only word matches

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
        filter: MessageFilter | None = None,
        sort: str = "relevance",
        offset: int = 0,
        close_only: bool = False,
        match: str = "meaning",
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
            if problem := prefix_problem(text):
                raise QueryError("texts", problem)
        if not 1 <= limit <= MAX_LIMIT:
            raise QueryError("limit", f"must be 1 to {MAX_LIMIT}, got {limit}")
        if after_ts is not None and before_ts is not None and after_ts > before_ts:
            raise QueryError("after", "is later than before")
        if sort not in SORTS:
            raise QueryError("sort", f"must be one of {', '.join(SORTS)}, got {sort!r}")
        if not 0 <= offset <= MAX_OFFSET:
            raise QueryError("offset", f"must be 0 to {MAX_OFFSET}, got {offset}")
        if match not in MATCHES:
            raise QueryError("match", f"must be one of {', '.join(MATCHES)}, got {match!r}")
        return cls(
            texts=tuple(texts),
            room_ids=tuple(room_ids) if room_ids is not None else None,
            senders=tuple(senders) if senders is not None else None,
            after_ts=after_ts,
            before_ts=before_ts,
            limit=limit,
            filter=filter or MessageFilter(),
            sort=sort,
            offset=offset,
            close_only=close_only,
            match=match,
        )

    def point_filter(self) -> PointFilter:
        return PointFilter(
            room_ids=self.room_ids,
            senders=self.senders,
            after_ts=self.after_ts,
            before_ts=self.before_ts,
        )
