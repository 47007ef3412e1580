"""`ingest.search.matches`: a result is a message (docs/ARCHITECTURE.md §3 rule 22b).

The read path ranks windows (context finds meaning); a person reads messages. Each hit says
which of its messages matched (`Hit.matched`), best first:
- by the query's words: a message holding every content word of one of the texts (a `word*`
  as a word start), the transcript's finds and a `/regex/`'s too;
- by meaning, where no message of the window holds the words: the one message whose line,
  stored by the writer from the window's one pass, is nearest the question
  (`ingest.search.quotes`, chosen as the hit is built: no model runs at query time).
A page is then a list of matching messages (`expand`), numbered and paged one message at a time:
relevance keeps the windows' rank and each window's matches in turn; `sort:recent` lists every
message matching by words newest first, across the whole pool.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from ingest.rules import lexical
from ingest.search.hits import CitedMessage, Hit, SearchResult
from ingest.search.permalink import permalink
from ingest.search.query import plain_text, prefixes
from ingest.search.ranking.rank import content_terms

T = TypeVar("T")

__all__ = [
    "Result",
    "Terms",
    "expand",
    "in_order",
    "literal_matches",
    "newest_first",
    "page_hits",
    "person_page",
    "with_matched",
    "word_spans",
]


@dataclass(frozen=True)
class Terms:
    """What a message must hold to match one text by its words."""

    words: frozenset[str]  # every one of them, as a token
    stems: tuple[str, ...]  # and a token starting with each (`word*`)

    @classmethod
    def of(cls, text: str) -> Terms:
        plain = plain_text(text)
        stems = tuple(lexical.tokens(" ".join(prefixes(text))))
        words = [t for t in content_terms(plain) or lexical.tokens(plain) if t not in stems]
        return cls(frozenset(words), stems)

    def held_by(self, said: Sequence[str]) -> bool:
        if not self.words and not self.stems:
            return False
        have = set(said)
        return self.words <= have and all(any(t.startswith(s) for t in said) for s in self.stems)


def word_spans(body: str, texts: Sequence[str]) -> list[tuple[int, int]]:
    """Where `body` says the words of `texts` as a match reads them (`Terms`): each word a
    whole token, caseless, and each `word*` a token starting with it; what a reply marks
    (never "**the**m" for `the`). In `body`'s own coordinates, in order, overlaps kept."""
    terms = [Terms.of(t) for t in texts]
    words = frozenset().union(*(t.words for t in terms))
    stems = tuple(s for t in terms for s in t.stems)
    return [
        (start, end)
        for start, end, token in lexical.token_spans(body)
        if token in words or (stems and token.startswith(stems))
    ]


def literal_matches(messages: Sequence[CitedMessage], texts: Sequence[str]) -> tuple[str, ...]:
    """The messages holding the words of some text, the most query words first (then in
    timeline order)."""
    terms = [Terms.of(t) for t in texts]
    every = {w for t in terms for w in t.words}
    found: list[tuple[int, int, str]] = []
    for i, m in enumerate(messages):
        said = lexical.tokens(str(m["body"]))
        if any(t.held_by(said) for t in terms):
            found.append((-len(every.intersection(said)), i, str(m["event_id"])))
    return tuple(e for *_, e in sorted(found))


def with_matched(hit: Hit, matched: Sequence[str], server_name: str) -> Hit:
    """The hit citing `matched` (best first; empty: a match by meaning not yet chosen)."""
    best = matched[0] if matched else hit.best_event_id
    return replace(
        hit,
        matched=tuple(matched),
        best_event_id=best,
        permalink=permalink(hit.room_id, best, server_name),
    )


def newest_first(hits: Sequence[Hit]) -> list[Hit]:
    """Hits by their newest matching message, newest first (`sort:recent` of windows)."""

    def newest(hit: Hit) -> int:
        ids = set(hit.matched or (hit.best_event_id,))
        return max((int(m["ts"]) for m in hit.messages if m["event_id"] in ids), default=0)

    return sorted(hits, key=lambda h: (-newest(h), h.first_event_id))


Result = tuple[Hit, CitedMessage]  # a matching message and the window it is read in


def _message(hit: Hit, event_id: str) -> CitedMessage | None:
    return next((m for m in hit.messages if m["event_id"] == event_id), None)


def expand(hits: Sequence[Hit], sort: str = "relevance") -> list[Result]:
    """The hits as the list of messages they matched: in rank order, each window's matches in
    turn; with `recent`, newest first. A window matched by meaning gives its chosen message
    (its best: `ingest.search.quotes` picks it)."""
    out: list[Result] = []
    for hit in hits:
        for event_id in hit.matched or (hit.best_event_id,):
            if (m := _message(hit, event_id)) is not None:
                out.append((hit, m))
    if sort == "recent":
        out.sort(key=lambda r: (-int(r[1]["ts"]), str(r[1]["event_id"])))
    return out


def person_page(
    items: Sequence[T], limit: int, close: Callable[[T], bool]
) -> tuple[list[T], bool]:
    """A person's page of `items` (hits or listed messages, the close matches first, then the
    weaker ones: `judgment.Judgment.leading`): the first `limit`, stopping where the close
    matches end, so no page passes a weaker match off among close ones (rule 22c). Returns
    the page and whether it is of weaker matches (it starts with one)."""
    page = list(items[:limit])
    weaker = bool(page) and not close(page[0])
    if not weaker:
        page = list(itertools.takewhile(close, page))
    return page, weaker


def in_order(result: SearchResult) -> list[Result]:
    """A result's messages in the order a person reads them: `result.matched` (its page's
    order), else each hit's matches in turn."""
    if not result.matched:
        return expand(result.hits)
    by_id = {str(m["event_id"]): (h, m) for h in result.hits for m in h.messages}
    return [by_id[e] for e in result.matched if e in by_id]


def page_hits(results: Sequence[Result], server_name: str) -> list[Hit]:
    """The windows of a page of messages, in the order their first message is listed, each
    with `matched` the page's messages in it (the JSON's `matched_event_ids`)."""
    order: dict[str, Hit] = {}
    matched: dict[str, list[str]] = {}
    for hit, m in results:
        key = hit.point_id or hit.first_event_id
        order.setdefault(key, hit)
        matched.setdefault(key, []).append(str(m["event_id"]))
    return [with_matched(h, matched[k], server_name) for k, h in order.items()]
