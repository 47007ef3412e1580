"""The transcript fold as the bot runs it: a timeout refused as a `CommandError` (§3 rule 18).
The fold itself is the read path's (`ingest.search.logs.transcript`): pure, over typed messages,
given a user's /regex/ compiled within its bounds (`bot.chat.commands.patterns.compile_pattern`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from bot.errors import CommandError
from ingest.search.logs import transcript
from ingest.search.logs.transcript import FoldTimeout

__all__ = ["PatternTimeout", "fold", "fold_search", "match_regex", "refused_timeouts"]

P = ParamSpec("P")
R = TypeVar("R")


class PatternTimeout(CommandError):
    """A /regex/ that ran out of its time budget: refused, so it cannot hang the bot."""


@contextlib.contextmanager
def refused_timeouts() -> Iterator[None]:
    """A /regex/ out of its time budget inside (`FoldTimeout`) is refused as `PatternTimeout`,
    a `CommandError` whose text is posted: the one place of that rule, for the bot's search
    (`bot.chat.lookup`) and the folds below."""
    try:
        yield
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e


def _refusing(fold_function: Callable[P, R]) -> Callable[P, R]:
    """`fold_function` of `ingest.search.logs.transcript`, its timeout refused
    (`refused_timeouts`)."""

    @functools.wraps(fold_function)
    def refusing(*args: P.args, **kwargs: P.kwargs) -> R:
        with refused_timeouts():
            return fold_function(*args, **kwargs)

    return refusing


match_regex = _refusing(transcript.match_regex)
fold = _refusing(transcript.fold)
fold_search = _refusing(transcript.fold_search)
