"""`muninn search --json` finds files, images, video and audio by filename and caption (issue 49,
docs/ARCHITECTURE.md §3 rule 5), against a room indexed from the real Synapse: each message
says its msgtype, `--has KIND` keeps that kind, a secret in a caption is nowhere, a redacted
clip is never shown and an edited caption replaces the old one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bot.search_contract import check_contract, search_json
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, reader_config, reader_config_doc, utc_ms, write_config

PASSWORD = "Hunter2-Zebra-9931"
HINGE = "the broken hinge on the storage cupboard door"


def _said(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["event_id"]: m for h in doc["hits"] for m in h["messages"]}


async def test_cli_search_finds_media_by_caption_and_filename(
    hs: Homeserver, alice: MatrixUser, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A captioned image and a file without a caption are found by their words, with their
    msgtype; `--has image` keeps the image only; the caption's secret and the content's
    `mxc://` address are in no point; a redacted video is not shown, and an edited caption is
    found by its new words and not by its old ones."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    for user in (seeder, reader):
        await user.join(room)
    ts, hour = utc_ms("2024-07-01T10:00"), 3_600_000
    image = await seeder.send_media(room, "m.image", "IMG_2041.jpg", HINGE, ts=ts)
    budget = await seeder.send_media(room, "m.file", "quarterly-budget-2026.xlsx", ts=ts + hour)
    text = await seeder.send_text(room, "who fixes the storage cupboard hinge?", ts=ts + 2 * hour)
    secret = f"the router, admin password: {PASSWORD}"
    router = await seeder.send_media(room, "m.image", "router.png", secret, ts=ts + 3 * hour)
    otter = await seeder.send_media(room, "m.video", "otter.mp4", "the otter dance rehearsal")
    memo = await seeder.send_media(room, "m.audio", "memo.ogg", "the walrus tariff memo")
    async with Indexer(reader_config(hs, reader, tmp_path)) as indexer:
        await indexer.refresh()
        dump = await indexer.dump()
    assert PASSWORD not in dump and "mxc://" not in dump
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))

    found = await search_json(config, "broken hinge storage cupboard", "--limit", "20")
    check_contract(found, hs.server_name)
    said = _said(found)
    assert said[image]["body"] == f"IMG_2041.jpg — {HINGE}"
    assert said[image]["msgtype"] == "m.image" and said[text]["msgtype"] == "m.text"
    spreadsheet = _said(await search_json(config, "quarterly budget", "--limit", "20"))
    assert spreadsheet[budget]["body"] == "quarterly-budget-2026.xlsx"
    assert spreadsheet[budget]["msgtype"] == "m.file"
    images = await search_json(config, "hinge cupboard", "--has", "image", "--limit", "20")
    check_contract(images, hs.server_name)
    assert image in _said(images) and text not in _said(images)
    assert {m["msgtype"] for m in _said(images).values()} == {"m.image"}
    either = await search_json(config, "budget", "--has", "file", "--has", "video")
    assert {m["msgtype"] for m in _said(either).values()} <= {"m.file", "m.video"}
    routers = await search_json(config, "router admin password", "--limit", "20")
    assert router in _said(routers) and PASSWORD not in json.dumps(routers)

    await seeder.redact(room, otter)
    await seeder.edit_caption(room, memo, "the pelican ferry timetable")
    # Before the writer's next pass the search revalidates: neither shows what changed.
    stale = await search_json(config, "otter dance rehearsal walrus tariff", "--limit", "20")
    assert not {otter, memo} & set(_said(stale))
    async with Indexer(reader_config(hs, reader, tmp_path)) as indexer:
        await indexer.refresh()
        dump = await indexer.dump()
    assert "otter" not in dump and "walrus" not in dump
    pelican = _said(await search_json(config, "pelican ferry timetable", "--limit", "20"))
    assert pelican[memo]["body"] == "memo.ogg — the pelican ferry timetable"
    assert pelican[memo]["msgtype"] == "m.audio"
    walrus = await search_json(config, "walrus tariff memo", "--limit", "20")
    assert "walrus" not in json.dumps(walrus) and otter not in _said(walrus)
