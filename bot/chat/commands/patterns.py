"""A user's /regex/: bounded by a cheap scan before it is compiled, then compiled uncached.

The `regex` module writes counted repeats out when it compiles: `!search /a{1000000}/` (20
bytes) took ~250 MB that never came back, and a larger count raised MemoryError or got the
process killed. `pattern_problem` refuses such a pattern without compiling it (the parser
calls it, so a refusal is a usage error); `compile_pattern` compiles one that passes, after
the rate limit and off the event loop (the handler's job). A compiled pattern that runs out of
its time budget in the read path's fold (`FoldTimeout`) is refused too (`refused_timeouts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator

import regex

from bot.chat.html import quoted
from bot.errors import CommandError
from ingest.search.logs.transcript import FoldTimeout

__all__ = [
    "MAX_PATTERN_BYTES",
    "MAX_PATTERN_SIZE",
    "MAX_REPEAT",
    "PatternError",
    "PatternTimeout",
    "compile_off_loop",
    "compile_pattern",
    "pattern_problem",
    "pattern_size",
    "refused_timeouts",
]

MAX_PATTERN_BYTES = 1000  # as every search text (rule 22), without the `(?i)` of an i flag
# These keep a compile under ~10 ms and a few MB: `(?:x{1000}){1000}` took seconds and 250 MB.
MAX_REPEAT = 1000  # the largest n or m in {n}, {n,}, {n,m}
MAX_PATTERN_SIZE = 10_000  # the pattern's length with every counted repeat written out


class PatternError(CommandError):
    """A /regex/ that does not compile, or matches empty text; found when the search runs."""


class PatternTimeout(CommandError):
    """A /regex/ that ran out of its time budget: refused, so it cannot hang the bot."""


@contextlib.contextmanager
def refused_timeouts() -> Iterator[None]:
    """A /regex/ out of its time budget inside (the fold's `FoldTimeout`, §3 rule 18) is
    refused as `PatternTimeout`, a `CommandError` whose text is posted."""
    try:
        yield
    except FoldTimeout as e:
        raise PatternTimeout(str(e)) from e


_BRACES = re.compile(r"\{([^{}]*)\}")
_COUNTS = re.compile(r"\d+")
_BRACED_ESCAPES = frozenset({"p{", "P{", "N{", "x{"})  # braces that hold a name, not a count


def _skip_class(text: str, i: int) -> int:
    """The index after the `[...]` set opening at text[i] (nested sets, escapes, a leading ])."""
    depth, j = 1, i + 1
    if j < len(text) and text[j] == "^":
        j += 1
    if j < len(text) and text[j] == "]":
        j += 1
    while j < len(text) and depth:
        ch = text[j]
        j += 2 if ch == "\\" else 1
        depth += 1 if ch == "[" else -1 if ch == "]" else 0
    return j


def pattern_size(text: str) -> tuple[int, int]:
    """(the largest repeat count, the size with every counted repeat written out) of a /regex/.

    A cheap scan, no compile: each atom counts 1, a group the sum of its contents (all
    branches), and `{n,m}` multiplies what it repeats by its largest count. It over-counts
    rather than under-counts (a brace in a verbose-mode comment counts too), so a pattern it
    passes compiles in bounded time and memory.
    """
    frames: list[list[int]] = [[0, 0]]  # per open group: [total size, size of the last atom]
    largest = 0
    i = 0
    while i < len(text):
        ch, frame = text[i], frames[-1]
        braces = _BRACES.match(text, i) if ch == "{" else None
        if braces is not None and (counts := [int(c) for c in _COUNTS.findall(braces[1])]):
            times = max(counts)
            largest = max(largest, times)
            frame[0] += frame[1] * (times - 1)
            frame[1] *= times
            i = braces.end()
            continue
        if ch == "(":
            frames.append([0, 0])
            i += 1
            continue
        if ch == ")" and len(frames) > 1:
            size = frames.pop()[0]
            frames[-1][0] += size
            frames[-1][1] = size
            i += 1
            continue
        if ch == "[":
            i = _skip_class(text, i)
        elif ch == "\\":
            i += 2
            if text[i - 1 : i + 1] in _BRACED_ESCAPES:  # \p{Greek}, \N{name}, \x{263a}
                end = text.find("}", i)
                i = len(text) if end < 0 else end + 1
        else:
            i += 1
        if ch not in "|*+?":
            frame[0] += 1
            frame[1] = 1
    return largest, frames[0][0]


def pattern_problem(pattern: str) -> str | None:
    """Why a /regex/ is refused before it is compiled, naming the limit; None when it is not.
    The length is the user's: the `(?i)` an `i` flag became is not counted."""
    if len(pattern.removeprefix("(?i)").encode()) > MAX_PATTERN_BYTES:
        return f"the /regex/ is longer than {MAX_PATTERN_BYTES} bytes"
    largest, size = pattern_size(pattern)
    if largest > MAX_REPEAT:
        return f"a /regex/ repeat count is at most {MAX_REPEAT}, not {largest}"
    if size > MAX_PATTERN_SIZE:
        return (
            f"the /regex/ is too large: its repeats written out make {size} elements, "
            f"at most {MAX_PATTERN_SIZE}"
        )
    return None


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """A /regex/ compiled for the search: bounded first, not cached (patterns are user text).

    Costs up to ~10 ms of CPU: the handler calls it after the rate limit, off the event loop,
    never while parsing (the pinboard re-parses every old command on each `!pins`).

    Raises:
        PatternError: the pattern is refused by the bounds, does not compile, or matches
            empty text (it would match every message).
    """
    problem = pattern_problem(pattern)
    if problem is not None:
        raise PatternError(problem)
    try:
        compiled = regex.compile(pattern, cache_pattern=False)
    except (regex.error, OverflowError, ValueError, RecursionError, MemoryError) as e:
        raise PatternError(f"the /regex/ does not compile: {quoted(str(e), 80)}") from e
    try:
        matches_empty = compiled.search("", timeout=0.05) is not None
    except TimeoutError:
        matches_empty = False
    if matches_empty:
        raise PatternError("the /regex/ matches empty text, so it would match every message")
    return compiled


async def compile_off_loop(pattern: str) -> regex.Pattern[str]:
    """`compile_pattern` in a worker thread: its CPU (up to ~10 ms) does not hold the loop."""
    return await asyncio.to_thread(compile_pattern, pattern)
