"""A reply's content and its size: the `m.notice`, its relation to the command, and
`fit_reply`, the one owner of the reply budget (docs/ARCHITECTURE.md §3 rule 16)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from mautrix.types import MessageType, RelationType

from bot.chat.html import Mentions, escape, help_html, no_mentions, safe_html, safe_plain
from ingest.rules.stamps import utc_minute
from ingest.search.logs.roomlog import ScanInfo

__all__ = [
    "EXCERPT_WIDTH",
    "NOTE_WIDTH",
    "REPLY_BUDGET",
    "RESULTS_KEY",
    "Part",
    "Relation",
    "ReplyContent",
    "ReplyTo",
    "content_size",
    "fit_reply",
    "matrix_json",
    "notice",
    "plural",
    "relation",
    "scan_sentence",
    "shorten",
    "text_reply",
    "when",
]

RESULTS_KEY: Final = "org.muninn.results"
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


class InReplyTo(TypedDict):
    event_id: str


# `m.relates_to` of a reply: a thread's (`m.thread`, with the rich-reply fallback) or a plain
# reply's `m.in_reply_to` alone.
Relation = TypedDict(
    "Relation",
    {
        "rel_type": NotRequired[str],
        "event_id": NotRequired[str],
        "is_falling_back": NotRequired[bool],
        "m.in_reply_to": InReplyTo,
    },
)
# The content of every reply the bot sends (an `m.notice`); `org.muninn.results` only in the
# command room.
ReplyContent = TypedDict(
    "ReplyContent",
    {
        "msgtype": str,
        "body": str,
        "format": str,
        "formatted_body": str,
        "m.relates_to": Relation,
        "m.mentions": Mentions,
        "org.muninn.results": NotRequired[object],
    },
)


def relation(reply_to: ReplyTo) -> Relation:
    if reply_to.thread_root is not None:
        return {
            "rel_type": RelationType.THREAD.value,
            "event_id": reply_to.thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to.event_id},
        }
    return {"m.in_reply_to": {"event_id": reply_to.event_id}}


def _notice(
    reply_to: ReplyTo, plain: str, html: str, results: Mapping[str, Any] | None
) -> ReplyContent:
    content: ReplyContent = {
        "msgtype": MessageType.NOTICE.value,
        "body": plain,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.relates_to": relation(reply_to),
        "m.mentions": no_mentions()["m.mentions"],
    }
    if results is not None:
        content[RESULTS_KEY] = matrix_json(results)
    return content


def content_size(content: ReplyContent) -> int:
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
    keep_results: Callable[[Mapping[str, Any], int], dict[str, Any]] | None = None,
    start: int = 1,
    budget: int | None = None,
) -> ReplyContent:
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
        keep_results: else, `results` as the first n `items` show them (a search's messages
            are fewer windows).
        start: the number of the first item (`<ol start>`: a next page goes on counting).
    """
    budget = REPLY_BUDGET if budget is None else budget
    foot = foot or Part("", "")

    def build(shown: int, text_limit: int | None) -> ReplyContent:
        left_out = len(items) - shown
        plain = [head.plain, *(i.plain for i in items[:shown])]
        ol = "<ol>" if start == 1 else f'<ol start="{start}">'
        html = head.html + (ol + "".join(i.html for i in items[:shown]) + "</ol>" if shown else "")
        if left_out:
            note = f"… {left_out} more not shown: the reply would be over {budget:,} bytes"
            plain.append(note)
            html += f"<p><i>{escape(note)}</i></p>"
        plain.append(foot.plain)
        res = None
        if results is not None:
            res = dict(results)
            if keep_results is not None and left_out:
                res = keep_results(res, shown)
            elif results_items is not None and left_out:
                res[results_items] = list(res[results_items])[:shown]
            cut = 0
            if text_limit is not None:
                res, cut = _cap_texts(res, text_limit)
            if left_out or cut:
                res["truncated"] = {"items_left_out": left_out, "texts_shortened": cut}
        return _notice(reply_to, "\n".join(p for p in plain if p), html + foot.html, res)

    content = build(len(items), None)
    if content_size(content) <= budget:
        return content
    for text_limit in RESULT_TEXTS:
        content = build(len(items), text_limit)
        if content_size(content) <= budget:
            return content
    low, high = 0, len(items) - 1  # the most items that fit, by bisection
    best: ReplyContent | None = None
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
    return _notice(
        reply_to, too_large, escape(too_large), None if results is None else {"error": too_large}
    )


def notice(
    reply_to: ReplyTo, plain: str, html: str, *, results: Mapping[str, Any] | None = None
) -> ReplyContent:
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


def text_reply(
    reply_to: ReplyTo, text: str, *, results_kind: str | None = None, own: bool = False
) -> ReplyContent:
    """A short notice from plain text (usage, refusals); lines become `<br>`. With
    `results_kind` (the command room) it carries `{results_kind: text}` as its results.

    The text may quote the asker's command (a usage error names the bad fragment): the caller
    scrubs it (`Replier.say`), so the body and the results carry the same words, cut
    to the same `TEXT_REPLY` characters.

    `own`: Muninn's own text quoting nobody (`!help`): escaped, but no word joiner after an
    `@` (`from:@user` is copied as typed; `m.mentions: {}` alone keeps it from pinging).
    """
    text = shorten(text, TEXT_REPLY)
    lines = text.split("\n")
    html = help_html(lines) if own else "<br>".join(safe_html(line) for line in lines)
    results = None if results_kind is None else {results_kind: text}
    plain = text if own else "\n".join(safe_plain(line) for line in lines)
    return notice(reply_to, plain, html, results=results)


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
