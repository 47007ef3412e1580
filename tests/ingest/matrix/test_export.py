"""`muninn import`: a room export goes through the same pipeline and rules as a refresh."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.chat.replies.words import plural
from bot.demo.synapse import free_port
from ingest.index.records import CURSOR_PREFIX, EXPORT_PREFIX, exported_rooms
from ingest.matrix.export import ExportError, ExportReader, load_export
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import open_store
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    admit,
    muninn,
    reader_config,
    reader_config_doc,
    shared_embedder,
    write_config,
)
from tests.inprocess import muninn_here

COLLECTION = "muninn_test"  # the collection tests.indexing writes
QUERIES = ["deploy failed", "pizza for the team lunch", "E4242"]


async def _all_events(user: MatrixUser, room_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = await user.messages(room_id, from_token=token, limit=100)
        events.extend(page.get("chunk", []))
        if not page.get("end") or page.get("end") == token:
            return events
        token = page["end"]


async def _import(cfg_path: Path, export: Path) -> tuple[int, dict[str, Any]]:
    run = await muninn_here(cfg_path, "import", str(export), "--json")
    if run.rc not in (0, 3):
        raise AssertionError(f"import failed ({run.rc}): {run.err}")
    return run.rc, json.loads(run.out)


async def _hits(store_dir: Path, cfg_doc: dict[str, Any], tmp: Path) -> list[list[str]]:
    from ingest.config import parse_config

    index = {"store": {"path": str(store_dir)}, "collection": COLLECTION}
    cfg = parse_config({**cfg_doc, "index": index}, tmp)
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    try:
        searcher = Searcher(store, shared_embedder(), server_name=cfg.homeserver.server_name)
        out = []
        for q in QUERIES:
            result = await searcher.search(SearchQuery.build([q], limit=3))
            out.append([m["body"] for h in result.hits for m in h.messages])
        return out
    finally:
        await asyncio.to_thread(store.close)


async def _seed(alice: MatrixUser, room: str) -> None:
    first = await alice.send_text(room, "the deploy failed with E4242 on friday night")
    await alice.send_text(room, "who orders pizza for the team lunch tomorrow?")
    gone = await alice.send_text(room, "my phone number is 555-0100, call me")
    await alice.send_edit(room, first, "the deploy failed with E4242 on saturday night")
    await alice.redact(room, gone)
    await alice.send_text(room, "token for the bot: syt_c2VjcmV0_abcdefghijklmnopqrst_1a2b3c")


async def test_import_element_and_jsonl_match_refresh(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """An Element export and a JSONL of the same events index exactly what a refresh indexes."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await reader.join(room)
    await _seed(alice, room)
    refreshed = Indexer(reader_config(hs, reader, tmp_path / "refresh"))
    await refreshed.refresh()
    expected_bodies = await refreshed.bodies()
    await refreshed.close()

    events = await _all_events(reader, room)
    jsonl = tmp_path / "room.jsonl"
    jsonl.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    element = tmp_path / "export.json"
    element.write_text(json.dumps({"room_name": "r", "exported_by": "a", "messages": events}))

    doc = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
    }
    results = {}
    for name, export in (("jsonl", jsonl), ("element", element)):
        cfg_doc = {
            **doc,
            "index": {"store": {"path": str(tmp_path / name)}, "collection": COLLECTION},
        }
        cfg_path = tmp_path / f"{name}.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg_doc))
        code, report = await _import(cfg_path, export)
        assert code == 0
        assert report["rooms"][0]["verdict"] == "eligible"
        results[name] = await _hits(tmp_path / name, doc, tmp_path)
    refreshed_hits = await _hits(tmp_path / "refresh" / "qdrant", doc, tmp_path)
    assert results["jsonl"] == refreshed_hits
    assert results["element"] == refreshed_hits
    flat = json.dumps(refreshed_hits)
    assert "saturday" in flat and "friday" not in flat, "the edit replaced the text"
    assert "555-0100" not in flat and "syt_c2VjcmV0" not in flat
    assert len(expected_bodies) == 3


@pytest.mark.parametrize("kind", ["dm", "encrypted", "puppet"])
async def test_import_refuses_rooms_scope_refuses(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, tmp_path: Path, kind: str
) -> None:
    """A DM's, an encrypted room's or a bridged room's export is refused: nothing is indexed."""
    if kind == "dm":
        room = await hs.make_dm(alice, bob)
    else:
        room = await hs.fresh_room(alice)
        await bob.join(room)
    if kind == "encrypted":
        await alice.enable_encryption(room)
    await alice.send_text(room, "a private plan about the surprise party")
    events = await _all_events(bob, room)
    if kind == "puppet":
        events.append({**events[-1], "event_id": "$puppet", "sender": "@_discord_42:muninn.test"})
    export = tmp_path / "room.jsonl"
    export.write_text("\n".join(json.dumps(e) for e in events))
    cfg_doc = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": bob.user_id, "access_token": bob.access_token},
        "index": {"store": {"path": str(tmp_path / "q")}, "collection": COLLECTION},
    }
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg_doc))
    code, report = await _import(cfg_path, export)
    assert code == 3
    assert report["rooms"][0]["verdict"] == {"dm": "dm", "encrypted": "encrypted"}.get(
        kind, "bridged"
    )
    assert report["rooms"][0]["indexed"] == 0
    hits = await _hits(tmp_path / "q", cfg_doc, tmp_path)
    assert "surprise party" not in json.dumps(hits)


async def test_import_is_searchable_without_a_homeserver_against_its_export(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """An old room's export, indexed and searched with no homeserver at all: its hits are
    revalidated against the export (a redaction added to the file hides the message), and a
    search whose export is gone fails naming the file instead of showing unconfirmed hits."""
    room = await hs.fresh_room(alice)
    await _seed(alice, room)
    events = await _all_events(alice, room)
    export = tmp_path / "old-room.jsonl"
    export.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    cfg_doc = {
        # Nothing listens there, and the reader was never in the room anyway.
        "homeserver": {"url": f"http://127.0.0.1:{free_port()}", "server_name": hs.server_name},
        "reader": {"user_id": f"@archivist:{hs.server_name}", "access_token": "unused"},
        "index": {"store": {"path": str(tmp_path / "q")}, "collection": COLLECTION},
    }
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg_doc))
    plain = await muninn(cfg_path, "import", str(export))  # the report as text: one line
    assert plain.rc == 0, plain.err
    assert plain.out.startswith(
        f"{room}: read {len(events)}, indexed 3, edits 1, redactions 0, now 1 point "
        "(1 window write, 0 deletes), skipped: "
    )
    assert plain.out.count("\n") == 1 and "redacted 1" in plain.out

    found = await muninn_here(cfg_path, "search", "deploy failed", "--room", room, "--json")
    doc = found.doc()
    bodies = [m["body"] for h in doc["hits"] for m in h["messages"]]
    assert any("E4242 on saturday" in b for b in bodies), doc
    assert doc["dropped_stale"] == 0 and doc["warnings"] == []
    deploy = next(h for h in doc["hits"] if "E4242" in json.dumps(h))

    redaction = {
        "type": "m.room.redaction",
        "room_id": room,
        "sender": alice.user_id,
        "event_id": "$redacted-in-the-export",
        "origin_server_ts": events[-1]["origin_server_ts"] + 1,
        "redacts": deploy["best_event_id"],
        "content": {"redacts": deploy["best_event_id"]},
    }
    with export.open("a") as f:
        f.write(json.dumps(redaction) + "\n")
    after = (await muninn_here(cfg_path, "search", "deploy failed", "--json")).doc()
    assert deploy["best_event_id"] not in {e for h in after["hits"] for e in h["event_ids"]}
    assert after["dropped_stale"] >= 1

    export.rename(tmp_path / "moved.jsonl")
    gone = await muninn_here(cfg_path, "search", "deploy failed", "--json")
    assert (gone.rc, gone.out) == (1, "")
    assert f"{export.resolve()}: cannot read" in gone.err
    assert "revalidated against it" in gone.err and "Traceback" not in gone.err


async def test_import_into_a_store_homeserver_passes_write_is_refused(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """`muninn status` lists an imported room with its source (regression: never listed,
    its points unaccounted for); once homeserver passes write the store, an import of a room
    the reader has not joined is refused naming the archive-store recipe (regression: the
    next refresh silently purged it, "not_joined")."""
    reader = await hs.register()
    joined = await hs.fresh_room(alice)
    await admit(alice, joined, reader)
    await alice.send_text(joined, "the standup moves to ten")
    old = await hs.fresh_room(alice)  # the reader was never in it
    await _seed(alice, old)
    export = tmp_path / "old-room.jsonl"
    export.write_text("\n".join(json.dumps(e) for e in await _all_events(alice, old)) + "\n")
    cfg_path = write_config(tmp_path / "c.yaml", reader_config_doc(hs, reader, tmp_path))

    first = await muninn_here(cfg_path, "import", str(export))  # an empty store: an archive
    assert first.rc == 0, first.err
    status = (await muninn_here(cfg_path, "status", "--json")).doc()
    [imported] = status["imported"]
    assert imported["room_id"] == old and imported["source"] == str(export.resolve())
    assert imported["points"] >= 1 and imported["joined"] is False
    assert status["points"] == imported["points"]
    # The text says so too: the joined room no pass wrote into this store is not "indexed"
    # (regression: "indexed, 0 points"; issue 44: nor listed, an archive store holds none of
    # the homeserver's rooms), and the import's points are counted in words.
    lines = (await muninn(cfg_path, "status")).out.splitlines()
    assert "the reader's joined rooms (1) are not in it" in lines[1]
    assert not any(joined in line for line in lines)
    where = "(not joined: a homeserver pass over this store purges it)"
    points = plural(imported["points"], "point")
    assert f"imported {old}: {points} from {export.resolve()} {where}" in lines

    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()  # a homeserver pass: it writes `joined` (and purges `old`)
    again = await muninn_here(cfg_path, "import", str(export))
    assert again.rc == 1 and again.out == ""
    assert f"the reader has not joined {old}" in again.err
    assert "would purge the import again" in again.err and "archive store" in again.err


def test_exported_rooms_are_those_still_built_from_their_export() -> None:
    """A room is revalidated against its export while its cursor is the export's; once a
    refresh read it from the homeserver (a homeserver token), the homeserver is its record."""
    exports = {
        f"{EXPORT_PREFIX}!old:x": {"path": "/srv/exports/old.jsonl"},
        f"{EXPORT_PREFIX}!joined:x": {"path": "/srv/exports/joined.jsonl"},
        f"{EXPORT_PREFIX}!lost:x": {"path": "/srv/exports/lost.jsonl"},
    }
    cursors = {
        f"{CURSOR_PREFIX}!old:x": {"token": "import:120"},
        f"{CURSOR_PREFIX}!joined:x": {"token": "s72594_4483_1934"},
        f"{CURSOR_PREFIX}!other:x": {"token": "import:3"},
    }
    found = exported_rooms(exports, cursors, cursor_prefix=CURSOR_PREFIX)
    assert found == {"!old:x": Path("/srv/exports/old.jsonl")}


def test_export_load_errors_name_the_cause(tmp_path: Path) -> None:
    """A file that is not an export says why, naming the line or the missing key."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "m.room.message", "room_id": "!a"}\nnot json\n')
    with pytest.raises(ExportError, match=r"bad.jsonl:2"):
        load_export(bad)
    no_messages = tmp_path / "element.json"
    no_messages.write_text('{"room_name": "x"}')
    with pytest.raises(ExportError, match="messages"):
        load_export(no_messages)
    two_rooms = [{"room_id": "!a", "event_id": "$1"}, {"room_id": "!b", "event_id": "$2"}]
    with pytest.raises(ExportError, match="one room"):
        ExportReader(two_rooms, user_id="@m:x")


def test_export_nested_thousands_deep_names_the_file_and_line(tmp_path: Path) -> None:
    """Regression (issue 37 item 10): a JSONL line nested 5,000 deep escaped as a
    `RecursionError` traceback; it is an error naming the file and the line (and the byte, in
    an Element export)."""
    deep = "[" * 5_000 + "]" * 5_000
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text('{"type": "m.room.message", "room_id": "!a"}\n' + deep + "\n")
    with pytest.raises(ExportError, match=r"deep.jsonl:2: not a JSON event: nested too deeply"):
        load_export(jsonl)
    element = tmp_path / "deep.json"
    element.write_text('{"messages": [' + deep + "]}")
    with pytest.raises(ExportError, match=r"deep.json: not valid JSON: nested too deeply"):
        load_export(element)


def _export_events(n: int) -> list[dict[str, Any]]:
    """A room's raw events: state, long messages with JSON-looking and non-ASCII text, an edit,
    a redacted message and a redacted edit."""
    room = "!stream:x"
    events: list[dict[str, Any]] = [
        {"type": "m.room.create", "state_key": "", "sender": "@a:x", "event_id": "$c",
         "room_id": room, "origin_server_ts": 1, "content": {"room_version": "12"}},
        {"type": "m.room.member", "state_key": "@a:x", "sender": "@a:x", "event_id": "$m",
         "room_id": room, "origin_server_ts": 2, "content": {"membership": "join"}},
    ]  # fmt: skip
    for i in range(n):
        body = f'message {i} ünïcode 🙂 "quoted" {{"messages": [1, 2]}} ] }} ' + "x" * 400
        events.append(
            {"type": "m.room.message", "sender": f"@u{i % 7}:x", "event_id": f"$e{i}",
             "room_id": room, "origin_server_ts": 10 + i,
             "content": {"msgtype": "m.text", "body": body}}
        )  # fmt: skip
    for eid, target, body in (("$ed1", "$e3", "edited"), ("$ed2", "$e3", "edited again")):
        events.append(
            {"type": "m.room.message", "sender": "@u3:x", "event_id": eid, "room_id": room,
             "origin_server_ts": 10 + n, "content": {"msgtype": "m.text", "body": f"* {body}",
             "m.new_content": {"msgtype": "m.text", "body": body},
             "m.relates_to": {"rel_type": "m.replace", "event_id": target}}}
        )  # fmt: skip
    for eid, target in (("$r1", "$e5"), ("$r2", "$ed2")):
        events.append(
            {"type": "m.room.redaction", "sender": "@a:x", "event_id": eid, "room_id": room,
             "origin_server_ts": 20 + n, "redacts": target, "content": {"redacts": target}}
        )  # fmt: skip
    return events


async def test_export_is_read_from_the_file_with_the_same_pages_tokens_and_events(
    tmp_path: Path,
) -> None:
    """Import reads an export a page at a time from the file (not all of it into memory), and
    serves what an in-memory read served: every event in file order, `import:N` tokens, a walk
    resumed from any page's token, redactions applied, edits found by relation. JSONL (with
    blank and non-event lines) and an Element export larger than one read of the file agree."""
    events = _export_events(3000)
    jsonl = tmp_path / "room.jsonl"
    lines = [json.dumps(e, ensure_ascii=False) for e in events]
    jsonl.write_text("\n".join([lines[0], "", "[1, 2]", *lines[1:]]) + "\n", encoding="utf-8")
    element = tmp_path / "export.json"
    doc = {"room_name": "r", "messages": [events[0], "not an event", *events[1:]], "n": 3}
    element.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    assert element.stat().st_size > 3 << 19  # more than one of the reader's 1 MiB chunks

    redacted = {"$e5", "$ed2"}
    served = [
        {**e, "content": {}, "unsigned": {"redacted_because": {"type": "m.room.redaction"}}}
        if e["event_id"] in redacted
        else e
        for e in events
    ]
    for path in (jsonl, element):
        assert load_export(path) == events
        reader = ExportReader.from_file(path, user_id="@m:x")
        assert not isinstance(reader.events, list)  # the file is the store, not a copy
        pages = [p async for p in reader.walk(reader.room_id, None, page_size=128)]
        assert [e for p in pages for e in p.events] == served
        assert [(p.start, p.end) for p in pages] == [
            (f"import:{i}", f"import:{min(i + 128, len(events))}")
            for i in range(0, len(events), 128)
        ]
        resumed = [p async for p in reader.walk(reader.room_id, pages[10].end, page_size=500)]
        assert [e for p in resumed for e in p.events] == served[11 * 128 :]
        assert resumed[0].start == f"import:{11 * 128}"
        assert await reader.get_event(reader.room_id, "$e5") == served[7]
        assert await reader.get_event(reader.room_id, "$e2999") == events[3001]
        assert await reader.get_event(reader.room_id, "$nope") is None
        edits = await reader.relations(reader.room_id, "$e3", "m.replace")
        assert [e["event_id"] for e in edits] == ["$ed1"]  # the redacted edit is not offered
        state = await reader.room_state(reader.room_id)
        assert {"@a:x", "@u0:x", "@u6:x"} <= set(state.members)


def test_export_scan_errors_name_the_cause(tmp_path: Path) -> None:
    """An Element export cut short or broken mid-list says so, naming the file."""
    whole = json.dumps({"messages": _export_events(5)})
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: len(whole) // 2])
    with pytest.raises(ExportError, match=r"cut.json: not valid JSON"):
        ExportReader.from_file(cut, user_id="@m:x")
    broken = tmp_path / "broken.json"
    broken.write_text(whole.replace('"type": "m.room.message"', '"type" "m.room.message"', 1))
    with pytest.raises(ExportError, match=r"broken.json: not valid JSON"):
        ExportReader.from_file(broken, user_id="@m:x")
