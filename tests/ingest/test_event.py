"""The typed view of an event (`ingest.event`): the one read of `content`, of a relation and of
a bundled edit, and the step from a homeserver's JSON to `ClientEvent`s."""

from __future__ import annotations

from typing import Any, cast

import pytest

from ingest.event import (
    ClientEvent,
    as_event,
    bundled_edit,
    content_of,
    events_in,
    relation_of,
)


def event(**fields: Any) -> ClientEvent:
    return cast(ClientEvent, {"type": "m.room.message", "event_id": "$e", **fields})


@pytest.mark.parametrize(
    ("fields", "content"),
    [
        ({"content": {"body": "hi"}}, {"body": "hi"}),
        ({"content": {}}, {}),  # redacted
        ({}, {}),  # no content at all
        ({"content": "hi"}, {}),  # a faulty server's: no object
        ({"content": None}, {}),
    ],
)
def test_content_of_is_an_object_or_empty(fields: dict[str, Any], content: object) -> None:
    """An event's content is its object, or {} when it has none or none that is an object."""
    assert content_of(event(**fields)) == content


REPLACE = {"rel_type": "m.replace", "event_id": "$t"}


@pytest.mark.parametrize(
    ("content", "relation"),
    [
        ({"m.relates_to": REPLACE}, REPLACE),
        ({"m.relates_to": "$t"}, {}),
        ({"m.relates_to": None}, {}),
        ({"body": "hi"}, {}),
    ],
)
def test_relation_of_is_an_object_or_empty(content: dict[str, Any], relation: object) -> None:
    """`m.relates_to` is read only when it is an object."""
    assert relation_of(content) == relation


def test_events_in_keeps_only_objects() -> None:
    """A homeserver's list becomes the objects in it; no list is no event."""
    a, b = {"event_id": "$a"}, {"event_id": "$b"}
    assert events_in([a, 1, "x", None, [a], b]) == [a, b]
    assert events_in({"chunk": [a]}) == []
    assert events_in(None) == []


def test_as_event_tells_an_object_from_junk() -> None:
    """A JSON object is an event to read; anything else is none."""
    assert as_event({"event_id": "$a"}) == {"event_id": "$a"}
    assert as_event(["$a"]) is None
    assert as_event("$a") is None


@pytest.mark.parametrize(
    ("unsigned", "bundled"),
    [
        ({"m.relations": {"m.replace": {"event_id": "$edit"}}}, {"event_id": "$edit"}),
        ({"m.relations": {"m.replace": "junk"}}, "junk"),  # handed on: the caller refuses it
        ({"m.relations": {"m.thread": {}}}, None),
        ({"m.relations": []}, None),
        ({}, None),
        ("junk", None),
    ],
)
def test_bundled_edit_is_the_replace_relation(unsigned: object, bundled: object) -> None:
    """The homeserver's bundled latest edit, None when it bundled none."""
    assert bundled_edit(event(unsigned=unsigned)) == bundled
