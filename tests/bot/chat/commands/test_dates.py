"""`bot.chat.commands.dates`: one date grammar for the chat's `after:`/`before:` and the CLI's
times."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from bot.chat.commands.arguments import ArgumentError
from bot.chat.commands.dates import TIME_HELP, instant, period, shown
from bot.cli.main import _parser, parse_time

NOW = int(datetime(2026, 11, 20, 15, 30, tzinfo=UTC).timestamp() * 1000)
DAY = 86_400_000


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)  # type: ignore[arg-type, misc]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("7d", NOW - 7 * DAY),
        ("12h", NOW - 12 * 3_600_000),
        ("yesterday", ms(2026, 11, 19)),
        ("today", ms(2026, 11, 20)),
        ("now", NOW),
        ("tomorrow", ms(2026, 11, 21)),
        ("2026-11", ms(2026, 11, 1)),
        ("2026-11-01", ms(2026, 11, 1)),
        ("2026-11-01T16:34", ms(2026, 11, 1, 16, 34)),
        ("2026-11-01T16:34:05+01:00", ms(2026, 11, 1, 15, 34, 5)),
        ("1793534400000", 1793534400000),
    ],
)
def test_instant_reads_the_chat_grammar_ms_and_iso(given: str, expected: int) -> None:
    """The CLI takes what the chat takes (regression: `7d`, `yesterday` were refused; issue 44:
    `now`, `tomorrow`), a span meaning its first moment, plus milliseconds and full ISO
    datetimes."""
    assert instant(given, NOW) == expected


def test_instant_and_the_chat_agree_on_every_chat_date() -> None:
    """One grammar: each chat DATE is a CLI time at the start of the chat's span."""
    for given in ("7d", "2w", "now", "yesterday", "tomorrow", "2026-10", "2026-10-31T08:00"):
        assert instant(given, NOW) == period(given, NOW).start


@pytest.mark.parametrize(
    "given", ["last week", "2026-13-01", "9007199254740992", "1969-12-31", "\u00b2", "9" * 5000]
)
def test_instant_refuses_a_non_time_naming_the_grammar(given: str) -> None:
    with pytest.raises(ArgumentError, match="not a time"):
        instant(given, NOW)


def test_cli_time_flags_document_the_grammar() -> None:
    """`--help` of search and purge says what T may be (regression: no format given)."""
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("search", "purge"):
        page = " ".join(sub.choices[name].format_help().split())
        assert " ".join(TIME_HELP.split()) in page
    with pytest.raises(argparse.ArgumentTypeError, match="7d"):
        parse_time("fortnight")


def test_shown_prints_a_date_not_milliseconds() -> None:
    assert shown(ms(2026, 11, 1, 16, 34, 5)) == "2026-11-01 16:34:05 UTC"
