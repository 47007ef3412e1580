"""`muninn search` and `muninn status` falling back to the running service's listener while it
holds the embedded store, and saying how to enable it or find its token when they cannot.

One appservice-mode service for the module (real Synapse, store and MiniLM: the `api` fixture of
conftest.py).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bot.chat.replies.budget import plural
from bot.demo.synapse import SynapseServer
from ingest.config import IndexConfig, StoreConfig
from ingest.store import open_store
from tests.bot.service.http_api.listener import (
    Api,
    config_doc,
)
from tests.indexing import Run, muninn, write_config

# ---------------------------------------------------------------- the CLI's fallback


async def test_cli_search_falls_back_to_the_running_service(api: Api) -> None:
    """While `muninn run` holds the store, `muninn search --json` gives the same document."""
    run = await muninn(api.config, "search", "otters", "feeding", "--room", api.alias, "--json")
    assert run.rc == 0, run.err
    doc = run.doc()
    status, direct = await api.post(
        {"texts": ["otters", "feeding"], "room_ids": [api.room], "limit": 5}
    )
    assert status == 200
    assert doc == direct
    assert {e for h in doc["hits"] for e in h["event_ids"]} >= {api.otters[0], api.otters[1]}
    human = await muninn(api.config, "search", "otters", "--limit", "1")
    assert human.rc == 0, human.err
    assert "matrix.to" in human.out and "retrievers: dense, lexical" in human.err
    bad = await muninn(api.config, "search", "q", "--room", "#nowhere-at-all:muninn.test")
    assert bad.rc == 1 and "muninn: room: " in bad.err


async def test_cli_status_asks_the_running_service(api: Api) -> None:
    """`muninn status` runs beside `muninn run` (regression: "held by another process"): the
    store's half comes from the service's listener, the same facts the service holds."""
    run = await muninn(api.config, "status", "--json")
    assert run.rc == 0, run.err
    doc = run.doc()
    assert doc["generation"] == await asyncio.to_thread(api.service.store.active)
    room = next(r for r in doc["rooms"] if r["room_id"] == api.room)
    assert room["indexed"] and room["points"] >= 1 and room["cursor"]
    assert doc["points"] >= room["points"]
    human = await muninn(api.config, "status")
    assert human.rc == 0, human.err
    assert f"{api.alias}: indexed, {plural(room['points'], 'point')}" in human.out


async def _held_without_a_port(synapse: SynapseServer, tmp_path: Path, *args: str) -> Run:
    """`muninn <args>` while another process holds the store and no listener is configured."""
    config = write_config(tmp_path / "config.yaml", config_doc(synapse, tmp_path))
    holder = open_store(
        IndexConfig(store=StoreConfig(path=tmp_path / "qdrant"), collection="muninn_api"),
        tmp_path,
    )
    try:
        return await muninn(config, *args)
    finally:
        holder.close()


async def test_cli_search_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """Without metrics.port the held-store error names the cause and how to fix it."""
    run = await _held_without_a_port(synapse, tmp_path, "search", "otters", "--json")
    assert run.rc == 1 and run.out == ""
    assert f"held by another process (pid {os.getpid()})" in run.err
    assert "metrics: {port:" in run.err
    assert "Traceback" not in run.err


async def test_cli_status_held_without_a_port_says_how_to_enable_it(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """`muninn status` beside a service with no listener names the cause and the fix."""
    run = await _held_without_a_port(synapse, tmp_path, "status")
    assert run.rc == 1 and "held by another process" in run.err
    assert "For `muninn status` while `muninn run` holds the store" in run.err
    assert "metrics: {port:" in run.err and "Traceback" not in run.err
    # the port the deploy guide, the example config and compose use (issue 36: 9464 here)
    assert "metrics: {port: 9108}" in run.err and "deploy/README.md" in run.err


async def test_cli_search_without_the_token_names_the_file(api: Api) -> None:
    """A caller who cannot read the token file (another user) is told which file and why."""
    assert api.service.api is not None and api.service.api.token_file is not None
    token_file = api.service.api.token_file
    hidden = token_file.with_name("hidden")
    token_file.rename(hidden)
    try:
        run = await muninn(api.config, "search", "otters", "--json")
    finally:
        hidden.rename(token_file)
    assert run.rc == 1 and run.out == ""
    assert f"cannot read the service's listener token {token_file}" in run.err
    assert "service's own user" in run.err and "Traceback" not in run.err
