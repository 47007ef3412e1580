"""The room logs a command has just read, as the read path fuses them with the index.

`Searcher.search(query, room_logs=…)` (`ingest.search`) answers `!search` and the command room:
the index's candidates and the transcript matches of each room's log, fused by reciprocal rank,
every message cut to what the room's readers may see (`Cut`, each room's audience asked once:
`ingest.search.logs.request.Visibility`), and only the index hits the reply shows revalidated
(`Candidates.confirmed`). This module holds that fusion's pure rules; what the command hands in
is `ingest.search.logs.request`'s, the transcript retriever `ingest.search.logs.transcript`'s fold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace

from ingest.index.records import Tombstone
from ingest.search._candidates import Candidates, Confirm
from ingest.search.filters import Said, keep_messages
from ingest.search.hits import CitedMessage, Hit, SearchResult, best_message, window_of
from ingest.search.logs.request import EVERYONE, LogQuery, RoomLogs, RoomView, ShownIds
from ingest.search.logs.transcript import TranscriptHit, fold_search
from ingest.search.matches import (
    Result,
    expand,
    literal_matches,
    page_hits,
    person_page,
    with_matched,
)
from ingest.search.permalink import permalink
from ingest.search.query import MAX_OFFSET
from ingest.search.ranking.fusion import rrf
from ingest.types import Message, RoomID, StoredPoint

__all__ = ["Cut", "Found", "fuse", "fused_page", "listed", "log_finds"]


@dataclass(frozen=True)
class Cut:
    """Each room's stamps its readers may see, of those the read path judges there: its
    log's messages and its candidate windows' (`Visibility.seen`, asked once a room)."""

    seen: Mapping[str, frozenset[int]]  # room -> the stamps seen; a room absent: no cut

    @classmethod
    def of(
        cls,
        views: Sequence[RoomView],
        said: Sequence[Sequence[Message]],
        points: Iterable[StoredPoint],
    ) -> Cut:
        stamps: dict[str, set[int]] = {v.log.room_id: set() for v in views}
        for view, messages in zip(views, said, strict=True):
            stamps[view.log.room_id].update(m.ts for m in messages)
        for point in points:
            window = window_of(point)
            if (room := window["room_id"]) in stamps:
                stamps[room].update(int(m["ts"]) for m in window.get("messages", []))
        return cls(
            {
                v.log.room_id: v.audience.seen(stamps[v.log.room_id])
                for v in views
                if v.audience is not EVERYONE
            }
        )

    def sees(self, room_id: str, ts: int) -> bool:
        seen = self.seen.get(room_id)
        return seen is None or ts in seen


Found = tuple[RoomView, TranscriptHit, str | None]  # the room, the match, its thread root


def _passes(ts: int, sender: str, asked: LogQuery, room_id: str, cut: Cut) -> bool:
    if not cut.sees(room_id, ts):
        return False
    if asked.sender is not None and sender != asked.sender:
        return False
    if asked.after_ms is not None and ts < asked.after_ms:
        return False
    return asked.before_ms is None or ts < asked.before_ms


def _trim(hit: Hit, asked: LogQuery, cut: Cut, server_name: str) -> Hit | None:
    """The hit with only the messages the room may see and the filters keep; None if none."""
    kept = tuple(
        m for m in hit.messages if _passes(int(m["ts"]), str(m["sender"]), asked, hit.room_id, cut)
    )
    if not kept:
        return None
    if len(kept) == len(hit.messages):
        return hit
    ids = {str(m["event_id"]) for m in kept}
    matched = tuple(e for e in hit.matched if e in ids)
    if hit.matched and not matched:
        return None  # what matched is what the room may not see; the rest did not match
    # A window matched by meaning keeps the quote its lines chose, if the room may read it.
    kept_best = hit.best_event_id if hit.best_event_id in ids else None
    best = matched[0] if matched else kept_best or best_message(kept, asked.texts)
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
        event_id=found.event_id,
        sender=found.sender,
        ts=found.ts,
        body=found.body,
        msgtype=found.msgtype,
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
    logs: RoomLogs, stones: Sequence[Tombstone], points: Iterable[StoredPoint], fetch: int
) -> tuple[list[Found], Cut]:
    """Each room's transcript matches (`fold_search`; pure and CPU-bound: callers run it off
    the event loop; raises `FoldTimeout` when the /regex/ runs out of its budget):
    its messages a purge does not cover, that the room's readers may see and the command's
    filters keep, judged by the index's own predicate (`keep_messages`). And the cut of every
    room with an audience (`Cut.of`), over its log's messages and the candidate `points`."""
    said = [
        v.log.without_purged(stones).messages(logs.bot_user_id, logs.prefix) for v in logs.views
    ]
    cut = Cut.of(logs.views, said, points)
    found: list[Found] = []
    for view, everything in zip(logs.views, said, strict=True):
        room = view.log.room_id
        messages = [m for m in everything if cut.sees(room, m.ts)]
        if logs.filter:  # a command without operators keeps every message: no payload built
            messages = [
                m for m in messages if keep_messages(logs.filter, [_as_payload(m)], m.thread_root)
            ]
        threads: dict[str, str | None] = {m.event_id: m.thread_root for m in messages}
        folded = fold_search(
            messages, logs.asked, bound=max(1, len(messages)), pattern=logs.pattern, limit=fetch
        )
        finds = _worded(folded.hits, logs.asked) if logs.pattern is None else folded.hits
        found.extend((view, f, threads.get(f.event_id)) for f in finds[:fetch])
    return found, cut


def _worded(finds: Sequence[TranscriptHit], asked: LogQuery) -> Sequence[TranscriptHit]:
    """`sort:recent`'s finds: those holding the query's words as the index's hits do
    (`literal_matches`, rule 22a), not a text the fold found inside other words or spelt out
    across a message (`kiln` in "the kids club … vinyl"); a relevance search keeps them all,
    ranked by their tiers. Operators alone (no text) keep every message."""
    if asked.sort != "recent" or not asked.texts:
        return finds
    said = [
        CitedMessage(event_id=f.event_id, sender=f.sender, ts=f.ts, body=f.body) for f in finds
    ]
    holding = set(literal_matches(said, asked.texts))
    return [f for f in finds if f.event_id in holding]


def _as_payload(message: Message) -> Said:
    """A log message as the index's payload holds it, for `keep_messages`."""
    said: Said = {"body": message.body, "sender": message.sender, "msgtype": message.msgtype}
    if message.mentions is not None:
        said["mentions"] = list(message.mentions)
    return said


def fuse(
    index: Sequence[Hit], found: Sequence[Found], asked: LogQuery, cut: Cut, server_name: str
) -> tuple[dict[str, Hit], list[tuple[str, float]]]:
    """The index hits (trimmed to what the room may see) and transcript finds, by RRF."""
    hits: dict[str, Hit] = {}
    index_order: list[str] = []
    for hit in index:
        trimmed = _trim(hit, asked, cut, server_name)
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


def listed(hits: Sequence[Hit], sort: str, shown: ShownIds | Set[str]) -> list[Result]:
    """The ranked hits as the messages a page lists (`ingest.search.matches.expand`), none an
    earlier page showed: a message matched by words once shown is passed over, a window matched
    by meaning once any of its messages was. `sort:recent` lists the messages holding the
    query's words (the log's finds hold them too: `_worded`) when there are any, newest first
    across the whole pool, so each `!more` page goes on where the last one ended."""
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
    cut: Cut,
    logs: RoomLogs,
    confirm: Confirm,
    server_name: str,
    fetch: int,
) -> SearchResult:
    """The page: `asked.limit` matching messages (`listed`) of the index's first `fetch`
    candidates fused unchecked with the transcript finds; only the windows of the messages the
    page lists are revalidated (`Candidates.confirmed`), and a stale one gives its place to
    the next until every one shown has passed. A window matched by meaning quotes the message
    its hit chose from the stored lines (`ingest.search.quotes`): no model runs here."""
    asked = logs.asked

    def listing(stale: Set[str]) -> tuple[list[Hit], list[Result]]:
        """The window of candidates, and every message a page would list of it."""
        window = pool.first(fetch, skip=stale)
        hits, order = fuse(window, found, asked, cut, server_name)
        ranked = [replace(hits[k], score=v) for k, v in order]
        if pool.close_first:  # a person's: the close matches (the log's finds), then weaker
            ranked.sort(key=lambda h: not h.close)  # stable: each part in the fused order
        return window, listed(ranked, asked.sort, logs.shown)

    def page_of(results: Sequence[Result]) -> tuple[list[Result], bool]:
        if pool.close_first:
            return person_page(results, asked.limit, lambda r: r[0].close)
        return list(results[: asked.limit]), False

    def shown(stale: Set[str]) -> list[Hit]:
        window, results = listing(stale)
        top_keys = {hit.point_id for hit, _ in page_of(results)[0]}
        return [h for h in window if h.point_id in top_keys]

    _, stale = await pool.confirmed(confirm, shown)
    _, results = listing(stale)
    top, weaker = page_of(results)
    page = list(top)
    if asked.sort == "recent":
        page.sort(key=lambda r: (-int(r[1]["ts"]), str(r[1]["event_id"])))
    depth = logs.depth
    more = len(results) > len(top) and depth + len(top) < MAX_OFFSET
    following = results[len(top) :]
    return SearchResult(
        hits=page_hits(page, server_name),
        warnings=list(pool.warnings),
        retrievers=[*pool.retrievers, *(["transcript"] if logs.views else [])],
        dropped_stale=len(stale),
        below_floor=pool.below_floor,
        nothing_close=pool.nothing_close and not found,
        weaker=weaker,
        weaker_next=more and bool(following) and not following[0][0].close,
        next_offset=depth + len(top) if more else None,
        sort=asked.sort,
        remaining=len(results) - len(top) if more else 0,
        matched=[str(m["event_id"]) for _, m in page],
    )
