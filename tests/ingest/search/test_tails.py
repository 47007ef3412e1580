"""A room's tail since the writer's mark (`ingest.search.tails`), read from a command's log."""

from __future__ import annotations

from typing import Any

from ingest.rules.events import normalize
from ingest.search.tails import Tail, tail_since
from ingest.types import Edit, Redaction


def test_a_tail_of_many_messages_keeps_every_edit_and_redaction_among_them() -> None:
    """Pure: a burst's commands and replies are plain messages after the mark, passed over
    without reading them as the writer would; every edit among them (a thread's, a reply's,
    one with no fallback, a redacted one: none) and every redaction still counts, as the
    writer's `normalize` reads each event."""

    def event(event_id: str, kind: str = "m.room.message", **content: object) -> dict[str, Any]:
        return {
            "type": kind,
            "event_id": event_id,
            "sender": "@a:x",
            "room_id": "!r:x",
            "origin_server_ts": 5,
            "content": content,
        }

    def edit(event_id: str, target: str, body: str) -> dict[str, Any]:
        new = {"msgtype": "m.text", "body": body}
        rel = {"rel_type": "m.replace", "event_id": target}
        return event(
            event_id,
            msgtype="m.text",
            body=f"* {body}",
            **{"m.new_content": new, "m.relates_to": rel},
        )

    log = [
        event("$cmd", msgtype="m.text", body="!search plan"),
        edit("$e1", "$m1", "the new plan"),
        event(
            "$reply",
            msgtype="m.notice",
            body="1 result",
            **{"m.relates_to": {"m.in_reply_to": {"event_id": "$cmd"}}},
        ),
        event(
            "$th",
            msgtype="m.text",
            body="in a thread",
            **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}},
        ),
        {**edit("$e2", "$m2", "gone"), "unsigned": {"redacted_because": {}}, "content": {}},
        event("$shape", msgtype="m.text", body="x", **{"m.new_content": {"body": "y"}}),
        event("$red", "m.room.redaction", redacts="$m3"),
        edit("$e3", "$m4", "again"),
        event("$mark", msgtype="m.text", body="hi"),
    ]
    tail = tail_since(log, "$mark")
    assert tail is not None
    expected = Tail()
    for e in reversed(log[:-1]):
        item = normalize(e, own_user_ids=frozenset(), command_prefix="")
        if isinstance(item, Redaction):
            expected.redacted.add(str(item.redacts))
        elif isinstance(item, Edit):
            expected.edits.setdefault(str(item.target), []).append(item)
    assert tail == expected
    assert tail.redacted == {"$m3"} and sorted(tail.edits) == ["$m1", "$m4"]
