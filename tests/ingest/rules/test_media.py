"""Media messages by filename and caption (`ingest.rules.media`, MSC2530; docs/ARCHITECTURE.md
§3 rule 5): what `normalize` indexes of a file, image, video or audio clip, and that the room
log the bot folds reads them the same way."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.rules.media import media_parts, media_text
from ingest.search.logs.roomlog import RoomLog, current_body
from ingest.types import Edit, Message, RoomID, SkipReason
from tests.ingest.rules.eventkit import load, norm

URL = "mxc://example.org/JWEIFJgwEIhweiWJE"
TOKEN = "syt_" + "bXVuaW5u_QWxpY2VTZWNyZXRUb2tlbg_1a2B3c"


def _media(msgtype: str, **content: Any) -> dict[str, Any]:
    event = load("image")
    event["content"] = {"msgtype": msgtype, "url": URL, **content}
    return event


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ({"body": "quarterly-budget-2026.xlsx"}, "quarterly-budget-2026.xlsx"),
        ({"body": "budget.xlsx", "filename": "budget.xlsx"}, "budget.xlsx"),
        (
            {"body": "the broken hinge on the cupboard", "filename": "IMG_2041.jpg"},
            "IMG_2041.jpg — the broken hinge on the cupboard",
        ),
        ({"body": "notes.txt", "filename": ""}, "notes.txt"),
        ({"body": "  spaced caption  ", "filename": "a b.png"}, "a b.png — spaced caption"),
    ],
)
@pytest.mark.parametrize("msgtype", ["m.file", "m.image", "m.video", "m.audio"])
def test_normalize_media_is_its_filename_and_caption(
    msgtype: str, content: dict[str, Any], text: str
) -> None:
    """Where `filename` is present and differs from `body`, `body` is the caption; otherwise
    `body` is the filename. The message keeps its msgtype, and its content's address is in
    nothing Muninn keeps."""
    result = norm(_media(msgtype, **content))
    assert isinstance(result, Message)
    assert (result.body, result.msgtype) == (text, msgtype)
    assert "mxc://" not in repr(result)


def test_normalize_media_fixtures_are_messages() -> None:
    """The spec's own example image and file are indexed by their filenames."""
    image, file = norm(load("image")), norm(load("file"))
    assert (image.body, image.msgtype) == ("filename.jpg", "m.image")
    assert (file.body, file.msgtype) == ("something-important.doc", "m.file")


def test_normalize_media_caption_loses_its_reply_fallback_and_is_no_command() -> None:
    """A captioned image answering a message loses the `> ` fallback from its caption; a
    caption that reads like a command is still the image's text (the bot reads commands from
    m.text only)."""
    reply = {"m.in_reply_to": {"event_id": "$asked"}}
    caption = "> <@bob:example.org> where is it?\n\nin the shed"
    result = norm(_media("m.image", body=caption, filename="shed.jpg", **{"m.relates_to": reply}))
    assert result.body == "shed.jpg — in the shed"
    command = norm(_media("m.image", body="!search hinge", filename="hinge.jpg"))
    assert isinstance(command, Message) and command.body == "hinge.jpg — !search hinge"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ({"filename": "x.png"}, SkipReason.MALFORMED),
        ({"body": 7, "filename": "x.png"}, SkipReason.MALFORMED),
        ({"body": "   "}, SkipReason.OTHER),
    ],
)
def test_normalize_media_without_a_name_is_skipped(
    content: dict[str, Any], reason: SkipReason
) -> None:
    """A media event with no string `body` is malformed; one with only spaces says nothing."""
    assert norm(_media("m.image", **content)).reason is reason


@pytest.mark.parametrize("fixture", ["sticker", "location"])
def test_normalize_stickers_and_locations_stay_media_skips(fixture: str) -> None:
    """Only files, images, video and audio are indexed; stickers and locations are counted as
    media and skipped."""
    assert norm(load(fixture)).reason is SkipReason.MEDIA


def test_normalize_edit_of_a_caption_is_the_new_filename_and_caption() -> None:
    """A caption's edit (MSC2530: the whole media content in `m.new_content`) replaces the
    message's text with the new filename and caption, its msgtype with the new one."""
    event = load("edit")
    event["content"]["m.new_content"] = {
        "msgtype": "m.image",
        "body": "the mended hinge",
        "filename": "IMG_2041.jpg",
        "url": URL,
    }
    result = norm(event)
    assert isinstance(result, Edit) and result.withdrawn is None
    assert (result.new_body, result.msgtype) == ("IMG_2041.jpg — the mended hinge", "m.image")
    assert "mxc://" not in repr(result)


def test_media_parts_and_text() -> None:
    """MSC2530's reading, then the one text: the filename, ` — `, the caption."""
    assert media_parts({"body": "cap", "filename": "f.pdf"}) == ("f.pdf", "cap")
    assert media_parts({"body": "f.pdf"}) == ("f.pdf", "")
    assert media_parts({"filename": "f.pdf"}) is None
    assert media_text("f.pdf", "") == "f.pdf"
    assert media_text("two\nlines.pdf", " cap ") == "two lines.pdf — cap"


def _raw(event_id: str, content: dict[str, Any], ts: int) -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": "@alice:x",
        "origin_server_ts": ts,
        "room_id": "!r",
        "content": content,
    }


def test_room_log_reads_media_as_the_writer_does() -> None:
    """The bot's room log (the transcript fold) reads a media message by the same rule: the
    filename and caption, the latest edit's, scrubbed, with its msgtype."""
    image = {"msgtype": "m.image", "body": "the old hinge", "filename": "h.jpg", "url": URL}
    new = {**image, "body": f"the new hinge, token {TOKEN}"}
    edit = {
        "msgtype": "m.image",
        "body": "* edited",
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": "$img"},
    }
    file = {"msgtype": "m.file", "body": "budget.xlsx", "url": URL}
    raw = [_raw("$edit", edit, 3), _raw("$file", file, 2), _raw("$img", image, 1)]
    said = RoomLog(RoomID("!r"), raw, 10).messages("@muninn:x", "!")
    assert [(m.event_id, m.msgtype) for m in said] == [("$file", "m.file"), ("$img", "m.image")]
    assert said[0].body == "budget.xlsx"
    assert said[1].body.startswith("h.jpg — the new hinge, token [redacted:")
    assert TOKEN not in repr(said) and "old hinge" not in repr(said) and URL not in repr(said)


def test_current_body_of_media_is_its_filename_and_caption() -> None:
    """A fetched media event reads as its filename and caption (pins, MCP `context`), as the
    writer and the room log read it; its content's address is not in it."""
    image = {"msgtype": "m.image", "body": "the hinge", "filename": "h.jpg", "url": URL}
    assert current_body(_raw("$img", image, 1), "@muninn:x", "!") == "h.jpg — the hinge"
