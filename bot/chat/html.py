"""Reply-rendering helpers: escaping, mention neutralising, excerpts and matrix.to permalinks.

Everything a reply quotes from a user (bodies, notes, labels, sender names, even parts of their
command echoed in an error) goes through `safe_plain` / `safe_html` or `excerpt`, so quoted text
can neither inject HTML nor ping anyone (docs/ARCHITECTURE.md §3 rule 16), nor forge the reply
around it: `reply_line`, under all three, folds it to one line (a note cannot add a result
line), strips bidi embeddings, overrides and isolates (they reorder what follows them), and caps
combining marks; the HTML form is isolated in `<bdi>` as well.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from ingest.search.matches import word_spans
from ingest.search.permalink import permalink

__all__ = [
    "WORD_JOINER",
    "Excerpt",
    "escape",
    "excerpt",
    "help_html",
    "neutralise_mentions",
    "permalink",
    "quoted",
    "reply_line",
    "safe_html",
    "safe_plain",
]

WORD_JOINER = "\u2060"

# An `@` that starts a word and is followed by something: `@room`, `@alice:example.org`, and the
# `@` in `matrix.to/#/@alice:…`. Synapse's body matching for `@room` needs a non-word character
# (or the start) before the `@`, which is exactly the look-behind here, so e-mail addresses are
# left alone. Text already neutralised (followed by the word joiner) is not touched again.
_MENTION_AT = regex.compile(r"(?<!\w)@(?=[^\s\u2060])")
_SNAP = 20  # how far an excerpt edge may move to land on a word boundary

# Line breaks of every kind (a plain body's lines are the reply's own structure).
_LINE_BREAKS = regex.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# Bidi embeddings and overrides (U+202A–202E) and isolates (U+2066–2069): quoted, they would
# reorder the reply's own text after them (`‮` turns a line around).
_BIDI_CONTROLS = regex.compile(r"[\u202a-\u202e\u2066-\u2069]+")
MAX_MARKS = 4  # combining marks kept on one character: no script needs more, a flood has 100s
_MARK_FLOOD = regex.compile(r"(\p{M}{" + str(MAX_MARKS) + r"})\p{M}+")
# What `ingest.rules.scrub` puts where a secret was (`[redacted:password]`): not the sender's
# words, so no search word is marked inside it.
_SCRUB_MARKER = regex.compile(r"\[redacted:[^\]\s]*\]")


def escape(text: str) -> str:
    """HTML-escape text for element content and attribute values (quotes included)."""
    return html.escape(text, quote=True)


def help_html(lines: Sequence[str]) -> str:
    """`!help`'s HTML from its lines (`CommandSpec.help`, `grammar.help_text`): each usage in
    `<code>`, a command's arguments and examples as a list (issue 36: one paragraph before),
    the sentences after a blank line as paragraphs of prose, nothing of them code (issue 44).
    Muninn's own text: escaped, no word joiner (`from:@user` is copied as typed)."""

    def usage(line: str) -> str:
        typed, dash, summary = line.partition(" — ")
        return f"<code>{escape(typed)}</code>{dash and ' — '}{escape(summary)}"

    def item(line: str) -> str:
        for lead, sep in (("also: ", ", "), ("e.g. ", " · ")):
            if line.startswith(lead):
                shown = sep.join(f"<code>{escape(x)}</code>" for x in line[len(lead) :].split(sep))
                return f"{lead}{shown}"
        syntax, colon, what = line.partition(": ")
        return f"<code>{escape(syntax)}</code>: {escape(what)}" if colon else escape(line)

    blank = lines.index("") if "" in lines else len(lines)
    lines, prose = lines[:blank], [x for x in lines[blank + 1 :] if x]
    heads = [x for x in lines if not x.startswith("  ")]
    items = [x.strip() for x in lines if x.startswith("  ")]
    if len(heads) > 1:  # `!help`: one usage line a command
        return "<ul>" + "".join(f"<li>{usage(x)}</li>" for x in heads) + "</ul>"
    html = "".join(f"<p>{usage(x)}</p>" for x in heads)
    html += "<ul>" + "".join(f"<li>{item(x)}</li>" for x in items) + "</ul>" if items else ""
    return html + "".join(f"<p>{escape(x)}</p>" for x in prose)


def neutralise_mentions(text: str) -> str:
    """Break every mention-shaped `@` with a word joiner so quoted text cannot ping.

    `@room` becomes `@\u2060room` (the `.m.rule.roomnotif` body match no longer fires), and mxids
    stop being linkified into pills or `matrix.to` user links. Idempotent. Display-name mentions
    cannot be broken in text; every reply carries an empty `m.mentions` for those
    (`bot.chat.content.no_mentions`).
    """
    return _MENTION_AT.sub("@" + WORD_JOINER, text)


def reply_line(text: str) -> str:
    """User text as one line of a reply: line breaks become a space, bidi controls go, and at
    most `MAX_MARKS` combining marks stay on a character. Not escaped, not neutralised (the
    callers do that after, so `@\u202eroom` is still caught as `@room`)."""
    text = _BIDI_CONTROLS.sub("", _LINE_BREAKS.sub(" ", text))
    return _MARK_FLOOD.sub(r"\1", text)


def safe_plain(text: str) -> str:
    """User text for a line of a reply's plain `body`."""
    return neutralise_mentions(reply_line(text))


def quoted(text: str, limit: int) -> str:
    """User text echoed in an error: at most `limit` characters and unable to ping (the reply
    layer escapes HTML)."""
    return safe_plain(text if len(text) <= limit else text[: limit - 1] + "…")


def safe_html(text: str) -> str:
    """User text for a reply's `formatted_body`: one line, escaped, neutralised, in `<bdi>`
    (a right-to-left name does not pull the reply's own text after it around)."""
    return f"<bdi>{neutralise_mentions(escape(reply_line(text)))}</bdi>"


@dataclass(frozen=True)
class Excerpt:
    """One excerpt in both reply forms; both are already safe to send."""

    plain: str  # match marked **like this**
    html: str  # match marked <mark>like this</mark>


def _term_spans(body: str, texts: Sequence[str]) -> list[tuple[int, int]]:
    """The words of `texts` where `body` says them (`matches.word_spans`: whole words,
    caseless, a `word*` at a word's start), merged where they overlap or only spaces part
    them (`migration plan` is one mark); none inside a scrub marker, which is Muninn's."""
    markers = [m.span() for m in _SCRUB_MARKER.finditer(body)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(word_spans(body, [t for t in texts if t.strip()])):
        if any(a <= start and end <= b for a, b in markers):
            continue
        if merged and (start <= merged[-1][1] or not body[merged[-1][1] : start].strip()):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _window(body: str, focus: tuple[int, int], width: int) -> tuple[int, int]:
    """A `width`-character window around `focus`, edges moved onto spaces where one is near."""
    if len(body) <= width:
        return 0, len(body)
    centre = (focus[0] + focus[1]) // 2
    start = max(0, min(centre - width // 2, len(body) - width))
    end = start + width
    if start > 0:
        space = body.find(" ", start, min(start + _SNAP, focus[0]))
        start = space + 1 if space >= 0 else start
    if end < len(body):
        space = body.rfind(" ", max(end - _SNAP, focus[1]), end)
        end = space if space >= 0 else end
    return start, end


def _render(body: str, marks: Sequence[tuple[int, int]], window: tuple[int, int]) -> Excerpt:
    start, end = window
    plain: list[str] = ["…"] if start > 0 else []
    rich: list[str] = list(plain)
    cursor = start
    for mark_start, mark_end in marks:
        mark_start, mark_end = max(mark_start, start), min(mark_end, end)
        if mark_start >= mark_end:
            continue
        plain += [body[cursor:mark_start], "**", body[mark_start:mark_end], "**"]
        rich += [escape(body[cursor:mark_start]), "<mark>", escape(body[mark_start:mark_end])]
        rich.append("</mark>")
        cursor = mark_end
    plain.append(body[cursor:end])
    rich.append(escape(body[cursor:end]))
    if end < len(body):
        plain.append("…")
        rich.append("…")
    # Cleaning and neutralising the assembled strings also catches an `@` split from its word
    # by a mark; our own markup (`<mark>`, entities, `**`, `…`) holds no `@`, no bidi control
    # and no combining mark, so only user text is touched.
    plain_text = neutralise_mentions(reply_line("".join(plain)))
    return Excerpt(plain_text, f"<bdi>{neutralise_mentions(reply_line(''.join(rich)))}</bdi>")


def excerpt(
    body: str,
    query_terms: Sequence[str],
    width: int = 160,
    *,
    span: tuple[int, int] | None = None,
) -> Excerpt:
    """A short excerpt of `body` around its best match, every match in view marked.

    Args:
        body: the message text as sent.
        query_terms: the query's texts; each word is marked where the body says it
            (whole words, caseless; a `word*` at a word's start), not inside other words.
        width: the excerpt's length in characters before ellipses.
        span: a match already found (e.g. a `/regex/` hit), in `body` coordinates; it is the
            focus and is marked along with the terms.

    The best match is `span` if given, else the longest term occurrence (earliest on ties);
    with no match the excerpt is the start of the body.
    """
    # One line: replacing whitespace one for one keeps `span` valid.
    flat = "".join(" " if ch.isspace() else ch for ch in body)
    marks = _term_spans(flat, query_terms)
    if span is not None and span[0] < span[1]:
        marks = sorted({*marks, span})
        focus = span
    elif marks:
        focus = min(marks, key=lambda s: (s[0] - s[1], s[0]))
    else:
        focus = (0, 0)
    return _render(flat, marks, _window(flat, focus, width))
