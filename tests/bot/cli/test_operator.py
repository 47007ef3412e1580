"""The operator's CLI when something changes (issue 36), without a homeserver: an outage met
by `muninn status`, a purge looked at before it is written. The store is a real embedded one,
filled by `muninn import` from an export file, as an archive store is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import parse_config
from bot.demo.synapse import free_port
from ingest.index.records import COMPAT_KEY, CURSOR_PREFIX
from ingest.matrix.transport import AiohttpTransport, Request, Response
from ingest.store import open_store
from tests.inprocess import muninn_here

SERVER = "example.org"
ROOM = f"!old:{SERVER}"
ALICE = f"@alice:{SERVER}"
OLD_ALIAS = f"#old-days:{SERVER}"
DAY = 86_400_000
T0 = 1_764_547_200_000  # 2025-12-01T00:00Z
SAID = [
    "the backup job failed again last night",
    "disk quota on the backup volume is at 98 percent",
    "I moved the old snapshots to cold storage",
]


def _event(n: int, type_: str, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "room_id": ROOM,
        "sender": ALICE,
        "event_id": f"$e{n}",
        "origin_server_ts": T0 + n * DAY,
        "content": content,
        **extra,
    }


def export_file(path: Path, alias: str | None = None) -> Path:
    """An old room's export: created, Alice joined, three messages a day apart (`alias`: its
    canonical alias, set before them)."""
    named = {"alias": alias} if alias else None
    events = [
        _event(0, "m.room.create", {"creator": ALICE, "room_version": "10"}, state_key=""),
        _event(1, "m.room.member", {"membership": "join"}, state_key=ALICE),
        _event(2, "m.room.history_visibility", {"history_visibility": "shared"}, state_key=""),
        *(
            [{**_event(2, "m.room.canonical_alias", named, state_key=""), "event_id": "$a"}]
            if named
            else []
        ),
        *(
            _event(3 + i, "m.room.message", {"msgtype": "m.text", "body": body})
            for i, body in enumerate(SAID)
        ),
    ]
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


DOWN = f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """A config whose homeserver does not answer."""
    doc = {
        "homeserver": {"url": DOWN, "server_name": SERVER},
        "reader": {"user_id": f"@archivist:{SERVER}", "access_token": "unused"},
        "index": {"store": {"path": str(tmp_path / "q")}, "collection": "muninn_test"},
        "embedder": {"model": "minilm"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


async def test_cli_status_during_an_outage_shows_the_store_and_names_the_homeserver(
    archive: Path, tmp_path: Path
) -> None:
    """Issue 36 item 3: with the homeserver down `muninn status` still prints the store's half
    (generation, points, rooms) and says the homeserver is unreachable, naming its URL; it
    exits 1 so that a script notices."""
    imported = await muninn_here(archive, "import", str(export_file(tmp_path / "old.jsonl")))
    assert imported.rc == 0, imported.err
    url = DOWN

    text = await muninn_here(archive, "status")
    assert text.rc == 1
    assert text.out.startswith(f"homeserver {url} unreachable")
    assert "generation muninn_test-" in text.out and "generation None" not in text.out
    assert f"imported {ROOM}: 3 points from" in text.out  # a window a message: a day apart
    assert "not joined" not in text.out  # unknown while the homeserver is down
    assert f"homeserver {url} unreachable" in text.err and "Traceback" not in text.err

    doc = json.loads((await muninn_here(archive, "status", "--json")).out)
    assert doc["homeserver"]["url"] == url and "unreachable" in doc["homeserver"]["error"]
    assert doc["generation"].startswith("muninn_test-") and doc["points"] == 3
    assert doc["reader"] is None and doc["rebuilding"] is None


def edit_config(config: Path, **sections: dict[str, Any]) -> None:
    """Set these sections of a config file, each merged into what it holds."""
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    for name, values in sections.items():
        doc[name] = {**doc.get(name, {}), **values}
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")


async def test_cli_status_during_an_outage_shows_what_the_store_knows_and_the_rest_unknown(
    archive: Path, tmp_path: Path
) -> None:
    """Issue 44: with the homeserver down `muninn status` of an archive store names the
    imported room by the alias its windows carry (regression: by id only), and says that
    whether it is joined, and whether the command room is served, is unknown."""
    edit_config(archive, bot={"command_room": f"#commands:{SERVER}"})
    export = export_file(tmp_path / "old.jsonl", alias=OLD_ALIAS)
    assert (await muninn_here(archive, "import", str(export))).rc == 0

    text = await muninn_here(archive, "status")
    assert text.rc == 1
    assert f"imported {OLD_ALIAS} ({ROOM}): 3 points from {export}" in text.out
    assert "(joined or not: unknown while the homeserver is unreachable)" in text.out
    assert f"command room #commands:{SERVER}: served or not: unknown" in text.out
    shown = json.loads((await muninn_here(archive, "status", "--json")).out)
    assert [(i["room_id"], i["room_alias"], i["joined"]) for i in shown["imported"]] == [
        (ROOM, OLD_ALIAS, None)
    ]
    assert shown["archive"] is True and shown["command_room"] is None and shown["rooms"] == []


async def test_cli_status_of_an_empty_store_says_there_is_no_index_yet(archive: Path) -> None:
    """Issue 36 item 10: no generation reads "no index yet" and how one is built, never
    "generation None"."""
    text = await muninn_here(archive, "status")
    assert "no index yet" in text.out and "None" not in text.out


def a_rebuild_under_way(config: Path, tmp_path: Path) -> dict[str, Any]:
    """What a writer leaves mid-rebuild: a generation beside the active one, incomplete, one
    room read. The config's document."""
    doc: dict[str, Any] = yaml.safe_load(config.read_text(encoding="utf-8"))
    cfg = parse_config(doc, tmp_path)
    store = open_store(cfg.index, cfg.base_dir)
    try:
        col = store.open("muninn_test-0123456789ab", dense_dim=768, create=True)
        col.put_meta(COMPAT_KEY, {"complete": False})
        col.put_meta(f"{CURSOR_PREFIX}{ROOM}", {"token": "t1", "updated_ms": T0})
        col.flush()
    finally:
        store.close()
    return doc


async def test_cli_status_shows_a_rebuild_under_way(archive: Path, tmp_path: Path) -> None:
    """Issue 36 item 1: while a generation is built beside the active one, `muninn status`
    says so with its progress (the switch's log line:
    `tests/ingest/index/test_refresh_writes.py::test_refresh_compat_change_builds_new_generation_then_switches`)."""
    export = export_file(tmp_path / "old.jsonl")
    assert (await muninn_here(archive, "import", str(export))).rc == 0
    a_rebuild_under_way(archive, tmp_path)
    text = await muninn_here(archive, "status")
    assert "rebuilding: muninn_test-0123456789ab is being built beside" in text.out
    assert "1 of 1 room read so far" in text.out
    rebuilding = json.loads((await muninn_here(archive, "status", "--json")).out)["rebuilding"]
    assert rebuilding == {
        "generation": "muninn_test-0123456789ab",
        "rooms_read": 1,
        "rooms": 1,
        "points": 0,
    }


async def test_cli_refresh_interrupted_says_nothing_is_lost_and_how_to_go_on(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 item 9: Ctrl-C during `muninn refresh` (here while it waits on the homeserver,
    the transport seam raising it as the terminal would) exits 130 saying that nothing is lost
    and how to continue, not silently."""

    async def ctrl_c(self: AiohttpTransport, request: Request) -> Response:
        raise KeyboardInterrupt

    monkeypatch.setattr(AiohttpTransport, "send", ctrl_c)
    run = await muninn_here(archive, "refresh")
    assert run.rc == 130 and run.out == ""
    stopped, interrupted = run.err.splitlines()
    assert stopped == "muninn: stopped before the first room was read"  # issue 44: how far
    assert interrupted.startswith("muninn: interrupted. Nothing is lost")
    assert "`muninn refresh` (or `muninn run`) goes on from there" in run.err
    assert "Traceback" not in run.err
