"""The transcript fold as the bot runs it: a user's /regex/ compiled within its bounds, a timeout
refused as a `CommandError` (§3 rule 18). The fold itself is the read path's
(`ingest.search.transcript`): pure, over typed messages.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import ParamSpec, TypeVar

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
    "refused_timeouts",
]

P = ParamSpec("P")
R = TypeVar("R")


class PatternTimeout(CommandError):
    """A /regex/ that ran out of its time budget: refused, so it cannot hang the bot."""


@contextlib.contextmanager
def refused_timeouts() -> Iterator[None]:
    """A /regex/ out of its time budget inside (`FoldTimeout`) is refused as `PatternTimeout`,
    a `CommandError` whose text is posted: the one place of that rule, for the bot's search
    (`bot.lookup`) and the folds below."""
    try:
        yield
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e


def _refusing(fold_function: Callable[P, R]) -> Callable[P, R]:
    """`fold_function` of `ingest.search.transcript`, its timeout refused (`refused_timeouts`)."""

    @functools.wraps(fold_function)
    def refusing(*args: P.args, **kwargs: P.kwargs) -> R:
        with refused_timeouts():
            return fold_function(*args, **kwargs)

    return refusing


match_regex = _refusing(transcript.match_regex)
fold = _refusing(transcript.fold)


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
    with refused_timeouts():
        return transcript.fold_search(
            events, command, bound=bound, timeout_s=timeout_s, pattern=pattern, limit=limit
        )
