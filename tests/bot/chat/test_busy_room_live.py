"""A busy room through every surface (issue 47, rule 22b): the room of
`tests/fixtures/rooms/busy.yaml` on the real Synapse, each person of its conversations an
appservice user of their own, their lines a minute apart and the conversations an hour apart,
indexed by `muninn run` with the default pair (chat, the command room) and by the writer
(`muninn search --json`, MCP's `search`). For every question asked in other words, each
surface quotes one line of the answer's window, the same line on every surface: the answer,
not a neighbour sharing a small word with the question, nor a line asking the question again
(the storage-cupboard question's reply, not the question line holding its words).
`word*`, `sort:recent` and `from:` select messages there, not windows, in the room and in the
command room alike."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer
from ingest.config import PAIR_MODEL
from tests.bot.botenv import Env, link, pages, service_env
from tests.bot.mcp.harness import call, muninn_mcp
from tests.botkit import ask
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    RecordingEmbedder,
    reader_config,
    reader_config_doc,
    shared_pair,
    utc_ms,
    write_config,
)
from tests.inprocess import muninn_here
from tests.rooms import BUSY_ASKED, conversations

MINUTE, HOUR = 60_000, 3_600_000
RESULTS = "org.muninn.results"


@dataclass
class BusyRoom:
    env: Env
    owner: MatrixUser  # a member who asks in the room
    room: str
    alias: str
    config: Path  # the reader's, over the writer's index of the same room
    said: list[list[tuple[str, str]]]  # each conversation's (event id, body)
    senders: dict[str, str]  # event id → its sender's user id

    def answer(self, phrase: str) -> str:
        """The line a person should be quoted for the question about `phrase`."""
        conv = next(c for c in self.said if any(phrase in body for _, body in c))
        return next(e for e, b in conv if phrase in b)

    def body(self, event_id: str) -> str:
        return next(b for conv in self.said for e, b in conv if e == event_id)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def busy(
    synapse: SynapseServer, hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[BusyRoom]:
    folder = tmp_path_factory.mktemp("busy")
    async with service_env(synapse, hs, folder / "service", shared_pair()) as env:
        owner = await hs.register(displayname="Owner")
        local = unique_localpart("busy")
        room = await env.room(owner, alias_localpart=local)
        talk = conversations("busy")
        people = sorted({name for conv in talk for name, _ in conv})
        users = {name: await hs.seed_user(unique_localpart(f"seed-{name}-")) for name in people}
        for name, user in users.items():  # people are read by their display names
            await user.set_displayname(name)
            await user.join(room)
        start = utc_ms("2024-09-02T09:00")
        said: list[list[tuple[str, str]]] = []
        senders: dict[str, str] = {}
        for c, conv in enumerate(talk):
            said.append([])
            for j, (name, body) in enumerate(conv):
                sent = await users[name].send_text(room, body, ts=start + c * HOUR + j * MINUTE)
                said[-1].append((sent, body))
                senders[sent] = users[name].user_id
        await env.settle(room)
        reader = await hs.register(displayname="Reader")
        await reader.join(room)
        pair = {"embedder": {"model": PAIR_MODEL}}
        async with Indexer(
            reader_config(hs, reader, folder, **pair), embedder=RecordingEmbedder(shared_pair())
        ) as indexer:
            await indexer.refresh()
        doc = reader_config_doc(hs, reader, folder, **pair)
        config = write_config(folder / "config.yaml", doc)
        alias = f"#{local}:{synapse.server_name}"
        yield BusyRoom(env, owner, room, alias, config, said, senders)


def _quoted(window: Sequence[str], best: Sequence[str]) -> list[str]:
    """The lines of `window` among the ones a surface quoted (`best`), in order."""
    return [e for e in best if e in window]


async def _chat(busy: BusyRoom, question: str, window: Sequence[str]) -> list[str]:
    """The lines of the window a person in the room is shown, over every `!more` page."""
    replies = await pages(busy.owner, busy.room, f"!search {question} limit:20", busy.env.bot_id)
    return [e for body in replies for e in window if link(busy.room, e) in body]


async def _command_room(busy: BusyRoom, question: str) -> list[str]:
    """Each hit's best message in the command room's JSON, over every `!more` page."""
    env = busy.env
    best: list[str] = []
    command = f"!search {question} in:{busy.alias} limit:20"
    for _ in range(4):
        _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
        results = reply["content"][RESULTS]
        best += [str(h["best_event_id"]) for h in results["hits"]]
        if results.get("next_offset") is None:
            return best
        command = "!more"
    raise AssertionError(f"no last page for {question!r}")


async def test_every_surface_quotes_the_answer_of_its_window(busy: BusyRoom) -> None:
    """For each of the busy room's fifteen questions, the answer's window (the stored one: a
    window's lines are bounded by their full user ids and minutes too, so a conversation of
    five may be two) is quoted by one line on each surface, the same line everywhere, and it
    is the answer."""
    wrong: dict[str, dict[str, Any]] = {}
    async with muninn_mcp(busy.config) as session:
        for question, phrase in BUSY_ASKED:
            answer = busy.answer(phrase)
            run = await muninn_here(
                busy.config, "search", question, "--room", busy.room, "--limit", "50", "--json"
            )
            hits = run.doc()["hits"]
            [window] = [
                [str(m["event_id"]) for m in h["messages"]]
                for h in hits
                if answer in {m["event_id"] for m in h["messages"]}
            ]
            tool = await call(session, "search", query=question, room=busy.room, limit=50)
            views = {
                "chat": await _chat(busy, question, window),
                "command room": _quoted(window, await _command_room(busy, question)),
                "muninn search --json": _quoted(window, [h["best_event_id"] for h in hits]),
                "mcp search": _quoted(window, [h["best_event_id"] for h in tool["hits"]]),
            }
            if any(quoted != [answer] for quoted in views.values()):
                wrong[question] = {
                    "answer": busy.body(answer),
                    **{k: [busy.body(e) for e in v] for k, v in views.items()},
                }
    assert not wrong, json.dumps(wrong, indent=1)


async def test_word_star_sort_recent_lists_the_messages_newest_first_across_pages(
    busy: BusyRoom,
) -> None:
    """`print* sort:recent limit:2`, in the room and in the command room: the four messages
    holding a word starting with "print" (printer, printers), each from another window of
    five people, newest first across `!more` pages, and none of their neighbours."""
    said = [(e, b) for conv in busy.said for e, b in conv]
    printed = [e for e, b in reversed(said) if any(w.startswith("print") for w in b.split())]
    assert len(printed) == 4
    env = busy.env
    for user, room, command in (
        (busy.owner, busy.room, "!search print* sort:recent limit:2"),
        (env.persona, env.command_room, f"!search print* sort:recent in:{busy.alias} limit:2"),
    ):
        replies = await pages(user, room, command, busy.env.bot_id)
        listed = [
            e
            for body in replies
            for e in sorted(
                (e for e, _ in said if link(busy.room, e) in body),
                key=lambda e, body=body: body.find(link(busy.room, e)),
            )
        ]
        assert listed == printed, (command, [busy.body(e) for e in listed])
        assert len(replies) == 2 and all("newest first" in body for body in replies)


async def test_from_lists_the_senders_own_messages_in_shared_windows(busy: BusyRoom) -> None:
    """`from:` in the room and in the command room: every line listed is the named person's,
    never a neighbour of their window that matches the words better."""
    said = [(e, b) for conv in busy.said for e, b in conv]
    ana = busy.senders[next(e for e, b in said if b.startswith("I can bring"))]
    env = busy.env
    for user, room, command in (
        (busy.owner, busy.room, f"!search the spare extension lead from:{ana} limit:10"),
        (env.persona, env.command_room, f"!search spare extension lead from:{ana} limit:10"),
    ):
        body = "\n".join(await pages(user, room, command, busy.env.bot_id))
        listed = [e for e, _ in said if link(busy.room, e) in body]
        assert listed and {busy.senders[e] for e in listed} == {ana}, [
            busy.body(e) for e in listed
        ]
