"""A member's membership history (`ingest.matrix.membership`), walked over a fixed set of
events."""

from __future__ import annotations

from typing import Any

from ingest.matrix.membership import Chain, direct_in, walk_back

JSON = dict[str, Any]


def member(
    event_id: str, ts: int, membership: str, prev: JSON | None, replaces: str | None, **extra: Any
) -> JSON:
    unsigned: JSON = {}
    if prev is not None:
        unsigned["prev_content"] = prev
    if replaces is not None:
        unsigned["replaces_state"] = replaces
    return {
        "type": "m.room.member",
        "state_key": "@bob:hs.test",
        "event_id": event_id,
        "origin_server_ts": ts,
        "content": {"membership": membership, **extra},
        "unsigned": unsigned,
    }


INVITE = member("$invite", 100, "invite", None, None, is_direct=True)
JOIN = member("$join", 200, "join", {"membership": "invite", "is_direct": True}, "$invite")
RENAME = member("$rename", 300, "join", {"membership": "join"}, "$join", displayname="B")
RENAME2 = member("$rename2", 400, "join", {"membership": "join", "displayname": "B"}, "$rename")
EVENTS = {e["event_id"]: e for e in (INVITE, JOIN, RENAME, RENAME2)}


async def _get(event_id: str) -> JSON | None:
    return EVENTS.get(event_id)


async def _hidden(event_id: str) -> JSON | None:
    return None  # the homeserver shows the reader none of the earlier events


async def test_walk_back_finds_is_direct_behind_profile_changes() -> None:
    """Two profile changes after the join: the invite's is_direct is found two hops back."""
    chain = await walk_back(RENAME2, _get, counted=frozenset({"join"}))
    assert [e["event_id"] for e in chain.events] == ["$rename2", "$rename", "$join"]
    assert chain.complete and direct_in(chain)
    assert chain.oldest_ts == 200  # the continuous membership began at the join


async def test_walk_back_counting_invites_reaches_the_invite() -> None:
    chain = await walk_back(RENAME2, _get, counted=frozenset({"join", "invite"}))
    assert chain.oldest_ts == 100 and chain.complete


async def test_walk_back_ends_incomplete_at_an_event_it_may_not_see() -> None:
    chain = await walk_back(RENAME2, _hidden, counted=frozenset({"join"}))
    assert chain == Chain((RENAME2,), complete=False)
    assert not direct_in(chain)


async def test_walk_back_stops_at_the_bound() -> None:
    chain = await walk_back(RENAME2, _get, counted=frozenset({"join"}), hops=1)
    assert [e["event_id"] for e in chain.events] == ["$rename2", "$rename"]
    assert not chain.complete
