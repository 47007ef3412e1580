"""`bot.service.wiring`: the service and every CLI command build the writer and the searcher
the same way, so the CLI honours what the service honours (the purge file, the command prefix).

No homeserver: the room comes from an export, which `muninn import` indexes and `muninn search`
revalidates against.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import yaml

from bot.config import parse_config
from bot.service import wiring
from tests.inprocess import muninn_here

ROOM = "!archive:x"
SERVER = "x"
BOT_DIR = Path(__file__).resolve().parents[3] / "bot"
# The parts the wiring builds: nothing else in `bot/` may call these.
WIRED = {"Writer", "Searcher", "PurgeLog"}


def _event(ts: int, etype: str, content: dict[str, Any], **more: str) -> dict[str, Any]:
    return {
        "type": etype,
        "sender": "@ada:x",
        "event_id": f"$e{ts}",
        "room_id": ROOM,
        "origin_server_ts": ts,
        "content": content,
        **more,
    }


def _export(tmp: Path) -> Path:
    """A room of three messages, one far apart in time from the two others (a purge's range)."""
    said = [
        (10_000, "the kiwi harvest starts on monday"),
        (11_000, "bring crates for the kiwi harvest"),
        (50_000_000, "the kiwi orchard is sold, a secret until friday"),
    ]
    events = [
        _event(1, "m.room.create", {"room_version": "12"}, state_key=""),
        _event(2, "m.room.member", {"membership": "join"}, state_key="@ada:x"),
        *(_event(ts, "m.room.message", {"msgtype": "m.text", "body": t}) for ts, t in said),
    ]
    path = tmp / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return path


def _config(tmp: Path) -> Path:
    doc = {
        # Never asked: the room is an export, revalidated against its file.
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": SERVER},
        "reader": {"user_id": "@archivist:x", "access_token": "unused"},
        "index": {"store": {"path": str(tmp / "store" / "qdrant")}, "collection": "muninn_test"},
        "embedder": {"model": "minilm"},  # the session's model (`tests.indexing`)
    }
    path = tmp / "muninn.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _purge_in_the_file(config: Path, from_ts: int, to_ts: int) -> None:
    """A purge only the file holds, as a store rebuilt from nothing or not yet opened sees it."""
    cfg = parse_config(yaml.safe_load(config.read_text()), config.parent)
    wiring.purge_log(cfg).append({"room_id": ROOM, "from_ts": from_ts, "to_ts": to_ts})


def _bodies(doc: dict[str, Any]) -> list[str]:
    return [str(m["body"]) for h in doc["hits"] for m in h["messages"]]


def test_wiring_is_the_only_place_bot_builds_a_writer_or_a_searcher() -> None:
    """`muninn run`, the CLI and `muninn mcp` build their writer, searcher and purge file through
    `bot.service.wiring` alone: a second construction could drift (a missing `purges=`)."""
    found: list[str] = []
    for path in sorted(BOT_DIR.rglob("*.py")):
        if path.name == "wiring.py" and path.parent.name == "service":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                if name in WIRED:
                    found.append(f"{path.relative_to(BOT_DIR.parent)}:{node.lineno} {name}")
    assert found == []


async def test_cli_import_honours_a_purge_only_the_file_holds(tmp_path: Path) -> None:
    """`muninn import` writes through the wiring's writer, which takes the purge file's records
    into the store first: a purged message is never indexed, as with `muninn refresh`."""
    config = _config(tmp_path)
    _purge_in_the_file(config, 40_000_000, 60_000_000)
    run = await muninn_here(config, "import", str(_export(tmp_path)), "--json")
    assert run.rc == 0, run.err
    (room,) = run.doc()["rooms"]
    assert room["skipped"].get("purged") == 1, room
    doc = (await muninn_here(config, "search", "kiwi orchard", "--json")).doc()
    assert not any("orchard" in b for b in _bodies(doc)), doc


async def test_cli_search_honours_a_purge_only_the_file_holds(tmp_path: Path) -> None:
    """`muninn search --json` reads the purge file as the service's searcher does: a purge the
    running service recorded (the file first) hides the hit at once, before any refresh."""
    config = _config(tmp_path)
    run = await muninn_here(config, "import", str(_export(tmp_path)), "--json")
    assert run.rc == 0, run.err
    before = (await muninn_here(config, "search", "kiwi orchard", "--json")).doc()
    assert any("orchard" in b for b in _bodies(before)), before
    _purge_in_the_file(config, 40_000_000, 60_000_000)
    after = (await muninn_here(config, "search", "kiwi orchard", "--json")).doc()
    assert not any("orchard" in b for b in _bodies(after)), after
    assert after["dropped_stale"] >= 1
