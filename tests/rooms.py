"""Fixture rooms (`tests/fixtures/rooms/*.yaml`) indexed in-process: no homeserver.

A room file lists `[sender, body]` messages; they become one room's Matrix events an hour
apart (so each message is its own window; `minutes_apart: 1` makes them one conversation), or
`conversations` of them, a minute apart within one and an hour between them; read by the
writer through `ExportReader` (the path `muninn import` takes) into an embedded store, with the
embedder the test gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ingest.config import Config, parse_config
from ingest.embed import Embedder
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport
from ingest.matrix.export import ExportReader
from ingest.search import Searcher
from ingest.search.hits import SearchResult
from ingest.search.query import SearchQuery
from ingest.store import Store, open_store

ROOMS = Path(__file__).parent / "fixtures" / "rooms"
SERVER = "rooms.test"
ROOM_ID = "!fixture:rooms.test"
START_MS = 1_700_000_000_000
HOUR_MS = 3_600_000  # more than the chunker's gap: one window a message

# The busy room's questions (`busy.yaml`, issue 47): (question, a phrase of its answer),
# asked in other words than the answer's.
BUSY_ASKED = (
    ("can I use the resin machine", "resin printer is free"),
    ("where is the storage cupboard key kept", "blue envelope"),
    ("who teaches people to weld", "welding course"),
    ("how much more do we pay for the space", "rent for the unit"),
    ("is there a rodent problem", "mice chewed"),
    ("how do I disarm the security system", "alarm code"),
    ("who looks after the money now", "new treasurer"),
    ("when do I have to pay my membership", "annual fees"),
    ("is water coming through the ceiling upstairs", "radiator in the loft"),
    ("why won't my prints come out", "nozzle is clogged"),
    ("where is the thing to control the beamer", "projector remote"),
    ("who is repairing the garden hut", "shed roof"),
    ("how long does the pottery oven take to heat up", "kiln hits temperature"),
    ("where do we keep the face shields", "welding masks"),
    ("why are my cuts not straight", "fence is out of true"),
)


def conversations(name: str) -> list[list[tuple[str, str]]]:
    """The fixture room `name`'s `conversations`: each a list of (sender, body)."""
    doc = yaml.safe_load((ROOMS / f"{name}.yaml").read_text("utf-8"))
    return [[(str(s), str(b)) for s, b in conv] for conv in doc["conversations"]]


def room_events(name: str, said: Sequence[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """The fixture room `name` as raw Matrix events (a create event, then the messages); with
    `said`, those (sender, body) messages instead of the file's."""
    if said is None:
        doc = yaml.safe_load((ROOMS / f"{name}.yaml").read_text("utf-8"))
    else:
        doc = {"messages": said}
    apart = int(doc.get("minutes_apart", 0)) * 60_000 or HOUR_MS  # a minute: one window
    stamps = [START_MS + (i + 1) * apart for i in range(len(doc.get("messages", [])))]
    if "conversations" in doc:  # a minute apart within one, an hour between them
        doc["messages"] = [m for conv in doc["conversations"] for m in conv]
        stamps = [
            START_MS + (c + 1) * HOUR_MS + j * 60_000
            for c, conv in enumerate(doc["conversations"])
            for j in range(len(conv))
        ]
    create = {
        "type": "m.room.create",
        "state_key": "",
        "sender": f"@admin:{SERVER}",
        "event_id": "$create",
        "room_id": ROOM_ID,
        "origin_server_ts": START_MS,
        "content": {"room_version": "12"},
    }
    messages = [
        {
            "type": "m.room.message",
            "sender": f"@{sender}:{SERVER}",
            "event_id": f"${name}-{i}",
            "room_id": ROOM_ID,
            "origin_server_ts": stamps[i],
            "content": {"msgtype": "m.text", "body": body},
        }
        for i, (sender, body) in enumerate(doc["messages"])
    ]
    return [create, *messages]


@dataclass
class Room:
    """A fixture room's index and its searcher."""

    cfg: Config
    store: Store
    source: ExportReader
    searcher: Searcher

    async def search(self, question: str, k: int = 3) -> SearchResult:
        return await self.searcher.search(SearchQuery.build([question], limit=k))

    async def top(self, question: str, k: int = 3) -> list[str]:
        """The bodies of the first `k` hits' messages, best first ([] when nothing is shown)."""
        result = await self.search(question, k)
        return [str(m["body"]) for h in result.hits for m in h.messages]

    async def refresh(self, embedder: Embedder) -> RefreshReport:
        """A writer pass over the room with `embedder`; the searcher follows it."""
        writer = Writer(self.cfg, self.source, self.store, embedder)
        report = await writer.refresh()
        assert [r.verdict for r in report.rooms] == ["eligible"], report
        self.searcher = Searcher(self.store, embedder, server_name=SERVER)
        return report

    def close(self) -> None:
        self.store.close()


async def index_room(
    name: str,
    embedder: Embedder,
    tmp_path: Path,
    said: Sequence[tuple[str, str]] | None = None,
) -> Room:
    """Index the fixture room `name` (or the messages `said`, a room of that name) with
    `embedder` into a new store under `tmp_path`."""
    cfg = parse_config(
        {
            "homeserver": {"url": "http://127.0.0.1:1", "server_name": SERVER},
            "reader": {"user_id": f"@muninn:{SERVER}", "access_token": "not-used"},
            "index": {"store": {"path": str(tmp_path / "qdrant")}, "collection": "rooms"},
        },
        tmp_path,
    )
    store = await asyncio.to_thread(open_store, cfg.index, cfg.base_dir)
    source = ExportReader(room_events(name, said), user_id=f"@muninn:{SERVER}")
    room = Room(cfg, store, source, Searcher(store, embedder, server_name=SERVER))
    await room.refresh(embedder)
    return room


def found(answers: Sequence[str], expected: str) -> bool:
    return any(expected in a for a in answers)
