"""Room events as the client-server API serves them, for the room log's tests."""

from __future__ import annotations

from typing import Any


def message(event_id: str, sender: str, body: str, edits: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if edits is not None:
        content["m.new_content"] = {"msgtype": "m.text", "body": body.removeprefix("* ")}
        content["m.relates_to"] = {"rel_type": "m.replace", "event_id": edits}
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": sender,
        "origin_server_ts": 1,
        "room_id": "!r",
        "content": content,
    }
