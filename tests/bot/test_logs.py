"""Structured logs: JSON lines carry the message and the fields a call site gives."""

from __future__ import annotations

import json
import logging

import pytest

from bot.logs import JsonFormatter, fields_of, setup_logging


def test_json_formatter_carries_extra_fields() -> None:
    """A refusal logged with extra= fields is one JSON object holding them."""
    record = logging.LogRecord(
        "muninn.index", logging.WARNING, "f", 1, "refusing %s", ("!r",), None
    )
    record.room_id = "!r"
    record.reason = "dm"
    doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "refusing !r"
    assert (doc["level"], doc["logger"]) == ("warning", "muninn.index")
    assert (doc["room_id"], doc["reason"]) == ("!r", "dm")
    assert doc["ts"].endswith("+00:00")


def test_setup_logging_json_writes_one_object_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--log-format json: every line on stderr parses as JSON."""
    setup_logging(verbose=False, fmt="json")
    try:
        logging.getLogger("muninn.test").info("hello %s", "world", extra={"room_id": "!x"})
        logging.getLogger("muninn.test").debug("not shown at info level")
    finally:
        setup_logging(verbose=False, fmt="text")
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert [json.loads(line)["message"] for line in lines] == ["hello world"]
    assert json.loads(lines[0])["room_id"] == "!x"


def test_json_lines_read_room_event_and_ms_off_the_message() -> None:
    """A line that names a room, an event and a duration carries them as fields (regression:
    one `message` string only), e.g. the service's "answered $e in !r in 12 ms"."""
    record = logging.LogRecord(
        "muninn.chat",
        logging.INFO,
        "f",
        1,
        "answered %s in %s in %.0f ms (100%% of %s)",
        ("$ev:x", "!room:x", 12.5, "!pin"),
        None,
    )
    doc = json.loads(JsonFormatter().format(record))
    assert (doc["room_id"], doc["event_id"], doc["ms"]) == ("!room:x", "$ev:x", 12.5)
    assert doc["message"] == "answered $ev:x in !room:x in 12 ms (100% of !pin)"


@pytest.mark.parametrize(
    ("msg", "args", "fields"),
    [
        ("room %s", ("!" + "a" * 43,), {"room_id": "!" + "a" * 43}),  # a v12 room id
        ("command %s", ("!search",), {}),
        ("took %d seconds", (5,), {}),
        ("no arguments", (), {}),
    ],
)
def test_fields_of_takes_only_what_is_an_id_or_ms(
    msg: str, args: tuple[object, ...], fields: dict[str, object]
) -> None:
    assert fields_of(msg, args) == fields
