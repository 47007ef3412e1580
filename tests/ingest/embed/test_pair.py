"""ingest.embed.pair: MiniLM and e5 as one vector space, and the read path's two lists from it,
against the real models and a real index."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ingest.config import EmbedderConfig
from ingest.embed import make_embedder
from ingest.embed.pair import PairEmbedder, is_pair, joined, parts
from ingest.search.query import SearchQuery
from ingest.search.retrieve import Retriever
from ingest.store import AsyncCollection
from tests.indexing import shared_e5, shared_embedder, shared_pair
from tests.rooms import index_room

PAIR = "minilm+multilingual-e5-small"


def test_config_pair_is_both_models_side_by_side() -> None:
    """`embedder.model: minilm+multilingual-e5-small` is one embedder of 768 dimensions whose
    identity names both models (a change of either rebuilds the index)."""
    pair = make_embedder(EmbedderConfig(model=PAIR))
    assert isinstance(pair, PairEmbedder)
    assert pair.identity.model == "all-MiniLM-L6-v2-int8+multilingual-e5-small-q4-ort1"
    assert pair.identity.dimension == 768 and is_pair(pair.identity)
    assert not is_pair(make_embedder(EmbedderConfig(model="minilm")).identity)


def test_joined_vectors_meet_at_the_mean_of_their_cosines() -> None:
    """Pure: a joined vector is unit, and two of them meet at the mean of the parts' cosines;
    a part's query vector meets a joined one at that model's cosine over sqrt(2)."""
    rng = np.random.default_rng(7)
    a1, a2, b1, b2 = (v / np.linalg.norm(v) for v in rng.normal(size=(4, 8)))
    x, y = np.array(joined(a1, b1)), np.array(joined(a2, b2))
    assert math.isclose(float(np.linalg.norm(x)), 1.0, rel_tol=1e-9)
    assert math.isclose(float(x @ y), (a1 @ a2 + b1 @ b2) / 2, rel_tol=1e-9)
    first, second = (np.array(p) for p in parts(list(x)))
    assert math.isclose(float(first @ y) * math.sqrt(2), float(a1 @ a2), rel_tol=1e-9)
    assert math.isclose(float(second @ y) * math.sqrt(2), float(b1 @ b2), rel_tol=1e-9)


async def test_pair_index_lists_each_model_by_its_own_cosine(tmp_path: Path) -> None:
    """A room indexed with the pair answers a question with two dense lists, `dense` by
    MiniLM's own cosine and `dense2` by e5's (each checked against that model embedding the
    stored text directly, within the int8 runtime's batch-to-batch wobble); the result still
    reports the kinds `dense` and `lexical`."""
    room = await index_room("workshop", shared_pair(), tmp_path)
    try:
        question = "is there water coming through the ceiling anywhere"
        col = AsyncCollection(
            room.store.open(room.store.active() or "", dense_dim=None, create=False)
        )
        found = await Retriever(shared_pair()).lists(col, SearchQuery.build([question]))
        assert found.retrievers == ["dense", "lexical"]
        for name, model in (("dense", shared_embedder()), ("dense2", shared_e5())):
            listed = found.lists[(name, question)][:5]
            texts = [str(found.points[pid].payload["text"]) for pid, _ in listed]
            q = np.array((await model.embed_queries([question]))[0])
            direct = np.array(await model.embed_documents(texts)) @ q
            # 1e-2: e5's int8 kernels quantize a batch's activations together, and on a processor
            # without AVX-512 a text's cosine moves by up to 0.006 with its batch (the models'
            # scales are ~0.5 apart: another model's cosine would miss by far more).
            assert [s for _, s in listed] == pytest.approx(list(direct), abs=1e-2), name
    finally:
        room.close()
