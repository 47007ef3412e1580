"""The test harness itself: a real Synapse starts, users register, messages go and come back."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.demo.client import HarnessError
from bot.demo.homeserver import PING_ATTEMPTS, registration_mac
from bot.demo.synapse import SynapseServer
from tests.homeserver import Homeserver, MatrixUser
from tests.transport import MockedTransport, calls

PUSH_TIMEOUT = 60.0  # seconds for a pushed event to arrive behind Synapse's stored backlog


def test_synapse_answers_versions_on_loopback(synapse: SynapseServer) -> None:
    """The fixture's Synapse is up on 127.0.0.1, with its log and registration on disk."""
    with urllib.request.urlopen(f"{synapse.base_url}/_matrix/client/versions") as resp:
        assert resp.status == 200
    assert synapse.base_url.startswith("http://127.0.0.1:")
    assert synapse.process.poll() is None
    assert synapse.log_path.is_file()
    assert synapse.registration_path.is_file()
    assert synapse.appservice_port not in (synapse.port, 0)


def test_registration_mac_matches_the_documented_example() -> None:
    """The HMAC is SHA1 over nonce, user, password and admin flag, NUL-separated."""
    import hashlib
    import hmac

    expected = hmac.new(b"s", b"n\x00u\x00p\x00notadmin", hashlib.sha1).hexdigest()
    assert registration_mac("s", "n", "u", "p", admin=False) == expected


async def test_register_gives_a_working_token(hs: Homeserver) -> None:
    """A registered user's token is accepted by whoami and by a password login."""
    user = await hs.register(password="pw-1234")
    who = await user.call("GET", "/_matrix/client/v3/account/whoami")
    assert who["user_id"] == user.user_id
    again = await hs.login(user.localpart, "pw-1234")
    assert again.user_id == user.user_id


async def test_send_text_round_trips(alice: MatrixUser, room: str) -> None:
    """A sent text message comes back by id with its body and sender."""
    event_id = await alice.send_text(room, "hello harness")
    event = await alice.get_event(room, event_id)
    assert event["content"]["body"] == "hello harness"
    assert event["sender"] == alice.user_id


async def test_room_ids_have_no_server_part(alice: MatrixUser, room: str) -> None:
    """Room version 12 is the default: its room ids carry no `:server`."""
    assert ":" not in room
    create = [e for e in await alice.state(room) if e["type"] == "m.room.create"]
    assert create[0]["content"]["room_version"] == "12"


async def test_seed_user_backdates_with_ts(hs: Homeserver, alice: MatrixUser, room: str) -> None:
    """An appservice user's `?ts=` sets origin_server_ts; a plain user's is ignored."""
    seeder = await hs.seed_user()
    await alice.invite(room, seeder.user_id)
    await seeder.join(room)
    ts = 1_600_000_000_000
    seeded = await seeder.send_text(room, "from the past", ts=ts)
    plain = await alice.send_text(room, "from now", ts=ts)
    assert (await alice.get_event(room, seeded))["origin_server_ts"] == ts
    assert (await alice.get_event(room, plain))["origin_server_ts"] > ts


async def test_rate_limits_are_relaxed(alice: MatrixUser, room: str) -> None:
    """Thirty quick messages from one user pass (the defaults 429 after about nine)."""
    for i in range(30):
        await alice.send_text(room, f"burst {i}")


async def test_bot_cannot_sync(bot: MatrixUser) -> None:
    """The appservice bot user gets 500 from /sync; it must read with /messages."""
    with pytest.raises(HarnessError) as err:
        await bot.call("GET", "/_matrix/client/v3/sync", query={"timeout": 0})
    assert err.value.status == 500


async def test_make_dm_puts_is_direct_on_the_invite_only(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser
) -> None:
    """After the join, is_direct survives only in the join event's unsigned.prev_content."""
    dm = await hs.make_dm(alice, bob)
    joins = [e for e in await alice.state(dm) if e.get("state_key") == bob.user_id]
    assert joins[0]["content"]["membership"] == "join"
    assert "is_direct" not in joins[0]["content"]
    assert joins[0]["unsigned"]["prev_content"]["is_direct"] is True
    assert dm in (await bob.get_account_data("m.direct") or {})[alice.user_id]


async def test_redacted_event_keeps_its_id_with_empty_content(
    alice: MatrixUser, room: str
) -> None:
    """A redacted message is still served, with `content: {}` and `redacted_because`."""
    event_id = await alice.send_text(room, "oops, a secret")
    await alice.redact(room, event_id, "leak")
    event = await alice.get_event(room, event_id)
    assert event["content"] == {}
    assert event["unsigned"]["redacted_because"]["type"] == "m.room.redaction"


async def test_reply_thread_and_edit_carry_spec_relations(alice: MatrixUser, room: str) -> None:
    """Replies have both fallbacks; thread replies and edits carry their relation."""
    parent = await alice.send_text(room, "the original")
    reply = await alice.get_event(room, await alice.send_reply(room, parent, "my answer"))
    assert reply["content"]["body"] == f"> <{alice.user_id}> the original\n\nmy answer"
    assert reply["content"]["formatted_body"].startswith("<mx-reply><blockquote>")
    assert reply["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == parent
    thread = await alice.get_event(room, await alice.send_thread_reply(room, parent, "in thread"))
    assert thread["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert thread["content"]["m.relates_to"]["is_falling_back"] is True
    edit = await alice.get_event(room, await alice.send_edit(room, parent, "the revised"))
    assert edit["content"]["body"] == "* the revised"
    assert edit["content"]["m.new_content"]["body"] == "the revised"


async def test_bridged_room_has_both_bridge_events(hs: Homeserver, alice: MatrixUser) -> None:
    """`make_bridged_room` sends m.bridge and uk.half-shot.bridge with one state_key."""
    room = await hs.make_bridged_room(alice, channel_id="1234")
    bridges = [
        e for e in await alice.state(room) if e["type"] in ("m.bridge", "uk.half-shot.bridge")
    ]
    assert len(bridges) == 2
    assert len({e["state_key"] for e in bridges}) == 1


async def test_encrypted_and_media_events_are_accepted(alice: MatrixUser, room: str) -> None:
    """A megolm-shaped `m.room.encrypted` and an uploaded `m.image` are stored as sent."""
    encrypted = await alice.get_event(room, await alice.send_encrypted(room))
    assert encrypted["type"] == "m.room.encrypted"
    assert encrypted["content"]["algorithm"] == "m.megolm.v1.aes-sha2"
    image = await alice.get_event(room, await alice.send_image(room))
    assert image["content"]["msgtype"] == "m.image"
    assert image["content"]["url"].startswith("mxc://muninn.test/")


async def test_canonical_alias_with_alt_aliases(alice: MatrixUser, room: str) -> None:
    """The helper creates the directory entries so Synapse accepts alt_aliases."""
    suffix = room[1:9].lower()
    main, alt = f"#main-{suffix}:muninn.test", f"#alt-{suffix}:muninn.test"
    await alice.set_canonical_alias(room, main, [alt])
    state = {e["type"]: e["content"] for e in await alice.state(room)}
    assert state["m.room.canonical_alias"] == {"alias": main, "alt_aliases": [alt]}


async def test_fresh_rooms_are_independent(hs: Homeserver, alice: MatrixUser) -> None:
    """Two fresh rooms are distinct and start without each other's messages."""
    first, second = await asyncio.gather(hs.fresh_room(alice), hs.fresh_room(alice))
    assert first != second
    await alice.send_text(first, "only in the first")
    chunk = (await alice.messages(second))["chunk"]
    assert all(e["type"] != "m.room.message" for e in chunk)


async def test_appservice_port_receives_pushed_transactions(
    hs: Homeserver, alice: MatrixUser, room: str
) -> None:
    """A listener on `appservice_port` gets seed users' events, signed with the hs_token."""
    received: list[dict[str, Any]] = []
    tokens: set[str] = set()
    arrived = asyncio.Event()  # set by every transaction

    async def transaction(request: web.Request) -> web.Response:
        tokens.add(request.headers.get("Authorization", ""))
        received.extend((await request.json()).get("events", []))
        arrived.set()
        return web.json_response({})

    async def ping(request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_put("/_matrix/app/v1/transactions/{txn_id}", transaction)
    app.router.add_post("/_matrix/app/v1/ping", ping)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", hs.server.appservice_port).start()
    try:
        await hs.ping_appservice()
        seeder = await hs.seed_user()
        await alice.invite(room, seeder.user_id)
        await seeder.join(room)
        event_id = await seeder.send_text(room, "pushed")

        async def pushed() -> None:
            while not any(e.get("event_id") == event_id for e in received):
                arrived.clear()
                await arrived.wait()

        # The ping makes Synapse send first what it stored while nothing listened (every
        # earlier module's seed-user events, one stored transaction at a time); this event
        # comes after that backlog, however long it is: wait for it, not for a fixed 5 s.
        await asyncio.wait_for(pushed(), PUSH_TIMEOUT)
        assert tokens == {f"Bearer {hs.server.hs_token}"}
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------- the ping's faults (transport)

PING = re.compile(r"^http://127\.0\.0\.1:\d+/_matrix/client/v1/appservice/muninn/ping$")
PING_RACE = {
    "errcode": "M_CONNECTION_FAILED",
    "error": "AlreadyCalled: Tried to cancel an already-called event.",
}


async def test_ping_waits_while_synapse_pushes_its_backlog(synapse: SynapseServer) -> None:
    """A 502 M_CONNECTION_FAILED "AlreadyCalled" (Synapse still pushing what it stored while
    nothing listened; the CI flake of stop 9) is pinged again until a 200."""
    async with aiohttp.ClientSession() as session:
        with MockedTransport() as mocked:
            for _ in range(PING_ATTEMPTS + 3):  # more than a dead listener gets
                mocked.post(PING, status=502, payload=PING_RACE)
            mocked.post(PING, payload={"duration_ms": 3})
            assert await Homeserver(synapse, session).ping_appservice() == {"duration_ms": 3}
            assert calls(mocked) == PING_ATTEMPTS + 4


async def test_ping_raises_a_setup_error_at_once_and_gives_up_in_bounded_time(
    synapse: SynapseServer,
) -> None:
    """A ping refused for another cause (a wrong token) is raised at once; a listener that
    refuses connections after `PING_ATTEMPTS` pings; a backlog that never ends at the
    patience's end."""
    forbidden = {"errcode": "M_FORBIDDEN", "error": "Mismatching application service ID"}
    dead = {
        "errcode": "M_CONNECTION_FAILED",
        "error": "ConnectionRefusedError: Connection was refused by other side: 111",
    }
    async with aiohttp.ClientSession() as session:
        hs = Homeserver(synapse, session)
        with MockedTransport() as mocked:
            mocked.post(PING, status=403, payload=forbidden)
            with pytest.raises(HarnessError, match="403"):
                await hs.ping_appservice()
            assert calls(mocked) == 1
        with MockedTransport() as mocked:
            mocked.post(PING, status=502, payload=dead, repeat=True)
            with pytest.raises(HarnessError, match="refused"):
                await hs.ping_appservice()
            assert calls(mocked) == PING_ATTEMPTS
        with MockedTransport() as mocked:
            mocked.post(PING, status=502, payload=PING_RACE, repeat=True)
            with pytest.raises(HarnessError, match=r"502.*AlreadyCalled"):
                await hs.ping_appservice(patience=0.5)
