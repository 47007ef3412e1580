"""The transcript fold as the bot runs it: a user's /regex/ compiled within its bounds, a timeout
refused as a `CommandError` (§3 rule 18). The fold itself is the read path's
(`ingest.search.transcript`): pure, over typed messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import regex

from bot.commands.records import SearchCommand
from bot.errors import CommandError
from bot.patterns import PatternError, compile_pattern
from ingest.search import transcript
from ingest.search.transcript import (
    DEFAULT_BOUND,
    DEFAULT_TIMEOUT_S,
    DENSITY_MAX,
    FoldTimeout,
    Match,
    TextEvent,
    Tier,
    TranscriptHit,
    TranscriptResult,
    fold_text,
    match_literal,
)

__all__ = [
    "DEFAULT_BOUND",
    "DENSITY_MAX",
    "Match",
    "PatternError",
    "PatternTimeout",
    "TextEvent",
    "Tier",
    "TranscriptHit",
    "TranscriptResult",
    "fold",
    "fold_search",
    "fold_text",
    "match_literal",
    "match_regex",
]


class PatternTimeout(CommandError):
    """A /regex/ that ran out of its time budget: refused, so it cannot hang the bot."""


def match_regex(body: str, pattern: regex.Pattern[str], *, timeout: float) -> Match | None:
    """`ingest.search.transcript.match_regex`, a timeout refused (`PatternTimeout`)."""
    try:
        return transcript.match_regex(body, pattern, timeout=timeout)
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e


def fold(
    events: Iterable[TextEvent],
    *,
    texts: Sequence[str] = (),
    pattern: str | regex.Pattern[str] | None = None,
    bound: int = DEFAULT_BOUND,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sender: str | None = None,
    after_ms: int | None = None,
    before_ms: int | None = None,
    limit: int | None = None,
) -> TranscriptResult:
    """`ingest.search.transcript.fold`, a /regex/ given as text compiled here by `compile_pattern`
    (which may raise `PatternError`) and a timeout refused (`PatternTimeout`)."""
    try:
        return transcript.fold(
            events,
            texts=texts,
            pattern=compile_pattern(pattern) if isinstance(pattern, str) else pattern,
            bound=bound,
            timeout_s=timeout_s,
            sender=sender,
            after_ms=after_ms,
            before_ms=before_ms,
            limit=limit,
        )
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e


def fold_search(
    events: Iterable[TextEvent],
    command: SearchCommand,
    *,
    bound: int = DEFAULT_BOUND,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    pattern: regex.Pattern[str] | None = None,
    limit: int | None = None,
) -> TranscriptResult:
    """`ingest.search.transcript.fold_search` of a parsed `!search`: its /regex/ (or `pattern`, its
    compiled form) compiled here, a timeout refused (`PatternTimeout`)."""
    if pattern is None and command.regex is not None:
        pattern = compile_pattern(command.regex)
    try:
        return transcript.fold_search(
            events, command, bound=bound, timeout_s=timeout_s, pattern=pattern, limit=limit
        )
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e
