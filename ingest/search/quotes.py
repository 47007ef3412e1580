"""`ingest.search.quotes`: which message a window matched by meaning quotes (rule 22b).

The writer stored each message's line vector, pooled from the window's one pass of the model
(late chunking, `ingest.embed.linecodec`): the line read in its window's context. The message
quoted is the one whose line is nearest a question's vector, compared here with no model run
(a page's messages embedded at query time were 70 % of a burst's model time, RESULTS §15).
Which model's judgment counts follows the messages' language (rule 22e at the message level):
where a message of the window, or the question, does not read as English, a pair's lines are
compared by e5's half alone (each such window's lines embedded alone by e5: its late-chunked
lines do not tell one line from another), as MiniLM reads other languages as noise.

The line read in context leans on its neighbours: in a crowd's window the line nearest a
question is often the one beside the message holding some of its words. So a line's place
between the window's farthest (0) and nearest (1) line counts beside the share of the
question's words its message holds (`WORDS_WEIGHT`): on molweni-dev the quote is right 0.612 →
0.634 (fitted on locomo-dev alone, which it leaves as it was held out; bench/RESULTS.md §15).

A line asking the person's question again (a question holding more than half its words) is not
its answer: the reply right after it, another sender's, is quoted (`answer_after`). A question
naming some of the window's senders ("what did Caroline research?") asks about their words: the
quote is one of their messages (locomo-dev 0.732 → 0.884, molweni-dev 0.635 → 0.668).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ingest.embed.linecodec import decode_line
from ingest.rules.language import each_reads_as_english, reads_as_english
from ingest.search.hits import CitedMessage, best_message
from ingest.search.matches import literal_matches
from ingest.search.ranking.rank import names_sender, share_said

__all__ = [
    "ASKED_AGAIN",
    "WORDS_WEIGHT",
    "answer_after",
    "best_of",
    "named",
    "nearest_line",
    "second_by_lines",
]

# What the share of the question's words a message holds weighs beside its line's place
# between the window's farthest and nearest line (both 0..1): the middle of locomo-dev's best
# (0.25-0.5, held out; 1.0 loses a window there), RESULTS §15.
WORDS_WEIGHT = 0.5

# A question line holding more than this share of the person's question's words asks it
# again. "More than half" is what asking the same thing means; held out on locomo-dev it is
# the fit among the shares above a half (lower shares win there and lose molweni-dev: a crowd's
# questions often hold the answer, "have you tried gparted?"), RESULTS §15.
ASKED_AGAIN = 0.5
_QUESTION_MARKS = ("?", "？", "؟")  # Latin, full-width (CJK), Arabic


def best_of(
    messages: Sequence[CitedMessage],
    lines: object,
    texts: Sequence[str],
    queries: Sequence[Sequence[float]] | None,
    *,
    pair: bool = False,
) -> tuple[tuple[str, ...], str]:
    """The messages of a window holding the query's words (best first) and its best message,
    the one owner of it for every view (chat, the command room, the CLI, JSON, MCP): the
    first holding the words, else the one whose stored line is nearest the question
    (`nearest_line`; the reply after it where it asks the question again, `answer_after`),
    else the one sharing most of the question's words."""
    matched = literal_matches(messages, texts)
    if matched:
        return matched, matched[0]
    nearest = nearest_line(messages, lines, queries, texts, pair=pair)
    if nearest is None:
        return (), best_message(messages, texts)
    return (), answer_after(messages, nearest, texts)


def answer_after(messages: Sequence[CitedMessage], chosen: str, texts: Sequence[str]) -> str:
    """`chosen`, or the message right after it where `chosen` asks the person's question again
    (it ends in a question mark and holds more than `ASKED_AGAIN` of its words) and the next
    message is another sender's: "has anyone seen the storage cupboard key?" is not where the
    key is, "blue envelope on the fridge door" is. Not where the question names its sender (it
    asks what they said), and only for a match by meaning: a message holding every word is
    what `from:`, `sort:recent`, `word*` and the highlight select."""
    at = next((i for i, m in enumerate(messages) if m["event_id"] == chosen), None)
    if at is None or at + 1 >= len(messages):
        return chosen
    asking, after = messages[at], messages[at + 1]
    body = str(asking["body"])
    if not body.rstrip().endswith(_QUESTION_MARKS) or after["sender"] == asking["sender"]:
        return chosen
    if named(messages, texts)[at]:
        return chosen  # the question asks what this sender said
    if max((share_said(t, body) for t in texts), default=0.0) <= ASKED_AGAIN:
        return chosen
    return str(after["event_id"])


def nearest_line(
    messages: Sequence[CitedMessage],
    lines: object,
    queries: Sequence[Sequence[float]] | None,
    texts: Sequence[str] = (),
    *,
    pair: bool = False,
) -> str | None:
    """The event id of the message whose stored line is nearest one of `queries` (the
    question's vectors), its place among the window's lines weighed with the share of the
    question's words it holds (`WORDS_WEIGHT`), among the messages of the senders the question
    names where it names some of them (`named`); None: no vectors, or a message without its
    line (a window the writer stored before lines, or one message long)."""
    scores = line_cosines(messages, lines, queries, texts, pair=pair)
    if scores is None:
        return None
    low, high = float(scores.min()), float(scores.max())
    place = (scores - low) / (high - low) if high > low else np.zeros_like(scores)
    said = [max((share_said(t, str(m["body"])) for t in texts), default=0.0) for m in messages]
    score = place + WORDS_WEIGHT * np.asarray(said)
    theirs = named(messages, texts)
    if any(theirs):
        score = np.where(theirs, score, -np.inf)
    return str(messages[int(np.argmax(score))]["event_id"])


def named(messages: Sequence[CitedMessage], texts: Sequence[str]) -> list[bool]:
    """Which messages are by a sender the question names, where it names some of the
    window's senders but not all (naming every one of them tells none apart): "what did
    Caroline research?" asks about Caroline's words, as `from:` would (held out on locomo-dev,
    250 of 284 quotes right against 208; molweni-dev 0.635 → 0.668, RESULTS §15)."""
    said = [any(names_sender(t, str(m["sender"])) for t in texts) for m in messages]
    return said if any(said) and not all(said) else [False] * len(messages)


def line_cosines(
    messages: Sequence[CitedMessage],
    lines: object,
    queries: Sequence[Sequence[float]] | None,
    texts: Sequence[str] = (),
    *,
    pair: bool = False,
) -> np.ndarray | None:
    """Each message's stored line's cosine with the nearest of `queries`, by the model whose
    judgment counts (rule 22e), or None where the lines cannot judge (see `nearest_line`)."""
    if not queries or not isinstance(lines, Mapping) or len(messages) < 2:
        return None
    vectors = []
    for m in messages:
        code = lines.get(str(m["event_id"]))
        vector = decode_line(code) if isinstance(code, str) else None
        if vector is None:
            return None
        vectors.append(vector)
    if len({len(v) for v in vectors}) != 1:
        return None  # halves and wholes: not one window's lines
    stored = np.stack(vectors)
    asked = np.asarray(queries, dtype=np.float32)
    if pair and stored.shape[1] * 2 == asked.shape[1]:
        # An English window of a pair stores its lines' first (MiniLM) half alone.
        if not reads_as_english(*texts):
            return None  # a question MiniLM cannot read: the words choose
        asked = asked[:, : stored.shape[1]]
    elif stored.shape[1] != asked.shape[1]:
        return None  # a generation's lines of another embedder: no judgment
    elif pair and not (
        each_reads_as_english(str(m["body"]) for m in messages) and reads_as_english(*texts)
    ):
        half = stored.shape[1] // 2
        stored, asked = stored[:, half:], asked[:, half:]  # e5's half alone
    return np.asarray((stored @ asked.T).max(axis=1))


def second_by_lines(
    found: Sequence[tuple[str, float]],
    windows: Mapping[str, tuple[Sequence[str], object]],
    query: Sequence[float] | None,
    text: str,
) -> list[tuple[str, float]]:
    """A pair's second (e5) list with each candidate window one of whose messages does not
    read as English scored by its best line, where that is higher than the window's own: e5's
    vector of each such line alone, which the writer stored (rule 22e by message). Five
    people's English lines otherwise dilute one German line's meaning in the window's vector,
    and only e5 reads it. `windows`: a candidate's message bodies and its payload's `lines`.
    Unchanged for an English question about English windows (MiniLM's to judge)."""
    if query is None or not found:
        return list(found)
    asked = np.asarray(query, dtype=np.float32)
    half = len(asked) // 2
    q = asked[half:] / max(float(np.linalg.norm(asked[half:])), 1e-12)
    score = dict(found)
    # A candidate past the list scores its last entry, as `ranking.rank` reads it.
    floor = found[-1][1]
    for pid, (bodies, lines) in windows.items():
        if each_reads_as_english(bodies) or not isinstance(lines, Mapping):
            continue
        stored = [decode_line(c) for c in lines.values() if isinstance(c, str)]
        halves = [v[half:] for v in stored if v is not None and len(v) == len(asked)]
        if halves:  # a part's dot is its cosine over sqrt(2) (`pair.joined`)
            best = float((np.stack(halves) @ q).max()) * math.sqrt(2.0)
            score[pid] = max(score.get(pid, floor), best)
    return sorted(score.items(), key=lambda item: -item[1])
