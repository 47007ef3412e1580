"""A `!search /regex/`'s bounds (`bot.chat.commands.patterns`): refused by name, measured as
written out, cheap at the limit, and the same bounds where it is parsed and compiled."""

from __future__ import annotations

import time

import pytest

from bot.chat.commands.patterns import (
    MAX_PATTERN_SIZE,
    PatternError,
    compile_pattern,
    pattern_size,
)
from bot.chat.commands.records import (
    SearchCommand,
    UsageError,
)
from bot.errors import CommandError
from ingest.search.query import MAX_TEXT_BYTES
from tests.bot.chat.commands.parsing import run


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("a(b", "does not compile: missing \\)"),
        ("[z-a]", "does not compile"),
        ("a*", "matches empty text"),
        ("a{1000000}", "repeat count is at most 1000"),
    ],
)
def test_compile_pattern_refuses(pattern: str, problem: str) -> None:
    """A /regex/ that does not compile, matches empty text or is too large is a
    PatternError (a CommandError, so its text is the reply), never a literal search."""
    with pytest.raises(PatternError, match=problem) as caught:
        compile_pattern(pattern)
    assert isinstance(caught.value, CommandError)


@pytest.mark.parametrize(
    ("pattern", "size"),
    [
        ("abc", 3),
        ("a{5}", 5),
        ("(?:ab){3}", 3 * 3),  # the `?:` counts, over rather than under
        ("(?:a{10}){10}", 10 * (1 + 10)),
        ("x|y{4}", 1 + 4),
        ("[{9999}]{3}", 3),  # braces inside a set are no count
        ("\\p{L}{7}", 7),
        ("\\w{7}", 7),
        ("a{2,9}", 9),
        ("a{e<=2}", 2),  # fuzzy constraints count as repeats: over, never under
    ],
)
def test_pattern_size_counts_repeats_written_out(pattern: str, size: int) -> None:
    """The size bound is the pattern with its counted repeats written out, nested ones
    multiplied: what the compiled form grows with."""
    assert pattern_size(pattern)[1] == size


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.parametrize(
    "body", ["!search /a{1000000}/", "!search /a{20000000}/", "!search /(?:x{1000}){1000}/"]
)
def test_parse_poison_regex_is_refused_fast_and_small(body: str) -> None:
    """Regression: a 20-byte `!search` compiled a pattern of a million elements (~250 MB that
    never came back; a larger count raised MemoryError). It is a usage error naming the
    limit, given within 50 ms, and the process grows by less than 10 MB (timed: issue 11)."""
    before = _rss_mb()
    started = time.perf_counter()
    with pytest.raises(UsageError, match="at most") as caught:
        run(body)
    with pytest.raises(PatternError, match="at most"):
        compile_pattern(body.split("/", 1)[1].rsplit("/", 1)[0])
    elapsed = time.perf_counter() - started
    assert "Usage: !search" in str(caught.value)
    assert elapsed < 0.05 and _rss_mb() - before < 10


@pytest.mark.parametrize("flags", ["", "i"])
@pytest.mark.parametrize("pattern", ["(?:[a-z]{99}){100}", "x" * MAX_TEXT_BYTES])
def test_parse_and_compile_agree_on_the_bounds(pattern: str, flags: str) -> None:
    """A /regex/ at the bounds the parser passes is never refused by size when the search
    compiles it, with or without the `i` flag (which the parser turns into `(?i)`)."""
    try:
        command = run(f"!search /{pattern}/{flags}")
    except UsageError:
        assert flags  # only the `(?i)` may tip a pattern at the size bound over it
        return
    assert isinstance(command, SearchCommand) and command.regex is not None
    compile_pattern(command.regex)


def test_compile_pattern_at_the_bounds_is_cheap() -> None:
    """The largest pattern the bounds pass still compiles quickly and small (timed: issue 11)."""
    pattern = "(?:[a-z]{99}){100}"
    assert pattern_size(pattern)[1] <= MAX_PATTERN_SIZE
    before = _rss_mb()
    started = time.perf_counter()
    compiled = compile_pattern(pattern)
    assert time.perf_counter() - started < 0.05 and _rss_mb() - before < 10
    assert compiled.search("x" + "q" * 10_000) is not None
