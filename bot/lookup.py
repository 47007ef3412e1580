"""The read behind `!search`: the index's candidates fused with the rooms' transcripts.

`fused_search` asks the one read path (`ingest.search`) for its ranked candidates, fuses them
with the transcript fold of each room's log (`bot.roomlog`) by reciprocal rank, applies the
room's history visibility (`bot.visibility`: what every reader of the reply may see) to every
hit, and has the read path revalidate every index hit it shows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import regex

from bot.commands.records import SearchCommand
from bot.errors import CommandError
from bot.roomlog import RoomLog
from bot.transcript import TranscriptHit, fold_search
from bot.visibility import ANYONE, Audience
from ingest.errors import StoreError
from ingest.filters import MessageFilter, keep_messages
from ingest.fusion import rrf
from ingest.hits import Candidates, CitedMessage, Hit, SearchResult, best_message, order_hits
from ingest.permalink import permalink
from ingest.query import MAX_OFFSET, SearchQuery
from ingest.records import Tombstone
from ingest.revalidate import LogRead
from ingest.search import MAX_CANDIDATES, Searcher
from ingest.types import Message, RoomID

__all__ = ["RoomView", "Shown", "fused_search", "tombstones"]

log = logging.getLogger("muninn.lookup")


class Shown(Protocol):
    """Event ids an earlier page showed (`bot.paging.ShownIds`, or any set)."""

    def isdisjoint(self, event_ids: Iterable[str], /) -> bool: ...


def _passes(ts: int, sender: str, command: SearchCommand, audience: Audience) -> bool:
    if not audience.sees(ts):
        return False
    if command.sender is not None and sender != command.sender:
        return False
    if command.after_ms is not None and ts < command.after_ms:
        return False
    return command.before_ms is None or ts < command.before_ms


def _trim(hit: Hit, command: SearchCommand, audience: Audience, server_name: str) -> Hit | None:
    """The hit with only the messages the room may see and the filters keep; None if none."""
    kept = tuple(
        m for m in hit.messages if _passes(int(m["ts"]), str(m["sender"]), command, audience)
    )
    if not kept:
        return None
    if len(kept) == len(hit.messages):
        return hit
    best = best_message(kept, command.texts)
    return replace(
        hit,
        messages=kept,
        event_ids=tuple(str(m["event_id"]) for m in kept),
        first_event_id=str(kept[0]["event_id"]),
        last_event_id=str(kept[-1]["event_id"]),
        best_event_id=best,
        permalink=permalink(hit.room_id, best, server_name),
    )


def _transcript_hit(
    room_id: RoomID, alias: str | None, found: TranscriptHit, thread: str | None, server: str
) -> Hit:
    message = CitedMessage(
        event_id=found.event_id, sender=found.sender, ts=found.ts, body=found.body
    )
    return Hit(
        point_id=f"event:{found.event_id}",
        room_id=room_id,
        room_alias=alias,
        thread_root=thread,
        first_event_id=found.event_id,
        last_event_id=found.event_id,
        event_ids=(found.event_id,),
        messages=(message,),
        score=float(found.score),
        permalink=permalink(room_id, found.event_id, server),
        best_event_id=found.event_id,
    )


async def _index(
    searcher: Searcher,
    command: SearchCommand,
    rooms: Sequence[RoomID] | None,
    audience: Audience,
    logs: Mapping[str, LogRead],
    flt: MessageFilter,
    depth: int,
) -> Candidates:
    if command.regex is not None or not command.texts:
        return Candidates()  # a /regex/ is the transcript's alone
    after = max((t for t in (command.after_ms, audience.after) if t is not None), default=None)
    before = command.before_ms - 1 if command.before_ms is not None else None
    query = SearchQuery.build(
        command.texts,
        room_ids=rooms,
        senders=(command.sender,) if command.sender else None,
        after_ts=after,
        before_ts=before,
        limit=command.limit,
        filter=flt,
        offset=min(depth, MAX_OFFSET),  # a later page: a deeper pool (`Searcher._depth`)
    )
    try:
        return await searcher.rank(query, logs)
    except StoreError as e:
        log.warning("store unavailable, answering from the transcript: %s", e)
        return Candidates(warnings=[f"the index is unavailable ({e}): transcript only"])


@dataclass(frozen=True)
class RoomView:
    """One room the search reads the transcript of, and who may see what in it."""

    log: RoomLog
    alias: str | None
    audience: Audience  # who reads the reply in the room (`bot.visibility`)


async def fused_search(
    searcher: Searcher,
    command: SearchCommand,
    *,
    rooms: Sequence[RoomID] | None,
    views: Sequence[RoomView],
    audiences: Mapping[str, Audience],
    bot_user_id: str,
    prefix: str,
    server_name: str,
    pattern: regex.Pattern[str] | None = None,
    marks: Mapping[str, str] | None = None,
    names: Mapping[str, tuple[str, ...]] | None = None,
    shown: Shown = frozenset(),
    depth: int = 0,
) -> SearchResult:
    """Index hits (filtered to `rooms`, None = every indexed room) fused with the transcripts.

    `marks`: the writer's marks (`Searcher.marks`) taken before the views' logs were read:
    the index hits of those rooms are then revalidated from the logs, no tail read of their
    own.

    `audiences` holds the visibility cut of the room the index answers from (none: the
    command room, whose askers may read every room). The
    index's first `fetch` candidates are fused unchecked; only those that rank into the reply
    are revalidated (`Searcher.confirm`), and a stale one gives its place to the next candidate
    until every index hit shown has passed. Revalidating all `fetch` up front cost three times
    the homeserver round trips for hits the reply never shows. `pattern` is the command's
    /regex/ already compiled (`compile_pattern`); without it the fold compiles it.

    `names`: user id → display names, for `mentions:` in text without `m.mentions`. A next
    page (`!more`) gives the event ids earlier pages `shown` (no hit citing one is shown
    again) and `depth`, how many hits they showed; `next_offset` is set when more remain.
    """
    fetch = min(MAX_CANDIDATES, (command.limit + depth) * 3)
    flt = command.filter.with_names(names or {})
    single = audiences.get(rooms[0], ANYONE) if rooms is not None and len(rooms) == 1 else ANYONE
    marks = marks or {}
    logs: dict[str, LogRead] = {
        v.log.room_id: LogRead(v.log.raw, marks.get(v.log.room_id)) for v in views
    }
    pool = await _index(searcher, command, rooms, single, logs, flt, depth)
    stones = pool.stones if pool.ranked else []
    if views and not pool.ranked:
        try:
            stones = await tombstones(searcher)
        except CommandError as e:  # no log text a purge may cover: the transcript stays out
            pool.warnings.append(str(e))
            views = []
    # The folds scrub and match up to `SCAN_TEXT` per room: seconds of CPU for large
    # messages, run in a thread so appservice transactions and other rooms do not wait.
    found = await asyncio.to_thread(
        _transcript_finds, views, command, pattern, stones, bot_user_id, prefix, fetch, flt
    )
    live: set[str] = set()  # point ids confirmed
    stale: set[str] = set()
    while True:
        window = pool.first(fetch, skip=stale)
        hits, order = _fuse(window, found, command, audiences, server_name)
        order = [(k, v) for k, v in order if shown.isdisjoint(hits[k].event_ids)]
        top = order[: command.limit]
        top_keys = {key for key, _ in top}
        unchecked = [h for h in window if h.point_id in top_keys and h.point_id not in live]
        if not unchecked:
            break
        for hit, ok in zip(unchecked, await searcher.confirm(pool, unchecked), strict=True):
            (live if ok else stale).add(hit.point_id)
    more = len(order) > len(top) and depth + len(top) < MAX_OFFSET
    return SearchResult(
        hits=order_hits([replace(hits[k], score=score) for k, score in top], command.sort),
        warnings=list(pool.warnings),
        retrievers=[*pool.retrievers, *(["transcript"] if views else [])],
        dropped_stale=len(stale),
        below_floor=pool.below_floor,
        next_offset=depth + len(top) if more else None,
        sort=command.sort,
        remaining=len(order) - len(top) if more else 0,
    )


def _transcript_finds(
    views: Sequence[RoomView],
    command: SearchCommand,
    pattern: regex.Pattern[str] | None,
    stones: Sequence[Tombstone],
    bot_user_id: str,
    prefix: str,
    fetch: int,
    flt: MessageFilter | None = None,
) -> list[tuple[RoomView, TranscriptHit, str | None]]:
    """Each room's transcript fold (pure and CPU-bound: callers run it off the event loop);
    the command's filters judged by the index's own predicate (`keep_messages`)."""
    found: list[tuple[RoomView, TranscriptHit, str | None]] = []
    flt = flt if flt is not None else command.filter
    for view in views:
        messages = [
            m
            for m in view.log.without_purged(stones).messages(bot_user_id, prefix)
            if view.audience.sees(m.ts) and keep_messages(flt, [_as_payload(m)], m.thread_root)
        ]
        threads: dict[str, str | None] = {m.event_id: m.thread_root for m in messages}
        folded = fold_search(
            messages, command, bound=max(1, len(messages)), pattern=pattern, limit=fetch
        )
        found.extend((view, f, threads.get(f.event_id)) for f in folded.hits[:fetch])
    return found


def _as_payload(message: Message) -> dict[str, object]:
    """A log message as the index's payload holds it, for `keep_messages`."""
    said: dict[str, object] = {"body": message.body, "sender": message.sender}
    if message.mentions is not None:
        said["mentions"] = list(message.mentions)
    return said


async def tombstones(searcher: Searcher) -> list[Tombstone]:
    """Every recorded purge, for a reply that quotes the room log (`RoomLog.without_purged`).

    Raises:
        CommandError: they cannot be read (the purge file unreadable, or the store down and no
            file): the reply must then show no log text at all, never text a purge may cover.
    """
    try:
        return await searcher.tombstones()
    except StoreError as e:
        log.warning("purges cannot be read, no log text is shown: %s", e)
        raise CommandError(
            f"the purge records cannot be read ({e}): recent messages are not shown"
        ) from e


def _fuse(
    index: Sequence[Hit],
    found: Sequence[tuple[RoomView, TranscriptHit, str | None]],
    command: SearchCommand,
    audiences: Mapping[str, Audience],
    server_name: str,
) -> tuple[dict[str, Hit], list[tuple[str, float]]]:
    """The index hits (trimmed to what the room may see) and transcript finds, by RRF."""
    hits: dict[str, Hit] = {}
    index_order: list[str] = []
    for hit in index:
        trimmed = _trim(hit, command, audiences.get(hit.room_id, ANYONE), server_name)
        if trimmed is not None:
            hits[trimmed.point_id] = trimmed
            index_order.append(trimmed.point_id)
    by_event = {e: pid for pid, h in hits.items() for e in h.event_ids}
    transcript_order: list[str] = []
    for view, match, thread in found:
        key = by_event.get(match.event_id)
        if key is None:
            key = f"event:{match.event_id}"
            hits[key] = _transcript_hit(view.log.room_id, view.alias, match, thread, server_name)
        else:  # the index holds it too: cite the exact message the transcript matched
            hits[key] = replace(
                hits[key],
                best_event_id=match.event_id,
                permalink=permalink(hits[key].room_id, match.event_id, server_name),
            )
        transcript_order.append(key)
    return hits, rrf({("index", "*"): index_order, ("transcript", "*"): transcript_order})
