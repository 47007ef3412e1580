"""`muninn run` against the real Synapse: `!search` in a room (visibility, edits, large and
fresh messages; its operators and `!more`: test_searching_pages.py).

One service for the whole module (the `env` fixture of tests/bot/conftest.py: its store in a
module temp dir, the session's MiniLM).
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import pytest

from ingest.search.logs.recent import RecentEvents
from ingest.store import PointFilter
from ingest.types import RoomID
from tests.bot.botenv import (
    BASE_TS,
    TRANSCRIPT_LIMIT,
    Env,
    body_of,
    link,
    pin_then_board,
)
from tests.botkit import ask, wait_reply
from tests.homeserver import Homeserver, MatrixUser

# ---------------------------------------------------------------- !search in a room


async def test_bot_search_finds_indexed_and_fresh_messages(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """An old message (indexed, beyond the transcript) and one sent seconds ago are both found."""
    room = await env.room(alice)
    await seeder.join(room)
    old = await seeder.send_text(room, "the aurora borealis vanished over Tromsø", ts=BASE_TS)
    for i in range(TRANSCRIPT_LIMIT + 10):
        await seeder.send_text(room, f"filler chatter number {i} about lunch", ts=BASE_TS + i + 1)
    await env.settle(room)
    fresh = await alice.send_text(room, "aurora is back tonight, look north")
    _, reply = await ask(alice, room, "!search aurora", env.bot_id)
    body = body_of(reply)
    assert link(room, old) in body and link(room, fresh) in body
    assert "answered by" not in body  # retriever names are not the room's business (i25 #13)
    assert f"scanned the latest {TRANSCRIPT_LIMIT} events" in body
    assert reply["content"]["msgtype"] == "m.notice"
    assert reply["content"]["m.mentions"] == {}
    assert "org.muninn.results" not in reply["content"]  # only the command room carries JSON
    for event_id in (old, fresh):  # the permalinks point at real, visible events
        assert (await alice.get_event(room, event_id))["event_id"] == event_id


FAR_FUTURE_TS = 253_402_300_800_000  # 10000-01-01 00:00 UTC, where `datetime` gives up


async def test_bot_a_far_future_message_holds_back_neither_the_index_nor_a_reply(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """Regression (issue 21): one message stamped in the year 10000 (an appservice's `?ts=`)
    failed its room on every writer pass, so nothing said after it was indexed, and a
    `!search` whose answer held it got no reply. Both messages are indexed and found."""
    room = await env.room(alice)
    await seeder.join(room)
    future = await seeder.send_text(room, "the quokka time machine lands", ts=FAR_FUTURE_TS)
    after = await alice.send_text(room, "a wombat left footprints in the sand")
    await env.quiesce(alice, room)
    await env.settle(room)
    col = await env.service.writer.open()
    for event_id in (future, after):
        flt = PointFilter(room_ids=(room,), event_ids=(event_id,))
        assert await asyncio.to_thread(col.count, flt) == 1
    _, reply = await ask(alice, room, "!search quokka", env.bot_id)
    assert link(room, future) in body_of(reply) and "10000-01-01 00:00" in body_of(reply)
    _, reply = await ask(alice, room, "!search wombat", env.bot_id)
    assert link(room, after) in body_of(reply)


async def test_bot_search_sees_only_this_room(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """A second room's !search never returns the first room's text."""
    first = await env.room(alice)
    await alice.send_text(first, "the secret word is kumquat")
    await env.settle(first)
    second = await env.room(bob)
    _, reply = await ask(bob, second, "!search kumquat", env.bot_id)
    assert "kumquat" not in body_of(reply).split("\n", 1)[1]
    assert body_of(reply).startswith("No results")


async def test_bot_pin_confirmation_does_not_quote_above_a_members_join(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """Under `joined` visibility, `!pin ^N` reaching above the join of a member pins but does
    not quote the message: not for the late joiner, and (regression) not for the old member
    either, since the late joiner reads the confirmation too. Once the late joiner has left,
    the old member's confirmation quotes it."""
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    await alice.send_text(room, "the okapi feed schedule, members only")
    await bob.join(room)
    _, reply = await ask(bob, room, "!pin ^1", env.bot_id)
    assert "📌" in body_of(reply) and "okapi" not in str(reply["content"])
    _, reply = await ask(alice, room, "!pin ^1", env.bot_id)
    assert "📌" in body_of(reply) and "okapi" not in str(reply["content"])
    _, board = await ask(alice, room, "!pins", env.bot_id)
    assert "okapi" not in str(board["content"])
    await bob.leave(room)
    _, reply = await ask(alice, room, "!pin ^1", env.bot_id)
    assert "okapi feed schedule" in body_of(reply)


async def test_bot_pins_show_the_edited_text(env: Env, alice: MatrixUser) -> None:
    """A pinned message edited by its author shows its new text; the edited-away words neither
    show nor match `!pins WORD` (rule 6)."""
    room = await env.room(alice)
    target = await alice.send_text(room, "the tapir gate code is 7312")
    await alice.send_edit(room, target, "the tapir gate code is with the keeper")
    command = await alice.send_reply(room, target, "!pin")
    confirmation = await wait_reply(alice, room, command, env.bot_id)
    assert "with the keeper" in body_of(confirmation)
    assert "7312" not in str(confirmation["content"])
    _, board = await ask(alice, room, "!pins", env.bot_id)
    assert "with the keeper" in body_of(board) and "7312" not in str(board["content"])
    _, found = await ask(alice, room, "!pins 7312", env.bot_id)
    assert "with the keeper" not in body_of(found)


async def test_bot_pins_show_the_edited_text_of_a_target_beyond_the_scan(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """A pin whose target and its edit are older than the scanned bound shows the text as
    edited (the homeserver's bundled latest edit), not the original; another sender's later
    edit of it counts for nothing (rule 6: Synapse bundles only the author's; Muninn's own
    check of the bundle is `test_roomlog.test_current_body_applies_…`)."""
    room = await env.room(alice)
    await bob.join(room)
    target = await alice.send_text(room, "the tapir feed is stored in shed 4471")
    await alice.send_edit(room, target, "the tapir feed is stored in the new barn")
    await bob.send_edit(room, target, "bob rewrites it as the capybara pen")
    board = await pin_then_board(env, alice, room, target, "!pin #feed")
    assert "the new barn" in body_of(board)
    assert "4471" not in str(board["content"]) and "capybara" not in str(board["content"])


async def test_bot_pins_show_a_pinned_reply_without_the_parent_it_quotes(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """A pinned reply older than the scanned bound shows its own words, not its fallback's
    quote of the parent — which here was redacted after the reply was sent."""
    room = await env.room(alice)
    await bob.join(room)
    parent = await bob.send_text(room, "the loading dock door code is 5519")
    target = await alice.send_reply(room, parent, "noted for the delivery on Friday")
    await bob.redact(room, parent)
    board = await pin_then_board(env, alice, room, target, "!pin #dock")
    assert "noted for the delivery" in body_of(board)
    assert "5519" not in str(board["content"]) and "loading dock" not in str(board["content"])


async def test_bot_search_respects_joined_history_visibility(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """Under `joined` visibility nobody's `!search` quotes what came before the latest join of
    a current member: the late joiner's does not, and (regression) neither does the old
    member's, whose reply the late joiner reads. When the late joiner leaves, it does again."""
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    before = await alice.send_text(room, "zebra migration plans, members only")
    await env.settle(room)
    await bob.join(room)
    after = await alice.send_text(room, "zebra crossing repainted today")
    await env.settle(room)
    for asker in (bob, alice):
        _, reply = await ask(asker, room, "!search zebra", env.bot_id)
        body = body_of(reply)
        assert link(room, after) in body, asker
        assert link(room, before) not in body and "migration" not in body, asker
    await bob.leave(room)
    _, reply = await ask(alice, room, "!search zebra", env.bot_id)
    assert link(room, before) in body_of(reply)  # alice alone was there all along


@pytest.mark.parametrize("dispatcher_sees_it", [True, False], ids=["appservice", "missed"])
async def test_bot_search_after_a_join_does_not_quote_what_the_joiner_may_not_read(
    env: Env,
    alice: MatrixUser,
    bob: MatrixUser,
    monkeypatch: pytest.MonkeyPatch,
    dispatcher_sees_it: bool,
) -> None:
    """Regression for the audience kept per room between commands: in a `joined` room, a
    search quotes alice's message while she is the only reader; once bob has joined, the very
    next search (his) does not. Also when the dispatcher never sees the join (`missed`: client
    mode's limited `/sync` skips state), since the room's log read meets it."""
    if not dispatcher_sees_it:
        monkeypatch.setattr(env.service.handler, "state_changed", lambda room_id: None)
    room = await env.room(alice)
    await alice.set_history_visibility(room, "joined")
    before = await alice.send_text(room, "the pangolin enclosure code, members only")
    _, reply = await ask(alice, room, "!search pangolin enclosure", env.bot_id)
    assert link(room, before) in body_of(reply)  # the room's audience is now kept
    await bob.join(room)
    _, reply = await ask(bob, room, "!search pangolin enclosure", env.bot_id)
    assert link(room, before) not in body_of(reply) and "members only" not in body_of(reply)


@pytest.mark.parametrize("dispatcher_sees_it", [True, False], ids=["appservice", "missed"])
async def test_bot_search_applies_a_visibility_change_to_the_next_command(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch, dispatcher_sees_it: bool
) -> None:
    """Regression for the audience kept per room: a `shared` room made `world_readable` (a
    reply is then read by anyone) stops quoting its `shared` history at the very next command,
    whether or not the dispatcher saw the change."""
    if not dispatcher_sees_it:
        monkeypatch.setattr(env.service.handler, "state_changed", lambda room_id: None)
    room = await env.room(alice)
    said = await alice.send_text(room, "the armadillo feeding rota is on the board")
    _, reply = await ask(alice, room, "!search armadillo rota", env.bot_id)
    assert link(room, said) in body_of(reply)
    await asyncio.sleep(0.01)  # a message in the ms of a change counts under both
    await alice.set_history_visibility(room, "world_readable")
    _, reply = await ask(alice, room, "!search armadillo rota", env.bot_id)
    assert link(room, said) not in body_of(reply) and "feeding rota" not in body_of(reply)


async def test_bot_search_keeps_history_a_renamed_member_saw(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """A member who joined a `joined` room before the bot and changed their room nick after
    does not cut the history at the nick change: a profile change is not a join. The bot may
    not read that member's join (Synapse hides it: the bot was not there), so their start is
    taken no later than the bot's own."""
    room = await _joined_room_the_bot_joins_late(env, alice, bob)
    seen = await alice.send_text(room, "the quokka count is forty two")
    await asyncio.sleep(0.01)
    await bob.send_state(
        room, "m.room.member", {"membership": "join", "displayname": "Bob, renamed"}, bob.user_id
    )
    _, reply = await ask(alice, room, "!search quokka count", env.bot_id)
    assert link(room, seen) in body_of(reply)


async def _joined_room_the_bot_joins_late(env: Env, alice: MatrixUser, bob: MatrixUser) -> str:
    """A `joined` room bob joined before the bot did."""
    room = await env.hs.fresh_room(alice)
    await alice.set_history_visibility(room, "joined")
    await bob.join(room)
    await alice.send_text(room, "said before the bot came")
    await env.hs.bot().join(room)
    return room


async def test_bot_search_judges_each_message_by_the_visibility_then(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """Regression: the visibility in force when a message was sent decides, not today's. A
    `shared` room switched to `joined`: what was said while `shared` is quoted to members who
    came later, what was said after the switch and before their join is not. Switched back to
    `shared`, nothing from the `joined` period is quoted any more (a reply is then read by
    everyone who ever joins)."""
    room = await env.room(alice)  # `shared`, the preset's default
    early = await alice.send_text(room, "wombat burrow found by the shared fence")
    await asyncio.sleep(0.01)  # a message in the ms of a change counts under both
    await alice.set_history_visibility(room, "joined")
    await asyncio.sleep(0.01)
    middle = await alice.send_text(room, "wombat litter born, members only")
    await asyncio.sleep(0.01)
    await bob.join(room)
    late = await alice.send_text(room, "wombat tracks near the gate")
    await env.settle(room)

    async def search(query: str) -> str:
        _, reply = await ask(alice, room, f"!search {query}", env.bot_id)
        return str(reply["content"])

    assert link(room, early) in await search("burrow fence")
    assert link(room, late) in await search("tracks gate")
    hidden = await search("litter born")
    assert link(room, middle) not in hidden and "members only" not in hidden

    await bob.leave(room)  # only alice and the bot: the `joined` period is hers to read
    assert link(room, middle) in await search("litter born")
    await asyncio.sleep(0.01)
    await alice.set_history_visibility(room, "shared")
    assert link(room, early) in await search("burrow fence")
    hidden = await search("litter born")
    assert link(room, middle) not in hidden and "members only" not in hidden


async def test_bot_search_reads_a_room_of_large_messages_each_to_its_share(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a read held every event up to the event bound whatever its size, and the
    fold scrubbed all of it per command; then (issue 37 item 9) 17 such messages filled the
    text bound, hiding everything older. Each message is kept to its share (`EVENT_SHARE`), so
    a room of 60 KB messages is read whole and its oldest message found; the rooms' cached
    copies keep to their budget by evicting the least recently used."""
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)  # no indexing
    room = await env.room(alice)
    oldest = await alice.send_text(room, "the oldest message mentions the platypus")
    for i in range(40):
        await alice.send_text(room, f"bulk {i} " + "lorem ipsum " * 5000)
    _, reply = await ask(alice, room, "!search platypus", env.bot_id)
    assert "scanned the whole room" in body_of(reply)
    assert link(room, oldest) in body_of(reply)
    logs = RecentEvents(max_size=50_000)
    events, cut = await logs.latest(env.service.client, RoomID(room), TRANSCRIPT_LIMIT)
    assert not cut and len(events) > 40 and 80_000 < logs.size < 100_000  # one room stays
    small = await env.room(alice)
    await alice.send_text(small, "a short one")
    await logs.latest(env.service.client, RoomID(small), TRANSCRIPT_LIMIT)
    assert logs.size < 10_000  # the large room's copy went


async def test_bot_board_survives_a_flood_of_big_edits(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 46): 126 big edits emptied the pinboard again. Each text field of an
    event was kept to its share, and an edit has four (the `* …` fallback's body and HTML, the
    new body and HTML): 126 of them filled the read's 1,000,000 characters and pushed the
    `!pin` out of it. An event's fields together are kept to its share (`EVENT_SHARE`), so the
    board is still read whole, as with the default event bound."""
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)  # no indexing
    monkeypatch.setattr(env.service.handler.reads, "_limit", 2048)  # `bot.transcript_limit`
    room = await env.room(alice)
    pinned = await alice.send_text(room, "the numbat feeding schedule is on the wiki")
    await wait_reply(alice, room, await alice.send_reply(room, pinned, "!pin #docs"), env.bot_id)
    draft = await alice.send_text(room, "a draft to be edited")
    big = "lorem ipsum dolor sit amet " * 100  # 2,700 characters a field
    html = {"format": "org.matrix.custom.html", "formatted_body": f"<p>{big}</p>"}
    edit = {
        "msgtype": "m.text",
        "body": f"* {big}",
        **html,
        "m.new_content": {"msgtype": "m.text", "body": big, **html},
        "m.relates_to": {"rel_type": "m.replace", "event_id": draft},
    }
    await asyncio.gather(*(alice.send(room, "m.room.message", edit) for _ in range(126)))
    _, board = await ask(alice, room, "!pins", env.bot_id)
    assert "numbat feeding schedule" in body_of(board)


async def test_reads_of_a_room_asked_at_once_share_one_request(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (a burst): commands waiting at once for a room's log read it one after
    another, one `/messages` each; now those that asked before a read began share it, cold or
    warm, and it holds what was said before they asked."""
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)  # no indexing
    room = await env.room(alice)
    client = env.service.client

    def backwards(mark: int) -> list[str]:  # the log's reads of this room: `dir=b`, newest end
        return [
            r.path
            for r in env.sent_since(mark)
            if quote(room, safe="") in r.path
            and r.params.get("dir") == "b"
            and "from" not in r.params
        ]

    logs = RecentEvents()
    for said in ("said before anyone asked", "said before the next three asked"):
        await alice.send_text(room, said)
        mark = len(env.requests.requests)
        reads = [logs.latest(client, RoomID(room), TRANSCRIPT_LIMIT) for _ in range(3)]
        for events, _ in await asyncio.gather(*reads):
            assert said in [e["content"].get("body") for e in events]
        assert len(backwards(mark)) == 1, backwards(mark)


async def test_bot_command_wakes_no_refresh(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command is never indexed (rule 9), so it wakes no refresh pass to compete with its
    reply; an ordinary message in the same room does."""
    room = await env.room(alice)
    await env.quiesce(alice, room)  # the bot's own join, which wakes the room, is handled
    woken: list[str] = []
    wake = env.service.scheduler.wake

    def recording(room_id: RoomID) -> None:
        woken.append(room_id)
        wake(room_id)

    monkeypatch.setattr(env.service.scheduler, "wake", recording)
    await ask(alice, room, "!search anything at all", env.bot_id)
    assert room not in woken
    await alice.send_text(room, "an ordinary message about anything")
    deadline = time.monotonic() + 10
    while room not in woken:
        assert time.monotonic() < deadline, "an ordinary message woke no refresh"
        await asyncio.sleep(0.05)


async def test_bot_redaction_leaves_the_index_within_seconds(env: Env, alice: MatrixUser) -> None:
    """A redaction in a live room wakes the writer: its text leaves every point within 5 s."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the purple walrus sings at dawn")
    # Its pushed wake may start a pass after a plain settle; the 5 s below are the
    # redaction's, so let that pass finish first.
    await env.quiesce(alice, room)  # their wakes are issued
    await env.settle(room)  # a pass after every wake: none is left in flight
    col = await env.service.writer.open()
    flt = PointFilter(room_ids=(room,), event_ids=(doomed,))
    assert await asyncio.to_thread(col.count, flt) == 1
    await alice.redact(room, doomed)
    started = time.monotonic()
    while await asyncio.to_thread(col.count, flt):
        assert time.monotonic() - started < 5.0, "the redacted message is still indexed"
        await asyncio.sleep(0.1)
    _, reply = await ask(alice, room, "!search walrus", env.bot_id)
    assert "walrus" not in body_of(reply).split("\n", 1)[1]


async def test_bot_search_checks_its_hits_against_the_log_it_read_for_the_command(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message redacted after indexing, the writer not woken since: the reply does not
    quote it, and the command checked its index hits against the room log it had just read
    for the transcript: no tail read (`/messages` with a filter) and no `GET /event` of its
    own, one or two homeserver requests a command fewer (bench/RESULTS.md §7e)."""
    room = await env.room(alice)
    doomed = await alice.send_text(room, "the purple walrus sings at dawn")
    await env.quiesce(alice, room)
    await env.settle(room)
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)  # index as is
    mark = len(env.requests.requests)
    _, reply = await ask(alice, room, "!search purple walrus", env.bot_id)
    assert link(room, doomed) in body_of(reply)
    await alice.redact(room, doomed)
    _, reply = await ask(alice, room, "!search purple walrus", env.bot_id)
    assert "purple" not in body_of(reply).split("\n", 1)[1]
    checks = [  # this room's tail reads and single-event fetches
        r.path
        for r in env.sent_since(mark)
        if quote(room, safe="") in r.path and ("filter" in r.params or "/event/" in r.path)
    ]
    assert checks == []


async def test_bot_search_forgets_history_the_homeserver_purged(
    env: Env, hs: Homeserver, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin's purge deletes history without a redaction event, which the bot's copy of the
    room never sees by reading what is newer; once the copy is older than its age bound it is
    read whole again, and the purged message is quoted no more."""
    monkeypatch.setattr(env.service.scheduler, "wake", lambda room_id: None)  # transcript only
    room = await env.room(alice)
    gone = await alice.send_text(room, "the wombat burrow is behind the shed")
    kept = await alice.send_text(room, "nothing else to report")
    _, reply = await ask(alice, room, "!search wombat", env.bot_id)
    assert link(room, gone) in body_of(reply)
    admin = await hs.register(admin=True)
    path = "/_synapse/admin/v1/purge_history/" + quote(room, safe="")
    body = {"purge_up_to_event_id": kept, "delete_local_events": True}
    purge_id = str((await admin.call("POST", path, body))["purge_id"])
    status_path = "/_synapse/admin/v1/purge_history_status/" + quote(purge_id, safe="")
    for _ in range(100):
        if (await admin.call("GET", status_path))["status"] == "complete":
            break
        await asyncio.sleep(0.1)
    _, reply = await ask(alice, room, "!search wombat", env.bot_id)
    assert link(room, gone) in body_of(reply)  # within the age bound the copy still holds it
    monkeypatch.setattr(RecentEvents, "MAX_AGE_SECONDS", 0.0)
    _, reply = await ask(alice, room, "!search wombat", env.bot_id)
    assert link(room, gone) not in body_of(reply)
