"""What the store's tests share: the test collection and its generations, points with chosen
vectors and payloads.
"""

from __future__ import annotations

import uuid
from typing import Any

from ingest.store import PointRecord, generation_name
from ingest.types import SparseVector

COLLECTION = "muninn_test"
DIM = 4
GEN = generation_name(COLLECTION, {"embedder": "test", "dimension": DIM})
OTHER_GEN = generation_name(COLLECTION, {"embedder": "other", "dimension": DIM})

TERM0 = SparseVector((0,), (1.0,))  # every test document shares term 0 unless told otherwise


def pid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def point(
    name: str,
    *,
    room: str = "!r1",
    senders: tuple[str, ...] = ("@alice:x",),
    span: tuple[int, int] = (1000, 2000),
    events: tuple[str, ...] | None = None,
    thread: str | None = None,
    dense: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0),
    sparse: SparseVector = TERM0,
    text: str = "",
) -> PointRecord:
    events = events if events is not None else (f"${name}1",)
    payload: dict[str, Any] = {
        "room_id": room,
        "room_alias": None,
        "thread_root": thread,
        "event_ids": list(events),
        "first_event_id": events[0],
        "last_event_id": events[-1],
        "first_ts": span[0],
        "last_ts": span[1],
        "senders": list(senders),
        "messages": [
            {"event_id": e, "sender": senders[0], "ts": span[0], "body": text} for e in events
        ],
        "text": text or name,
        "content_hash": f"h-{name}",
        "versions": {"chunker": 1, "scrub": 1},
    }
    return PointRecord(id=pid(name), dense=dense, sparse=sparse, payload=payload)


def names(points: Any) -> set[str]:
    by_id = {pid(n): n for n in "ABCDEFGHXYZ"}
    return {by_id[p.id] for p in points}
