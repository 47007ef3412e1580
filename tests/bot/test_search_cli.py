"""`muninn search` as a user runs it: the real CLI in a subprocess, against Synapse and a store.

The module's corpus (`tests.indexing.SEARCH_CORPUS`) is indexed in-process, then the store is
closed, because the embedded store allows one process per path: the CLI is the only holder.
Tests that change the homeserver (a redaction) or the index (a purge) seed their own room.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from bot.demo.synapse import free_port
from bot.operations import fail_fast, revalidation
from ingest.config import IndexConfig, StoreConfig
from ingest.errors import MatrixUnavailable
from ingest.matrix import MatrixReader
from ingest.permalink import MATRIX_TO
from ingest.store import open_store
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    PROJECT,
    Corpus,
    Indexer,
    muninn,
    reader_config,
    reader_config_doc,
    seed_corpus,
    utc_ms,
    write_config,
)

TOP_KEYS = {"hits", "warnings", "retrievers", "dropped_stale", "below_floor"}
HIT_KEYS = {
    "room_id",
    "room_alias",
    "thread_root",
    "first_event_id",
    "last_event_id",
    "event_ids",
    "messages",
    "score",
    "permalink",
    "best_event_id",
}
MESSAGE_KEYS = {"event_id", "sender", "ts", "body"}


async def search_json(config: Path, *args: str) -> dict[str, Any]:
    return (await muninn(config, "search", *args, "--json")).doc()


@dataclass
class CliCorpus:
    corpus: Corpus
    config: Path
    store_path: Path

    def keys(self, doc: dict[str, Any]) -> list[str]:
        by_event = self.corpus.by_event()
        return [by_event[h["first_event_id"]].key for h in doc["hits"]]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cli(
    hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CliCorpus]:
    corpus = await seed_corpus(hs)
    folder = tmp_path_factory.mktemp("search-cli")
    indexer = Indexer(reader_config(hs, corpus.reader, folder))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()  # releases the store for the CLI
    config = write_config(folder / "config.yaml", reader_config_doc(hs, corpus.reader, folder))
    yield CliCorpus(corpus, config, folder / "qdrant")


def check_contract(doc: dict[str, Any], server_name: str) -> None:
    """docs/ARCHITECTURE.md §4.3 exactly: the top-level keys, each hit's keys and every value's
    type."""
    assert set(doc) == TOP_KEYS
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    assert isinstance(doc["retrievers"], list)
    assert set(doc["retrievers"]) <= {"dense", "lexical"}
    assert type(doc["dropped_stale"]) is int
    assert type(doc["below_floor"]) is int
    for hit in doc["hits"]:
        assert set(hit) == HIT_KEYS
        assert isinstance(hit["room_id"], str) and hit["room_id"].startswith("!")
        assert hit["room_alias"] is None or hit["room_alias"].startswith("#")
        assert hit["thread_root"] is None or hit["thread_root"].startswith("$")
        assert type(hit["score"]) is float and hit["score"] > 0
        ids = hit["event_ids"]
        assert isinstance(ids, list) and all(isinstance(e, str) for e in ids)
        assert hit["first_event_id"] == ids[0] and hit["last_event_id"] in ids
        assert hit["best_event_id"] in ids
        assert hit["messages"]
        for m in hit["messages"]:
            assert set(m) == MESSAGE_KEYS
            assert isinstance(m["event_id"], str) and m["event_id"] in ids
            assert isinstance(m["sender"], str) and m["sender"].startswith("@")
            assert type(m["ts"]) is int and m["ts"] > 10**12  # milliseconds, not seconds
            assert isinstance(m["body"], str)
        assert hit["permalink"] == (
            f"{MATRIX_TO}{quote(hit['room_id'], safe='!')}/"
            f"{quote(hit['best_event_id'], safe='!')}?via={server_name}"
        )


async def test_cli_search_json_follows_the_contract(cli: CliCorpus, hs: Homeserver) -> None:
    """`muninn search --json` prints exactly the §7 document, cited and typed."""
    doc = await search_json(cli.config, "budget review", "ERR_7731X", "--limit", "50")
    check_contract(doc, hs.server_name)
    assert doc["retrievers"] == ["dense", "lexical"]
    assert doc["warnings"] == []
    assert doc["dropped_stale"] == 0
    # Every window once: shown, or left out under the relevance floor (and counted).
    assert len(doc["hits"]) + doc["below_floor"] == len(cli.corpus.sent) - 1
    assert len({h["first_event_id"] for h in doc["hits"]}) == len(doc["hits"])
    keys = cli.keys(doc)
    # Both texts are answered: every budget window and the error code's window lead.
    assert set(keys[:5]) == {"err-target", "budget-1", "budget-2", "budget-3", "budget-ops"}
    by_key = dict(zip(keys, doc["hits"], strict=True))
    sent = cli.corpus.sent["budget-ops"]
    assert by_key["budget-ops"]["room_alias"] == cli.corpus.aliases["ops"]
    assert by_key["budget-ops"]["messages"] == [
        {"event_id": sent.event_id, "sender": sent.sender, "ts": sent.ts, "body": sent.body}
    ]


async def test_cli_search_repeated_query_prints_the_same_document(cli: CliCorpus) -> None:
    """The same query run twice prints byte-identical JSON (a deterministic order)."""
    args = ("search", "budget review", "migration", "--limit", "20", "--json")
    first, second = await muninn(cli.config, *args), await muninn(cli.config, *args)
    assert first.rc == second.rc == 0
    assert first.out == second.out
    doc = first.doc()  # every window once: shown, or counted under the relevance floor
    assert doc["hits"] and len(doc["hits"]) + doc["below_floor"] == len(cli.corpus.sent) - 1


@pytest.mark.parametrize("by", ["id", "alias"])
async def test_cli_search_room_filter_by_id_or_alias(cli: CliCorpus, by: str) -> None:
    """`--room` takes a room id or an alias; nothing outside that room is returned."""
    room = cli.corpus.rooms["ops"] if by == "id" else cli.corpus.aliases["ops"]
    doc = await search_json(cli.config, "budget review", "--room", room, "--limit", "50")
    assert {h["room_id"] for h in doc["hits"]} == {cli.corpus.rooms["ops"]}
    assert cli.keys(doc)[0] == "budget-ops"
    assert len(doc["hits"]) + doc["below_floor"] == 4  # every ops window: shown or left out


async def test_cli_search_sender_and_time_filters(cli: CliCorpus) -> None:
    """`--sender`, `--after` and `--before` (ISO dates) narrow together."""
    c = cli.corpus
    doc = await search_json(
        cli.config,
        "budget review",
        "--sender",
        c.senders["ben"],
        "--after",
        "2024-03-01",
        "--before",
        "2024-04-01T00:00",
        "--limit",
        "50",
    )
    assert cli.keys(doc) == ["budget-2"]
    assert all(
        utc_ms("2024-03-01T00:00") <= m["ts"] <= utc_ms("2024-04-01T00:00")
        for h in doc["hits"]
        for m in h["messages"]
    )


async def test_cli_search_human_output_cites_room_time_sender_excerpt_link(
    cli: CliCorpus, hs: Homeserver
) -> None:
    """Without --json each hit prints room, time, sender, excerpt and permalink."""
    run = await muninn(cli.config, "search", "ERR_7731X", "--limit", "1")
    assert run.rc == 0, run.err
    sent = cli.corpus.sent["err-target"]
    lines = run.out.splitlines()
    assert lines[0].split() == [cli.corpus.aliases["eng"], "2024-02-01", "10:00", sent.sender]
    assert lines[1].strip() == sent.body
    assert lines[2].strip().startswith(f"{MATRIX_TO}{quote(sent.room_id, safe='!')}/")
    assert lines[2].strip().endswith(f"{quote(sent.event_id, safe='!')}?via={hs.server_name}")
    assert "retrievers: dense, lexical; dropped stale: 0" in run.err


async def test_cli_search_embedder_down_answers_from_lexical(
    cli: CliCorpus, hs: Homeserver, tmp_path: Path
) -> None:
    """With the embedder unreachable the CLI still answers, from lexical, and says why."""
    port = free_port()  # nothing listens: connection refused
    doc = reader_config_doc(
        hs,
        cli.corpus.reader,
        tmp_path,
        embedder={"kind": "ollama", "url": f"http://127.0.0.1:{port}"},
    )
    doc["index"]["store"]["path"] = str(cli.store_path)
    down = write_config(tmp_path / "down.yaml", doc)
    result = await search_json(down, "ERR_7731X")
    check_contract(result, hs.server_name)
    assert result["retrievers"] == ["lexical"]
    assert len(result["warnings"]) == 1
    assert "unavailable" in result["warnings"][0]
    assert f"127.0.0.1:{port}" in result["warnings"][0]
    assert cli.keys(result)[0] == "err-target"


async def test_cli_search_homeserver_down_fails_naming_it(
    cli: CliCorpus, hs: Homeserver, tmp_path: Path
) -> None:
    """Every hit is revalidated; with the homeserver unreachable the search exits 1 naming it
    and the room, and prints nothing: no hit is shown unconfirmed."""
    doc = reader_config_doc(hs, cli.corpus.reader, tmp_path)
    doc["index"]["store"]["path"] = str(cli.store_path)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    doc["homeserver"]["url"] = dead
    down = write_config(tmp_path / "down.yaml", doc)
    run = await muninn(down, "search", "ERR_7731X", "--json")
    assert (run.rc, run.out) == (1, "")
    assert "muninn: cannot revalidate the hits of !" in run.err
    assert f"failed 2 time(s) on {dead}" in run.err
    assert "No hit is shown unconfirmed" in run.err and "Traceback" not in run.err


async def test_cli_search_revalidation_fails_within_3_s(cli: CliCorpus, hs: Homeserver) -> None:
    """The CLI's revalidation gives an unreachable homeserver two tries, not ~8 s of retries:
    the search fails within 3 s (the time the rule promises, measured on the check alone)."""
    cfg = reader_config(hs, cli.corpus.reader, cli.store_path.parent)
    dead = MatrixReader(f"http://127.0.0.1:{free_port()}", "token", cli.corpus.reader.user_id)
    fail_fast(dead)
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    try:
        check = await revalidation(cfg, dead, store)
        room = next(iter(cli.corpus.rooms.values()))
        started = time.monotonic()
        with pytest.raises(MatrixUnavailable, match="cannot revalidate the hits of"):
            await check.windows([{"room_id": room, "event_ids": ["$any"], "messages": []}], {})
        elapsed = time.monotonic() - started
    finally:
        await dead.close()
        await asyncio.to_thread(store.close)
    assert elapsed <= 3.0


async def test_cli_search_store_held_by_another_process_fails_clearly(cli: CliCorpus) -> None:
    """While another process holds the embedded store, search exits non-zero naming the cause."""
    holder = open_store(
        IndexConfig(store=StoreConfig(path=cli.store_path), collection="muninn_test"), PROJECT
    )
    try:
        run = await muninn(cli.config, "search", "budget", "--json")
    finally:
        holder.close()
    assert run.rc == 1
    assert run.out == ""
    assert "held by another process" in run.err
    assert f"pid {os.getpid()}" in run.err
    assert "Traceback" not in run.err


async def test_cli_search_bad_query_is_refused_before_taking_the_store(cli: CliCorpus) -> None:
    """A malformed query names its field even while another process holds the store
    (regression: the store was opened first, so the error said "held by another process")."""
    holder = open_store(
        IndexConfig(store=StoreConfig(path=cli.store_path), collection="muninn_test"), PROJECT
    )
    try:
        run = await muninn(cli.config, "search", "q", "--limit", "51", "--json")
    finally:
        holder.close()
    assert run.rc == 1
    assert "muninn: limit: " in run.err
    assert "held" not in run.err


async def test_cli_search_empty_store_warns(
    hs: Homeserver, cli: CliCorpus, tmp_path: Path
) -> None:
    """Before any refresh, search answers an empty document with a warning, exit 0."""
    config = write_config(
        tmp_path / "empty.yaml", reader_config_doc(hs, cli.corpus.reader, tmp_path)
    )
    doc = await search_json(config, "anything")
    check_contract(doc, hs.server_name)
    assert doc["hits"] == [] and doc["dropped_stale"] == 0
    assert len(doc["warnings"]) == 1 and "empty" in doc["warnings"][0]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["q", "--limit", "51"], "limit"),
        (["q", "--limit", "0"], "limit"),
        (["x" * 1001], "texts"),
        ([f"t{i}" for i in range(9)], "texts"),
        (["q", "--room", "#nowhere-at-all:muninn.test"], "room"),
    ],
    ids=["limit-51", "limit-0", "long-text", "nine-texts", "unknown-alias"],
)
async def test_cli_search_bad_query_names_the_field(
    cli: CliCorpus, args: list[str], field: str
) -> None:
    """A refused query exits 1 with one line on stderr naming the field, no traceback."""
    run = await muninn(cli.config, "search", *args, "--json")
    assert run.rc == 1
    assert run.out == ""
    assert f"muninn: {field}: " in run.err
    assert "Traceback" not in run.err


# ---------------------------------------------------------------- revalidation


@dataclass
class Kiwi:
    config: Path
    room_id: str
    harvest: str  # event id of the window that will go stale
    export: str  # event id of the window that stays
    reader: MatrixUser


async def kiwi_room(hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path) -> Kiwi:
    """Two one-message windows about kiwis, indexed by a fresh reader; the store is released."""
    reader = await hs.register()
    room_id = await hs.fresh_room(alice)
    for user in (seeder, reader):
        await user.join(room_id)
    harvest = await seeder.send_text(
        room_id, "kiwi harvest starts monday", ts=utc_ms("2024-07-01T10:00")
    )
    export = await seeder.send_text(
        room_id, "kiwi export paperwork is done", ts=utc_ms("2024-07-03T10:00")
    )
    indexer = Indexer(reader_config(hs, reader, tmp_path))
    try:
        await indexer.refresh()
        assert len(await indexer.points()) == 2
    finally:
        await indexer.close()
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    return Kiwi(config, room_id, harvest, export, reader)


def event_ids(doc: dict[str, Any]) -> list[str]:
    return [e for h in doc["hits"] for e in h["event_ids"]]


async def test_cli_search_drops_a_hit_redacted_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A window whose message was redacted after the last refresh is dropped and counted."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    before = await search_json(kiwi.config, "kiwi")
    assert set(event_ids(before)) == {kiwi.harvest, kiwi.export}
    await seeder.redact(kiwi.room_id, kiwi.harvest)
    after = await search_json(kiwi.config, "kiwi")
    check_contract(after, hs.server_name)
    assert event_ids(after) == [kiwi.export]
    assert after["dropped_stale"] == 1


async def test_cli_search_drops_a_hit_whose_edit_was_redacted_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """The indexed window shows an edit's text; once that edit is redacted, the window is
    stale though the message it edited still stands."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    edit = await seeder.send_edit(kiwi.room_id, kiwi.harvest, "kiwi harvest moved to gooseberry")
    indexer = Indexer(reader_config(hs, kiwi.reader, tmp_path))
    try:
        await indexer.refresh()
    finally:
        await indexer.close()
    before = await search_json(kiwi.config, "gooseberry")
    assert kiwi.harvest in event_ids(before)
    await seeder.redact(kiwi.room_id, edit)
    run = await muninn(kiwi.config, "search", "gooseberry", "--json")
    assert "gooseberry" not in run.out
    assert run.doc()["dropped_stale"] >= 1


async def test_cli_search_never_shows_the_words_an_edit_since_indexing_took_back(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """Index, edit, (no refresh), search: the old words are not shown. The window the index
    ranked for them is dropped and counted (with its new text it would still say they were
    there); the next refresh indexes the new text."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    await seeder.send_edit(kiwi.room_id, kiwi.harvest, "kiwi harvest is postponed")
    run = await muninn(kiwi.config, "search", "kiwi harvest monday", "--json")
    assert "monday" not in run.out
    assert run.doc()["dropped_stale"] == 1
    assert event_ids(run.doc()) == [kiwi.export]


async def test_cli_search_drops_a_hit_inside_a_pending_purge(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A window inside a purge tombstone not yet applied by a refresh is dropped and counted."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    purge = await muninn(
        kiwi.config,
        "purge",
        "--room",
        kiwi.room_id,
        "--from",
        "2024-07-01",
        "--to",
        "2024-07-02",
        "--json",
    )
    assert purge.rc == 0, purge.err
    doc = await search_json(kiwi.config, "kiwi")
    assert event_ids(doc) == [kiwi.export]
    assert doc["dropped_stale"] == 1


async def test_cli_search_drops_hits_of_a_room_the_reader_left(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """After the reader leaves a room its windows are stale at once, before any refresh."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    await kiwi.reader.leave(kiwi.room_id)
    doc = await search_json(kiwi.config, "kiwi")
    assert doc["hits"] == []
    assert doc["dropped_stale"] == 2


@pytest.mark.parametrize("change", ["bridged", "encrypted", "excluded"])
async def test_cli_search_hides_a_room_refused_since_indexing(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path, change: str
) -> None:
    """A room that became bridged, encrypted or excluded after the last refresh shows nothing
    at once: its windows are still in the store, but no text of theirs reaches the output."""
    kiwi = await kiwi_room(hs, alice, seeder, tmp_path)
    config = kiwi.config
    if change == "bridged":
        bridge = {"bridgebot": alice.user_id, "protocol": {"id": "irc"}, "channel": {"id": "#k"}}
        await alice.send_state(kiwi.room_id, "m.bridge", bridge, "irc/#k")
    elif change == "encrypted":
        await alice.enable_encryption(kiwi.room_id)
    else:
        doc = reader_config_doc(hs, kiwi.reader, tmp_path)
        doc["scope"] = {"exclude_room_ids": [kiwi.room_id]}
        config = write_config(tmp_path / "excluded.yaml", doc)
    runs = [await muninn(config, "search", "kiwi", *args) for args in (["--json"], [])]
    for run in runs:
        assert run.rc == 0, run.err
        assert "kiwi" not in run.out  # not one excerpt
        assert kiwi.room_id not in run.out
    doc = runs[0].doc()
    assert doc["hits"] == [] and doc["dropped_stale"] == 2
