"""`muninn mcp`'s pure parts, without a server: how `context` reads the events around a message
(rule 29), how an agent names an event, and the `mcp.rooms` key."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from bot.config import parse_config
from bot.mcp.lookups import moment, named
from bot.operations.context import EventRef, around, event_ref
from ingest.errors import ConfigError, QueryError
from ingest.index.records import Tombstone
from ingest.matrix import ClientEvent
from ingest.types import RoomID

ROOM = RoomID("!room:hs")
READER = "@muninn:hs"


def message(n: int, body: str, sender: str = "@ana:hs", **extra: Any) -> ClientEvent:
    event: dict[str, Any] = {
        "type": "m.room.message",
        "event_id": f"$e{n}",
        "room_id": ROOM,
        "sender": sender,
        "origin_server_ts": 1_000 * n,
        "content": {"msgtype": "m.text", "body": body},
    }
    event.update(extra)
    return cast(ClientEvent, event)


def edited(n: int, body: str, new: str, sender: str = "@ana:hs") -> ClientEvent:
    edit = {
        "type": "m.room.message",
        "event_id": f"$edit{n}",
        "room_id": ROOM,
        "sender": sender,
        "origin_server_ts": 1_000 * n + 500,
        "content": {
            "msgtype": "m.text",
            "body": f"* {new}",
            "m.new_content": {"msgtype": "m.text", "body": new},
            "m.relates_to": {"rel_type": "m.replace", "event_id": f"$e{n}"},
        },
    }
    return message(n, body, unsigned={"m.relations": {"m.replace": edit}})


def shown(
    before: list[ClientEvent], event: ClientEvent, after: list[ClientEvent], **kw: Any
) -> list[str]:
    got = around(
        ROOM,
        str(event["event_id"]),
        (before, event, after),
        before=kw.get("n", 5),
        after=kw.get("n", 5),
        reader_id=READER,
        prefix="!",
        stones=kw.get("stones", []),
        server_name="hs",
    )
    return [f"{m['event_id']}:{m['body']}" for m in got]


def test_context_shows_what_a_reply_may_quote_and_nothing_around_a_hidden_message() -> None:
    """Around a message: its neighbours as they read now (the author's edit, a secret
    scrubbed), oldest first; never a notice, a command, Muninn's own message, a redacted or
    purged one, or another sender's edit's words; around a hidden message, nothing."""
    notice = message(2, "build passed")
    notice["content"]["msgtype"] = "m.notice"  # type: ignore[index]
    redacted = message(3, "", unsigned={"redacted_because": {"type": "m.room.redaction"}})
    redacted["content"] = {}  # type: ignore[typeddict-item]
    older = [  # newest first, as /context gives them
        message(6, "the vault password=hunter2vault"),
        message(5, "!search kiwi"),
        message(4, "in the purge", sender="@ben:hs"),
        redacted,
        notice,
        edited(1, "kiwi costs ten", "kiwi costs twelve"),
    ]
    newer = [
        message(8, "our own reply", sender=READER),
        edited(9, "harvest monday", "stolen words", sender="@ben:hs"),
        message(10, "done"),
    ]
    purge = Tombstone(ROOM, 3_500, 4_500)
    lines = shown(older, message(7, "the harvest"), newer, stones=[purge])
    assert lines == [
        "$e1:kiwi costs twelve",
        "$e6:the vault password=[redacted:password]",
        "$e7:the harvest",
        "$e10:done",
    ]
    assert shown(older, message(7, "x"), newer, n=1) == [lines[1], "$e7:x", "$e10:done"]
    for hidden in (redacted, message(4, "in the purge"), notice, message(5, "!pin")):
        with pytest.raises(QueryError, match=r"^event: "):
            shown(older, hidden, newer, stones=[purge])


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("$abc:hs", EventRef("$abc:hs", None)),
        ("https://matrix.to/#/!r:hs/%24abc%3Ahs?via=hs", EventRef("$abc:hs", "!r:hs")),
        ("https://matrix.to/#/%23dev%3Ahs/%24abc", EventRef("$abc", "#dev:hs")),
    ],
)
def test_event_ref_takes_an_id_or_a_permalink(text: str, ref: EventRef) -> None:
    """An event id, or a hit's matrix.to permalink (room id or alias, `via` ignored)."""
    assert event_ref(text) == ref


@pytest.mark.parametrize(
    "text", ["", "abc", "$", "$a b", "https://matrix.to/#/!r:hs", "https://matrix.to/#/@u:hs/$a"]
)
def test_event_ref_refuses_what_names_no_message(text: str) -> None:
    with pytest.raises(QueryError, match=r"^event: "):
        event_ref(text)


def test_a_refusal_names_the_tools_argument() -> None:
    """The read path's field names become the tool's (`texts` is `query`, `offset` `cursor`),
    and a date the chat grammar cannot read names its argument."""
    assert str(named(QueryError("texts", "give 1 to 8 texts"))) == "query: give 1 to 8 texts"
    assert str(named(QueryError("offset", "must be 0 to 200"))) == "cursor: must be 0 to 200"
    with pytest.raises(QueryError, match=r"^before: "):
        moment("before", "the day after tomorrow")
    assert moment("after", "2026-11-01") == datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1000


def config(rooms: Any) -> dict[str, Any]:
    return {
        "homeserver": {"server_name": "hs"},
        "reader": {"user_id": "@muninn:hs", "access_token": "tok"},
        "mcp": {"rooms": rooms},
    }


def test_mcp_rooms_takes_ids_and_aliases_and_refuses_anything_else_by_name() -> None:
    assert parse_config(config(["#dev", "!r:hs"])).mcp.rooms == ("#dev", "!r:hs")
    assert parse_config(config(None)).mcp.rooms is None
    for bad in ([], ["dev"], ["#de v"]):
        with pytest.raises(ConfigError, match=r"mcp\.rooms"):
            parse_config(config(bad))
