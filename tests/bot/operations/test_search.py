"""`muninn search` as a user runs it: the real CLI, against Synapse and a store; in a child
process where the test is about the process (a store another process holds, byte-identical
output across runs), in this process (`tests.inprocess`) where it is about the answer.

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

from bot.config import parse_config
from bot.demo.synapse import free_port
from bot.operations import fail_fast, revalidation
from ingest.config import IndexConfig, StoreConfig
from ingest.errors import MatrixUnavailable
from ingest.matrix import MatrixReader
from ingest.search.permalink import MATRIX_TO
from ingest.store import open_store
from tests.bot.search_contract import check_contract, search_json
from tests.homeserver import Homeserver
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
from tests.inprocess import muninn_here


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
        {
            "event_id": sent.event_id,
            "sender": sent.sender,
            "ts": sent.ts,
            "body": sent.body,
            "msgtype": "m.text",
        }
    ]


async def test_cli_search_repeated_query_prints_the_same_document(cli: CliCorpus) -> None:
    """The same query run twice prints byte-identical JSON (a deterministic order)."""
    args = ("search", "budget review", "migration", "--limit", "20", "--json")
    first, second = await muninn(cli.config, *args), await muninn(cli.config, *args)
    assert first.rc == second.rc == 0
    assert first.out == second.out
    doc = first.doc()  # every candidate in the ranker's order, marked (rule 22c)
    assert doc["hits"] and doc["hits"][0]["close"] and not all(h["close"] for h in doc["hits"])


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


@pytest.mark.parametrize("short", ["bare", "at"])
async def test_cli_search_sender_takes_the_short_forms_chat_takes(
    cli: CliCorpus, short: str
) -> None:
    """Issue 36 item 6: `--sender ben` and `--sender @ben` mean `@ben:<server_name>`, as chat's
    `from:ben` does, instead of silently finding nothing."""
    full = cli.corpus.senders["ben"]
    localpart = full.partition(":")[0].removeprefix("@")
    given = localpart if short == "bare" else f"@{localpart}"
    query = ("budget review", "--after", "2024-03-01", "--before", "2024-04-01T00:00")
    doc = await search_json(cli.config, *query, "--sender", given, "--limit", "50")
    assert cli.keys(doc) == ["budget-2"]
    assert full in {m["sender"] for h in doc["hits"] for m in h["messages"]}


async def test_cli_search_human_output_cites_room_time_sender_excerpt_link(
    cli: CliCorpus, hs: Homeserver
) -> None:
    """Without --json each hit prints room, time, sender, excerpt and permalink."""
    run = await muninn_here(cli.config, "search", "ERR_7731X", "--limit", "1")
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
    """Every hit is revalidated; with the homeserver unreachable the search exits 1 naming it,
    and prints nothing: no hit is shown unconfirmed. It asks the homeserver once before the
    model loads (issue 36: ~7 s and the rooms' ids before)."""
    doc = reader_config_doc(hs, cli.corpus.reader, tmp_path)
    doc["index"]["store"]["path"] = str(cli.store_path)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    doc["homeserver"]["url"] = dead
    down = write_config(tmp_path / "down.yaml", doc)
    run = await muninn_here(down, "search", "ERR_7731X", "--json")
    assert (run.rc, run.out) == (1, "")
    assert f"muninn: the homeserver {dead} is unreachable (" in run.err
    assert f"failed 2 time(s) on {dead}" in run.err and "/account/whoami" in run.err
    assert "so none is" in run.err and "Traceback" not in run.err


async def test_cli_search_revalidation_fails_within_3_s(cli: CliCorpus, hs: Homeserver) -> None:
    """The CLI's revalidation gives an unreachable homeserver two tries, not ~8 s of retries:
    the search fails within 3 s (the time the rule promises, measured on the check alone)."""
    base = cli.store_path.parent  # the service's config: revalidation's scope reads `bot`
    cfg = parse_config(reader_config_doc(hs, cli.corpus.reader, base), base)
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
    run = await muninn_here(cli.config, "search", *args, "--json")
    assert run.rc == 1
    assert run.out == ""
    assert f"muninn: {field}: " in run.err
    assert "Traceback" not in run.err


# ---------------------------------------------------------------- revalidation


async def test_cli_search_operators_exclude_prefix_and_sort(cli: CliCorpus) -> None:
    """`--exclude`, `--exclude-sender`, a `word*` text and `--sort recent` mean what the chat
    operators mean; a `word*` finds the words it starts, as the rooms say them."""
    c = cli.corpus
    doc = await search_json(
        cli.config,
        "budget review",
        "--exclude",
        "wiki",
        "--exclude-sender",
        c.senders["cai"],
        "--sort",
        "recent",
        "--limit",
        "50",
    )
    assert set(cli.keys(doc)) == {"budget-1", "budget-ops"}
    stamps = [h["messages"][0]["ts"] for h in doc["hits"]]
    assert stamps == sorted(stamps, reverse=True) and doc["sort"] == "recent"
    prefixed = await search_json(cli.config, "quarter*")
    assert cli.keys(prefixed) == ["budget-1"]  # "quarterly": the words the rooms say
    assert prefixed["retrievers"] == ["lexical"]  # a word* is the lexical side's


async def test_cli_search_offset_pages_without_repeating(cli: CliCorpus) -> None:
    """`--offset` takes the `next_offset` of the page before; the last page's is null."""
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        doc = await search_json(
            cli.config, "budget review", "--limit", "2", "--offset", str(offset)
        )
        seen.extend(cli.keys(doc))
        offset = doc["next_offset"]
        assert len(seen) < len(cli.corpus.sent)
    assert len(seen) == len(set(seen)) >= 4
    assert {"budget-1", "budget-2", "budget-3", "budget-ops"} <= set(seen)
