"""A busy room (issue 47): each answer shares its window with four or more other people's
lines, some sharing one word or only small words with the question. The first line a person
is quoted, and the best message an agent's list names, is the answer, for every question
asked in other words: the message is the unit of the answer (rule 22b). Real models, a real
index, no homeserver (the chat, command room, CLI and MCP views read the same hits:
tests/bot/chat/test_busy_room_live.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ingest.search.query import SearchQuery
from tests.indexing import shared_pair
from tests.rooms import BUSY_ASKED, Room, index_room

# (English question, its answer in another language inside an English window)
ACROSS_LANGUAGES = (
    ("is the drill working", "Bohrmaschine"),
    ("why can't I print labels", "impresora de etiquetas"),
    ("can I park here on saturday", "parking sera fermé"),
    ("is the elevator out of order", "лифт"),
    ("when is the meeting now", "会议"),
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def busy(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Room]:
    room = await index_room("busy", shared_pair(), tmp_path_factory.mktemp("busy"))
    yield room
    room.close()


def _body(room_hit_messages: object, event_id: str) -> str:
    assert isinstance(room_hit_messages, tuple)
    return next(str(m["body"]) for m in room_hit_messages if m["event_id"] == event_id)


@pytest.mark.parametrize(("question", "answer"), BUSY_ASKED)
async def test_the_quoted_line_of_the_answers_window_is_the_answer(
    busy: Room, question: str, answer: str
) -> None:
    """In the window holding the answer, among four or more other people's lines, the line
    a person is quoted and an agent's list names best is the answer, not a neighbour sharing a
    small word ("can") with the question, nor a line asking the question again ("has anyone
    seen the storage cupboard key?" gives way to its reply), for every question asked in other
    words."""
    agent = await busy.searcher.search(SearchQuery.build([question], limit=20))
    [hit] = [h for h in agent.hits if any(answer in str(m["body"]) for m in h.messages)]
    assert len(hit.messages) >= 5 and len({m["sender"] for m in hit.messages}) >= 5
    quoted = _body(hit.messages, hit.best_event_id)
    assert answer in quoted
    # A person's page lists the same line of that window (where the window is on the page: a
    # weaker match waits for `!more` behind the close ones, rule 22c).
    person = await busy.searcher.search(SearchQuery.build([question], limit=20, close_only=True))
    listed = {str(m["event_id"]): str(m["body"]) for h in person.hits for m in h.messages}
    theirs = [e for e in person.matched if e in {str(m["event_id"]) for m in hit.messages}]
    assert [listed[e] for e in theirs] in ([quoted], [])


@pytest.mark.parametrize(("question", "answer"), ACROSS_LANGUAGES)
async def test_other_languages_inside_english_windows_are_found(
    busy: Room, question: str, answer: str
) -> None:
    """An English question about a German, Spanish, French, Russian or Chinese line among
    four English ones finds it in the first five (the first three but the Spanish, 5th behind
    three English lines about printers: bench/RESULTS.md §15), and quotes it (rule 22e by
    message: the window is e5's to judge, by its lines each embedded alone)."""
    result = await busy.searcher.search(SearchQuery.build([question], limit=5))
    quoted = [_body(h.messages, h.best_event_id) for h in result.hits]
    assert any(answer in q for q in quoted), quoted


async def test_from_quotes_the_senders_own_message_in_a_shared_window(busy: Room) -> None:
    """`from:ana` (the CLI's `--sender`, MCP's `sender`): the window holding ana's line is
    found, and what is quoted and listed as matched is ana's message, never a neighbour's that
    matches the words better (issue 47: the CLI printed another sender's line of her window)."""
    query = SearchQuery.build(
        ["who took the spare extension lead"], senders=["@ana:rooms.test"], close_only=True
    )
    result = await busy.searcher.search(query)
    assert result.hits and result.matched
    for hit in result.hits:
        assert _sender(hit.messages, hit.best_event_id) == "@ana:rooms.test"
    listed = {str(m["event_id"]): str(m["sender"]) for h in result.hits for m in h.messages}
    assert {listed[e] for e in result.matched} == {"@ana:rooms.test"}


def _sender(messages: object, event_id: str) -> str:
    assert isinstance(messages, tuple)
    return next(str(m["sender"]) for m in messages if m["event_id"] == event_id)


async def test_a_persons_pages_list_the_agents_order(busy: Room) -> None:
    """A person's pages (`close_only`: chat, the CLI's text) list the windows in the order an
    agent's list (`--json`, MCP) gives them, close as far as its first weaker candidate: a
    match the match model calls close that the ranker puts behind a weaker one is not moved
    ahead of it (rule 22c; moving it cost molweni-dev 0.004 of R@2000). Two of this room's
    questions list one ("why won't my prints come out", "is the drill working")."""
    for question, _ in (*BUSY_ASKED, *ACROSS_LANGUAGES):
        agent = await busy.searcher.search(SearchQuery.build([question], limit=20))
        paged: list[str] = []
        offset: int | None = 0
        while offset is not None and len(paged) < 20:
            page = await busy.searcher.search(
                SearchQuery.build([question], limit=5, offset=offset, close_only=True)
            )
            paged += [h.point_id for h in page.hits]
            offset = page.next_offset
        listed = [h.point_id for h in agent.hits]
        n = min(len(paged), len(listed))
        assert n >= 5 and paged[:n] == listed[:n], question
        close = [h.close for h in agent.hits]
        assert close == sorted(close, reverse=True), question  # a leading run, then none
