"""The reply to `!search`: each matching message a numbered result, with its sender, time,
room and link (a result is a message: docs/ARCHITECTURE.md §3 rule 22b); a file, image, video
or audio clip shows as `📎 filename — caption` (`ingest.rules.media`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from bot.chat.commands.records import SearchCommand
from bot.chat.content import ReplyContent, ReplyTo
from bot.chat.html import escape, excerpt, safe_html, safe_plain
from bot.chat.replies.budget import Part, fit_reply
from bot.chat.replies.names import SenderLabels
from bot.chat.replies.understood import filters_said, understood
from bot.chat.replies.words import plural, scan_sentence, when
from ingest.rules.media import is_media
from ingest.rules.scrub import scrub
from ingest.search.hits import CitedMessage, Hit, SearchResult
from ingest.search.logs.roomlog import ScanInfo
from ingest.search.matches import Result, in_order
from ingest.search.notices import for_chat
from ingest.search.permalink import permalink
from ingest.types import UserID

__all__ = ["EXCERPT_WIDTH", "MEDIA_MARK", "SearchView", "search_reply"]

MEDIA_MARK = "📎 "  # before a media result's filename and caption
EXCERPT_WIDTH = 160  # characters of a result's message shown around its match


@dataclass(frozen=True)
class SearchView:
    """Everything a search reply shows."""

    result: SearchResult
    texts: tuple[str, ...]
    pattern: str | None = None
    matcher: regex.Pattern[str] | None = None  # `pattern` compiled, to mark its match
    scans: Sequence[ScanInfo] = ()
    names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # room → user → name
    room_labels: Mapping[str, str] = field(default_factory=dict)  # room → alias or name
    show_rooms: bool = False  # the command room: every hit says its room
    results_json: bool = False  # the command room: `org.muninn.results`
    command: SearchCommand | None = None  # the search as parsed: a reply with no hit echoes it
    prefix: str = "!"
    more: int = 0  # matching messages past this page (`!more` shows them)
    first: int = 1  # the number of this page's first result (`!more` pages go on counting)
    server_name: str = ""  # the permalinks' `via`
    unread: tuple[str, ...] = ()  # searched rooms the index has not read yet, by label


def _span(body: str, matcher: regex.Pattern[str] | None) -> tuple[int, int] | None:
    if matcher is None:
        return None
    try:
        found = matcher.search(body, timeout=0.05)
    except TimeoutError:
        return None
    return found.span() if found and found.start() < found.end() else None


def _hit_lines(
    view: SearchView, labels: SenderLabels, index: int, hit: Hit, best: CitedMessage
) -> tuple[str, str]:
    body, sender = str(best["body"]), str(best["sender"])
    name = labels.of(UserID(sender))
    cut = excerpt(body, view.texts, EXCERPT_WIDTH, span=_span(body, view.matcher))
    clip = MEDIA_MARK if is_media(best.get("msgtype")) else ""
    stamp = when(best["ts"])
    room = view.room_labels.get(hit.room_id) or hit.room_alias or hit.room_id
    room_plain = f"{safe_plain(room)} · " if view.show_rooms else ""
    room_html = f"{safe_html(room)} · " if view.show_rooms else ""
    event_id = str(best["event_id"])
    link = (
        hit.permalink
        if event_id == hit.best_event_id
        else permalink(hit.room_id, event_id, view.server_name)
    )
    plain = f"{index}. {room_plain}{stamp} · {safe_plain(name)}: {clip}{cut.plain}\n   {link}"
    html = (
        f'<li>{room_html}<a href="{escape(link)}">{stamp}</a> · '
        f"<b>{safe_html(name)}</b>: {clip}{cut.html}</li>"
    )
    return plain, html


def _labels(view: SearchView, known: dict[str, SenderLabels], room_id: str) -> SenderLabels:
    if room_id not in known:
        known[room_id] = SenderLabels(view.names.get(room_id, {}))
    return known[room_id]


def _query_label(view: SearchView) -> str:
    # The query is echoed back to the whole room: a pasted token is scrubbed like any body.
    if view.pattern is not None:
        return f"/{scrub(view.pattern)}/"
    if not view.texts:  # operators alone: the latest messages they keep (rule 22a)
        said = filters_said(view.command) if view.command is not None else []
        return ", ".join(["the latest messages", *said])
    return " | ".join(f"“{scrub(t)}”" for t in view.texts)


def _numbers(view: SearchView, count: int) -> str:
    """This page's result numbers: `5–8`, or `5` for a page of one."""
    return f"{view.first}–{view.first + count - 1}" if count > 1 else f"{view.first}"


def _footer(view: SearchView) -> str:
    """What a chat user can act on: how far back it looked, what it left out, what is next."""
    result = view.result
    parts = [scan_sentence(scan) for scan in view.scans]
    if view.unread:  # its latest messages were read above; nothing older is indexed yet
        parts.append(f"the index has not read {', '.join(map(safe_plain, view.unread))} yet")
    if result.below_floor:
        parts.append(f"{plural(result.below_floor, 'weaker match', 'weaker matches')} left out")
    if result.dropped_stale:
        changed = plural(result.dropped_stale, "message")
        parts.append(f"{changed} edited or removed since indexing left out")
    if result.next_offset is not None:
        # A lower bound: a later page reads the candidates deeper and may count more, so the
        # count says "at least" rather than seem to grow (issue 46)
        least = "at least " if view.more else ""
        if result.weaker_next:  # the close matches end here; the next page says so too
            weaker = "weaker match", "weaker matches"
            count = plural(view.more, *weaker) if view.more else weaker[1]
        else:
            count = f"{view.more} more" if view.more else "more"
        parts.append(f"{least}{count}: {view.prefix}more")
    elif view.first > 1:  # the last page of a `!more`
        parts.append("no more results")
    return "; ".join(parts)


def _keeper(listed: Sequence[Result]) -> Callable[[Mapping[str, Any], int], dict[str, Any]]:
    """The §4.3 document as the first n listed messages show it: their windows, each with the
    messages of it shown."""

    def keep(results: Mapping[str, Any], shown: int) -> dict[str, Any]:
        kept = [str(m["event_id"]) for _, m in listed[:shown]]
        hits = []
        for hit in results.get("hits") or ():
            mine = [e for e in hit.get("matched_event_ids") or () if e in kept]
            if mine:
                hits.append({**hit, "matched_event_ids": mine})
        return {**results, "hits": hits, "matched_event_ids": kept}

    return keep


def search_reply(reply_to: ReplyTo, view: SearchView) -> ReplyContent:
    result = view.result
    label = _query_label(view)
    listed = in_order(result)
    count = len(listed)
    # Every page of a time-ordered list says so, a later page of one result too.
    sorted_ = result.sort == "recent" and (count > 1 or view.first > 1)
    order = ", sorted newest first" if sorted_ else ""
    head = f"{plural(count, 'result')} for {label}{order}" if count else ""
    if count and view.first > 1:
        results = "Results" if count > 1 else "Result"
        head = f"{results} {_numbers(view, count)} for {label}{order}"
    head = head or f"No results for {label}"
    if count and result.nothing_close:  # docs/ARCHITECTURE.md §3 rule 22c
        head = f"Nothing matched {label} closely; the nearest{order}:"
    elif count and result.weaker:  # the close matches were on earlier pages (rule 22c)
        matches = "Weaker matches" if count > 1 else "Weaker match"
        closely = "none of these matched closely"
        head = f"{matches} {_numbers(view, count)} for {label}{order}: {closely}"
    labels: dict[str, SenderLabels] = {}  # a room's members counted once a reply
    items = [
        Part(*_hit_lines(view, _labels(view, labels, hit.room_id), i, hit, m))
        for i, (hit, m) in enumerate(listed, start=view.first)
    ]
    # The room gets short notices; the operator's details are in the log and `muninn status`.
    lines = [f"⚠ {w}" for w in for_chat(result.warnings)]
    if not count and view.command is not None:
        lines.extend(understood(view.command))
    foot = _footer(view)
    plain = "\n".join([*(safe_plain(x) for x in lines), *([foot] if foot else [])])
    html = "".join(f"<p>{safe_html(w)}</p>" for w in lines)
    html += f"<p><small>{safe_html(foot)}</small></p>" if foot else ""
    return fit_reply(
        reply_to,
        Part(safe_plain(head), f"<p>{safe_html(head)}</p>"),
        items,
        Part(plain, html),
        results=result.as_json() if view.results_json else None,
        keep_results=_keeper(listed),
        start=view.first,
    )
