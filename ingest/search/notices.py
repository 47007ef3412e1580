"""The read path's warnings: the operator's text, and what a chat room is told instead.

`SearchResult.warnings` (the CLI, `--json`, the command room's `org.muninn.results`) carries
the operator's words: which embedder built the index, the error the embedder gave. A chat
reply is read by the room, who can do nothing about either (issue 36): it gets a short notice
(`for_chat`) and the details stay in the log and `muninn status`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["EMPTY_INDEX", "REBUILDING", "for_chat", "other_embedder"]

# What each kind of warning starts with; the one place that words it.
_OTHER_EMBEDDER = "the index was built with another embedder"
_LEXICAL_ONLY = "lexical results only"
EMPTY_INDEX = "the index is empty: run `muninn refresh` first"

# The chat's words for them.
REBUILDING = "the search index is being rebuilt; results may be incomplete"
_BUILDING = "the search index is still being built; results may be incomplete"
_WORDS_ONLY = "the search reads exact words only for now; results may be incomplete"


def other_embedder(built_with: Mapping[str, object], configured: Mapping[str, object]) -> str:
    """The operator's warning while the active generation is another embedder's (rule 13)."""
    return (
        f"{_OTHER_EMBEDDER} ({_describe(built_with)}, configured: {_describe(configured)}): "
        f"{_LEXICAL_ONLY} until a refresh rebuilds it"
    )


def _describe(identity: Mapping[str, object]) -> str:
    return f"{identity.get('provider')}/{identity.get('model')}, {identity.get('dimension')}-d"


def for_chat(warnings: Iterable[str]) -> list[str]:
    """The notices a chat reply shows for the read path's warnings, each once, in order."""
    shown: list[str] = []
    for w in warnings:
        if w.startswith(_OTHER_EMBEDDER):
            notice = REBUILDING
        elif w == EMPTY_INDEX:
            notice = _BUILDING
        elif _LEXICAL_ONLY in w:  # the embedder is down or failed: its error is the log's
            notice = _WORDS_ONLY
        else:
            notice = w
        if notice not in shown:
            shown.append(notice)
    return shown
