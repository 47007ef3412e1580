"""The `muninn search --json` document as docs/ARCHITECTURE.md §4.3 defines it, and a way to get
one from the real CLI (`bot.cli.main.main`, in this process): shared by the CLI's test files."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from ingest.search.permalink import MATRIX_TO
from tests.inprocess import muninn_here

TOP_KEYS = {
    "hits",
    "warnings",
    "retrievers",
    "dropped_stale",
    "below_floor",
    "nothing_close",
    "weaker",  # issue 32: a person's page of weaker matches (always false in an agent's list)
    "next_offset",
    "sort",
    "matched_event_ids",  # issue 33: the page's matching messages in reading order
}
HIT_KEYS = {
    "room_id",
    "room_alias",
    "thread_root",
    "first_event_id",
    "last_event_id",
    "event_ids",
    "messages",
    "score",
    "permalink",
    "best_event_id",
    "close",
    "matched_event_ids",  # issue 33: the hit's messages that matched, best first
}
MESSAGE_KEYS = {"event_id", "sender", "ts", "body", "msgtype"}  # issue 49: msgtype
# Issue 49: `muninn search --json` and MCP `search` add `indexing` (the listener's does not),
# and a best message asked with `context` carries `context: {before, after}`.
INDEXING_KEYS = {"room_id", "room_alias", "reason", "indexed_ts", "lag_seconds"}
QUOTED_KEYS = {*MESSAGE_KEYS, "permalink"}  # a `context` message, as the context tool's


async def search_json(config: Path, *args: str) -> dict[str, Any]:
    return (await muninn_here(config, "search", *args, "--json")).doc()


def check_contract(doc: dict[str, Any], server_name: str) -> None:
    """docs/ARCHITECTURE.md §4.3 exactly: the top-level keys, each hit's keys and every value's
    type."""
    assert set(doc) - {"indexing"} == TOP_KEYS
    for room in doc.get("indexing", []):
        assert set(room) == INDEXING_KEYS and room["reason"] in ("not_read", "behind")
        assert room["room_id"].startswith("!")
        assert (room["indexed_ts"] is None) == (room["lag_seconds"] is None)
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    assert isinstance(doc["retrievers"], list)
    assert set(doc["retrievers"]) <= {"dense", "lexical"}
    assert type(doc["dropped_stale"]) is int
    assert type(doc["below_floor"]) is int
    assert type(doc["nothing_close"]) is bool
    assert type(doc["weaker"]) is bool
    assert doc["next_offset"] is None or type(doc["next_offset"]) is int
    assert doc["sort"] in ("relevance", "recent")
    listed = [e for hit in doc["hits"] for e in hit["matched_event_ids"]]
    assert sorted(doc["matched_event_ids"]) == sorted(listed)
    for hit in doc["hits"]:
        assert set(hit) == HIT_KEYS
        said = [m["event_id"] for m in hit["messages"]]
        assert hit["matched_event_ids"] and set(hit["matched_event_ids"]) <= set(said)
        assert hit["matched_event_ids"][0] == hit["best_event_id"]
        assert isinstance(hit["room_id"], str) and hit["room_id"].startswith("!")
        assert hit["room_alias"] is None or hit["room_alias"].startswith("#")
        assert hit["thread_root"] is None or hit["thread_root"].startswith("$")
        assert type(hit["score"]) is float and hit["score"] > 0
        assert type(hit["close"]) is bool
        ids = hit["event_ids"]
        assert isinstance(ids, list) and all(isinstance(e, str) for e in ids)
        assert hit["first_event_id"] == ids[0] and hit["last_event_id"] in ids
        assert hit["best_event_id"] in ids
        assert hit["messages"]
        for m in hit["messages"]:
            assert set(m) - {"context"} == MESSAGE_KEYS
            if "context" in m:
                assert m["event_id"] == hit["best_event_id"]
                assert set(m["context"]) == {"before", "after"}
                for side in m["context"].values():
                    assert all(set(c) == QUOTED_KEYS for c in side)
            assert isinstance(m["event_id"], str) and m["event_id"] in ids
            assert isinstance(m["sender"], str) and m["sender"].startswith("@")
            assert type(m["ts"]) is int and m["ts"] > 10**12  # milliseconds, not seconds
            assert isinstance(m["body"], str)
            assert m["msgtype"] in ("m.text", "m.emote", "m.file", "m.image", "m.video", "m.audio")
        assert hit["permalink"] == (
            f"{MATRIX_TO}{quote(hit['room_id'], safe='!')}/"
            f"{quote(hit['best_event_id'], safe='!')}?via={server_name}"
        )
