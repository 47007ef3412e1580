"""A window's lines from its one pass (issue 47, rule 22b): the window's vector is the one
`embed_documents` gives, each line is pooled where it stands (MiniLM) or embedded alone (e5,
Ollama), and the stored code keeps a cosine within 0.01. Real models; Ollama's server stood in
for at its transport (respx), as tests/ingest/embed/test_ollama.py does."""

from __future__ import annotations

import numpy as np
import pytest
import respx

from ingest.embed import lines_of
from ingest.embed.linecodec import decode_line, encode_line
from ingest.embed.ollama import OllamaEmbedder
from tests.indexing import shared_e5, shared_embedder, shared_pair
from tests.ingest.embed.test_ollama import URL, StandIn

WINDOW = (
    "Ana, Ben, Chloe and Dev:\n"
    "Ana said: I can bring the laser-cut coasters\n"
    "Ben said: the SLA printer is free all afternoon, book it\n"
    "Chloe said: who took the spare extension lead?\n"
    "Dev said: lunch is pizza again"
)
GERMAN = "Kai and Ana:\nKai said: Die Bohrmaschine ist kaputt\nAna said: the mugs are clean"


@pytest.mark.parametrize("make", [shared_embedder, shared_e5, shared_pair])
async def test_a_windows_vector_is_its_documents_vector_and_each_line_has_one(
    make: object,
) -> None:
    """`embed_windows` gives the vector `embed_documents` gives for the same text (the index
    built before lines finds the same windows; e5's int8 kernels quantise a batch's
    activations together, so another batch moves its vector by about 0.001) and one vector a
    line of the text."""
    embedder = make()  # type: ignore[operator]
    [doc] = await embedder.embed_documents([WINDOW])
    [stored] = await embedder.embed_windows([WINDOW])
    assert float(np.dot(doc, stored.window)) > 0.995
    assert len(stored.lines) == len(lines_of(WINDOW)) and all(v is not None for v in stored.lines)


async def test_minilms_lines_pooled_in_context_choose_the_answer() -> None:
    """MiniLM's late-chunked lines tell a window's lines apart: asked in other words, the
    answering line is the nearest; a line is not its window (cosine under 0.97)."""
    embedder = shared_embedder()
    [stored] = await embedder.embed_windows([WINDOW])
    [q] = await embedder.embed_queries(["is the printer available today"])
    scores = [float(np.dot(q, v)) for v in stored.lines[1:] if v is not None]
    assert int(np.argmax(scores)) == 1, scores
    assert all(float(np.dot(stored.window, v)) < 0.97 for v in stored.lines if v is not None)


async def test_the_pair_reads_a_window_with_another_language_by_e5s_lines_alone() -> None:
    """In a window with a German line, the pair's second half of each line is e5's vector of
    that line alone (MiniLM reads German as noise); an English window's lines are MiniLM's
    half alone (e5's would be the window's own vector for every line: bytes for nothing), and
    e5 runs no pass a line for it."""
    pair = shared_pair()
    english, german = await pair.embed_windows([WINDOW, GERMAN])
    assert {len(v) for v in english.lines if v is not None} == {384}
    assert {len(v) for v in german.lines if v is not None} == {768}
    alone = await shared_e5().embed_documents(lines_of(GERMAN))
    for line, e5 in zip(german.lines, alone, strict=True):
        assert line is not None
        assert float(np.dot(np.asarray(line)[384:] * np.sqrt(2), e5)) > 0.995


async def test_ollama_embeds_each_line_alone_beside_its_window() -> None:
    """Ollama returns pooled vectors only: `embed_windows` asks for each window and each of
    its lines (a line said twice once), in the same requests."""
    server = StandIn(dimension=8)
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        router.post("/api/embed").mock(side_effect=server)
        e = OllamaEmbedder(url=URL, model="plain-model", batch_size=32)
        texts = ["A:\nA said: hi", "A:\nA said: bye"]
        [first, second] = await e.embed_windows(texts)
        await e.close()
    sent = [t for batch in server.inputs for t in batch]
    assert sent == [*texts, "A:", "A said: hi", "A said: bye"]
    assert [v[0] for v in first.lines] == [2.0, 3.0] and [v[0] for v in second.lines] == [2.0, 4.0]


def test_a_line_vector_is_stored_in_a_byte_a_dimension_within_a_hundredth() -> None:
    """The payload's code: 4 + one byte a dimension (base64), a cosine moved by under 0.01,
    and anything else read back as None (a payload is read untyped)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = rng.normal(size=(2, 768))
        a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
        decoded = decode_line(encode_line(a.tolist()))
        assert decoded is not None and abs(float(np.dot(decoded, b) - np.dot(a, b))) < 0.01
    assert len(encode_line([0.1] * 768)) == 1032
    assert decode_line("not base64!") is None and decode_line("") is None
