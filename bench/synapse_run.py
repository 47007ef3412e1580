"""A throwaway Synapse for benchmarks: start it, seed LoCoMo conversations, ask its `/search`.

The server is the test suite's launcher (`bot.demo.synapse.start_synapse`: loopback only, no
outbound traffic, rate limits relaxed, one appservice whose `@seed-*` users may backdate with
`?ts=`), on SQLite or on PostgreSQL in a throwaway cluster of `bench.postgres`. Each
conversation becomes one public room: its two speakers are seed users with the speakers' names
as display names, every turn is one `m.text` message sent at the session's time (turns 30 s
apart), and the event id of every `dia_id` is recorded.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.locomo import Conversation
from bench.postgres import PostgresCluster, start_postgres
from bot.demo.client import HarnessError
from bot.demo.synapse import SynapseServer, start_synapse
from bot.demo.synapse_config import SEED_PREFIX
from tests.homeserver import Homeserver, MatrixUser

__all__ = [
    "SYNAPSE_DBS",
    "SearchAnswer",
    "SeededRoom",
    "SynapseBench",
    "seed_conversation",
    "synapse_search",
]

SYNAPSE_DBS = ("sqlite", "postgres")


@dataclass
class SeededRoom:
    conversation: Conversation
    room_id: str
    event_ids: dict[str, str] = field(default_factory=dict)  # dia_id -> event id
    dia_ids: dict[str, str] = field(default_factory=dict)  # event id -> dia_id


@dataclass(frozen=True)
class SearchAnswer:
    """Synapse's ranked events: (event id, body), best first; `error` if it refused."""

    events: tuple[tuple[str, str], ...]
    error: str | None = None


class SynapseBench:
    """`async with SynapseBench(workdir, db) as sb:` — a started Synapse and a client session.

    `db` is "sqlite" (a file on /dev/shm) or "postgres" (a cluster started here and deleted on
    exit, after Synapse has stopped).
    """

    def __init__(self, workdir: Path, db: str = "sqlite") -> None:
        if db not in SYNAPSE_DBS:
            raise ValueError(f"db must be one of {', '.join(SYNAPSE_DBS)}, not {db!r}")
        self.workdir = workdir
        self.db = db
        self.postgres: PostgresCluster | None = None
        self.server: SynapseServer | None = None
        self.session: aiohttp.ClientSession | None = None
        self.hs: Homeserver | None = None

    async def __aenter__(self) -> SynapseBench:
        try:
            database = None
            if self.db == "postgres":
                self.postgres = await asyncio.to_thread(start_postgres)
                await asyncio.to_thread(self.postgres.create_database, "synapse")
                database = self.postgres.synapse_database("synapse")
            self.server = await asyncio.to_thread(
                lambda: start_synapse(self.workdir, database=database)
            )
        except BaseException:
            await self.__aexit__()
            raise
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        self.hs = Homeserver(self.server, self.session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.session is not None:
                await self.session.close()
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
        finally:
            if self.postgres is not None:
                await asyncio.to_thread(self.postgres.stop)

    @property
    def homeserver(self) -> Homeserver:
        if self.hs is None:
            raise RuntimeError("SynapseBench is not started")
        return self.hs


def _localpart(sample_id: str, name: str, n: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", f"{sample_id}-{name}".lower()).strip("-")
    return f"{SEED_PREFIX}{slug}-{n}"


async def seed_conversation(
    hs: Homeserver, conversation: Conversation, members: Sequence[MatrixUser]
) -> SeededRoom:
    """One room a conversation; `members` (the reader, the searcher) join before any turn."""
    speakers: dict[str, MatrixUser] = {}
    for n, name in enumerate(conversation.speakers):
        user = await hs.seed_user(_localpart(conversation.sample_id, name, n))
        await user.set_displayname(name)
        speakers[name] = user
    owner = speakers[conversation.speakers[0]]
    room_id = await owner.create_room(preset="public_chat", name=conversation.sample_id)
    for user in [*list(speakers.values())[1:], *members]:
        await user.join(room_id)
    seeded = SeededRoom(conversation, room_id)
    for turn in conversation.turns:
        sender = speakers.get(turn.speaker)
        if sender is None:  # a speaker not named in speaker_a/b: give them a seat too
            sender = await hs.seed_user(
                _localpart(conversation.sample_id, turn.speaker, len(speakers))
            )
            await sender.set_displayname(turn.speaker)
            await sender.join(room_id)
            speakers[turn.speaker] = sender
        event_id = await sender.send_text(room_id, turn.text or " ", ts=turn.ts)
        seeded.event_ids[turn.dia_id] = event_id
        seeded.dia_ids[event_id] = turn.dia_id
    return seeded


async def synapse_search(
    user: MatrixUser, room_id: str, term: str, limit: int = 50
) -> SearchAnswer:
    """`POST /_matrix/client/v3/search`, `order_by: rank`, this room only, up to `limit`."""
    if not term.strip():
        return SearchAnswer((), "empty search term")
    body: dict[str, Any] = {
        "search_categories": {
            "room_events": {
                "search_term": term,
                "order_by": "rank",
                "keys": ["content.body"],
                "filter": {"rooms": [room_id], "limit": limit},
            }
        }
    }
    try:
        resp = await user.call("POST", "/_matrix/client/v3/search", body)
    except HarnessError as e:
        return SearchAnswer((), f"{e.status}: {e.body}")
    results = resp.get("search_categories", {}).get("room_events", {}).get("results", [])
    events = tuple(
        (str(r["result"]["event_id"]), str(r["result"].get("content", {}).get("body", "")))
        for r in results[:limit]
    )
    return SearchAnswer(events)
