"""The room logs a command has just read, as the read path fuses them with the index.

`Searcher.search(query, room_logs=…, audiences=…)` (`ingest.search`) answers `!search` and the
command room: the index's candidates and the transcript matches of each room's log, fused by
reciprocal rank, every message cut to what the room's readers may see (`Visibility`, the
bot's `bot.chat.visibility.Audience`), and only the index hits the reply shows revalidated. This
module holds that fusion's pure rules and its confirm-until-enough loop; the bot hands in its
logs (`LogView`), its command (`Asked`, with its /regex/ compiled within the bot's bounds) and
the rooms' audiences as values, so ingest never imports the bot. The transcript retriever is
`ingest.search.logs.transcript`'s fold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import regex

from ingest.index.records import Tombstone
from ingest.matrix import ClientEvent
from ingest.search._candidates import Candidates
from ingest.search.filters import NO_FILTER, MessageFilter, Said, keep_messages
from ingest.search.fusion import rrf
from ingest.search.hits import CitedMessage, Hit, SearchResult, best_message
from ingest.search.logs.transcript import TranscriptHit, TranscriptQuery, fold_search
from ingest.search.matches import Result, expand, page_hits, settled, with_matched
from ingest.search.permalink import permalink
from ingest.search.query import MAX_OFFSET
from ingest.types import Message, RoomID

__all__ = [
    "Asked",
    "LogView",
    "RoomLogs",
    "Shown",
    "Visibility",
    "fuse",
    "log_finds",
]


class Visibility(Protocol):
    """Who reads the reply in a room, as the search applies it (`bot.chat.visibility.Audience`)."""

    def sees(self, ts: int, /) -> bool: ...


class _Everyone:
    def sees(self, ts: int, /) -> bool:
        return True


EVERYONE: Visibility = _Everyone()  # a room with no cut (the command room's askers)


class Shown(Protocol):
    """Event ids an earlier page showed (`bot.chat.paging.ShownIds`, or any set)."""

    def isdisjoint(self, event_ids: Iterable[str], /) -> bool: ...


class Asked(TranscriptQuery, Protocol):
    """The command the search answers, as far as the cut, the fold and the page read it
    (`bot.chat.commands.records.SearchCommand` fits)."""

    @property
    def sort(self) -> str: ...


class ReadLog(Protocol):
    """A room's latest raw events as a command read them (`bot.chat.roomlog.RoomLog`)."""

    @property
    def room_id(self) -> RoomID: ...
    @property
    def raw(self) -> Sequence[ClientEvent]: ...
    def without_purged(self, stones: Sequence[Tombstone], /) -> ReadLog: ...
    def messages(self, bot_user_id: str, prefix: str, /) -> Sequence[Message]: ...


class LogView(Protocol):
    """One room whose log the search folds (`bot.chat.lookup.RoomView`)."""

    @property
    def log(self) -> ReadLog: ...
    @property
    def alias(self) -> str | None: ...


@dataclass(frozen=True)
class RoomLogs:
    """What a command adds to the index's answer: the logs it read, and its page."""

    asked: Asked
    views: Sequence[LogView]
    bot_user_id: str  # its messages and `prefix` commands are not conversation
    prefix: str
    marks: Mapping[str, str] = field(default_factory=dict)  # `Searcher.marks`, before the read
    filter: MessageFilter = NO_FILTER
    shown: Shown = frozenset()
    depth: int = 0  # hits earlier pages showed
    pattern: regex.Pattern[str] | None = (
        None  # the /regex/, compiled (`bot.chat.commands.patterns`)
    )


Found = tuple[LogView, TranscriptHit, str | None]  # the room, the match, its thread root


def _passes(ts: int, sender: str, asked: Asked, audience: Visibility) -> bool:
    if not audience.sees(ts):
        return False
    if asked.sender is not None and sender != asked.sender:
        return False
    if asked.after_ms is not None and ts < asked.after_ms:
        return False
    return asked.before_ms is None or ts < asked.before_ms


def _trim(hit: Hit, asked: Asked, audience: Visibility, server_name: str) -> Hit | None:
    """The hit with only the messages the room may see and the filters keep; None if none."""
    kept = tuple(
        m for m in hit.messages if _passes(int(m["ts"]), str(m["sender"]), asked, audience)
    )
    if not kept:
        return None
    if len(kept) == len(hit.messages):
        return hit
    ids = {str(m["event_id"]) for m in kept}
    matched = tuple(e for e in hit.matched if e in ids)
    if hit.matched and not matched:
        return None  # what matched is what the room may not see; the rest did not match
    best = matched[0] if matched else best_message(kept, asked.texts)
    return replace(
        hit,
        messages=kept,
        event_ids=tuple(str(m["event_id"]) for m in kept),
        first_event_id=str(kept[0]["event_id"]),
        last_event_id=str(kept[-1]["event_id"]),
        best_event_id=best,
        matched=matched,
        permalink=permalink(hit.room_id, best, server_name),
    )


def _log_hit(
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
        matched=(found.event_id,),
    )


def log_finds(
    logs: RoomLogs,
    stones: Sequence[Tombstone],
    audiences: Mapping[str, Visibility],
    fetch: int,
) -> list[Found]:
    """Each room's transcript matches (`fold_search`; pure and CPU-bound: callers run it off
    the event loop; raises `FoldTimeout` when the /regex/ runs out of its budget):
    its messages a purge does not cover, that the room's readers may see and the command's
    filters keep, judged by the index's own predicate (`keep_messages`)."""
    found: list[Found] = []
    for view in logs.views:
        audience = audiences.get(view.log.room_id, EVERYONE)
        messages = [
            m
            for m in view.log.without_purged(stones).messages(logs.bot_user_id, logs.prefix)
            if audience.sees(m.ts) and keep_messages(logs.filter, [_as_payload(m)], m.thread_root)
        ]
        threads: dict[str, str | None] = {m.event_id: m.thread_root for m in messages}
        folded = fold_search(
            messages, logs.asked, bound=max(1, len(messages)), pattern=logs.pattern, limit=fetch
        )
        found.extend((view, f, threads.get(f.event_id)) for f in folded.hits[:fetch])
    return found


def _as_payload(message: Message) -> Said:
    """A log message as the index's payload holds it, for `keep_messages`."""
    said: Said = {"body": message.body, "sender": message.sender}
    if message.mentions is not None:
        said["mentions"] = list(message.mentions)
    return said


def fuse(
    index: Sequence[Hit],
    found: Sequence[Found],
    asked: Asked,
    audiences: Mapping[str, Visibility],
    server_name: str,
) -> tuple[dict[str, Hit], list[tuple[str, float]]]:
    """The index hits (trimmed to what the room may see) and transcript finds, by RRF."""
    hits: dict[str, Hit] = {}
    index_order: list[str] = []
    for hit in index:
        trimmed = _trim(hit, asked, audiences.get(hit.room_id, EVERYONE), server_name)
        if trimmed is not None:
            hits[trimmed.point_id] = trimmed
            index_order.append(trimmed.point_id)
    by_event = {e: pid for pid, h in hits.items() for e in h.event_ids}
    transcript_order: list[str] = []
    for view, match, thread in found:
        key = by_event.get(match.event_id)
        if key is None:
            key = f"event:{match.event_id}"
            hits[key] = _log_hit(view.log.room_id, view.alias, match, thread, server_name)
        elif match.event_id not in hits[key].matched:  # the index holds it too: it matched
            hits[key] = with_matched(hits[key], (*hits[key].matched, match.event_id), server_name)
        transcript_order.append(key)
    return hits, rrf({("index", "*"): index_order, ("transcript", "*"): transcript_order})


Confirm = Callable[[Candidates, Sequence[Hit]], Awaitable[list[bool]]]
Choose = Callable[[Candidates, Sequence[Hit]], Awaitable[list[Hit]]]


def listed(hits: Sequence[Hit], sort: str, shown: Shown) -> list[Result]:
    """The ranked hits as the messages a page lists (`ingest.search.matches.expand`), none an
    earlier page showed: a message matched by words once shown is passed over, a window matched
    by meaning once any of its messages was. `sort:recent` lists the messages holding the
    query's words (or found in the log) when there are any."""
    if sort == "recent" and any(h.matched for h in hits):
        hits = [h for h in hits if h.matched]
    out: list[Result] = []
    for hit, message in expand(hits, sort):
        seen = [str(message["event_id"])] if hit.matched else hit.event_ids
        if shown.isdisjoint(seen):
            out.append((hit, message))
    return out


async def fused_page(
    pool: Candidates,
    found: Sequence[Found],
    logs: RoomLogs,
    audiences: Mapping[str, Visibility],
    confirm: Confirm,
    choose: Choose,
    server_name: str,
    fetch: int,
) -> SearchResult:
    """The page: `asked.limit` matching messages (`listed`) of the index's first `fetch`
    candidates fused unchecked with the transcript finds; only the windows of the messages the
    page lists are revalidated (`confirm`), and a stale one gives its place to the next until
    every one shown has passed. Revalidating all `fetch` up front cost three times the
    homeserver round trips for hits the reply never shows. A window matched by meaning then
    quotes its message nearest the question (`choose`)."""
    asked = logs.asked
    live: set[str] = set()  # point ids confirmed
    stale: set[str] = set()
    while True:
        window = pool.first(fetch, skip=stale)
        hits, order = fuse(window, found, asked, audiences, server_name)
        results = listed([replace(hits[k], score=v) for k, v in order], asked.sort, logs.shown)
        top = results[: asked.limit]
        top_keys = {hit.point_id for hit, _ in top}
        unchecked = [h for h in window if h.point_id in top_keys and h.point_id not in live]
        if not unchecked:
            break
        for hit, ok in zip(unchecked, await confirm(pool, unchecked), strict=True):
            (live if ok else stale).add(hit.point_id)
    meant = list({h.point_id: h for h, _ in top if not h.matched}.values())
    page = settled(top, await choose(pool, meant) if meant else [])
    if asked.sort == "recent":
        page.sort(key=lambda r: (-int(r[1]["ts"]), str(r[1]["event_id"])))
    depth = logs.depth
    more = len(results) > len(top) and depth + len(top) < MAX_OFFSET
    return SearchResult(
        hits=page_hits(page, server_name),
        warnings=list(pool.warnings),
        retrievers=[*pool.retrievers, *(["transcript"] if logs.views else [])],
        dropped_stale=len(stale),
        below_floor=pool.below_floor,
        nothing_close=pool.nothing_close and not found,
        next_offset=depth + len(top) if more else None,
        sort=asked.sort,
        remaining=len(results) - len(top) if more else 0,
        matched=[str(m["event_id"]) for _, m in page],
    )
