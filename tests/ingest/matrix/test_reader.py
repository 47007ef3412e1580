"""ingest.matrix: the reader against the real Synapse in both modes (built from the config:
test_reader_config.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer
from ingest.errors import (
    MatrixAuthError,
    MatrixForbidden,
)
from ingest.matrix import MatrixReader, Page, ReaderMode, Retry
from ingest.types import RoomID, UserID
from tests.homeserver import Homeserver, MatrixUser

FAST = Retry(attempts=3, backoff=0.01, max_backoff=0.05)
LONG_ROOM_SIZE = 250
BASE_TS = 1_700_000_000_000


@dataclass
class Subject:
    """A reader under test, and the same identity as a harness user (to invite and join it)."""

    reader: MatrixReader
    user: MatrixUser
    mode: ReaderMode


def make_reader(synapse: SynapseServer, user: MatrixUser, mode: ReaderMode) -> MatrixReader:
    if mode is ReaderMode.CLIENT:
        return MatrixReader(synapse.base_url, user.access_token, user.user_id, mode, retry=FAST)
    return MatrixReader(
        synapse.base_url,
        synapse.as_token,
        synapse.bot_user_id,
        mode,
        token_name=f"as_token in {synapse.registration_path}",
        retry=FAST,
    )


@pytest_asyncio.fixture(params=[ReaderMode.CLIENT, ReaderMode.APPSERVICE], ids=str)
async def subject(
    request: pytest.FixtureRequest, synapse: SynapseServer, hs: Homeserver
) -> AsyncIterator[Subject]:
    """The reader in client mode (a fresh user) or appservice mode (the bot @muninn)."""
    mode: ReaderMode = request.param
    user = await hs.register(displayname="Reader") if mode is ReaderMode.CLIENT else hs.bot()
    reader = make_reader(synapse, user, mode)
    yield Subject(reader, user, mode)
    await reader.close()


async def admit(owner: MatrixUser, room_id: str, subject: Subject) -> None:
    """Invite the reader's user and join it (the bot joins with the as_token).

    The bot is shared by the session, so a room it already joined is left as it is.
    """
    if room_id in await subject.user.joined_rooms():
        return
    await owner.invite(room_id, subject.user.user_id)
    await subject.user.join(room_id)


async def walk_all(reader: MatrixReader, room_id: str, token: str | None, size: int) -> list[Page]:
    return [page async for page in reader.walk(room_id, token, size)]


@dataclass
class LongRoom:
    room_id: str
    owner: MatrixUser
    seeded: list[str]  # event ids of the seeded messages, in sending order


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def long_room(hs: Homeserver) -> LongRoom:
    """A public room with 250 backdated messages, built once (seeding costs ~30 ms a message).

    Tests only append to it and check their own events, so they stay independent.
    """
    owner = await hs.register()
    room_id = await hs.fresh_room(owner)
    seeder = await hs.seed_user()
    await owner.invite(room_id, seeder.user_id)
    await seeder.join(room_id)
    seeded = [
        await seeder.send_text(room_id, f"seeded {i}", ts=BASE_TS + i * 1000)
        for i in range(LONG_ROOM_SIZE)
    ]
    return LongRoom(room_id, owner, seeded)


# ---------------------------------------------------------------- against the real Synapse


async def test_reader_whoami_names_the_reader(subject: Subject) -> None:
    """whoami answers the reader's own user id (the bot user in appservice mode)."""
    assert await subject.reader.whoami() == subject.user.user_id


async def test_reader_joined_rooms_lists_joined_not_invited(
    subject: Subject, alice: MatrixUser, hs: Homeserver
) -> None:
    """A joined room is listed; a room the reader is only invited to is not."""
    joined, invited = await hs.fresh_room(alice), await hs.fresh_room(alice)
    await admit(alice, joined, subject)
    await alice.invite(invited, subject.user.user_id)
    rooms = await subject.reader.joined_rooms()
    assert joined in rooms
    assert invited not in rooms


async def test_reader_direct_rooms_reads_m_direct(
    subject: Subject, hs: Homeserver, alice: MatrixUser
) -> None:
    """Rooms in the reader's m.direct account data are its direct rooms."""
    dm = await hs.make_dm(alice, subject.user)
    assert dm in await subject.reader.direct_rooms()


async def test_reader_direct_rooms_empty_without_account_data(
    synapse: SynapseServer, hs: Homeserver
) -> None:
    """A user that never set m.direct (404 from Synapse) has no direct rooms."""
    user = await hs.register()
    async with make_reader(synapse, user, ReaderMode.CLIENT) as reader:
        assert await reader.direct_rooms() == set()


async def test_reader_room_state_reads_scope_facts(
    subject: Subject, alice: MatrixUser, bob: MatrixUser, hs: Homeserver
) -> None:
    """Name, aliases, join rule, visibility, encryption, version, members, names, bridges."""
    suffix = unique_localpart("r")
    room = await alice.create_room(name="Facts", alias_localpart=f"facts-{suffix}")
    alias, alt = f"#facts-{suffix}:muninn.test", f"#facts-alt-{suffix}:muninn.test"
    await alice.set_canonical_alias(room, alias, [alt])
    await alice.set_history_visibility(room, "joined")
    await alice.enable_encryption(room)
    await alice.set_bridge_state(room, "org.example.discord://guild/chan")
    await bob.join(room)
    await bob.leave(room)
    await admit(alice, room, subject)
    state = await subject.reader.room_state(room)
    assert (state.room_id, state.joined, state.name) == (room, True, "Facts")
    assert (state.canonical_alias, state.alt_aliases) == (alias, (alt,))
    assert (state.join_rule, state.history_visibility) == ("public", "joined")
    assert (state.encrypted, state.room_version, state.create_type) == (True, "12", None)
    assert set(state.members) == {alice.user_id, subject.user.user_id}
    assert (UserID(alice.user_id), "Alice") in state.display_names
    assert state.bridge_state_keys == ("org.example.discord://guild/chan",)
    assert state.direct_flag is False


async def test_reader_room_state_sees_is_direct_after_join(
    subject: Subject, hs: Homeserver, alice: MatrixUser
) -> None:
    """A DM's is_direct (only on the invite) is found through the join's prev_content."""
    dm = await hs.make_dm(alice, subject.user)
    state = await subject.reader.room_state(dm)
    assert state.direct_flag is True
    assert state.join_rule == "invite"


async def test_reader_room_state_keeps_is_direct_after_a_display_name_change(
    subject: Subject, alice: MatrixUser
) -> None:
    """Regression: a DM whose invitee later changed display name is still a DM. The change
    is a new member event whose prev_content is the join, not the invite with is_direct."""
    dm = await subject.user.create_room(
        preset="trusted_private_chat", invite=[alice.user_id], is_direct=True
    )
    await alice.join(dm)
    for name in ("Alice, renamed", "Alice, renamed again"):  # as `/myroomnick` does
        content = {"membership": "join", "displayname": name}
        await alice.send_state(dm, "m.room.member", content, alice.user_id)
    state = await subject.reader.room_state(dm)
    assert state.direct_flag is True
    assert dm not in await subject.reader.direct_rooms()  # is_direct alone decides here


async def test_reader_room_state_of_a_space_and_a_left_room(
    subject: Subject, alice: MatrixUser
) -> None:
    """create_type comes from m.room.create; after leaving, `joined` is False."""
    space = await alice.create_room(name="Space", creation_content={"type": "m.space"})
    await admit(alice, space, subject)
    assert (await subject.reader.room_state(space)).create_type == "m.space"
    await subject.reader.leave(space)
    left = await subject.reader.room_state(space)
    assert left.joined is False
    assert subject.user.user_id not in left.members


async def test_reader_room_state_of_unjoined_room_is_forbidden(
    subject: Subject, room: str
) -> None:
    """A room the reader never joined answers 403, raised as MatrixForbidden."""
    with pytest.raises(MatrixForbidden):
        await subject.reader.room_state(room)


async def test_reader_resolve_alias_known_and_unknown(subject: Subject, alice: MatrixUser) -> None:
    """A local alias resolves to its room; an unknown one is None."""
    localpart = unique_localpart("alias")
    room = await alice.create_room(alias_localpart=localpart)
    assert await subject.reader.resolve_alias(f"#{localpart}:muninn.test") == room
    assert await subject.reader.resolve_alias(f"#no-{localpart}:muninn.test") is None


async def test_reader_walk_reads_a_long_room_in_order_once(
    subject: Subject, long_room: LongRoom
) -> None:
    """Pages of 50 cover every event exactly once, the seeded ones in sending order."""
    await admit(long_room.owner, long_room.room_id, subject)
    pages = await walk_all(subject.reader, long_room.room_id, None, 50)
    events = [e for p in pages for e in p.events]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    assert events[0]["type"] == "m.room.create"
    seeded = set(long_room.seeded)
    assert [i for i in ids if i in seeded] == long_room.seeded
    assert all(len(p.events) <= 50 for p in pages)
    assert len(pages) >= LONG_ROOM_SIZE // 50
    assert all(p.end is not None for p in pages)


async def test_reader_walk_resumes_from_stored_token_with_only_new_events(
    subject: Subject, long_room: LongRoom
) -> None:
    """After a full walk, a walk from the last `end` yields exactly the events sent since."""
    await admit(long_room.owner, long_room.room_id, subject)
    pages = await walk_all(subject.reader, long_room.room_id, None, 50)
    cursor = pages[-1].end
    assert await walk_all(subject.reader, long_room.room_id, cursor, 50) == []
    new = [await long_room.owner.send_text(long_room.room_id, f"new {i}") for i in range(7)]
    resumed = await walk_all(subject.reader, long_room.room_id, cursor, 5)
    assert [e["event_id"] for p in resumed for e in p.events] == new
    assert await walk_all(subject.reader, long_room.room_id, resumed[-1].end, 5) == []


async def test_synapse_forward_walk_end_omits_end_and_resumes(
    alice: MatrixUser, room: str
) -> None:
    """Regression guard for walk's docstring: at the end Synapse drops `end`, keeps `start`."""
    last = await alice.messages(room, limit=1000)
    assert last["chunk"]
    assert "end" in last
    tail = await alice.messages(room, from_token=last["end"])
    assert tail == {"chunk": [], "start": last["end"]}
    sent = await alice.send_text(room, "after the end")
    more = await alice.messages(room, from_token=last["end"])
    assert [e["event_id"] for e in more["chunk"]] == [sent]
    assert "end" in more


async def test_reader_walk_shows_redacted_events_with_empty_content(
    subject: Subject, alice: MatrixUser, room: str
) -> None:
    """A redacted message is walked with its id, `content: {}` and redacted_because."""
    await admit(alice, room, subject)
    secret = await alice.send_text(room, "password=hunter2")
    await alice.redact(room, secret, "leaked")
    events = [e for p in await walk_all(subject.reader, room, None, 10) for e in p.events]
    redacted = next(e for e in events if e["event_id"] == secret)
    assert redacted["content"] == {}
    assert "redacted_because" in redacted["unsigned"]
    assert any(e["type"] == "m.room.redaction" and e.get("redacts") == secret for e in events)


async def test_reader_walk_passes_invisible_history_as_empty_pages(
    subject: Subject, alice: MatrixUser, room: str
) -> None:
    """Under `joined` visibility, pages before the join come back empty but with an `end`."""
    await alice.set_history_visibility(room, "joined")
    for i in range(8):
        await alice.send_text(room, f"before {i}")
    await admit(alice, room, subject)
    after = [await alice.send_text(room, f"after {i}") for i in range(3)]
    pages = await walk_all(subject.reader, room, None, 4)
    bodies = [e["content"].get("body") for p in pages for e in p.events]
    assert not any(str(b).startswith("before") for b in bodies)
    assert [
        e["event_id"] for p in pages for e in p.events if e["type"] == "m.room.message"
    ] == after
    assert any(not p.events and p.end for p in pages)


async def test_reader_walk_refuses_a_zero_page_size(subject: Subject, room: str) -> None:
    """page_size below 1 is a programming error, raised before any request."""
    with pytest.raises(ValueError, match="page_size"):
        await walk_all(subject.reader, room, None, 0)


async def test_reader_latest_is_newest_first_up_to_limit(
    subject: Subject, alice: MatrixUser, room: str
) -> None:
    """latest pages backwards until `limit` events, newest first."""
    await admit(alice, room, subject)
    sent = [await alice.send_text(room, f"msg {i}") for i in range(12)]
    latest = await subject.reader.latest(room, 10, page_size=3)
    assert [e["event_id"] for e in latest] == sent[::-1][:10]
    everything = await subject.reader.latest(room, 1000, page_size=7)
    assert everything[-1]["type"] == "m.room.create"


async def test_reader_get_event_found_and_missing(
    subject: Subject, alice: MatrixUser, room: str
) -> None:
    """An event is returned by id (ids quoted in the path); an unknown id is None."""
    await admit(alice, room, subject)
    event_id = await alice.send_text(room, "findable")
    event = await subject.reader.get_event(RoomID(room), event_id)
    assert event is not None
    assert event["content"]["body"] == "findable"
    assert await subject.reader.get_event(room, "$doesnotexist") is None


async def test_reader_relations_reads_all_pages_oldest_first(
    subject: Subject, alice: MatrixUser, room: str
) -> None:
    """Thread replies and edits of an event come back over several pages, in order."""
    await admit(alice, room, subject)
    root = await alice.send_text(room, "thread root")
    replies = [await alice.send_thread_reply(room, root, f"reply {i}") for i in range(7)]
    edits = [await alice.send_edit(room, root, f"root v{i}") for i in range(2)]
    thread = await subject.reader.relations(room, root, "m.thread", page_size=3)
    assert [e["event_id"] for e in thread] == replies
    assert [
        e["event_id"] for e in await subject.reader.relations(room, root, "m.replace")
    ] == edits
    assert await subject.reader.relations(room, replies[0], "m.thread") == []


async def test_reader_join_by_alias_and_leave(subject: Subject, alice: MatrixUser) -> None:
    """join accepts an alias and returns the room id; leave takes it off joined_rooms."""
    localpart = unique_localpart("join")
    room = await alice.create_room(alias_localpart=localpart)
    assert await subject.reader.join(f"#{localpart}:muninn.test") == room
    assert room in await subject.reader.joined_rooms()
    await subject.reader.leave(room)
    assert room not in await subject.reader.joined_rooms()


async def test_reader_bad_token_raises_auth_error_naming_it(
    synapse: SynapseServer, subject: Subject
) -> None:
    """A token Synapse does not know (401 M_UNKNOWN_TOKEN) names the token in the error."""
    reader = MatrixReader(
        synapse.base_url,
        "syt_not_a_real_token",
        subject.user.user_id,
        subject.mode,
        token_name=subject.reader.token_name,
        retry=FAST,
    )
    async with reader:
        with pytest.raises(MatrixAuthError, match=re.escape(subject.reader.token_name)) as err:
            await reader.whoami()
    assert err.value.errcode == "M_UNKNOWN_TOKEN"
    assert "syt_not_a_real_token" not in str(err.value)
