"""Typed records above the Matrix layer and the store adapter (issue 22): raw dicts stay at the
edge. The read path and the chat code take `ClientEvent`s, `CitedMessage`s, `Tombstone`s.

The count is the one the issue names: annotations of `Mapping`/`dict[str, Any | object]` and
the local aliases of `dict[str, Any]` (`JSONDict`, `JSON`) in `ingest/search/` and the bot's chat
modules. It was 81 before the event views (`ingest/event.py`), `filters.Said`,
`content.Mentions` and the typed `ReplyContent` send.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The read path and the bot's chat modules (what a command reads, decides, folds and replies).
CHAT_AND_READ = ("ingest/search", "bot/chat")
RAW_DICT = re.compile(
    r"\b(?:Mapping|MutableMapping|dict)\[str, *(?:Any|object)\]"
    r"|\bJSONDict\b|(?:: |-> |\[|\| |, )JSON\b"
)
MAX_RAW_DICTS = 25
TOMBSTONE_AS_DICT = re.compile(
    r"(?:stones?|tombstones?|purges?)\w*\s*:\s*(?:list|Sequence|Iterable)\[(?:Mapping|dict)\["
)


def _sources(*roots: str) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        path = ROOT / root
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return out


def test_the_read_path_and_chat_code_hold_at_most_25_raw_dict_annotations() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in _sources(*CHAT_AND_READ)
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        for m in RAW_DICT.finditer(line)
    ]
    assert len(found) <= MAX_RAW_DICTS, "\n".join(found)


def test_no_tombstone_travels_as_a_dict() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _sources("ingest", "bot")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if TOMBSTONE_AS_DICT.search(line)
    ]
    assert not found, found
