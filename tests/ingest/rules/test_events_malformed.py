"""ingest.rules.events on malformed events: each skipped by name, none raises, none changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.rules.events import normalize
from ingest.types import Edit, Message, Redaction, Skip, SkipReason
from tests.ingest.rules.eventkit import OWN, load, norm

# ---------------------------------------------------------------- malformed, never raising


def _set(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    event = load("text")
    node = event
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return event


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "word"),
    [
        (("event_id",), _DELETE, "event_id"),
        (("event_id",), 12, "event_id"),
        (("sender",), _DELETE, "sender"),
        (("sender",), {"user": "x"}, "sender"),
        (("origin_server_ts",), _DELETE, "origin_server_ts"),
        (("origin_server_ts",), "1432735824653", "origin_server_ts"),
        (("origin_server_ts",), True, "origin_server_ts"),
        (("origin_server_ts",), 1.5, "origin_server_ts"),
        (("origin_server_ts",), -1, "origin_server_ts"),
        (("origin_server_ts",), 2**53, "origin_server_ts"),
        pytest.param(("origin_server_ts",), 10**400, "origin_server_ts", id="ts-10**400"),
        (("room_id",), _DELETE, "room_id"),
        (("type",), _DELETE, "type"),
        (("type",), ["m.room.message"], "type"),
        (("content",), "hello", "content"),
        (("content",), _DELETE, "content"),
        (("content", "body"), _DELETE, "body"),
        (("content", "body"), 5, "body"),
        (("content", "msgtype"), _DELETE, "msgtype"),
        (("content", "msgtype"), None, "msgtype"),
        (("content", "m.relates_to"), {"rel_type": "m.thread"}, "m.thread"),
    ],
)
def test_normalize_malformed_variants(path: tuple[str, ...], value: Any, word: str) -> None:
    """A missing or wrongly typed field is Skip(MALFORMED) whose detail names the field."""
    result = norm(_set(path, value))
    assert isinstance(result, Skip)
    assert result.reason is SkipReason.MALFORMED
    assert word in result.detail


@pytest.mark.parametrize("ts", [253_402_300_800_000, 2**53 - 1])  # the year 10000; the last
def test_normalize_keeps_a_far_future_message(ts: int) -> None:
    """A timestamp past the year 9999 (an appservice's `?ts=`, a federated
    server's clock) is an untrusted but representable value: the message is kept."""
    result = norm(_set(("origin_server_ts",), ts))
    assert isinstance(result, Message) and result.ts == ts


@pytest.mark.parametrize("event", [None, [], "event", 42, ["type", "m.room.message"]])
def test_normalize_non_object_is_malformed(event: Any) -> None:
    """Something that is not a JSON object is malformed, with no event id."""
    assert norm(event) == Skip(None, SkipReason.MALFORMED, "the event is not a JSON object")


def test_normalize_room_id_fallback() -> None:
    """A /sync-style event without room_id takes the room id passed in."""
    event = load("text")
    del event["room_id"]
    result = normalize(event, own_user_ids=OWN, room_id="!other:example.org")
    assert result.room_id == "!other:example.org"


def test_normalize_does_not_mutate_event() -> None:
    """normalize reads its input only."""
    event = load("reply")
    before = copy.deepcopy(event)
    norm(event)
    assert event == before


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "type",
        "event_id",
        "sender",
        "origin_server_ts",
        "room_id",
        "content",
        "unsigned",
        "state_key",
        "redacts",
        "body",
        "msgtype",
        "m.relates_to",
        "m.new_content",
        "rel_type",
        "m.in_reply_to",
        "is_falling_back",
        "redacted_because",
    ]
)
_event_like = st.recursive(
    st.none()
    | st.integers()
    | st.text(max_size=10)
    | st.sampled_from(["m.room.message", "m.text", "m.replace", "m.thread", "m.room.redaction"]),
    lambda inner: st.dictionaries(_keys, inner, max_size=8) | st.lists(inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=250, deadline=None)
@given(event=st.one_of(_json, _event_like, st.dictionaries(_keys, _event_like, max_size=10)))
def test_normalize_never_raises(event: Any) -> None:
    """normalize returns one of the four records for any JSON-ish input."""
    assert isinstance(norm(event), Message | Edit | Redaction | Skip)


@settings(max_examples=200, deadline=None)
@given(
    content=st.fixed_dictionaries(
        {},
        optional={
            "body": _event_like,
            "msgtype": st.sampled_from(["m.text", "m.emote", "m.notice"]) | _event_like,
            "m.new_content": _event_like,
            "m.relates_to": _event_like,
        },
    )
)
def test_normalize_never_raises_on_message_content(content: Any) -> None:
    """A well-formed envelope with arbitrary content never raises either."""
    event = load("text")
    event["content"] = content
    assert isinstance(norm(event), Message | Edit | Redaction | Skip)
