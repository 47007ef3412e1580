"""bot.chat.visibility: what a reply in a room may quote, judged for every reader of the reply and
by the history visibility in force at each quoted event (rule 14)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.chat.visibility import ANYONE, NOTHING, Audience, Period, audience_of, periods_of

JOINED = (Period(0, "joined"),)
SHARED_THEN_JOINED = (Period(0, "shared"), Period(1000, "joined"))


def hv(ts: int, visibility: str) -> dict[str, Any]:
    return {"origin_server_ts": ts, "content": {"history_visibility": visibility}}


def test_the_latest_join_among_current_members_is_the_cut() -> None:
    """Regression: under `joined` the cut was the asker's join; a reply is read by the whole
    room, so an old member's search must not quote what came before a newer member joined."""
    # alice (the asker) joined at 100, bob at 500: the reply may show nothing before 500.
    audience = audience_of("joined", JOINED, [(100, 100), (500, 500)])
    assert not audience.sees(300)  # alice saw it; bob did not
    assert audience.sees(500) and audience.sees(900)
    assert audience.after == 500  # the index's own filter


def test_invited_counts_the_latest_invite_or_join() -> None:
    audience = audience_of("invited", (Period(0, "invited"),), [(NOTHING, 400), (100, 100)])
    assert not audience.sees(399) and audience.sees(400)


def test_an_invitee_sees_nothing_of_a_joined_period() -> None:
    """Under `invited` now, an invitee reads the reply but was never joined in a `joined`
    period: nothing from it may be quoted."""
    periods = (Period(0, "joined"), Period(1000, "invited"))
    audience = audience_of("invited", periods, [(NOTHING, 1200), (100, 100)])
    assert not audience.sees(500)
    assert audience.sees(1300)


def test_the_visibility_in_force_at_each_event_decides() -> None:
    """Regression: `shared` then `joined`: the `shared` period stays visible to members who
    came later; after the switch, nothing before the latest join."""
    audience = audience_of("joined", SHARED_THEN_JOINED, [(100, 100), (2000, 2000)])
    assert audience.sees(500)  # shared at the time: every member may read it
    assert not audience.sees(1500)  # joined at the time, before the newest member joined
    assert audience.sees(2500)
    assert audience.after is None  # the shared period starts at the room's start


def test_an_event_at_the_ms_of_a_change_passes_only_under_both() -> None:
    audience = audience_of("joined", SHARED_THEN_JOINED, [(2000, 2000)])
    assert audience.sees(999) and not audience.sees(1000)


@pytest.mark.parametrize("now", ["shared", "world_readable"])
def test_a_reply_everyone_may_read_quotes_nothing_from_a_joined_period(now: str) -> None:
    """A `joined` room switched to `shared`: the reply is read by everyone who ever joins, so
    nothing from the `joined` period may be quoted, however old the members."""
    periods = (Period(0, "joined"), Period(1000, now))
    audience = audience_of(now, periods, [])
    assert not audience.sees(500)
    assert audience.sees(1500)
    assert audience.after == 1000


def test_a_world_readable_reply_quotes_nothing_from_a_shared_period() -> None:
    """`shared` history is for members; a `world_readable` reply is for anyone."""
    audience = audience_of(
        "world_readable", (Period(0, "shared"), Period(1000, "world_readable")), []
    )
    assert not audience.sees(500) and not audience.sees(1000) and audience.sees(1001)


def test_shared_history_is_seen_by_a_joined_room() -> None:
    audience = audience_of("joined", (Period(0, "shared"),), [(100, 100), (5000, 5000)])
    assert audience.sees(10)


def test_anyone_sees_everything() -> None:
    assert ANYONE.sees(0) and ANYONE.sees(NOTHING - 1) and ANYONE.after is None


def test_no_reader_but_the_bot_restricts_nothing_restricted() -> None:
    assert audience_of("joined", JOINED, []) == Audience("joined", JOINED, None, None)
    assert audience_of("joined", JOINED, []).sees(1)


def test_periods_of_a_walk_that_reached_the_first_change() -> None:
    """Before the first history-visibility event the spec's default, `shared`, was in force."""
    changes = [hv(2000, "joined"), hv(1000, "shared")]  # newest first, as walked back
    assert periods_of(changes, complete=True) == (
        Period(0, "shared"),
        Period(1000, "shared"),
        Period(2000, "joined"),
    )


def test_periods_of_an_unfinished_walk_err_towards_joined() -> None:
    assert periods_of([hv(2000, "shared")], complete=False) == (
        Period(0, "joined"),
        Period(2000, "shared"),
    )
    assert periods_of([], complete=True) == (Period(0, "shared"),)


def test_a_timestamp_before_every_period_is_not_seen() -> None:
    """A (forged) negative timestamp falls in no period: nothing says it may be shown."""
    assert not audience_of("joined", SHARED_THEN_JOINED, []).sees(-5)
