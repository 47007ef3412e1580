"""The transcript fold, docs/ARCHITECTURE.md §3 rule 18: integer tiers, density within a tier,
time-bounded regexes."""

from __future__ import annotations

import time

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from bot.chat.commands.grammar import parse
from bot.chat.commands.patterns import (
    PatternError,
    PatternTimeout,
    compile_pattern,
    refused_timeouts,
)
from bot.chat.commands.records import SearchCommand
from bot.errors import CommandError
from ingest.search.logs.transcript import (
    DENSITY_MAX,
    Tier,
    fold,
    fold_search,
    fold_text,
    match_literal,
    match_regex,
)
from ingest.types import EventID, Message, RoomID, UserID

ROOM = RoomID("!room:example.org")
ALICE = UserID("@alice:example.org")
BOB = UserID("@bob:example.org")


def msg(n: int, body: str, *, ts: int | None = None, sender: UserID = ALICE) -> Message:
    return Message(EventID(f"$e{n:03d}"), ROOM, sender, 1000 * n if ts is None else ts, body)


def tier_of(body: str, query: str) -> Tier | None:
    found = match_literal(fold_text(body), fold_text(query))
    return found.tier if found else None


@pytest.mark.parametrize(
    ("body", "query", "tier"),
    [
        ("Deploy now", "deploy NOW", Tier.EXACT),
        ("deploy the server", "deploy", Tier.PREFIX),
        ("we deploy tonight", "depl", Tier.WORD_PREFIX),
        ("release-deploy done", "deploy", Tier.WORD_PREFIX),
        ("redeploy it", "deploy", Tier.SUBSTRING),
        ("snake_deploy", "deploy", Tier.SUBSTRING),
        ("the configuration", "cfg", Tier.SUBSEQUENCE),
        ("hello world", "xyz", None),
        ("hello", "hello world", None),
        ("ＤＥＰＬＯＹ", "deploy", Tier.EXACT),
        ("İstanbul", "istanbul", Tier.EXACT),  # issue 37: İ folds to i (`caseless`)
        ("istanbul office", "İSTANBUL", Tier.PREFIX),
    ],
)
def test_match_literal_tiers(body: str, query: str, tier: Tier | None) -> None:
    """Each kind of match lands in its tier; no match is no hit."""
    assert tier_of(body, query) == tier


def test_match_literal_density_prefers_shorter_bodies() -> None:
    """Within a tier, the match that is more of its message scores higher."""
    short = match_literal("deploy now", "deploy")
    long = match_literal("deploy now and then tell everyone about it", "deploy")
    assert short and long and short.tier == long.tier == Tier.PREFIX
    assert short.score > long.score


def test_match_literal_subsequence_density_is_compactness() -> None:
    """A tight subsequence beats one scattered across the message."""
    tight = match_literal("c f g then a long tail of words", "cfg")
    scattered = match_literal("c and then f and later g", "cfg")
    assert tight and scattered and tight.score > scattered.score


BODIES = st.text(alphabet="ab c_-", min_size=1, max_size=30)


@given(BODIES, BODIES, st.text(alphabet="ab c", min_size=1, max_size=4))
def test_match_literal_density_never_crosses_tiers(one: str, two: str, query: str) -> None:
    """A higher tier always outscores a lower one, whatever the densities."""
    first, second = match_literal(one, query), match_literal(two, query)
    for found in (first, second):
        if found:
            assert found.tier <= found.score <= found.tier + DENSITY_MAX
    if first and second and first.tier > second.tier:
        assert first.score > second.score


@pytest.mark.parametrize(
    ("body", "pattern", "tier", "span"),
    [
        ("error 42", r"error \d+", Tier.EXACT, (0, 8)),
        ("error 42 again", r"error \d+", Tier.PREFIX, (0, 8)),
        ("saw error 42", r"err\w+", Tier.WORD_PREFIX, (4, 9)),
        ("suberror", r"err\w+", Tier.SUBSTRING, (3, 8)),
        ("ab xab ab", r"ab", Tier.PREFIX, (0, 2)),
        ("xab ab", r"ab", Tier.WORD_PREFIX, (4, 6)),
    ],
)
def test_match_regex_span_tiers(
    body: str, pattern: str, tier: Tier, span: tuple[int, int]
) -> None:
    """A regex hit's span is read onto the literal tiers; the best match wins."""
    found = match_regex(body, regex.compile(pattern), timeout=1.0)
    assert found is not None
    assert (found.tier, found.span) == (tier, span)


def test_match_regex_ignores_empty_matches() -> None:
    """A zero-width match is not a hit."""
    assert match_regex("bbb", regex.compile(r"a*"), timeout=1.0) is None


def test_fold_orders_by_score_then_newest_then_event_id() -> None:
    """Ties on score go to the newest message, then to the smaller event id."""
    events = [
        msg(1, "deploy", ts=5),
        msg(2, "deploy", ts=9),
        msg(3, "deploy", ts=9),
        msg(4, "redeploy", ts=99),
        msg(5, "unrelated", ts=100),
    ]
    result = fold(events, texts=["deploy"])
    assert [h.event_id for h in result.hits] == ["$e002", "$e003", "$e001", "$e004"]
    assert result.hits[0].tier is Tier.EXACT


def test_fold_multiple_texts_take_the_best_tier() -> None:
    """With `a | b`, a message scores by its best text, and that text is recorded."""
    result = fold([msg(1, "backup failed"), msg(2, "the backup")], texts=["failed", "backup"])
    assert [(h.event_id, h.tier, h.text) for h in result.hits] == [
        ("$e001", Tier.PREFIX, "backup"),
        ("$e002", Tier.WORD_PREFIX, "backup"),
    ]


def test_fold_stops_at_the_bound_and_says_so() -> None:
    """Only `bound` events are read; reaching the bound is reported, not an error."""
    events = (msg(n, "needle") for n in range(10_000))
    result = fold(events, texts=["needle"], bound=100)
    assert (result.scanned, result.bound_reached, len(result.hits)) == (100, True, 100)
    assert result.oldest_ts == 0


def test_fold_under_the_bound_is_not_reached() -> None:
    """A room shorter than the bound is scanned whole."""
    result = fold([msg(1, "x"), msg(2, "y")], texts=["x"])
    assert (result.scanned, result.bound_reached, result.bound) == (2, False, 2048)


def test_fold_applies_filters_and_limit() -> None:
    """Sender and time filters drop hits; limit keeps the best few."""
    events = [msg(n, "needle", sender=BOB if n % 2 else ALICE) for n in range(1, 9)]
    result = fold(events, texts=["needle"], sender=ALICE, after_ms=3000, before_ms=8000, limit=2)
    assert [h.event_id for h in result.hits] == ["$e006", "$e004"]
    assert result.scanned == 8


def test_fold_search_uses_the_parsed_command() -> None:
    """A parsed `!search` drives the fold: regex, sender and limit."""
    command = parse(
        "!search /ERR\\d/i from:@bob limit:1",
        now_ms=0,
        in_command_room=False,
        server_name="example.org",
    )
    assert isinstance(command, SearchCommand)
    events = [msg(1, "err1", sender=BOB), msg(2, "err2"), msg(3, "an err3", sender=BOB)]
    assert command.regex is not None
    result = fold_search(events, command, pattern=compile_pattern(command.regex))
    assert [(h.event_id, h.span) for h in result.hits] == [("$e001", (0, 4))]


def test_fold_catastrophic_regex_is_stopped_within_the_budget() -> None:
    """`(a+)+$` against 5,000 a's and a b times out as a CommandError instead of hanging."""
    events = [msg(1, "a" * 5000 + "b"), msg(2, "a" * 5000 + "b")]
    started = time.monotonic()
    with pytest.raises(PatternTimeout, match="too long") as caught, refused_timeouts():
        fold(events, pattern=compile_pattern(r"(a+)+$"), timeout_s=0.2)
    # Unbounded, the match would run for ages; 5 s leaves room for a loaded machine (the
    # budget's own speed is a benchmark's, not this test's).
    assert time.monotonic() - started < 5.0
    assert isinstance(caught.value, CommandError)


@pytest.mark.parametrize("pattern", ["a(b", "[z-a]", "*x"])
def test_fold_rejects_a_pattern_that_does_not_compile(pattern: str) -> None:
    """A broken pattern is an error, never a literal search."""
    with pytest.raises(PatternError, match="does not compile"):
        fold([msg(1, pattern)], pattern=compile_pattern(pattern))


def test_fold_rejects_a_zero_bound() -> None:
    """A bound below one is a programming error."""
    with pytest.raises(ValueError):
        fold([], texts=["x"], bound=0)


def test_fold_search_reads_word_star_as_a_word_start() -> None:
    """`back*` finds "backups" and "back", never "feedback" (issue 24: `word*`)."""
    events = [msg(3, "the backups ran"), msg(2, "thanks for the feedback"), msg(1, "back at noon")]
    found = fold_search(events, SearchCommand(texts=("back*",)))
    assert {h.body for h in found.hits} == {"the backups ran", "back at noon"}
