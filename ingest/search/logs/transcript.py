"""`ingest.search.logs.transcript`: the transcript fold, a bounded scan of a room's latest raw
messages,
ranked in integers (§6).

It sees what the index has not caught up with yet, and is the fallback when the store is down.
Scores are a tier (Exact 1000, Prefix 800, WordPrefix 600, Substring 400, Subsequence 200) plus a
density term in [0, 100]; tiers are 200 apart, so density orders hits within a tier and never
lifts one across. Several texts (`a | b`) score by the best text: the texts are alternatives, and
the best tier keeps that guarantee, where fusing them by rank would let a Substring hit on two
texts outrank an Exact hit on one. A search of operators alone (no text, no /regex/:
`!search from:@bob`) matches every message the filters keep, tier Any (0): the latest first.
(Fusion with the index happens one level up, by RRF, in
`ingest.search.logs.roomlogs`.) Pure: the bot compiles a user's /regex/ within its bounds
(`bot.chat.commands.patterns`) and turns a timeout into its refusal (`refused_timeouts` there).
"""

from __future__ import annotations

import enum
import itertools
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import regex
from mautrix.types import MessageType

from ingest.errors import MuninnError
from ingest.rules.lexical import caseless
from ingest.search.logs.memo import TextMemo
from ingest.search.query import plain_text, prefixes

__all__ = [
    "DEFAULT_BOUND",
    "DENSITY_MAX",
    "FoldTimeout",
    "Match",
    "TextEvent",
    "Tier",
    "TranscriptHit",
    "TranscriptQuery",
    "TranscriptResult",
    "fold",
    "fold_search",
    "fold_text",
    "match_literal",
    "match_regex",
]

DEFAULT_BOUND = 2048
DEFAULT_TIMEOUT_S = 0.5  # the whole scan's regex budget, not per message
DENSITY_MAX = 100
_MAX_REGEX_MATCHES = 64  # matches examined per body when looking for the best tier


class Tier(enum.IntEnum):
    EXACT = 1000
    PREFIX = 800
    WORD_PREFIX = 600
    SUBSTRING = 400
    SUBSEQUENCE = 200
    ANY = 0  # no text and no /regex/ asked: every message, the latest first


class FoldTimeout(MuninnError):
    """A /regex/ that ran out of its time budget (the bot refuses it: `PatternTimeout`)."""


_TOO_LONG = "the /regex/ took too long; try a simpler pattern"


class TextEvent(Protocol):
    """What the fold reads of a message; `ingest.types.Message` fits."""

    @property
    def event_id(self) -> str: ...
    @property
    def sender(self) -> str: ...
    @property
    def ts(self) -> int: ...
    @property
    def body(self) -> str: ...
    @property
    def msgtype(self) -> str: ...


class TranscriptQuery(Protocol):
    """What `fold_search` reads of a search (`bot.chat.commands.records.SearchCommand` fits)."""

    @property
    def texts(self) -> tuple[str, ...]: ...
    @property
    def sender(self) -> str | None: ...
    @property
    def after_ms(self) -> int | None: ...
    @property
    def before_ms(self) -> int | None: ...
    @property
    def limit(self) -> int: ...


@dataclass(frozen=True)
class Match:
    tier: Tier
    density: int  # 0..DENSITY_MAX
    span: tuple[int, int] | None = None  # in the original body; regex matches only

    @property
    def score(self) -> int:
        return int(self.tier) + self.density


@dataclass(frozen=True)
class TranscriptHit:
    event_id: str
    sender: str
    ts: int
    body: str
    score: int
    tier: Tier
    text: str | None  # the query text that matched best; None for a /regex/ hit
    span: tuple[int, int] | None  # the /regex/ match in `body`, for excerpts
    msgtype: str = MessageType.TEXT.value  # the message's: `has:image` and a reply read it


@dataclass(frozen=True)
class TranscriptResult:
    hits: tuple[TranscriptHit, ...]
    scanned: int
    bound: int
    bound_reached: bool  # success: the reply says how far it looked
    oldest_ts: int | None  # the oldest message scanned, for "looked back to …"


def fold_text(text: str) -> str:
    """Caseless comparison form: NFKC case folding, whitespace runs collapsed."""
    return " ".join(unicodedata.normalize("NFKC", caseless(text)).split())


# A burst of commands in one room folds the same bodies again and again.
_folded = TextMemo(fold_text, 16_000_000)


def _is_word_start(text: str, index: int) -> bool:
    return index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")


def _density(matched: int, length: int) -> int:
    return min(DENSITY_MAX, DENSITY_MAX * matched // max(length, 1))


def _subsequence_window(body: str, query: str) -> int | None:
    """Length of a tight window holding `query` as a subsequence of `body`, if it is one.

    Forward to the earliest end, then backward from it to the latest start: not always the
    global minimum, but linear, and scattered matches still get long windows.
    """
    end = -1
    for ch in query:
        end = body.find(ch, end + 1)
        if end < 0:
            return None
    start = end + 1
    for ch in reversed(query):
        start = body.rfind(ch, 0, start)
    return end - start + 1


def match_literal(body: str, query: str) -> Match | None:
    """Tier and density of a query in a body, both already in `fold_text` form."""
    if not query or not body:
        return None
    # Found or not first: most of a room's bodies hold no query, and a burst folds them all.
    index = body.find(query)
    if index < 0:
        window = _subsequence_window(body, query)
        if window is None:
            return None
        # Density over the window, not the body: compactness is what makes a scattered match
        # worth anything.
        return Match(Tier.SUBSEQUENCE, _density(len(query), window))
    if body == query:
        return Match(Tier.EXACT, DENSITY_MAX)
    density = _density(len(query), len(body))
    if index == 0:
        return Match(Tier.PREFIX, density)
    while index >= 0:
        if _is_word_start(body, index):
            return Match(Tier.WORD_PREFIX, density)
        index = body.find(query, index + 1)
    return Match(Tier.SUBSTRING, density)


def _span_tier(body: str, start: int, end: int) -> Tier:
    if start == 0 and end == len(body):
        return Tier.EXACT
    if start == 0:
        return Tier.PREFIX
    return Tier.WORD_PREFIX if _is_word_start(body, start) else Tier.SUBSTRING


def match_regex(body: str, pattern: regex.Pattern[str], *, timeout: float) -> Match | None:
    """The best-tier non-empty match of `pattern` in `body`, read onto the literal tiers.

    Raises:
        FoldTimeout: matching this body took longer than `timeout` seconds.
    """
    best: Match | None = None
    try:
        matches = pattern.finditer(body, timeout=timeout)
        for found in itertools.islice(matches, _MAX_REGEX_MATCHES):
            start, end = found.span()
            if start == end:
                continue  # an empty match says nothing about the message
            tier = _span_tier(body, start, end)
            candidate = Match(tier, _density(end - start, len(body)), (start, end))
            if best is None or candidate.score > best.score:
                best = candidate
            if tier is Tier.EXACT:
                break
    except TimeoutError as e:
        raise FoldTimeout(_TOO_LONG) from e
    return best


@dataclass(frozen=True)
class _Query:
    texts: tuple[tuple[str, str], ...]  # (as given, folded)
    pattern: regex.Pattern[str] | None
    deadline: float

    def best(self, body: str) -> tuple[Match, str | None] | None:
        if self.pattern is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise FoldTimeout(_TOO_LONG)
            found = match_regex(body, self.pattern, timeout=remaining)
            return (found, None) if found else None
        if not self.texts:  # operators alone: every message the filters keep
            return Match(Tier.ANY, 0), None
        folded = _folded(body)
        if len(self.texts) == 1:  # the usual search: one text, no list to build
            ((text, f),) = self.texts
            found = match_literal(folded, f)
            return (found, text) if found else None
        scored = [(m, text) for text, f in self.texts if (m := match_literal(folded, f))]
        # max() keeps the first of equal scores: the earlier text wins a tie.
        return max(scored, key=lambda item: item[0].score, default=None)


def fold(
    events: Iterable[TextEvent],
    *,
    texts: Sequence[str] = (),
    pattern: regex.Pattern[str] | None = None,
    bound: int = DEFAULT_BOUND,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sender: str | None = None,
    after_ms: int | None = None,
    before_ms: int | None = None,
    limit: int | None = None,
) -> TranscriptResult:
    """Rank the latest `bound` events against texts or a /regex/.

    Args:
        events: newest first (as `/messages?dir=b` returns them); only the first `bound` are read.
        texts: literal alternatives; ignored when `pattern` is given.
        pattern: a compiled regular expression (`regex` module syntax; the bot's
            `compile_pattern` bounds a user's).
        timeout_s: the regex budget for the whole scan.
        sender, after_ms, before_ms: the command's filters (`after_ms <= ts < before_ms`).
        limit: keep at most this many hits.

    Returns:
        Hits by score desc, then newest first, then event id; plus how far the scan looked.
    """
    if bound < 1:
        raise ValueError(f"bound must be >= 1, got {bound}")
    query = _Query(
        tuple((t, fold_text(t)) for t in texts),
        pattern,
        time.monotonic() + timeout_s,
    )
    hits: list[TranscriptHit] = []
    scanned, oldest = 0, None
    filtered = sender is not None or after_ms is not None or before_ms is not None
    for event in itertools.islice(events, bound):
        scanned += 1
        oldest = event.ts if oldest is None or event.ts < oldest else oldest
        if filtered and not _passes(event, sender, after_ms, before_ms):
            continue
        if best := query.best(event.body):
            found, text = best
            hits.append(
                TranscriptHit(
                    event.event_id,
                    event.sender,
                    event.ts,
                    event.body,
                    found.score,
                    found.tier,
                    text,
                    found.span,
                    event.msgtype,
                )
            )
    hits.sort(key=lambda h: (-h.score, -h.ts, h.event_id))
    kept = tuple(hits if limit is None else hits[:limit])
    return TranscriptResult(kept, scanned, bound, scanned >= bound, oldest)


def _passes(event: TextEvent, sender: str | None, after: int | None, before: int | None) -> bool:
    if sender is not None and event.sender != sender:
        return False
    if after is not None and event.ts < after:
        return False
    return before is None or event.ts < before


def fold_search(
    events: Iterable[TextEvent],
    command: TranscriptQuery,
    *,
    bound: int = DEFAULT_BOUND,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    pattern: regex.Pattern[str] | None = None,
    limit: int | None = None,
) -> TranscriptResult:
    """`fold` with a search's texts, `pattern` (its /regex/ compiled), filters and limit (or
    `limit`: a next page's depth). A `word*` is matched as its word, at the start of a word:
    `back*` finds "backups", not "feedback"."""
    stems = {plain_text(t): prefixes(t) for t in command.texts}
    cap = limit or command.limit
    found = fold(
        events,
        texts=tuple(stems),
        pattern=pattern,
        bound=bound,
        timeout_s=timeout_s,
        sender=command.sender,
        after_ms=command.after_ms,
        before_ms=command.before_ms,
        limit=None if any(stems.values()) else cap,
    )
    if not any(stems.values()):
        return found
    kept = [h for h in found.hits if _starts_words(h.body, stems.get(h.text or "", ()))]
    return replace(found, hits=tuple(kept[:cap]))


def _starts_words(body: str, stems: Sequence[str]) -> bool:
    folded = _folded(body)
    return all(regex.search(rf"(?<!\w){regex.escape(fold_text(s))}", folded) for s in stems)
