"""`ingest.search.ranking.judgment`: the second stage's answer over the ranker's features (`rank`):
the candidates in the ranker's order, which match closely, and what hostile or made-up input
cannot make of it (issues 32, 37 and 46): nonsense answers nothing, made-up words sharing
only a stem with a real one are no close match, a window without the identifier asked for is
no close match, and a message pasting the same topics again and again leads no list. Pure.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ingest.rules import lexical
from ingest.search.ranking.models import COEFFICIENTS, FLOOR, MATCH_COEFFICIENTS
from ingest.search.ranking.rank import (
    FEATURES,
    LENGTH_CAP,
    Span,
    features,
    probability,
    question_words,
    words_said,
)

__all__ = [
    "STUFFED_CHARS",
    "STUFFED_REPEAT",
    "Found",
    "Judgment",
    "behind_the_worded",
    "holds_all",
    "identifiers",
    "repetitive",
    "rerank",
    "says_a_word",
    "stems_unmatched",
]

Found = Sequence[tuple[str, float]]  # one retriever's answer to one text: (id, score), best first


@dataclass(frozen=True)
class Judgment:
    """The second stage's answer: every candidate in the ranker's order, which of them match
    closely, and how many were left out because the query is nonsense (nothing then)."""

    ranked: list[tuple[str, float]]
    close: frozenset[str]
    refused: int = 0

    def shown(self) -> list[tuple[str, float]]:
        """What a time-ordered list holds: the close matches in order; when none is close,
        every candidate (the reply says they are only the nearest)."""
        return [item for item in self.ranked if item[0] in self.close] or self.ranked

    def leading(self) -> frozenset[str]:
        """The close matches a list in the ranker's order leads with: those before its first
        weaker candidate. One the match model calls close but the ranker puts behind a weaker
        one is weaker too, so a person's pages keep the ranker's order and still never hold
        both (`matches.person_page`): moving such matches to the front cost molweni-dev 0.004
        of R@2000 and 0.007 of MRR, below its own RRF, and the folds nothing
        (bench/RESULTS.md §15)."""
        return frozenset(itertools.takewhile(self.close.__contains__, (p for p, _ in self.ranked)))


def rerank(
    pool: Sequence[str],
    bodies: Mapping[str, Sequence[str]],
    per_text: Mapping[str, tuple[Found, Found, Found]],
    senders: Mapping[str, Sequence[str]] | None = None,
    *,
    spans: Mapping[str, Span] | None = None,
    coefficients: Mapping[str, float] = COEFFICIENTS,
    match: Mapping[str, float] = MATCH_COEFFICIENTS,
    floor: float = FLOOR,
    wordless_floor: float | None = None,
    made_up: Collection[str] | None = None,
    ranked_floor: bool = False,
) -> Judgment:
    """The pool ordered by the ranker's probability, best first (ties keep the pool's fused
    order), each window judged close or not by the `match` model; nothing when every text of
    the query is nonsense.

    `per_text` maps each query text to its (dense, lexical, dense2) lists (dense2: the second
    model's of a pair embedder, else empty). A window answers the query as well as it answers
    its best text, and matches closely when its match probability reaches the text's bar:
    `floor`, or `wordless_floor` (None: `floor`) for a text no candidate shares a word with.

    The bar labels, it does not cut (issue 32): a floor fitted on one kind of conversation cut
    a twelfth of the answers of another (molweni-dev, bench/RESULTS.md §1b), while what the
    ranker puts first held them. A wordless text is nonsense when it is in `made_up` (near the
    embedder's made-up words, `RankModel.made_up`) or, for an embedder without that direction
    (`made_up` None), when no candidate reaches its bar: only such a query answers nothing.
    With `ranked_floor`, a close window's ranker probability reaches the bar too: a hit
    listed near zero is never labelled close (`RankModel.ranked_floor`).
    """
    best = dict.fromkeys(pool, 0.0)
    worded: set[str] = set()  # holding some of a text's content words (`best_message` > 0)
    close: set[str] = set()
    nonsense = bool(per_text)
    for text, (dense, lexical_found, dense2) in per_text.items():
        rows = features(
            text, pool, bodies, dense, lexical_found, senders, spans=spans, dense2=dense2
        )
        named = identifiers(text)
        # Wordless: no candidate holds a word of the text whole. A word sharing only its first
        # letters with one (`STEM`: "bandorific" and "bandsaw") is no sign the text is real,
        # and made-up words were labelled close that way (issue 46).
        wordless = not any(row[FEATURES.index("best_message")] > 0 for row in rows) or not (
            says_a_word(text, [bodies[pid] for pid in pool])
        )
        bar = floor if not wordless or wordless_floor is None else wordless_floor
        matched = False
        for pid, row in zip(pool, rows, strict=True):
            score = probability(row, coefficients)
            best[pid] = max(best[pid], score)
            if row[FEATURES.index("best_message")] > 0:
                worded.add(pid)
            # A wordless text's stem matches are no words matched for the close label either.
            judged = stems_unmatched(row) if wordless else row
            if (
                probability(judged, match) >= bar
                and (not ranked_floor or score >= bar)
                and holds_all(bodies[pid], named)
            ):
                close.add(pid)
                matched = True
        if made_up is None:
            nonsense = nonsense and wordless and not matched
        else:
            nonsense = nonsense and wordless and text in made_up
    if nonsense:
        return Judgment([], frozenset(), refused=len(pool))
    ranked = sorted(((pid, best[pid]) for pid in pool), key=lambda item: -item[1])
    stuffed = {pid for pid in pool if any(map(repetitive, bodies[pid]))}
    return Judgment(behind_the_worded(ranked, stuffed, worded), frozenset(close - stuffed))


def says_a_word(text: str, windows: Sequence[Sequence[str]]) -> bool:
    """Whether some window's messages hold a content word of `text` whole, not only its first
    `STEM` letters ("bandorific" meets "bandsaw" there: no sign the text is real)."""
    words = set(question_words(text))
    return any(not words.isdisjoint(words_said(b)) for bodies in windows for b in bodies)


def stems_unmatched(row: Sequence[float]) -> list[float]:
    """`row` with no word matched (`best_message` 0): how the close label reads a text no
    window holds a word of whole (issue 46: made-up words labelled close by stems alone)."""
    return [0.0 if f == "best_message" else x for f, x in zip(FEATURES, row, strict=True)]


def identifiers(text: str) -> frozenset[str]:
    """The tokens of `text` holding a digit, four characters or more: an order number, an
    error code, a PIN. A window that holds none of them is no close match, however near its
    look-alikes are in meaning (`ORD1048088` for `ORD1048068`, issue 46)."""
    return frozenset(t for t in lexical.tokens(text) if len(t) >= 4 and any(map(str.isdigit, t)))


def holds_all(bodies: Sequence[str], named: Collection[str]) -> bool:
    """Whether the window's messages hold every one of the `identifiers` asked for."""
    if not named:
        return True
    said = frozenset[str]().union(*map(words_said, bodies))
    return all(t in said for t in named)


def behind_the_worded(
    ranked: Sequence[tuple[str, float]], stuffed: Collection[str], worded: Collection[str]
) -> list[tuple[str, float]]:
    """`ranked` with the `stuffed` windows moved behind the last other window holding some of
    the query's words: stuffing leads no list of the topics it pastes, and is never a close
    match, but a query only it answers (its own link) still finds it where the ranker put it
    (issue 46)."""
    if not stuffed:
        return list(ranked)
    others = [item for item in ranked if item[0] not in stuffed]
    last = max((i for i, (pid, _) in enumerate(others) if pid in worded), default=-1)
    pasted = [item for item in ranked if item[0] in stuffed]
    return [*others[: last + 1], *pasted, *others[last + 1 :]]


# A message this long whose words repeat this many times over on average is stuffing: the
# same topics' sentences pasted again and again to head their searches (issue 46: ten topics
# twelve times over, 3,000 characters). None of the 210,035 messages of locomo-dev, molweni-dev
# and the IRC logs is (bench/RESULTS.md §15).
STUFFED_CHARS = 2 * LENGTH_CAP
STUFFED_REPEAT = 3.0


@functools.lru_cache(maxsize=4096)
def repetitive(body: str) -> bool:
    """Whether `body` is long and says its words `STUFFED_REPEAT` times over on average."""
    if len(body) < STUFFED_CHARS:
        return False
    tokens = lexical.tokens(body)
    return len(tokens) >= STUFFED_REPEAT * max(len(set(tokens)), 1)
