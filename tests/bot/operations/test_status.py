"""`muninn status` and `refresh` against the real Synapse and store: as a real subprocess in
one test each, in this process (`tests.inprocess`) in the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from bot.config import load_config
from bot.demo.client import unique_localpart
from bot.demo.synapse import free_port
from bot.mcp.lookups import Lookups
from tests.bot.botenv import JOINED_HISTORY
from tests.bot.cli.test_operator import OLD_ALIAS, ROOM, edit_config, export_file
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, muninn, reader_config, shared_embedder
from tests.inprocess import muninn_here


def _write_config(path: Path, hs: Homeserver, reader: MatrixUser, **extra: Any) -> Path:
    doc: dict[str, Any] = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        "index": {"store": {"path": str(path.parent / "qdrant")}, "collection": "muninn_test"},
        **extra,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


async def _cli(config: Path, *args: str, child: bool = False) -> tuple[int, str, str]:
    """`muninn ARGS…` in this process, or (`child`) as a real subprocess."""
    run = await (muninn if child else muninn_here)(config, *args)
    return run.rc, run.out, run.err


async def test_cli_status_json_names_each_joined_room_with_its_verdict(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Every joined room is listed with its verdict, detail, points and cursor."""
    reader = await hs.register()
    excluded_alias = unique_localpart("users")
    rooms = {
        "ordinary": await hs.fresh_room(alice),
        "excluded": await hs.fresh_room(alice),
        "bridged": await hs.make_bridged_room(alice),
        "dm": await hs.fresh_room(alice, preset="private_chat"),
        "puppet_spoke": await hs.fresh_room(alice),
    }
    await alice.set_canonical_alias(rooms["excluded"], f"#{excluded_alias}:{hs.server_name}")
    for room_id in rooms.values():
        await admit(alice, room_id, reader)
        await alice.send_text(room_id, "some words")
    await reader.add_direct(alice.user_id, rooms["dm"])
    puppet = await hs.register(unique_localpart("discord_"))
    await puppet.join(rooms["puppet_spoke"])
    await puppet.send_text(rooms["puppet_spoke"], "relayed")
    await puppet.leave(rooms["puppet_spoke"])
    left = await hs.fresh_room(alice)
    await admit(alice, left, reader)
    await reader.leave(left)

    scope = {"exclude_aliases": [f"#{excluded_alias}"]}
    config = _write_config(tmp_path / "config.yaml", hs, reader, scope=scope)
    ix = Indexer(reader_config(hs, reader, tmp_path, scope=scope))
    try:
        await ix.refresh()
        generation = ix.writer.generation
    finally:
        await ix.close()  # one process per store path: the CLI opens it next

    code, out, err = await _cli(config, "status", "--json", child=True)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["reader"] == reader.user_id
    assert doc["generation"] == generation
    assert doc["versions"]["complete"] is True
    by_id = {r["room_id"]: r for r in doc["rooms"]}
    assert set(by_id) == set(rooms.values())  # the left room is not joined
    verdicts = {name: by_id[rid]["verdict"] for name, rid in rooms.items()}
    assert verdicts == {
        "ordinary": "eligible",
        "excluded": "excluded",
        "bridged": "bridged",
        "dm": "dm",
        "puppet_spoke": "bridged",
    }
    ordinary = by_id[rooms["ordinary"]]
    assert ordinary["indexed"] and ordinary["points"] == 1 and ordinary["cursor"]
    assert ordinary["lag_seconds"] is not None and ordinary["lag_seconds"] >= 0
    assert doc["points"] == 1
    assert excluded_alias in by_id[rooms["excluded"]]["detail"]
    assert by_id[rooms["excluded"]]["room_alias"] == f"#{excluded_alias}:{hs.server_name}"
    assert puppet.user_id in by_id[rooms["puppet_spoke"]]["detail"]
    for name in ("excluded", "bridged", "dm", "puppet_spoke"):
        assert by_id[rooms[name]]["points"] == 0
        assert not by_id[rooms[name]]["indexed"]


async def test_cli_status_before_any_refresh_lists_rooms_unindexed(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """With no generation yet, status still names each joined room and its verdict."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    config = _write_config(tmp_path / "config.yaml", hs, reader)
    code, out, err = await _cli(config, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["generation"] is None and doc["points"] == 0
    assert [(r["room_id"], r["verdict"], r["indexed"]) for r in doc["rooms"]] == [
        (room, "eligible", False)
    ]


async def test_cli_refresh_honours_room_and_prints_a_line_per_room(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """`muninn refresh --room R` indexes R only (the other room stays unsearchable; a short
    alias `#x` is this homeserver's, regression: a raw 400 M_INVALID_PARAM); a plain
    `muninn refresh` then indexes the rest and prints one line a room, refusals with their
    reason; `muninn status` prints the reader, generation, points and each room's state."""
    reader = await hs.register()
    first, second, excluded = [await hs.fresh_room(alice) for _ in range(3)]
    for room_id, body in (
        (first, "the heron nests above the boathouse"),
        (second, "the kestrel hovers over the car park"),
        (excluded, "the magpie steals the teaspoons"),
    ):
        await admit(alice, room_id, reader)
        await alice.send_text(room_id, body)
    scope = {"exclude_room_ids": [excluded]}
    config = _write_config(tmp_path / "config.yaml", hs, reader, scope=scope)
    short = f"#{unique_localpart('heron')}"  # `#x` means `#x:<server_name>`, as in the roster
    await alice.create_alias(f"{short}:{hs.server_name}", first)

    code, out, err = await _cli(config, "refresh", "--room", short, "--json", child=True)
    assert code == 0, err
    assert [r["room_id"] for r in json.loads(out)["rooms"]] == [first]
    heron = json.loads(
        (await _cli(config, "search", "heron boathouse", "--room", short, "--json"))[1]
    )
    kestrel = json.loads((await _cli(config, "search", "kestrel car park", "--json"))[1])
    assert {h["room_id"] for h in heron["hits"]} == {first}
    assert second not in {h["room_id"] for h in kestrel["hits"]}  # not indexed: not found

    code, out, err = await _cli(config, "refresh")
    assert code == 0, err
    lines = dict(line.split(": ", 1) for line in out.strip().splitlines())
    assert set(lines) == {first, second, excluded}
    assert lines[second].startswith("read ") and "indexed 1," in lines[second]
    assert "now 1 point (1 window write, 0 deletes), skipped: " in lines[second]
    assert lines[first].startswith("read 0, indexed 0,")  # nothing new since --room
    assert lines[excluded].startswith("refused, excluded: ")

    code, out, err = await _cli(config, "status")
    assert code == 0, err
    head, *rooms = out.strip().splitlines()
    assert head.startswith(f"reader {reader.user_id}; generation muninn_test-")
    assert head.endswith("; 2 points")
    shown = dict(line.strip().split(": ", 1) for line in rooms)
    assert shown[first] == shown[second] == "indexed, 1 point"
    assert shown[excluded].startswith("refused, excluded: ")  # as `refresh` says it


async def test_cli_status_names_why_the_command_room_is_not_served(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Regression: `status` says whether `bot.command_room` is served and, if not, names the
    cause: here a member who is not an allowed asker (JSON and plain text)."""
    reader = await hs.register()
    persona = await hs.register(unique_localpart("persona-"))
    room = await hs.fresh_room(persona, preset="private_chat", initial_state=[JOINED_HISTORY])
    for user in (reader, alice):
        await admit(persona, room, user)
    askers = [r"@persona-.*:muninn\.test"]
    bot = {"command_room": room, "command_room_askers": askers}
    config = _write_config(tmp_path / "config.yaml", hs, reader, bot=bot)
    code, out, err = await _cli(config, "status", "--json")
    assert code == 0, err
    command = json.loads(out)["command_room"]
    assert (command["room_id"], command["serving"], command["verdict"]) == (
        room,
        False,
        "outsider",
    )
    assert f"member {alice.user_id}" in command["detail"]
    code, out, err = await _cli(config, "status")
    assert code == 0, err
    assert f"command room {room}: NOT served, outsider: member {alice.user_id}" in out

    await alice.leave(room)
    code, out, err = await _cli(config, "status", "--json")
    assert json.loads(out)["command_room"]["serving"] is True


async def test_cli_status_with_the_homeserver_down_names_rooms_by_their_stored_alias(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Issue 44: with the homeserver down each indexed room is named by the alias its stored
    windows carry (regression: by id only, the store holding the alias), its verdict unknown."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    alias = f"#{unique_localpart('heron')}:{hs.server_name}"
    await alice.set_canonical_alias(room, alias)
    await admit(alice, room, reader)
    await alice.send_text(room, "the heron nests above the boathouse")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
    config = _write_config(tmp_path / "config.yaml", hs, reader)
    edit_config(config, homeserver={"url": f"http://127.0.0.1:{free_port()}"})  # none there

    code, out, _ = await _cli(config, "status")
    assert code == 1
    assert "rooms in the index (their verdicts need the homeserver: unknown):" in out
    assert f"  {alias}: indexed, 1 point" in out.splitlines()
    code, out, _ = await _cli(config, "status", "--json")
    shown = json.loads(out)["rooms"]
    assert [(r["room_id"], r["room_alias"], r["verdict"]) for r in shown] == [
        (room, alias, "unknown")
    ]


async def test_cli_status_of_an_archive_store_shows_its_imports_not_the_homeservers_rooms(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Issue 44: a store built by `muninn import` alone holds none of the reader's joined
    rooms: its text says it is an archive store and counts them, instead of listing each as
    "not indexed yet" with the command room (`--json` still lists them, `archive: true`)."""
    reader = await hs.register()
    joined = await hs.fresh_room(alice)
    await admit(alice, joined, reader)
    command = await hs.fresh_room(reader, preset="private_chat", initial_state=[JOINED_HISTORY])
    config = _write_config(tmp_path / "config.yaml", hs, reader, bot={"command_room": command})
    export = export_file(tmp_path / "old.jsonl", alias=OLD_ALIAS)
    imported = await _cli(config, "import", str(export))
    assert imported[0] == 0, imported[2]

    code, out, err = await _cli(config, "status")
    assert code == 0, err
    head, archive, old = out.strip().splitlines()
    assert head.startswith(f"reader {reader.user_id}; generation muninn_test-")
    assert archive.startswith("archive store: every room in it was indexed by `muninn import`")
    assert "the reader's joined rooms (1) and the command room are not in it" in archive
    assert old.startswith(f"imported {OLD_ALIAS} ({ROOM}): 3 points from {export}")
    assert "(not joined: a homeserver pass over this store purges it)" in old
    doc = json.loads((await _cli(config, "status", "--json"))[1])
    assert doc["archive"] is True and {r["room_id"] for r in doc["rooms"]} == {joined, command}
    assert doc["command_room"]["room_id"] == command


async def test_cli_refresh_leaves_the_command_room_out_and_status_names_it(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Issue 44: the command room is where people ask, not where answers live. Indexed while
    the operator opts in (`bot.index_command_room: true`), by default it is refused as
    `command_room`, known by the local address `bot.command_room` names though its state
    lists no alias: `refresh` purges what it held, `status` shows it refused like any other
    room (and still served), and a search finds the answer, not the asker's note."""
    reader = await hs.register()
    persona = await hs.register(unique_localpart("persona-"))
    commands = await hs.fresh_room(persona, preset="private_chat", initial_state=[JOINED_HISTORY])
    local = unique_localpart("muninn")
    await persona.create_alias(f"#{local}:{hs.server_name}", commands)  # not its canonical
    answers = await hs.fresh_room(alice)
    for owner, room in ((persona, commands), (alice, answers)):
        await admit(owner, room, reader)
    await persona.send_text(commands, "note to self: where is the vault key? ask the caretaker")
    await alice.send_text(answers, "the vault key hangs on the hook behind the boiler")
    bot = {"command_room": f"#{local}", "command_room_askers": [r"@persona-.*:muninn\.test"]}
    opted_in = {**bot, "index_command_room": True}
    indexing = _write_config(tmp_path / "opted-in.yaml", hs, reader, bot=opted_in)
    config = _write_config(tmp_path / "config.yaml", hs, reader, bot=bot)

    code, out, err = await _cli(indexing, "refresh", "--json")
    assert code == 0, err
    held = {r["room_id"]: r for r in json.loads(out)["rooms"]}[commands]
    assert held["verdict"] == "eligible" and held["points"] >= 1
    code, out, err = await _cli(config, "refresh", "--json")
    assert code == 0, err
    rooms = {r["room_id"]: r for r in json.loads(out)["rooms"]}
    assert rooms[commands]["verdict"] == "command_room" and rooms[commands]["purged_room"]
    assert rooms[answers]["verdict"] == "eligible"

    code, out, err = await _cli(config, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    row = {r["room_id"]: r for r in doc["rooms"]}[commands]
    assert (row["verdict"], row["points"], row["indexed"]) == ("command_room", 0, False)
    assert "bot.index_command_room: true" in row["detail"]
    assert doc["command_room"]["serving"] is True
    code, out, err = await _cli(config, "status")
    assert code == 0, err
    assert f"  {commands}: refused, command_room: the command room (bot.command_room)" in out
    code, out, err = await _cli(config, "search", "--json", "where is the vault key")
    assert code == 0, err
    found = json.loads(out)
    assert found["hits"] and {h["room_id"] for h in found["hits"]} == {answers}
    assert commands not in {r["room_id"] for r in found.get("indexing", [])}  # never read
    listed = await Lookups(load_config(config), shared_embedder()).rooms()  # MCP's `rooms`
    assert {r["room_id"] for r in listed["rooms"]} == {answers}
