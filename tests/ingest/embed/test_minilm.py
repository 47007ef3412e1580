"""ingest.embed.minilm: the embedded MiniLM int8 model, tested against the real model file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingest.config import EmbedderConfig
from ingest.embed import Embedder, WindowVectors, make_embedder, minilm
from ingest.embed.minilm import MiniLMEmbedder
from ingest.errors import EmbedError
from ingest.types import EmbedderIdentity


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=4)


async def cosine(embedder: MiniLMEmbedder, a: str, b: str) -> float:
    va, vb = await embedder.embed_documents([a, b])
    return float(np.dot(va, vb))  # vectors are unit length


def test_make_embedder_local_gives_minilm() -> None:
    """`model: minilm` builds the embedded MiniLM, which satisfies the Embedder protocol (the
    default pair is tests/ingest/embed/test_e5.py's)."""
    e = make_embedder(EmbedderConfig(model="minilm"))
    assert isinstance(e, MiniLMEmbedder)
    assert isinstance(e, Embedder)


def test_minilm_identity() -> None:
    """Identity: local provider, the int8 model name, 384 dimensions, no prefixes."""
    assert MiniLMEmbedder().identity == EmbedderIdentity(
        provider="local", model="all-MiniLM-L6-v2-int8", dimension=384
    )


async def test_minilm_vectors_are_384_d_unit_length(embedder: MiniLMEmbedder) -> None:
    """Each text gives one 384-d float vector of length 1, the empty string included."""
    vectors = await embedder.embed_documents(["hello world", ""])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == 384 and all(isinstance(x, float) for x in v)
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)


async def test_minilm_similar_closer_than_unrelated(embedder: MiniLMEmbedder) -> None:
    """A sentence is closer to a rewording of it than to an unrelated sentence."""
    crash = "the server crashed after the upgrade"
    near = await cosine(embedder, crash, "after upgrading, the server went down")
    far = await cosine(embedder, crash, "I love baking chocolate cake")
    assert near > far + 0.3


@pytest.mark.parametrize(
    ("query", "paraphrase", "unrelated"),
    [
        ("automobile repair shop", "mechanic fixing cars", "quarterly tax filing deadline"),
        ("puppy", "young dog", "stock market"),
    ],
)
async def test_minilm_paraphrase_without_shared_words(
    embedder: MiniLMEmbedder, query: str, paraphrase: str, unrelated: str
) -> None:
    """A paraphrase sharing no word with the query scores above an unrelated sentence."""
    assert not set(query.split()) & set(paraphrase.split())
    assert await cosine(embedder, query, paraphrase) > await cosine(embedder, query, unrelated)


async def test_minilm_deterministic(embedder: MiniLMEmbedder) -> None:
    """The same text gives the same vector, call after call and by either entry point."""
    texts = ["[2026-11-01 16:34] alice: is the build green?"]
    first = await embedder.embed_documents(texts)
    assert await embedder.embed_documents(texts) == first
    assert await embedder.embed_queries(texts) == first


async def test_minilm_batch_equals_one_by_one(embedder: MiniLMEmbedder) -> None:
    """Padding a batch does not change a text's vector: batched == embedded alone."""
    texts = [
        "short",
        "a somewhat longer sentence about deployments " * 3,
        "東京で会議",
        "x",
        "y z",
    ]
    batched = np.array(await embedder.embed_documents(texts))
    alone = np.array([(await embedder.embed_documents([t]))[0] for t in texts])
    np.testing.assert_allclose(batched, alone, atol=1e-5)


async def test_minilm_bounds_every_batch_by_padded_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of long texts is cut into batches of at most `MAX_BATCH_TOKENS` padded tokens
    (onnxruntime keeps its arena at the largest batch it ran: this bounds the process's
    memory), short texts still fill a batch by count, and every text keeps its own vector."""
    seen: list[list[str]] = []
    real = minilm._embed_batch

    def recording(texts: list[str]) -> list[list[float]]:
        seen.append(texts)
        return real(texts)

    monkeypatch.setattr(minilm, "_embed_batch", recording)
    long = [f"{n} deploy the release to staging and watch the logs " * 40 for n in range(12)]
    short = [f"ping {n}" for n in range(40)]
    texts = [t for pair in zip(long, short, strict=False) for t in pair] + short[12:]
    vectors = await MiniLMEmbedder(batch_size=32).embed_documents(texts)
    padded = [len(b) * max(minilm._token_counts(b)) for b in seen]
    assert max(padded) <= minilm.MAX_BATCH_TOKENS
    assert sorted(len(b) for b in seen)[-1] == 32  # the short ones, by count
    alone = (await MiniLMEmbedder().embed_documents([long[3]]))[0]
    np.testing.assert_allclose(vectors[texts.index(long[3])], alone, atol=1e-5)


def test_batches_cut_by_count_and_padded_tokens() -> None:
    """Pure batching rule: similar lengths together, a too-long text alone, none lost."""
    counts = [300, 5, 256, 5, 256, 5, 40, 256, 256, 256, 256, 256]
    groups = minilm.batches(counts, batch_size=2, max_tokens=512)
    assert sorted(i for g in groups for i in g) == list(range(len(counts)))
    assert all(len(g) <= 2 for g in groups)
    assert all(len(g) == 1 or len(g) * max(counts[i] for i in g) <= 512 for g in groups)
    assert [0] in groups  # over the budget with any other: a batch of its own
    assert minilm.batches([256] * 8, batch_size=32, max_tokens=1024) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]


def test_batches_cut_long_texts_by_attention() -> None:
    """With `max_attention`, a batch's padded tokens times its padded length stay within it:
    short texts batch as before, long ones go in fewer rows (alone past its square root)."""
    counts = [256, 30, 256, 100, 256] + [30] * 9 + [100] * 4 + [256]
    plain = minilm.batches(counts, batch_size=32, max_tokens=512)
    bound = minilm.batches(counts, 32, 512, max_attention=minilm.MAX_ATTENTION)
    assert sorted(i for g in bound for i in g) == list(range(len(counts)))
    assert bound[:2] == plain[:2]  # the 30s and the 100s: the token bound already holds
    assert [len(g) for g in plain[2:]] == [2, 2]
    assert [len(g) for g in bound[2:]] == [1, 1, 1, 1]
    assert all(
        len(g) == 1 or len(g) * max(counts[i] for i in g) ** 2 <= minilm.MAX_ATTENTION
        for g in bound
    )
    assert max(len(g) * max(counts[i] for i in g) ** 2 for g in plain) > minilm.MAX_ATTENTION


async def test_minilm_long_windows_run_fewer_at_once_their_vectors_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Windows of 256 tokens are run one at a time (the graph's attention grows with the
    square of a batch's length, and the runtime's arena keeps its largest), shorter ones as
    many as the padded tokens allow; each window's vector and its lines' are those of the
    window run alone."""
    seen: list[int] = []
    real = minilm._embed_lines_batch

    def recording(docs: list[list[str]]) -> list[WindowVectors]:
        seen.append(len(docs))
        return real(docs)

    monkeypatch.setattr(minilm, "_embed_lines_batch", recording)
    long = [
        "\n".join(f"user{n}: deploy release {k} to staging and watch the logs" for k in range(30))
        for n in range(3)
    ]
    short = [f"alice: ping {n}\nbob: pong {n}" for n in range(6)]
    got = await MiniLMEmbedder(batch_size=32).embed_windows(long + short)
    assert sorted(seen) == [1, 1, 1, 6]
    alone = await MiniLMEmbedder().embed_windows([long[1]])
    np.testing.assert_allclose(got[1].window, alone[0].window, atol=1e-5)
    for a, b in zip(got[1].lines, alone[0].lines, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            np.testing.assert_allclose(a, b, atol=1e-5)


async def test_minilm_empty_input(embedder: MiniLMEmbedder) -> None:
    """No texts, no vectors."""
    assert await embedder.embed_documents([]) == []
    assert await embedder.embed_queries([]) == []


async def test_minilm_long_text_truncated(embedder: MiniLMEmbedder) -> None:
    """Text beyond 256 tokens is cut, not refused: a longer tail does not change the vector."""
    long = "deploy the release to staging and watch the logs " * 200
    a, b = await embedder.embed_documents([long, long + " and then production"])
    assert len(a) == 384
    np.testing.assert_allclose(a, b, atol=1e-6)


async def test_minilm_checksum_mismatch_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model file whose sha256 differs from the pinned one is refused before it is run."""
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the pinned model")
    monkeypatch.setattr(minilm, "model_path", lambda: fake)
    with pytest.raises(EmbedError, match="sha256"):
        await MiniLMEmbedder().embed_documents(["hello"])
    assert fake not in minilm._resident.held


async def test_minilm_missing_model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing model file is an EmbedError naming the path."""
    missing = tmp_path / "gone.onnx"
    monkeypatch.setattr(minilm, "model_path", lambda: missing)
    with pytest.raises(EmbedError, match=r"gone\.onnx"):
        await MiniLMEmbedder().probe()


async def test_minilm_hashes_and_loads_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many embedders and calls share one verified session: the file is hashed once."""
    calls: list[Path] = []
    real_sha256 = minilm._sha256
    monkeypatch.setattr(minilm._resident, "held", {})

    def spy(path: Path) -> str:
        calls.append(path)
        return real_sha256(path)

    monkeypatch.setattr(minilm, "_sha256", spy)
    for _ in range(2):
        e = MiniLMEmbedder()
        assert await e.probe() == e.identity
        await e.embed_documents(["one", "two"])
        await e.close()
    assert calls == [minilm.model_path()]
    assert len(minilm._resident.held) == 1


async def test_minilm_threads_do_not_spin_between_runs(embedder: MiniLMEmbedder) -> None:
    """The session's idle threads sleep instead of spinning: spinning cost ~18 ms of CPU a
    query on the 2-core host, CPU the homeserver and the other commands of a burst need."""
    await embedder.embed_queries(["warm the session up"])
    options = minilm._resident.get().get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


async def test_minilm_unloads_when_idle_and_embeds_the_same_after() -> None:
    """With `unload_after_seconds`, an idle process drops the model; the next call loads it
    again and gives the very same vectors; closing the embedder drops it too. (Documents: a
    question asked again is not embedded again, `test_queries.py`.)"""
    e = MiniLMEmbedder(unload_after_seconds=0.2)
    texts = ["the quince orchard needs water", "how do I mount an ntfs drive"]
    first = await e.embed_documents(texts)
    for _ in range(600):  # a bound for a hung test, not a timing assertion
        if not minilm.loaded():
            break
        await asyncio.sleep(0.05)
    assert not minilm.loaded()
    assert await e.embed_documents(texts) == first
    assert minilm.loaded()
    await e.close()
    assert not minilm.loaded()


def test_minilm_unload_never_drops_a_session_mid_run() -> None:
    """An unload during a run leaves the session; once the run ends it may go."""
    with minilm._in_use():
        assert not minilm.unload_if_idle(0)
        assert minilm.loaded()
    assert minilm.unload_if_idle(0)
    assert not minilm.loaded()


async def test_minilm_concurrent_calls_after_an_unload_load_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls arriving together after an unload share one new session, loaded once (documents:
    questions asked at once share one run anyway, `test_queries.py`)."""
    loads: list[Path] = []
    real_load = minilm._load_session

    def spy(path: Path) -> Any:
        loads.append(path)
        return real_load(path)

    e = MiniLMEmbedder()
    expected = await e.embed_documents(["otters hold hands"])
    assert minilm.unload_if_idle(0)
    monkeypatch.setattr(minilm, "_load_session", spy)
    answers = await asyncio.gather(*(e.embed_documents(["otters hold hands"]) for _ in range(8)))
    assert answers == [expected] * 8
    assert loads == [minilm.model_path()]


def test_config_unload_after_seconds_reaches_the_embedder() -> None:
    """`embedder.unload_after_seconds` defaults to 300 s; 0 keeps the model loaded."""
    assert EmbedderConfig().unload_after_seconds == 300
    e = make_embedder(EmbedderConfig(model="minilm", unload_after_seconds=0))
    assert isinstance(e, MiniLMEmbedder) and e.unload_after_seconds is None
    e = make_embedder(EmbedderConfig(model="minilm", unload_after_seconds=5))
    assert isinstance(e, MiniLMEmbedder) and e.unload_after_seconds == 5
