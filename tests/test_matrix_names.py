"""Matrix's event types are named once, and an event's content read once (issue 38).

- Outside the Matrix layer (`ingest/matrix/`) no string spells an `m.room.*` type; code says
  mautrix's `EventType.ROOM_MESSAGE.t`, so a misspelt name is an AttributeError at import, not
  an event that silently never matches. Prose may name them (docstrings, comments, a log line):
  only a string that is nothing but the name, or its `m.room.` head in an f-string, counts.
- `content`, `m.relates_to` and `unsigned.m.relations` are read by `ingest/event.py`'s
  `content_of`, `relation_of` and `bundled_edit` alone; `normalize` also reads `content` itself,
  since it tells a missing one (malformed) from an empty one (redacted). The demo harness
  (`bot/demo/`) reads the JSON it sent as a user would and is left out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "ingest")
MATRIX_LAYER = "ingest/matrix/"
EVENT_TYPE = re.compile(r"m\.room\.[a-z_.]*")
OWN_READS = {"content": ("ingest/event.py", "ingest/rules/events.py")}
ONE_READER = ("ingest/event.py",)  # of the keys below
READ_KEYS = ("content", "m.relates_to", "m.relations")
HARNESS = "bot/demo/"


def _found(
    walk: Callable[[str], Iterator[tuple[int, str]]], counts: Callable[[str, str], bool]
) -> list[str]:
    """`path:line: value` of each hit `walk` finds in the product's modules that `counts`
    (given the module's path from the repository root and the value)."""
    return [
        f"{where}:{line}: {value!r}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, value in walk(path.read_text(encoding="utf-8"))
        if counts(where := path.relative_to(ROOT).as_posix(), value)
    ]


def _spelt(source: str) -> Iterator[tuple[int, str]]:
    """Each string constant of `source` that is an `m.room.*` event type, with its line."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and EVENT_TYPE.fullmatch(node.value)
        ):
            yield node.lineno, node.value


def test_the_check_finds_a_spelt_event_type() -> None:
    """The walker sees a bare name, a name in a tuple and an f-string's head, not prose."""
    source = (
        '"""Reads m.room.message events."""\n'
        'A = "m.room.message"\n'
        'B = ("m.room.member", "m.bridge")\n'
        'C = f"m.room.{A}"\n'
        'log = "skipped an m.room.encrypted event"\n'
    )
    assert [line for line, _ in _spelt(source)] == [2, 3, 4]


def test_no_event_type_is_spelt_outside_the_matrix_layer() -> None:
    """Every `m.room.*` string in the product is inside `ingest/matrix/`."""
    found = _found(_spelt, lambda where, _: not where.startswith(MATRIX_LAYER))
    assert not found, "use mautrix's EventType (`EventType.ROOM_MESSAGE.t`):\n" + "\n".join(found)


def _reads(source: str) -> Iterator[tuple[int, str]]:
    """Each `x.get("<key>")` or `x["<key>"]` read of one of `READ_KEYS`, with its line."""
    for node in ast.walk(ast.parse(source)):
        key: ast.expr | None = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        if isinstance(key, ast.Constant) and key.value in READ_KEYS:
            yield node.lineno, key.value


def test_the_check_finds_a_read() -> None:
    """The walker sees `.get` and subscript reads, not a write or a dict display."""
    source = (
        'a = e.get("content")\n'
        'b = e["content"]["body"]\n'
        'c = rel.get("m.relates_to", {})\n'
        'e["content"] = {}\n'
        'd = {"content": {}}\n'
    )
    assert sorted(_reads(source)) == [(1, "content"), (2, "content"), (3, "m.relates_to")]


def test_an_events_fields_are_read_in_one_place() -> None:
    """`content`, `m.relates_to` and `m.relations` are read only by their owners."""
    found = _found(
        _reads,
        lambda where, key: (
            not where.startswith(HARNESS) and where not in OWN_READS.get(key, ONE_READER)
        ),
    )
    assert not found, "use content_of, relation_of or bundled_edit (ingest.event):\n" + "\n".join(
        found
    )
