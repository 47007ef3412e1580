"""ingest.search.notices: the read path's warnings as a chat room is told them (issue 36 item 1;
a `!search` reply during a rebuild: tests/bot/chat/test_notices.py)."""

from __future__ import annotations

from ingest.search.notices import REBUILDING, for_chat, other_embedder

OTHER = {"provider": "local", "model": "another-model", "dimension": 768}


def test_for_chat_words_each_warning_for_a_room_once() -> None:
    """Every operator warning the read path gives has a room's wording, shown once."""
    mine = {"provider": "local", "model": "minilm", "dimension": 384}
    warnings = [
        other_embedder(OTHER, mine),
        other_embedder(OTHER, mine),
        "embedder unavailable (Ollama at http://10.0.0.5:11434 refused): lexical results only",
        "the index is empty: run `muninn refresh` first",
    ]
    shown = for_chat(warnings)
    assert shown[0] == REBUILDING and len(shown) == 3
    assert not any("http" in s or "muninn refresh" in s or "768" in s for s in shown)
