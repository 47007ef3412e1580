"""`muninn run` against the real Synapse: `!search` operators and `!more` pages (issue 24).

The module's one service is tests/bot/conftest.py's `env`, as in test_searching.py.
"""

from __future__ import annotations

import asyncio
import re

from bot.operations.search import result_text
from ingest.search.query import SearchQuery
from tests.bot.botenv import BASE_TS, Env, body_of, link
from tests.botkit import ask
from tests.homeserver import MatrixUser

HOUR = 3_600_000


def _shown(body: str, room: str, sent: dict[str, str]) -> set[str]:
    """The keys of `sent` (key → event id) whose permalinks the reply carries."""
    return {key for key, event_id in sent.items() if link(room, event_id) in body}


async def test_bot_search_operators_filter_what_the_reply_shows(
    env: Env, alice: MatrixUser, bob: MatrixUser, seeder: MatrixUser
) -> None:
    """has:link, is:thread, -is:thread, mentions:, -word, -from:, sort:recent in one room,
    each keeping only what it names; a redacted message stays out of a filtered reply, and a
    search that finds nothing says what it searched for."""
    room = await env.room(alice)
    await seeder.join(room)
    await bob.join(room)
    hour = 3_600_000
    sent: dict[str, str] = {}
    sent["link"] = await seeder.send_text(
        room, "the lantern festival notes are at https://example.org/lantern", ts=BASE_TS
    )
    sent["plain"] = await seeder.send_text(
        room, "lantern festival planning starts monday", ts=BASE_TS + hour
    )
    sent["root"] = await seeder.send_text(
        room, "lantern festival volunteers, reply here", ts=BASE_TS + 2 * hour
    )
    sent["thread"] = await seeder.send_thread_reply(
        room, sent["root"], "lantern festival volunteer: I can carry lamps", ts=BASE_TS + 3 * hour
    )
    mention = {
        "msgtype": "m.text",
        "body": "Bob, the lantern festival budget is yours",
        "m.mentions": {"user_ids": [bob.user_id]},
    }
    sent["mention"] = await seeder.send(room, "m.room.message", mention, ts=BASE_TS + 4 * hour)
    sent["test"] = await seeder.send_text(
        room, "lantern festival test run went fine", ts=BASE_TS + 5 * hour
    )
    sent["alice"] = await alice.send_text(room, "lantern festival: I bring tea")
    sent["redacted"] = await seeder.send_text(
        room, "lantern festival tickets on https://tickets.example.org", ts=BASE_TS + 6 * hour
    )
    await seeder.redact(room, sent["redacted"])
    await env.settle(room)

    async def shown(args: str) -> tuple[set[str], str]:
        _, reply = await ask(alice, room, f"!search lantern festival limit:20 {args}", env.bot_id)
        return _shown(body_of(reply), room, sent), body_of(reply)

    assert (await shown("has:link"))[0] == {"link"}
    assert (await shown("is:thread"))[0] == {"thread"}
    assert "thread" not in (await shown("-is:thread"))[0]
    assert (await shown(f"mentions:{bob.user_id}"))[0] == {"mention"}
    everything_but, _ = await shown(f"-test -from:{alice.user_id}")
    assert everything_but and not everything_but & {"test", "alice", "redacted"}
    keys, body = await shown("sort:recent")
    assert {"alice", "test", "plain"} <= keys and "sorted newest first" in body
    at = {key: body.index(link(room, sent[key])) for key in ("alice", "test", "plain")}
    assert at["alice"] < at["test"] < at["plain"]
    keys, body = await shown("has:link -example after:2026-11-01")
    assert not keys and body.startswith("No results for “lantern festival”")
    assert "Searched: leaving out messages with “example”" in body
    assert "only messages with a link" in body and "from 2 November 2026 on" in body


async def test_bot_more_pages_through_every_hit_once(
    env: Env, alice: MatrixUser, bob: MatrixUser, seeder: MatrixUser
) -> None:
    """A search of 25 hits at the default limit: the reply says there is more, `!more` shows
    each next page, no hit twice, a message redacted after the first page never; the last
    page offers no more, and `!more` from another asker continues nothing."""
    room = await env.room(alice)
    await seeder.join(room)
    await bob.join(room)
    sent = {
        f"k{i}": await seeder.send_text(
            room, f"kiwi crate number {i} arrived at the dock", ts=BASE_TS + i * 3_600_000
        )
        for i in range(26)
    }
    await env.settle(room)
    _, reply = await ask(alice, room, "!search kiwi crate", env.bot_id)
    first = _shown(body_of(reply), room, sent)
    assert len(first) == 5 and "more: !more" in body_of(reply)
    _, other = await ask(bob, room, "!more", env.bot_id)
    assert "No search of yours to continue here" in body_of(other)
    gone = next(k for k in sorted(sent) if k not in first)
    await seeder.redact(room, sent[gone])
    seen = set(first)
    for _ in range(4):
        _, reply = await ask(alice, room, "!more", env.bot_id)
        page = _shown(body_of(reply), room, sent)
        assert len(page) == 5 and not page & seen and gone not in page
        assert body_of(reply).startswith(f"Results {len(seen) + 1}–{len(seen) + 5} for")
        seen |= page
    assert len(seen) == 25 and gone not in seen
    assert "!more" not in body_of(reply) and "no more results" in body_of(reply)
    _, after = await ask(alice, room, "!more", env.bot_id)
    assert "No more results for “kiwi crate”" in body_of(after)


async def test_bot_more_says_its_count_is_a_lower_bound(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """Regression (issue 46): the "N more" count grew while paging (a page reads the
    candidates deeper than the one before, and counts what it read): "10 more", then "15 more"
    with 5 of them shown. Every page says its count is a lower bound, "at least N more", and
    it is one: never more than the matching messages not shown yet."""
    room = await env.room(alice)
    await seeder.join(room)
    total = 40
    for i in range(total):
        await seeder.send_text(
            room, f"wombat burrow survey number {i} is filed", ts=BASE_TS + i * 3_600_000
        )
    await env.settle(room)
    _, reply = await ask(alice, room, "!search wombat burrow survey", env.bot_id)
    shown = 0
    for _ in range(4):  # the counts were 17, 30, 25, 20: each page read deeper
        body = body_of(reply)
        found = re.search(r"; (at least )?(\d+) more: !more", body)
        assert found is not None, body
        assert found.group(1), f"a count that may grow says so: {found.group(0)!r}"
        shown += 5
        assert int(found.group(2)) <= total - shown
        _, reply = await ask(alice, room, "!more", env.bot_id)


OTHER_TALK = (
    "the gravelkite deploy broke the staging database again",
    "lunch is at the noodle place today",
    "who has the key to the bike shed",
    "the printer on floor two is out of toner",
    "standup moves to ten tomorrow",
    "can someone water the plants on friday",
)


async def test_bot_results_are_messages_paged_exactly_and_agree_everywhere(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """Issue 33, a result is a message. 24 "kestrelbox report N" messages, three at a time
    between other talk (so several in each window): `!more` reaches every one once, nothing
    unrelated, its HTML list numbered from the page's start, and ends with "no more results"
    (twice, not "expired"); `sort:recent` lists the newest reports in order; `quillfen*`
    quotes each of three consecutive messages with the prefix; the command room's JSON and
    `muninn search`'s (text and JSON) hold the same matching messages as the room's pages."""
    room = await env.room(alice)
    await seeder.join(room)
    reports: dict[str, str] = {}
    other: dict[str, str] = {}
    ts = BASE_TS
    for i in range(24):
        ts += 60_000
        reports[f"r{i}"] = await seeder.send_text(room, f"kestrelbox report {i}", ts=ts)
        if i % 3 == 2:
            for j in range(2):
                ts += 60_000
                said = OTHER_TALK[(i + j) % len(OTHER_TALK)]
                other[f"o{i}-{j}"] = await seeder.send_text(room, said, ts=ts)
    quill = {
        word: await seeder.send_text(room, word, ts=ts + 60_000 * (n + 1))
        for n, word in enumerate(("quillfen", "quillfenning", "quillfens"))
    }
    await env.settle(room)

    pages: list[set[str]] = []
    _, reply = await ask(alice, room, "!search kestrelbox report", env.bot_id)
    while not body_of(reply).startswith("Weaker match"):
        body = body_of(reply)
        pages.append(_shown(body, room, reports))
        assert not _shown(body, room, other)  # nothing unrelated
        if len(pages) > 1:
            html = reply["content"]["formatted_body"]
            assert f'<ol start="{5 * (len(pages) - 1) + 1}">' in html
        if "!more" not in body:
            break
        assert len(pages) < 10
        _, reply = await ask(alice, room, "!more", env.bot_id)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 4]
    assert set().union(*pages) == set(reports)  # every one, once each
    # The close matches end there; the weaker candidates follow on their own pages, said to
    # be weaker (rule 22c): here the quillfen talk, numbered on from the reports.
    body = body_of(reply)
    assert body.startswith("Weaker match 25") and "none of these matched closely" in body
    assert (
        not _shown(body, room, reports) and '<ol start="25">' in reply["content"]["formatted_body"]
    )
    assert "no more results" in body
    for _ in range(2):
        _, after = await ask(alice, room, "!more", env.bot_id)
        assert "No more results for “kestrelbox report”" in body_of(after)

    _, reply = await ask(alice, room, "!search kestrelbox sort:recent", env.bot_id)
    body = body_of(reply)
    newest = [f"r{i}" for i in range(23, 18, -1)]
    assert _shown(body, room, reports) == set(newest)
    at = [body.index(link(room, reports[key])) for key in newest]
    assert at == sorted(at)

    _, reply = await ask(alice, room, "!search quillfen*", env.bot_id)
    assert _shown(body_of(reply), room, quill) == set(quill)

    command = f"!search kestrelbox report limit:50 in:{room}"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    results = reply["content"]["org.muninn.results"]
    assert sorted(results["matched_event_ids"]) == sorted(reports.values())
    in_hits = [e for h in results["hits"] for e in h["matched_event_ids"]]
    assert sorted(in_hits) == sorted(reports.values())
    asked = (["kestrelbox report"],)
    person = SearchQuery.build(*asked, room_ids=[room], limit=50, close_only=True)
    result = await env.service.searcher.search(person)  # what `muninn search` prints
    assert sorted(result.as_json()["matched_event_ids"]) == sorted(reports.values())
    text = result_text(result, "muninn.test")
    assert _shown(text, room, reports) == set(reports) and not _shown(text, room, other)
    agent = await env.service.searcher.search(SearchQuery.build(*asked, room_ids=[room], limit=50))
    close = [e for h in agent.hits if h.close for e in h.matched]  # `--json`: rule 22c
    assert sorted(close) == sorted(reports.values())


async def test_bot_more_shows_nothing_the_room_may_no_longer_read(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """A next page is cut to the room's readers now: a `shared` room made `world_readable`
    after the first page gets a `!more` that quotes none of its `shared` history."""
    room = await env.room(alice)
    await seeder.join(room)
    said = [
        await seeder.send_text(room, f"the armadillo burrow map, part {i}", ts=BASE_TS + i * HOUR)
        for i in range(4)
    ]
    await env.settle(room)
    _, reply = await ask(alice, room, "!search armadillo burrow limit:2", env.bot_id)
    assert "!more" in body_of(reply)
    await asyncio.sleep(0.01)  # a message in the ms of a change counts under both
    await alice.set_history_visibility(room, "world_readable")
    _, more = await ask(alice, room, "!more", env.bot_id)
    assert not any(link(room, e) in body_of(more) for e in said)
    assert "burrow map" not in str(more["content"])
