"""ingest.embed.queries: the questions waiting at once embedded in one pass, a question asked
again not embedded again; and the pair's two models on a question at once. Against the real
models; a failing run is a plain function (a fault the real model cannot produce on demand)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ingest.embed import DelegatingEmbedder, Embedder
from ingest.embed.local import batches
from ingest.embed.minilm import MiniLMEmbedder
from ingest.embed.pair import PairEmbedder
from ingest.embed.queries import QueryVectors
from ingest.errors import EmbedUnavailable
from ingest.search.query import SearchQuery
from ingest.types import EmbedderIdentity
from tests.indexing import shared_e5, shared_embedder
from tests.rooms import index_room

QUESTIONS = [
    "who fixed the laser cutter",
    "when is the next workshop",
    "is there water coming through the ceiling",
    "where do I park my bike",
    "what glue holds acrylic",
    "who has the key to the storeroom",
]
ID = EmbedderIdentity("test", "words", 2)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))


async def test_questions_asked_at_once_share_one_pass_of_the_model() -> None:
    """Six commands embedding their questions at the same moment cost one pass of MiniLM, and
    each gets the vector it gets alone (within the int8 runtime's batch-to-batch wobble)."""
    model = MiniLMEmbedder()
    together = await asyncio.gather(*(model.embed_queries([q]) for q in QUESTIONS))
    assert model.queries.runs == 1
    alone = MiniLMEmbedder()
    for question, [vector] in zip(QUESTIONS, together, strict=True):
        [single] = await alone.embed_queries([question])
        assert _cosine(vector, single) > 0.99, question
    assert alone.queries.runs == len(QUESTIONS)


async def test_a_question_asked_again_is_not_embedded_again() -> None:
    """`!more` and a repeated question reuse the vector: the same numbers, no second pass."""
    model = MiniLMEmbedder()
    first = await model.embed_queries([QUESTIONS[0], QUESTIONS[1]])
    again = await model.embed_queries([QUESTIONS[1], QUESTIONS[0]])
    assert model.queries.runs == 1
    assert again == [first[1], first[0]]


async def test_a_question_asked_while_it_is_being_embedded_joins_that_pass() -> None:
    """A burst asks the same question again while its pass is under way: the later command
    waits for that pass and gets the same vector, no second pass of the model."""
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[list[str]] = []

    async def run(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        started.set()
        await release.wait()
        return [[float(len(t)), 1.0] for t in texts]

    vectors = QueryVectors(run, lambda: ID)
    first = asyncio.create_task(vectors.embed(["q", "r"]))
    await started.wait()
    later = asyncio.create_task(vectors.embed(["r"]))
    await asyncio.sleep(0)
    release.set()
    assert await first == [[1.0, 1.0], [1.0, 1.0]] and await later == [[1.0, 1.0]]
    assert calls == [["q", "r"]] and vectors.runs == 1


async def test_remembered_questions_are_bounded_oldest_out() -> None:
    """Only the most recently asked `remembered` questions are kept: the oldest is embedded
    again when asked again, a recent one is not."""
    calls: list[list[str]] = []

    async def run(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[float(len(t)), 1.0] for t in texts]

    vectors = QueryVectors(run, lambda: ID, remembered=2)
    for text in ("a", "bb", "ccc", "ccc", "bb", "a"):
        await vectors.embed([text])
    assert calls == [["a"], ["bb"], ["ccc"], ["a"]]


async def test_a_vector_is_remembered_under_its_embedder_identity() -> None:
    """Another identity (a model changed under the same embedder) embeds the question again."""
    identity = [ID]
    runs: list[str] = []

    async def run(texts: list[str]) -> list[list[float]]:
        runs.extend(texts)
        return [[1.0, 0.0] for _ in texts]

    vectors = QueryVectors(run, lambda: identity[0])
    await vectors.embed(["q"])
    identity[0] = EmbedderIdentity("test", "other words", 2)
    await vectors.embed(["q"])
    assert runs == ["q", "q"]


async def test_a_failed_pass_fails_each_waiting_question_and_the_next_one_runs() -> None:
    """The embedder down: every question of the pass gets the error (its command answers
    lexically); nothing is remembered, and the next question is embedded afresh."""
    down = [True]

    async def run(texts: list[str]) -> list[list[float]]:
        if down[0]:
            raise EmbedUnavailable("injected: the embedder is down")
        return [[1.0, 0.0] for _ in texts]

    vectors = QueryVectors(run, lambda: ID)
    failed = await asyncio.gather(
        vectors.embed(["a"]), vectors.embed(["b"]), return_exceptions=True
    )
    assert all(isinstance(e, EmbedUnavailable) for e in failed)
    down[0] = False
    assert await vectors.embed(["a"]) == [[1.0, 0.0]]
    assert vectors.runs == 2


async def test_a_cancelled_question_leaves_the_pass_to_the_others() -> None:
    """A command cancelled at its deadline while its question is embedded does not cancel the
    pass another command waits on for the same question."""
    release = asyncio.Event()

    async def run(texts: list[str]) -> list[list[float]]:
        await release.wait()
        return [[2.0, 0.0] for _ in texts]

    vectors = QueryVectors(run, lambda: ID)
    first = asyncio.create_task(vectors.embed(["q"]))
    second = asyncio.create_task(vectors.embed(["q"]))
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    assert await second == [[2.0, 0.0]]
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert first.cancelled() and vectors.runs == 1


def test_question_batches_do_not_pad_a_short_question_to_a_long_one() -> None:
    """Pure: questions of similar length share a batch; a long one among short ones goes apart
    (padding would multiply the short ones' work), while documents keep their batches."""
    counts = [6, 7, 40, 7, 8]
    assert batches(counts, 32, 512, slack=1.25) == [[0, 1, 3, 4], [2]]
    assert batches(counts, 32, 512) == [[0, 1, 3, 4, 2]]


class _Noted(DelegatingEmbedder):
    """A real model, noting when its query calls start and end."""

    def __init__(self, inner: Embedder, name: str, notes: list[str]) -> None:
        super().__init__(inner)
        self.name, self.notes = name, notes

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.notes.append(f"{self.name} starts")
        try:
            return await self.inner.embed_queries(texts)
        finally:
            self.notes.append(f"{self.name} ends")


async def test_pair_embeds_a_question_with_both_models_at_once() -> None:
    """The pair's two models take a question at the same time (each runs in its own worker
    thread), and the joined vector is the one the models give one after the other."""
    notes: list[str] = []
    pair = PairEmbedder(
        _Noted(shared_embedder(), "minilm", notes), _Noted(shared_e5(), "e5", notes)
    )
    [vector] = await pair.embed_queries(["a question about the roof leaking again"])
    assert sorted(notes[:2]) == ["e5 starts", "minilm starts"]
    apart = PairEmbedder(shared_embedder(), shared_e5())
    [first] = await apart.first.embed_queries(["a question about the roof leaking again"])
    [second] = await apart.second.embed_queries(["a question about the roof leaking again"])
    assert _cosine(vector[:384], first) > 0.999 and _cosine(vector[384:], second) > 0.999


async def test_searching_a_page_further_does_not_embed_the_question_again(
    tmp_path: Path,
) -> None:
    """`!more` (the same question, a later page) reads the remembered query vector: the model
    embeds the question once for both pages, and the later page still has dense results."""
    model = MiniLMEmbedder()
    room = await index_room("workshop", model, tmp_path)
    try:
        question = "who was going to look at the leak above the workbench"
        first = await room.searcher.search(SearchQuery.build([question], limit=3))
        runs = model.queries.runs  # the question's, and the searcher's made-up words'
        more = await room.searcher.search(SearchQuery.build([question], limit=3, offset=3))
        again = await room.searcher.search(SearchQuery.build([question], limit=3, offset=6))
        assert model.queries.runs == runs
        assert "dense" in first.retrievers and "dense" in more.retrievers
        assert "dense" in again.retrievers
    finally:
        room.close()


@pytest.mark.parametrize("texts", [[], ["one"]])
async def test_an_empty_call_and_a_single_question_answer_in_order(texts: list[str]) -> None:
    """No question, no pass; one question, its vector."""
    model = MiniLMEmbedder()
    assert len(await model.embed_queries(texts)) == len(texts)
    assert model.queries.runs == len(texts)
