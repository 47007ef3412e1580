"""The registration against the real Synapse: what `muninn run` says when the homeserver holds
another registration than the one Muninn reads (issue 44)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from bot.demo.synapse import SynapseServer, free_port
from tests.indexing import muninn
from tests.inprocess import muninn_here


async def test_run_after_generate_registration_force_without_a_synapse_restart_says_what_to_do(
    synapse: SynapseServer, tmp_path: Path
) -> None:
    """`generate-registration --force` voids the tokens Synapse holds until it restarts: the
    next `muninn run` exits 1 naming the refused as_token and its file, and saying to restart
    Synapse or point it at the new file (regression: a bare 401, no hint)."""
    registration = tmp_path / "registration.yaml"
    shutil.copy(synapse.registration_path, registration)  # the file Synapse read at start
    doc = {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "appservice": {"registration": str(registration), "port": free_port()},
        "index": {"store": {"path": str(tmp_path / "qdrant")}},
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    forced = await muninn_here(config, "generate-registration", "--force")
    assert forced.rc == 0, forced.err

    run = await muninn(config, "run")
    assert run.rc == 1
    assert f"refused as_token in {registration}" in run.err and "401 M_UNKNOWN_TOKEN" in run.err
    assert "The homeserver still has an older registration than Muninn's" in run.err
    assert f"restart Synapse so that it reads {registration}" in run.err
    assert f"point app_service_config_files in its homeserver.yaml at {registration}" in run.err
    assert "Traceback" not in run.err
