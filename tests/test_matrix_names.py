"""Matrix's event types are named once (issue 38): outside the Matrix layer (`ingest/matrix/`)
no string spells an `m.room.*` type; code says mautrix's `EventType.ROOM_MESSAGE.t`, so a
misspelt name is an AttributeError at import, not an event that silently never matches.

Prose may name them (docstrings, comments, a log line): only a string that is nothing but the
name, or its `m.room.` head in an f-string, counts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "ingest")
MATRIX_LAYER = ROOT / "ingest" / "matrix"
EVENT_TYPE = re.compile(r"m\.room\.[a-z_.]*")


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
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not path.is_relative_to(MATRIX_LAYER)
        for line, value in _spelt(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use mautrix's EventType (`EventType.ROOM_MESSAGE.t`):\n" + "\n".join(found)
