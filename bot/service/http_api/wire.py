"""The listener's documents: the search and purge requests it accepts and what it answers.

Pure: both sides decode the same way (the service parses requests, `muninn search` turns the
answer back into a `SearchResult`). A bad field is a `QueryError` naming it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest.errors import QueryError
from ingest.index.records import Tombstone
from ingest.search.filters import NO_FILTER, MessageFilter
from ingest.search.hits import Hit, SearchResult
from ingest.search.query import DEFAULT_LIMIT, SearchQuery

__all__ = [
    "MAX_IDS",
    "MAX_TS",
    "PURGE_PATH",
    "SEARCH_PATH",
    "STATUS_PATH",
    "PurgeRequest",
    "ResolveRoom",
    "SearchRequest",
    "filter_fields",
    "purge_document",
    "result_from_json",
]

SEARCH_PATH = "/_muninn/search"
PURGE_PATH = "/_muninn/purge"
STATUS_PATH = "/_muninn/status"  # body {} → `ingest.index.facts.StoreFacts.as_json()`
MAX_IDS = 100  # room_ids or senders in one search
# Times are ms in [0, 2^53): a larger int is stored as a float, and a tombstone keyed by it
# would never match its own key again (re-applied on every pass).
MAX_TS = 2**53

ResolveRoom = Callable[[str], Awaitable[str]]


def _known_fields(body: Any, fields: Sequence[str]) -> None:
    """A JSON object of only these fields, or a QueryError naming the first stranger."""
    if not isinstance(body, dict):
        raise QueryError("body", "must be a JSON object")
    for key in body:
        if key not in fields:
            raise QueryError(str(key), f"is not a known field (known: {', '.join(fields)})")


@dataclass(frozen=True)
class SearchRequest:
    """The JSON body of `POST /_muninn/search`, type-checked; `build` validates the rest."""

    texts: list[str]
    room_ids: list[str] | None
    senders: list[str] | None
    after: int | None
    before: int | None
    limit: int
    filter: MessageFilter = NO_FILTER
    sort: str = "relevance"
    offset: int = 0
    close_only: bool = False
    match: str = "meaning"

    FIELDS = (
        "texts",
        "room_ids",
        "senders",
        "after",
        "before",
        "limit",
        *("exclude", "exclude_senders", "has_link", "has", "in_thread", "mentions"),
        *("sort", "offset"),
        "close_only",
        "match",
    )

    @classmethod
    def parse(cls, body: Any) -> SearchRequest:
        _known_fields(body, cls.FIELDS)
        limit, offset = body.get("limit", DEFAULT_LIMIT), body.get("offset", 0)
        for key, value in (("limit", limit), ("offset", offset)):
            if not _is_int(value):
                raise QueryError(key, "must be an integer")
        if not isinstance(body.get("close_only", False), bool):
            raise QueryError("close_only", "must be true or false")
        for key in ("has_link", "in_thread"):
            if body.get(key) is not None and not isinstance(body[key], bool):
                raise QueryError(key, "must be true, false or null")
        sort, match = body.get("sort", "relevance"), body.get("match", "meaning")
        for key, value in (("sort", sort), ("match", match)):
            if not isinstance(value, str):
                raise QueryError(key, "must be a string")
        flt = MessageFilter.build(
            exclude_words=_strings(body, "exclude") or (),
            exclude_senders=_strings(body, "exclude_senders") or (),
            has_link=bool(body.get("has_link")),
            has=_strings(body, "has") or (),
            in_thread=body.get("in_thread"),
            mentions=_strings(body, "mentions") or (),
        )
        return cls(
            texts=_strings(body, "texts", required=True) or [],
            room_ids=_strings(body, "room_ids", most=MAX_IDS),
            senders=_strings(body, "senders", most=MAX_IDS),
            after=_time(body, "after"),
            before=_time(body, "before"),
            limit=limit,
            filter=flt,
            sort=sort,
            offset=offset,
            close_only=body.get("close_only", False),
            match=match,
        )

    async def query(self, resolve_room: ResolveRoom) -> SearchQuery:
        rooms = [await resolve_room(r) for r in self.room_ids] if self.room_ids else None
        return SearchQuery.build(
            self.texts,
            room_ids=rooms,
            senders=self.senders,
            after_ts=self.after,
            before_ts=self.before,
            limit=self.limit,
            filter=self.filter,
            sort=self.sort,
            offset=self.offset,
            close_only=self.close_only,
            match=self.match,
        )


def filter_fields(flt: MessageFilter, sort: str, offset: int) -> dict[str, Any]:
    """The request fields of a filter, a sort and an offset (what `SearchRequest.parse` reads)."""
    return {
        "exclude": list(flt.exclude_words),
        "exclude_senders": list(flt.exclude_senders),
        "has_link": flt.has_link,
        "has": sorted(flt.kinds),
        "in_thread": flt.in_thread,
        "mentions": list(flt.mentions),
        "sort": sort,
        "offset": offset,
    }


@dataclass(frozen=True)
class PurgeRequest:
    """The JSON body of `POST /_muninn/purge`: a room (id or alias) and a range in ms."""

    room_id: str
    from_ts: int
    to_ts: int

    FIELDS = ("room_id", "from_ts", "to_ts")

    @classmethod
    def parse(cls, body: Any) -> PurgeRequest:
        _known_fields(body, cls.FIELDS)
        room = body.get("room_id")
        if room is None:
            raise QueryError("room_id", "is required")
        if not isinstance(room, str) or not room.startswith(("!", "#")):
            raise QueryError("room_id", "must be a room id (!…) or an alias (#…)")
        stamps: list[int] = []
        for key in ("from_ts", "to_ts"):
            value = _time(body, key)
            if value is None:
                raise QueryError(key, "is required")
            stamps.append(value)
        from_ts, to_ts = stamps
        if to_ts < from_ts:
            raise QueryError("to_ts", "is before from_ts")
        return cls(room_id=room, from_ts=from_ts, to_ts=to_ts)


def purge_document(stone: Tombstone) -> dict[str, Any]:
    """What `muninn purge --json` prints, and what `POST /_muninn/purge` answers."""
    return {
        "room_id": stone.room_id,
        "from_ts": stone.from_ts,
        "to_ts": stone.to_ts,
        "key": stone.key,
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(
    body: Mapping[str, Any], key: str, *, required: bool = False, most: int | None = None
) -> list[str] | None:
    value = body.get(key)
    if value is None:
        if required:
            raise QueryError(key, "is required")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise QueryError(key, "must be a list of strings")
    if most is not None and len(value) > most:
        raise QueryError(key, f"give at most {most}, got {len(value)}")
    return list(value)


def _time(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise QueryError(key, "must be a time in milliseconds since the epoch (an integer)")
    if not 0 <= value < MAX_TS:
        raise QueryError(key, f"must be in [0, 2^53) milliseconds, got {value}")
    return int(value)


def result_from_json(doc: Mapping[str, Any]) -> SearchResult:
    """A `SearchResult` from its document (docs/ARCHITECTURE.md §4.3; the inverse of `as_json`,
    bar point ids)."""
    hits = [
        Hit(
            point_id="",
            room_id=h["room_id"],
            room_alias=h["room_alias"],
            thread_root=h["thread_root"],
            first_event_id=h["first_event_id"],
            last_event_id=h["last_event_id"],
            event_ids=tuple(h["event_ids"]),
            messages=tuple(h["messages"]),
            score=float(h["score"]),
            permalink=h["permalink"],
            best_event_id=h["best_event_id"],
            close=bool(h.get("close", True)),
            matched=tuple(h.get("matched_event_ids") or (h["best_event_id"],)),
        )
        for h in doc["hits"]
    ]
    return SearchResult(
        hits=hits,
        warnings=list(doc["warnings"]),
        retrievers=list(doc["retrievers"]),
        dropped_stale=int(doc["dropped_stale"]),
        below_floor=int(doc.get("below_floor", 0)),
        nothing_close=bool(doc.get("nothing_close", False)),
        weaker=bool(doc.get("weaker", False)),
        next_offset=doc.get("next_offset"),
        sort=str(doc.get("sort", "relevance")),
        matched=list(doc.get("matched_event_ids") or ()),
    )
