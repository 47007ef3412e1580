"""ingest.search over real indexed rooms: Synapse → the writer → qdrant-edge → MiniLM → Searcher.

One corpus (three rooms, three backdated senders, one window a conversation; see
`tests.indexing.SEARCH_CORPUS`) is seeded and indexed once for the module; every test here only
reads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from bot.demo.synapse import free_port
from ingest.config import EmbedderConfig
from ingest.embed import make_embedder
from ingest.rules import lexical
from ingest.search import Searcher, SearchSettings
from ingest.search.hits import Hit
from ingest.search.permalink import MATRIX_TO
from ingest.search.query import SearchQuery
from tests.homeserver import Homeserver
from tests.indexing import Corpus, Indexer, reader_config, seed_corpus, utc_ms

PARAPHRASE = "sign-in screen stopped working after schema change"


@dataclass
class Indexed:
    corpus: Corpus
    indexer: Indexer
    searcher: Searcher
    lexical_only: Searcher

    def keys(self, hits: Sequence[Hit]) -> list[str]:
        """The corpus key of each hit's first message."""
        by_event = self.corpus.by_event()
        return [by_event[h.first_event_id].key for h in hits]

    async def search(self, *texts: str, lexical_only: bool = False, **filters: Any) -> list[str]:
        searcher = self.lexical_only if lexical_only else self.searcher
        result = await searcher.search(SearchQuery.build(texts, **filters))
        assert result.dropped_stale == 0
        return self.keys(result.hits)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def indexed(
    hs: Homeserver, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Indexed]:
    corpus = await seed_corpus(hs)
    indexer = Indexer(reader_config(hs, corpus.reader, tmp_path_factory.mktemp("search")))
    try:
        report = await indexer.refresh()
        assert sum(r.indexed for r in report.rooms) == len(corpus.sent)
        yield Indexed(
            corpus,
            indexer,
            Searcher(indexer.store, indexer.embedder, server_name=hs.server_name),
            Searcher(indexer.store, None, server_name=hs.server_name),
        )
    finally:
        await indexer.close()


async def test_search_corpus_is_one_window_a_conversation(indexed: Indexed) -> None:
    """The fixture's premise: every conversation is exactly one window."""
    points = await indexed.indexer.points()
    assert len(points) == len(indexed.corpus.sent) - 1  # `migration` has a one-line answer


async def test_search_paraphrase_finds_its_window_by_meaning(indexed: Indexed) -> None:
    """A paraphrase sharing no word with the message finds its window (the dense side)."""
    words = {t for s in indexed.corpus.sent.values() for t in lexical.tokens(s.body)}
    assert not words & set(lexical.tokens(PARAPHRASE)), "the corpus must share no query word"
    assert await indexed.search(PARAPHRASE, lexical_only=True) == []
    result = await indexed.searcher.search(SearchQuery.build([PARAPHRASE]))
    assert result.retrievers == ["dense", "lexical"]
    assert indexed.keys(result.hits)[0] == "migration"


async def test_search_made_up_words_find_nothing(indexed: Indexed) -> None:
    """Words no message holds, near nothing in meaning: no hits at all (not the nearest noise),
    and the reply can say how many weaker candidates it left out."""
    result = await indexed.searcher.search(SearchQuery.build(["zorblatt quindex vremmoth"]))
    assert result.retrievers == ["dense", "lexical"]
    assert result.hits == []
    assert result.below_floor > 0
    assert result.as_json()["below_floor"] == result.below_floor


async def test_search_real_question_finds_its_message_first_and_no_noise(indexed: Indexed) -> None:
    """A question in other words finds its message first; windows sharing nothing with it (the
    travel room's Chinese and Japanese lines) are not on a person's page (`close_only`): they
    are the next pages', said to be weaker; in an agent's list they come after the close
    matches, marked (rule 22c)."""
    question = "which printer keeps jamming"
    result = await indexed.searcher.search(SearchQuery.build([question], close_only=True))
    keys = indexed.keys(result.hits)
    assert keys[0] == "printer"
    assert not {"beijing", "tokyo", "shanghai", "osaka"} & set(keys)
    assert not result.nothing_close and not result.weaker and result.weaker_next
    later = await indexed.searcher.search(
        SearchQuery.build([question], close_only=True, offset=result.next_offset, limit=50)
    )
    assert later.weaker and later.hits and not any(h.close for h in later.hits)
    assert not set(indexed.keys(later.hits)) & set(keys)
    everything = await indexed.searcher.search(SearchQuery.build([question], limit=50))
    listed = indexed.keys(everything.hits)
    assert [k for k, h in zip(listed, everything.hits, strict=True) if h.close] == keys
    noise = [h for k, h in zip(listed, everything.hits, strict=True) if k in {"tokyo", "osaka"}]
    assert noise and not any(h.close for h in noise)


@pytest.mark.parametrize(
    ("token", "key"), [("ERR_7731X", "err-target"), ("0x80070005", "hex-target")]
)
async def test_search_rare_token_finds_its_window_among_distractors(
    indexed: Indexed, token: str, key: str
) -> None:
    """An exact error code ranks its window first, ahead of near-miss codes dense prefers."""
    keys = await indexed.search(token)
    assert keys[0] == key
    assert (await indexed.search(token, lexical_only=True))[0] == key


@pytest.mark.parametrize(
    ("text", "key"), [("北京", "beijing"), ("東京", "tokyo"), ("会議", "tokyo")]
)
async def test_search_cjk_word_finds_its_message(indexed: Indexed, text: str, key: str) -> None:
    """Han and Japanese words are found inside unspaced sentences (character bigrams)."""
    keys = await indexed.search(text)
    assert keys[0] == key
    assert (await indexed.search(text, lexical_only=True)) == [key]


BUDGETS = {"budget-1", "budget-2", "budget-3", "budget-ops"}


async def test_search_unfiltered_budget_query_spans_rooms(indexed: Indexed) -> None:
    """Without filters every budget window is found (the premise of the filter tests)."""
    assert set((await indexed.search("budget review", limit=10))[:4]) == BUDGETS


async def test_search_room_filter_keeps_to_the_room(indexed: Indexed) -> None:
    """A room filter returns only that room's windows, however well others match."""
    ops = indexed.corpus.rooms["ops"]
    result = await indexed.searcher.search(
        SearchQuery.build(["budget review"], room_ids=[ops], limit=50)
    )
    assert {h.room_id for h in result.hits} == {ops}
    assert indexed.keys(result.hits)[0] == "budget-ops"
    assert len(result.hits) <= 4  # ops windows only (those under the relevance floor left out)


async def test_search_sender_filter_keeps_windows_with_that_sender(indexed: Indexed) -> None:
    """A sender filter returns only windows holding a message of that sender."""
    ben = indexed.corpus.senders["ben"]
    result = await indexed.searcher.search(
        SearchQuery.build(["budget review"], senders=[ben], limit=50)
    )
    assert result.hits
    assert all(any(m["sender"] == ben for m in h.messages) for h in result.hits)
    keys = indexed.keys(result.hits)
    assert {"budget-2", "budget-ops"} <= set(keys)
    assert not {"budget-1", "budget-3"} & set(keys)


async def test_search_after_filter_drops_earlier_windows(indexed: Indexed) -> None:
    """`after` returns only windows reaching that time or later."""
    after = utc_ms("2024-03-01T00:00")
    result = await indexed.searcher.search(
        SearchQuery.build(["budget review"], after_ts=after, limit=50)
    )
    assert all(max(int(m["ts"]) for m in h.messages) >= after for h in result.hits)
    keys = indexed.keys(result.hits)
    assert {"budget-2", "budget-3"} <= set(keys)
    assert not {"budget-1", "budget-ops"} & set(keys)


async def test_search_before_filter_drops_later_windows(indexed: Indexed) -> None:
    """`before` returns only windows starting at that time or earlier."""
    before = utc_ms("2024-03-01T00:00")
    result = await indexed.searcher.search(
        SearchQuery.build(["budget review"], before_ts=before, limit=50)
    )
    assert all(min(int(m["ts"]) for m in h.messages) <= before for h in result.hits)
    keys = indexed.keys(result.hits)
    assert {"budget-1", "budget-ops"} <= set(keys)
    assert not {"budget-2", "budget-3"} & set(keys)


async def test_search_filters_combine(indexed: Indexed) -> None:
    """Room, sender and time filters all hold at once (AND)."""
    c = indexed.corpus
    keys = await indexed.search(
        "budget review",
        room_ids=[c.rooms["eng"]],
        senders=[c.senders["ben"]],
        after_ts=utc_ms("2024-03-01T00:00"),
        before_ts=utc_ms("2024-04-01T00:00"),
        limit=50,
    )
    assert keys == ["budget-2"]


async def test_search_hit_cites_room_events_senders_times_and_permalink(
    indexed: Indexed, hs: Homeserver
) -> None:
    """A hit names its room (id and alias), events, senders, ms times and a matrix.to link."""
    result = await indexed.searcher.search(SearchQuery.build(["ERR_7731X"], limit=1))
    (hit,) = result.hits
    sent = indexed.corpus.sent["err-target"]
    assert hit.room_id == sent.room_id
    assert hit.room_alias == indexed.corpus.aliases["eng"]
    assert hit.thread_root is None
    assert (hit.first_event_id, hit.last_event_id, hit.event_ids) == (
        sent.event_id,
        sent.event_id,
        (sent.event_id,),
    )
    assert [dict(m) for m in hit.messages] == [
        {
            "event_id": sent.event_id,
            "sender": sent.sender,
            "ts": sent.ts,
            "body": sent.body,
            "msgtype": "m.text",  # issue 49: every message keeps its msgtype
        }
    ]
    assert type(hit.messages[0]["ts"]) is int
    assert hit.best_event_id == sent.event_id
    assert hit.permalink == (
        f"{MATRIX_TO}{quote(sent.room_id, safe='!')}/{quote(sent.event_id, safe='!')}"
        f"?via={hs.server_name}"
    )


async def test_search_best_event_is_the_matching_message(indexed: Indexed) -> None:
    """In a two-message window the excerpt and permalink point at the message that matched."""
    c = indexed.corpus
    result = await indexed.searcher.search(SearchQuery.build(["rolling back"], limit=1))
    (hit,) = result.hits
    ack = c.sent["migration-ack"].event_id
    assert hit.first_event_id == c.sent["migration"].event_id
    assert hit.best_event_id == ack
    assert hit.permalink.split("?")[0].endswith(quote(ack, safe="!"))


async def test_search_repeated_query_gives_the_same_answer(indexed: Indexed) -> None:
    """The same query twice returns the same hits, scores and order (every window: no floor)."""
    query = SearchQuery.build(["budget review", "error code"], limit=20)
    every = SearchSettings(relevance_floor=0.0)
    searcher = Searcher(
        indexed.indexer.store, indexed.indexer.embedder, server_name="x", settings=every
    )
    first = await searcher.search(query)
    second = await searcher.search(query)
    assert [h.as_json() for h in first.hits] == [h.as_json() for h in second.hits]
    assert len(first.hits) == 20


async def test_search_embedder_unreachable_answers_from_lexical(
    indexed: Indexed, hs: Homeserver
) -> None:
    """An embedder that cannot be reached degrades to lexical, says so, and still finds codes."""
    port = free_port()  # nothing listens there: a refused connection, a real fault
    embedder = make_embedder(EmbedderConfig(kind="ollama", url=f"http://127.0.0.1:{port}"))
    try:
        searcher = Searcher(indexed.indexer.store, embedder, server_name=hs.server_name)
        result = await searcher.search(SearchQuery.build(["ERR_7731X"]))
    finally:
        await embedder.close()
    assert result.retrievers == ["lexical"]
    assert len(result.warnings) == 1
    assert "unavailable" in result.warnings[0]
    assert str(port) in result.warnings[0]
    assert indexed.keys(result.hits)[0] == "err-target"
