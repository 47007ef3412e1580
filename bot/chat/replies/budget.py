"""The reply budget: `fit_reply`, the one owner of a reply's size (docs/ARCHITECTURE.md §3
rule 16), every reply within `REPLY_BUDGET` bytes; `notice` and `text_reply`, the short replies
built through it, and `shorten`, the cut it marks with `…`. The content's shape is
`bot.chat.content`'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.content import ReplyContent, ReplyTo, content_size, notice_content
from bot.chat.html import escape, help_html, safe_html, safe_plain

__all__ = [
    "REPLY_BUDGET",
    "Part",
    "fit_reply",
    "notice",
    "shorten",
    "text_reply",
]

# Synapse refuses an event over 65,536 bytes (413 M_TOO_LARGE), envelope and signatures
# included: a reply's content stays well under that.
REPLY_BUDGET = 40_000
RESULT_TEXTS = (1000, 200)  # characters a JSON string is cut to, tried in turn, to fit
TEXT_REPLY = 2000  # characters of a short text reply (a usage error, a refusal)


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
        return notice_content(reply_to, "\n".join(p for p in plain if p), html + foot.html, res)

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
    return notice_content(
        reply_to, too_large, escape(too_large), None if results is None else {"error": too_large}
    )


def notice(
    reply_to: ReplyTo, plain: str, html: str, *, results: Mapping[str, Any] | None = None
) -> ReplyContent:
    """An `m.notice` reply; `plain` and `html` must already be safe (built from safe parts).
    Within the reply budget (`fit_reply`), like every reply."""
    return fit_reply(reply_to, Part(plain, html), results=results)


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
