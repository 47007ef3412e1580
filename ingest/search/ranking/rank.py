"""The second stage of the read path: features of the fused candidates and a learned ranker. Pure.

Rank fusion keeps only ranks. Over the candidates the first stage found (`ingest.search`: the
top of the dense and lexical lists, fused), this stage looks again at what ranks forget: how
close a window's cosine is to the best one, how large its lexical score is against the best,
how much of the question's content (stemmed, IDF-weighted over the candidates) its best message
holds, alone and against the best candidate's, whether it was sent by someone the question
names, how long it is, whether a "when" question meets a window that says when, and whether it
answers a question: it comes right after
a candidate that holds the question's words and ends on a "?" (the asker's words are in the
question, the answer in the reply: "Got any fave styles?" → "contemporary is my top pick").
A logistic model trained on locomo-dev with numpy (`python -m bench.loco --train`; every lever
scored leaving one conversation out, bench/RESULTS.md) turns them into the order. A second,
two-feature model (cosine and words matched, both absolute) decides whether a window matches at
all: under `FLOOR` it is not shown, so made-up words answer nothing instead of the nearest
noise. Coefficients are versioned here.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Collection, Mapping, Sequence

import regex

from ingest.rules import lexical
from ingest.rules.language import each_reads_as_english, reads_as_english

__all__ = [
    "FEATURES",
    "LENGTH_CAP",
    "MATCH_FEATURES",
    "NEIGHBOUR_GAP_MS",
    "RANKER_VERSION",
    "STOP_WORDS",
    "Span",
    "content_terms",
    "features",
    "names_sender",
    "probability",
    "question_words",
    "share_said",
    "words_said",
]

# Words that carry no topic: question words, auxiliaries, pronouns, determiners, prepositions.
_STOP_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each else
    ever every few for from further get got had has have having he her here hers herself him
    himself his how i if in into is it its itself just kind like likely many may me might more
    most much must my myself no nor not now of off on once one only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they thing things this those through to too type under until
    up us very was way we well were what when where whether which while who whom whose why
    will with would yet you your yours yourself yourselves s t ve ll re d m
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

# dense: cosine; dense_gap: cosine − the list's best; lexical: score / the list's best;
# *_rr: 10 / (10 + rank) in that list (0 if absent; a pair's `dense_rr` is the second model's
# where the first cannot read the question or the window: `language`); best_message: the
# IDF-weighted share of the question's (stemmed) content terms in the window's best message (a
# long one's best `passages` run); speaker:
# the share of its messages sent by someone the question names (by user id); length: the
# window's characters up to `LENGTH_CAP`, log-scaled; time: a "when" question and a window
# that says when;
# after_question: the best_message of the candidate right before it in its timeline, when that
# one ends on a question (0 otherwise); best_message_gap: best_message − the pool's best (as
# dense_gap for the cosine: how much of the words the best candidate holds sets the bar);
# dense2, dense2_gap: dense and dense_gap in the second model's list (a pair embedder, 0 else).
FEATURES = (
    "dense",
    "dense_gap",
    "lexical",
    "dense_rr",
    "lexical_rr",
    "best_message",
    "speaker",
    "length",
    "time",
    "after_question",
    "best_message_gap",
    "dense2",
    "dense2_gap",
)
# 4: dense2 and dense2_gap, the second model's cosine where the embedder is a pair.
# 5: `length` capped at `LENGTH_CAP`; the match model labels close matches instead of cutting.
# 6: a pair's `dense_rr` is e5's rank where the question or the window is not English.
# 7: a window is unread by MiniLM where any one of its messages is not English (issue 47; its
#    best stored line as a feature lost on the folds, bench/RESULTS.md §16).
RANKER_VERSION = 7
# `length` counts a window's characters up to the chunker's window size (`chunker.max_bytes`'s
# default): past it, one long message would outweigh every topic by its length alone (a
# 3,000-character message of many topics' words headed unrelated searches; issue 37). The cap
# costs nothing on the folds and molweni-dev (bench/RESULTS.md §1b, §16).
LENGTH_CAP = 350
# The match model's features (the floor's): all absolute, so made-up words score low.
MATCH_FEATURES = ("dense", "best_message", "dense2")
# Terms match inside the candidates by their first STEM characters, a crude stem ("painting",
# "painted" and "paints" meet in "pain"); the store's lexical index itself stays unstemmed.
# 4 beat 5 and 6 on every fold's MRR (ranker v1: `git show 6579395:bench/RESULTS.md` §1b).
STEM = 4
RR_K = 10  # reciprocal ranks as RRF scores them, k = 10: 10 / (10 + rank)
# Two candidates of one timeline are neighbours when the later starts at most this long after
# the earlier ends: the chunker's default gap (a longer silence is another conversation).
NEIGHBOUR_GAP_MS = 1_800_000
Span = tuple[str, int, int]  # a window's timeline (room and thread), first and last timestamp


# A question about time ("when", "how long") and a message saying when something happened.
_ASKS_WHEN = regex.compile(r"\b(when|how long|what (year|month|day|date|time))\b", regex.I)
_SAYS_WHEN = regex.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|this (week|month|year|weekend)|"
    r"weekend|morning|evening|night|since|(mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"january|february|march|april|may|june|july|august|september|october|november|"
    r"december|week|month|year|years|months|weeks|days|\d{1,2}(st|nd|rd|th)|(19|20)\d\d)\b",
    regex.I,
)


def passages(body: str, size: float = LENGTH_CAP) -> list[str]:
    """A message cut at whitespace into runs of at most `size` characters (one run if it is no
    longer): the question's words count where they stand together, as in a window of the
    chunker's size, not scattered over a 3,000-character message of every topic's words."""
    if len(body) <= size:
        return [body]
    out: list[str] = []
    run: list[str] = []
    length = 0
    for word in body.split():
        if run and length + 1 + len(word) > size:
            out.append(" ".join(run))
            run, length = [], 0
        run.append(word)
        length += len(word) + (1 if length else 0)
    return [*out, " ".join(run)] if run else out


def stemmed(token: str, stem: int | None) -> str:
    """A token as the features match it: a word by its first `stem` characters, a token holding
    a digit whole (an identifier does not inflect: `ORD1048017` and `ORD1048023` are not one
    word, though their first four characters are)."""
    if stem is None or any(c.isdigit() for c in token):
        return token
    return token[:stem]


@functools.lru_cache(maxsize=8192)
def _passage_terms(body: str, stem: int | None, size: float) -> tuple[frozenset[str], ...]:
    """The stemmed tokens of each of a message's `passages`. Remembered: the candidates of one
    question are largely the last one's, and tokenising them again was about half of the second
    stage's time (bench/RESULTS.md §14). Held in this process's memory only, and only ever
    read for a body a candidate holds now."""
    return tuple(
        frozenset(stemmed(t, stem) for t in lexical.tokens(piece))
        for piece in passages(body, size)
    )


def words_said(body: str) -> frozenset[str]:
    """A message's tokens, whole: read from `_passage_terms`, remembered, as the pool's
    bodies recur from question to question."""
    return frozenset[str]().union(*_passage_terms(body, None, LENGTH_CAP))


@functools.lru_cache(maxsize=256)
def _stemmed_terms(text: str, stem: int | None) -> frozenset[str]:
    return frozenset(stemmed(t, stem) for t in content_terms(text))


def share_said(text: str, body: str, stem: int | None = STEM) -> float:
    """The share of `text`'s content terms (stemmed as the features match them) that `body`
    holds; 0 for a text of stop words only."""
    terms = _stemmed_terms(text, stem)
    if not terms:
        return 0.0
    said = frozenset[str]().union(*_passage_terms(body, stem, LENGTH_CAP))
    return len(terms & said) / len(terms)


def content_terms(text: str) -> list[str]:
    """The query's lexical tokens minus stop words, de-duplicated, in order."""
    return [t for t in dict.fromkeys(lexical.tokens(text)) if t not in STOP_WORDS]


@functools.lru_cache(maxsize=4096)
def sender_names(user_id: str) -> frozenset[str]:
    """The words of a Matrix user id's localpart a question may name them by ("@ann-lee:x" →
    ann, lee): letters only, three or more, no stop word."""
    local = user_id.removeprefix("@").split(":", 1)[0]
    return frozenset(
        t
        for t in lexical.tokens(regex.sub(r"[-_.=/]", " ", local))
        if t.isalpha() and len(t) >= 3 and t not in STOP_WORDS
    )


@functools.lru_cache(maxsize=256)
def question_words(text: str) -> tuple[str, ...]:
    """The words a question is read by: its `content_terms`, else (a text of stop words only)
    every token, de-duplicated, in order. The features, the names and `judgment.says_a_word`
    read a question alike."""
    return tuple(content_terms(text) or dict.fromkeys(lexical.tokens(text)))


@functools.lru_cache(maxsize=256)
def _asked_words(text: str) -> frozenset[str]:
    return frozenset(question_words(text))


def names_sender(text: str, user_id: str) -> bool:
    """Whether `text` names the sender `user_id` (a word of it is one of `sender_names`): the
    ranker's `speaker` feature and the quote (`ingest.search.quotes`) read a question alike."""
    return bool(sender_names(user_id) & _asked_words(text))


def features(
    text: str,
    pool: Sequence[str],
    bodies: Mapping[str, Sequence[str]],
    dense: Sequence[tuple[str, float]],
    lexical_found: Sequence[tuple[str, float]],
    senders: Mapping[str, Sequence[str]] | None = None,
    stem: int | None = STEM,
    spans: Mapping[str, Span] | None = None,
    dense2: Sequence[tuple[str, float]] = (),
    length_cap: float = LENGTH_CAP,
    english_only: bool = True,
) -> list[list[float]]:
    """One row of `FEATURES` per id of `pool`, for one query text.

    `bodies`, `senders` and `spans` give each pool window's message texts, senders and time
    span; `dense` and `lexical_found` are that text's lists, (id, score) best first. A window
    absent from the dense list scores its last entry (the most it could have); absent from the
    lexical list, 0. `stem=None` matches whole tokens; without `spans`, no window follows another.
    `dense2` is the second model's list of a pair embedder (empty: its features are 0).
    `length_cap`: `LENGTH_CAP` (a benchmark's replay of ranker v4 lifts it). `english_only`:
    the first model of a pair reads English only (False: ranker v5, its rank read everywhere).
    """
    words = question_words(text)
    asks_when = bool(_ASKS_WHEN.search(text))
    # The share of a window's messages sent by someone the question names.
    named = {pid: [names_sender(text, u) for u in (senders or {}).get(pid, ())] for pid in pool}
    terms = list(dict.fromkeys(stemmed(t, stem) for t in words))
    msg_tokens = {
        pid: [piece for b in bodies[pid] for piece in _passage_terms(b, stem, length_cap)]
        for pid in pool
    }
    win_tokens = {pid: set().union(*msgs) for pid, msgs in msg_tokens.items()}
    # IDF over the pool: a term every candidate shares says little about which one is meant.
    n = max(len(pool), 1)
    idf = {t: math.log(1.0 + n / (1 + sum(t in win_tokens[p] for p in pool))) for t in terms}
    total = sum(idf.values()) or 1.0
    d_rank = {pid: (r, s) for r, (pid, s) in enumerate(dense, start=1)}
    l_rank = {pid: (r, s) for r, (pid, s) in enumerate(lexical_found, start=1)}
    d_top = dense[0][1] if dense else 0.0
    d_last = dense[-1][1] if dense else 0.0
    second = dict(dense2)
    d2_top = dense2[0][1] if dense2 else 0.0
    d2_last = dense2[-1][1] if dense2 else 0.0
    # A pair's first model (MiniLM) reads English only: where the question or a window is in
    # another language its rank is noise, and the second model's (e5's) stands in (`language`).
    d2_rank = {pid: r for r, (pid, _) in enumerate(dense2, start=1)}
    unread: Collection[str] = ()
    if dense2 and english_only:
        english_query = reads_as_english(text)
        unread = {p for p in pool if not (english_query and each_reads_as_english(bodies[p]))}
    l_top = lexical_found[0][1] if lexical_found else 0.0
    best = {
        pid: max(
            (sum(idf[t] for t in terms if t in toks) / total for toks in msg_tokens[pid]),
            default=0.0,
        )
        for pid in pool
    }
    best_top = max(best.values(), default=0.0)
    before = previous(pool, spans or {})
    rows: list[list[float]] = []
    for pid in pool:
        d_r, d_s = d_rank.get(pid, (0, d_last))
        if pid in unread:
            d_r = d2_rank.get(pid, 0)
        l_r, l_s = l_rank.get(pid, (0, 0.0))
        d2_s = second.get(pid, d2_last)
        prev = before.get(pid)
        asked = prev is not None and bool(bodies[prev]) and "?" in bodies[prev][-1]
        rows.append(
            [
                d_s,
                d_s - d_top,
                l_s / l_top if l_top > 0 else 0.0,
                RR_K / (RR_K + d_r) if d_r else 0.0,
                RR_K / (RR_K + l_r) if l_r else 0.0,
                best[pid],
                sum(named[pid]) / len(named[pid]) if named[pid] else 0.0,
                math.log1p(min(sum(len(b) for b in bodies[pid]), length_cap) / 100.0),
                float(asks_when and any(_SAYS_WHEN.search(b) for b in bodies[pid])),
                best[prev] if asked and prev is not None else 0.0,
                best[pid] - best_top,
                d2_s,
                d2_s - d2_top,
            ]
        )
    return rows


def previous(pool: Sequence[str], spans: Mapping[str, Span]) -> dict[str, str]:
    """Each candidate's nearest predecessor among the others: the one of its timeline ending
    last at or before it starts, within `NEIGHBOUR_GAP_MS`; candidates without one are left out."""
    by_line: dict[str, list[tuple[int, int, str]]] = {}
    for pid in pool:
        if pid in spans:
            line, first, last = spans[pid]
            by_line.setdefault(line, []).append((last, first, pid))
    out: dict[str, str] = {}
    for windows in by_line.values():
        ends = sorted(windows)
        for _last, first, pid in windows:
            # The latest end at or before `first`, skipping the window itself.
            i = bisect.bisect_right(ends, (first, math.inf, "")) - 1
            while i >= 0 and ends[i][2] == pid:
                i -= 1
            if i >= 0 and first - ends[i][0] <= NEIGHBOUR_GAP_MS:
                out[pid] = ends[i][2]
    return out


def probability(row: Sequence[float], coefficients: Mapping[str, float]) -> float:
    """A model's probability that the window of `row` holds what the text asks for (a feature
    the model does not name weighs 0)."""
    z = coefficients["bias"] + sum(
        coefficients.get(f, 0.0) * x for f, x in zip(FEATURES, row, strict=True)
    )
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
