"""What the bot says: `m.notice` contents, plain `body` and HTML `formatted_body` (rule 16).

Pure: records in, event content out. Every piece of user text (bodies, notes, labels, display
names, room names, the asker's own query) goes through `bot.html` (`safe_plain`, `safe_html`,
`excerpt`), so quoted text can neither inject HTML nor ping; every content carries an empty
`m.mentions`. A reply is threaded under the command when the command came from a thread
(`rel_type: m.thread`, `is_falling_back: true`), and a rich reply to it otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import regex

from bot.html import escape, excerpt, no_mentions, safe_html, safe_plain
from bot.pinboard import Pin
from bot.roomlog import ScanInfo
from ingest.chunker import display_name
from ingest.scrub import scrub
from ingest.search import Hit, SearchResult
from ingest.types import UserID

__all__ = [
    "NOTE_WIDTH",
    "REPLY_BUDGET",
    "Part",
    "PinsView",
    "ReplyTo",
    "SearchView",
    "content_size",
    "fit_reply",
    "notice",
    "pins_reply",
    "scan_sentence",
    "search_reply",
    "shorten",
    "text_reply",
]

RESULTS_KEY = "org.muninn.results"
EXCERPT_WIDTH = 160
# Synapse refuses an event over 65,536 bytes (413 M_TOO_LARGE), envelope and signatures
# included: a reply's content stays well under that.
REPLY_BUDGET = 40_000
RESULT_TEXTS = (1000, 200)  # characters a JSON string is cut to, tried in turn, to fit
TEXT_REPLY = 2000  # characters of a short text reply (a usage error, a refusal)
NOTE_WIDTH = 300  # characters of a pin's note shown on the board or in a confirmation


@dataclass(frozen=True)
class ReplyTo:
    """The command being answered."""

    room_id: str
    event_id: str
    thread_root: str | None = None


def relation(reply_to: ReplyTo) -> dict[str, Any]:
    if reply_to.thread_root is not None:
        return {
            "rel_type": "m.thread",
            "event_id": reply_to.thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to.event_id},
        }
    return {"m.in_reply_to": {"event_id": reply_to.event_id}}


def _content(
    reply_to: ReplyTo, plain: str, html: str, results: Mapping[str, Any] | None
) -> dict[str, Any]:
    content: dict[str, Any] = {
        "msgtype": "m.notice",
        "body": plain,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.relates_to": relation(reply_to),
        **no_mentions(),
    }
    if results is not None:
        content[RESULTS_KEY] = matrix_json(results)
    return content


def content_size(content: Mapping[str, Any]) -> int:
    """Bytes of the content as the homeserver measures it (canonical JSON, UTF-8)."""
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Part:
    """A piece of a reply, already safe: its plain `body` text and its HTML."""

    plain: str
    html: str


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked by `…`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cap_texts(value: Any, limit: int) -> tuple[Any, int]:
    """`value` with every string longer than `limit` cut to it; and how many were cut."""
    if isinstance(value, str):
        return (value, 0) if len(value) <= limit else (shorten(value, limit), 1)
    if isinstance(value, Mapping):
        pairs = [(k, _cap_texts(v, limit)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(value, list | tuple):
        items = [_cap_texts(v, limit) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def fit_reply(
    reply_to: ReplyTo,
    head: Part,
    items: Sequence[Part] = (),
    foot: Part | None = None,
    *,
    results: Mapping[str, Any] | None = None,
    results_items: str | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """Every reply the bot sends, within `REPLY_BUDGET` bytes (body, HTML and JSON together).

    The one owner of the size rule. In order, until the content fits: the strings of
    `results` are cut to `RESULT_TEXTS` characters each (first the larger); then trailing
    `items` are left out (with `results[results_items]`, the JSON list they show), and the
    reply says how many; a reply that still cannot fit is a short notice saying so. What was
    cut is named in the text and, for JSON readers, in `results["truncated"]`.

    Args:
        head: the first paragraph; items: the numbered list (`<li>` HTML); foot: the last.
        results: the command room's `org.muninn.results`, None elsewhere.
        results_items: the key of the list in `results` that `items` render, if any.
    """
    budget = REPLY_BUDGET if budget is None else budget
    foot = foot or Part("", "")

    def build(shown: int, text_limit: int | None) -> dict[str, Any]:
        left_out = len(items) - shown
        plain = [head.plain, *(i.plain for i in items[:shown])]
        html = head.html + (
            "<ol>" + "".join(i.html for i in items[:shown]) + "</ol>" if shown else ""
        )
        if left_out:
            note = f"… {left_out} more not shown: the reply would be over {budget:,} bytes"
            plain.append(note)
            html += f"<p><i>{escape(note)}</i></p>"
        plain.append(foot.plain)
        res = None
        if results is not None:
            res = dict(results)
            if results_items is not None and left_out:
                res[results_items] = list(res[results_items])[:shown]
            cut = 0
            if text_limit is not None:
                res, cut = _cap_texts(res, text_limit)
            if left_out or cut:
                res["truncated"] = {"items_left_out": left_out, "texts_shortened": cut}
        return _content(reply_to, "\n".join(p for p in plain if p), html + foot.html, res)

    content = build(len(items), None)
    if content_size(content) <= budget:
        return content
    for text_limit in RESULT_TEXTS:
        content = build(len(items), text_limit)
        if content_size(content) <= budget:
            return content
    low, high = 0, len(items) - 1  # the most items that fit, by bisection
    best: dict[str, Any] | None = None
    while low <= high:
        middle = (low + high) // 2
        candidate = build(middle, RESULT_TEXTS[-1])
        if content_size(candidate) <= budget:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    if best is not None:
        return best
    too_large = f"The answer would be over {budget:,} bytes, too large to send."
    return _content(
        reply_to, too_large, escape(too_large), None if results is None else {"error": too_large}
    )


def notice(
    reply_to: ReplyTo, plain: str, html: str, *, results: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An `m.notice` reply; `plain` and `html` must already be safe (built from safe parts).
    Within the reply budget (`fit_reply`), like every reply."""
    return fit_reply(reply_to, Part(plain, html), results=results)


def matrix_json(value: Any) -> Any:
    """Event content is canonical JSON, which has no floats (Synapse answers M_BAD_JSON): a
    float (a hit's `score`) is carried as its decimal string, e.g. `"0.0327869"`."""
    if isinstance(value, float):
        return format(value, ".6g")
    if isinstance(value, Mapping):
        return {str(k): matrix_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [matrix_json(v) for v in value]
    return value


def text_reply(reply_to: ReplyTo, text: str, *, results_kind: str | None = None) -> dict[str, Any]:
    """A short notice from plain text (usage, refusals); lines become `<br>`. With
    `results_kind` (the command room) it carries `{results_kind: text}` as its results.

    The text may quote the asker's command (a usage error names the bad fragment): the caller
    scrubs it (`CommandHandler.say`), so the body and the results carry the same words, cut
    to the same `TEXT_REPLY` characters.
    """
    text = shorten(text, TEXT_REPLY)
    html = "<br>".join(safe_html(line) for line in text.split("\n"))
    results = None if results_kind is None else {results_kind: text}
    return notice(reply_to, safe_plain(text), html, results=results)


def when(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M")


# ---------------------------------------------------------------- search


def scan_sentence(scan: ScanInfo) -> str:
    """How far the transcript fold looked, as a reply's footer says it."""
    if scan.scanned < scan.bound and not scan.cut:
        return f"scanned the whole room ({scan.scanned} events)"
    back = f", back to {when(scan.oldest_ts)} UTC" if scan.oldest_ts is not None else ""
    why = " (as much text as one command reads)" if scan.cut else ""
    return f"scanned the latest {scan.scanned} events{back}{why}"


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


def _best(hit: Hit) -> Mapping[str, Any]:
    return next((m for m in hit.messages if m["event_id"] == hit.best_event_id), hit.messages[0])


def _span(body: str, matcher: regex.Pattern[str] | None) -> tuple[int, int] | None:
    if matcher is None:
        return None
    try:
        found = matcher.search(body, timeout=0.05)
    except TimeoutError:
        return None
    return found.span() if found and found.start() < found.end() else None


def _hit_lines(view: SearchView, index: int, hit: Hit) -> tuple[str, str]:
    best = _best(hit)
    body, sender = str(best["body"]), str(best["sender"])
    names = view.names.get(hit.room_id, {})
    name = display_name(UserID(sender), names)
    cut = excerpt(body, view.texts, EXCERPT_WIDTH, span=_span(body, view.matcher))
    stamp = when(int(best["ts"]))
    room = view.room_labels.get(hit.room_id) or hit.room_alias or hit.room_id
    room_plain = f"{safe_plain(room)} · " if view.show_rooms else ""
    room_html = f"{safe_html(room)} · " if view.show_rooms else ""
    plain = f"{index}. {room_plain}{stamp} · {safe_plain(name)}: {cut.plain}\n   {hit.permalink}"
    html = (
        f'<li>{room_html}<a href="{escape(hit.permalink)}">{stamp}</a> · '
        f"<b>{safe_html(name)}</b>: {cut.html}</li>"
    )
    return plain, html


def _query_label(view: SearchView) -> str:
    # The query is echoed back to the whole room: a pasted token is scrubbed like any body.
    if view.pattern is not None:
        return f"/{scrub(view.pattern)}/"
    return " | ".join(f"“{scrub(t)}”" for t in view.texts)


def search_reply(reply_to: ReplyTo, view: SearchView) -> dict[str, Any]:
    result = view.result
    label = _query_label(view)
    count = len(result.hits)
    head = f"{count} result{'s' if count != 1 else ''} for {label}" if count else ""
    head = head or f"No results for {label}"
    items = [Part(*_hit_lines(view, i, hit)) for i, hit in enumerate(result.hits, start=1)]
    foot = "answered by: " + (", ".join(result.retrievers) or "nothing")
    for scan in view.scans:
        foot += "; " + scan_sentence(scan)
    if result.dropped_stale:
        foot += f"; {result.dropped_stale} stale hit(s) dropped"
    if result.below_floor:
        foot += f"; {result.below_floor} weaker candidate(s) left out"
    warnings = [f"⚠ {w}" for w in result.warnings]
    plain = "\n".join([*warnings, foot])
    html = "".join(f"<p>{safe_html(w)}</p>" for w in warnings)
    html += f"<p><small>{safe_html(foot)}</small></p>"
    return fit_reply(
        reply_to,
        Part(safe_plain(head), f"<p>{safe_html(head)}</p>"),
        items,
        Part(plain, html),
        results=result.as_json() if view.results_json else None,
        results_items="hits",
    )


# ---------------------------------------------------------------- pins


@dataclass(frozen=True)
class PinsView:
    room_id: str
    room_label: str
    pins: Sequence[Pin]
    bodies: Mapping[str, str]  # target event id → body
    senders: Mapping[str, str]  # target event id → sender
    names: Mapping[str, str]  # user → display name
    permalinks: Mapping[str, str]  # target event id → permalink
    scan: ScanInfo
    board_size: int
    results_json: bool = False
    times: Mapping[str, int] = field(default_factory=dict)  # target event id → its ts (ms)

    def as_json(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_label": self.room_label,
            "board_size": self.board_size,
            "scanned": self.scan.scanned,
            "bound": self.scan.bound,
            "pins": [
                {
                    "target": p.target,
                    "label": p.label,
                    "note": p.note,
                    "pinned_by": p.pinned_by,
                    "pinned_ts": p.pinned_ts,
                    "marker_id": p.marker_id,
                    "sender": self.senders.get(p.target),
                    "ts": self.times.get(p.target),
                    "body": self.bodies.get(p.target),
                    "permalink": self.permalinks.get(p.target),
                }
                for p in self.pins
            ],
        }


def _pin_lines(view: PinsView, index: int, pin: Pin) -> tuple[str, str]:
    body = view.bodies.get(pin.target, "")
    sender = view.senders.get(pin.target)
    cut = excerpt(body, (), 120) if body else None
    label = f"#{pin.label} " if pin.label else ""
    by = display_name(UserID(sender), view.names) if sender else "?"
    link = view.permalinks.get(pin.target, "")
    note = f" — {shorten(pin.note, NOTE_WIDTH)}" if pin.note else ""
    text_plain = cut.plain if cut else "(message not in view)"
    text_html = cut.html if cut else "<i>(message not in view)</i>"
    plain = (
        f"{index}. {safe_plain(label)}{safe_plain(by)}: {text_plain}{safe_plain(note)}\n   {link}"
    )
    html = (
        f'<li>{safe_html(label)}<a href="{escape(link)}">{when(pin.pinned_ts)}</a> · '
        f"<b>{safe_html(by)}</b>: {text_html}{safe_html(note)}</li>"
    )
    return plain, html


def pins_reply(reply_to: ReplyTo, view: PinsView, filtered: bool) -> dict[str, Any]:
    room = view.room_label
    if view.pins:
        head = f"Pinboard of {room}: {len(view.pins)} pin(s)"
        if filtered:
            head += f" matching (of {view.board_size})"
    else:
        head = f"Pinboard of {room}: nothing pinned" + (" matches" if filtered else "")
    items = [Part(*_pin_lines(view, i, pin)) for i, pin in enumerate(view.pins, start=1)]
    foot = scan_sentence(view.scan)
    return fit_reply(
        reply_to,
        Part(safe_plain(head), f"<p>{safe_html(head)}</p>"),
        items,
        Part(foot, f"<p><small>{safe_html(foot)}</small></p>"),
        results=view.as_json() if view.results_json else None,
        results_items="pins",
    )
