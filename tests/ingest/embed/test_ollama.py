"""ingest.embed.ollama: profiles, batching and faults of the Ollama embedder.

The HTTP exchanges are played by respx (the ollama client speaks httpx); a refused connection and
a server that never answers are real loopback faults.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx

from ingest.config import EmbedderConfig
from ingest.embed import Embedder, make_embedder
from ingest.embed.ollama import QWEN3_QUERY_PREFIX, OllamaEmbedder, profile_for
from ingest.errors import EmbedError, EmbedUnavailable

URL = "http://127.0.0.1:11434"


class StandIn:
    """Answers /api/embed with `dimension`-d vectors whose first value is the input's position."""

    def __init__(self, dimension: int = 768) -> None:
        self.dimension = dimension
        self.requests: list[dict[str, Any]] = []
        self.inputs: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = json.loads(request.content)
        seen = sum(map(len, self.inputs))
        self.requests.append(body)
        self.inputs.append(body["input"])
        zeros = [0.0] * (self.dimension - 1)
        vectors = [[float(seen + i), *zeros] for i in range(len(body["input"]))]
        return httpx.Response(200, json={"model": body["model"], "embeddings": vectors})


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
def stand_in(mock: respx.MockRouter) -> StandIn:
    server = StandIn()
    mock.post("/api/embed").mock(side_effect=server)
    return server


def error_route(mock: respx.MockRouter, status: int, message: str) -> None:
    mock.post("/api/embed").mock(return_value=httpx.Response(status, json={"error": message}))


def embedder(
    model: str = "nomic-embed-text", *, batch_size: int = 32, expected_dimension: int | None = None
) -> OllamaEmbedder:
    return OllamaEmbedder(
        url=URL, model=model, batch_size=batch_size, expected_dimension=expected_dimension
    )


@pytest.mark.parametrize(
    ("model", "doc_prefix", "query_prefix"),
    [
        ("nomic-embed-text", "search_document: ", "search_query: "),
        ("nomic-embed-text:v1.5", "search_document: ", "search_query: "),
        ("qwen3-embedding:8b", "", QWEN3_QUERY_PREFIX),
        ("mxbai-embed-large", "", ""),
    ],
)
async def test_ollama_prefixes_sent_per_profile(
    stand_in: StandIn, model: str, doc_prefix: str, query_prefix: str
) -> None:
    """Documents and queries carry the model family's prefixes, recorded in the identity."""
    e = embedder(model)
    await e.embed_documents(["a window"])
    await e.embed_queries(["a question"])
    assert stand_in.inputs == [[doc_prefix + "a window"], [query_prefix + "a question"]]
    assert all(r["model"] == model for r in stand_in.requests)
    assert (e.identity.document_profile, e.identity.query_profile) == (doc_prefix, query_prefix)
    await e.close()


def test_ollama_qwen3_query_prefix_text() -> None:
    """The qwen3 instruction is the chat-search one, ending in a newline and `Query: `."""
    assert profile_for("qwen3-embedding").query_prefix == (
        "Instruct: Given a chat search query, retrieve relevant conversation\nQuery: "
    )


async def test_ollama_batches_in_order(stand_in: StandIn) -> None:
    """Texts go batch_size a request, and vectors come back in input order."""
    e = embedder("plain-model", batch_size=3)
    texts = [f"t{i}" for i in range(7)]
    vectors = await e.embed_documents(texts)
    assert stand_in.inputs == [["t0", "t1", "t2"], ["t3", "t4", "t5"], ["t6"]]
    assert [v[0] for v in vectors] == [float(i) for i in range(7)]


async def test_ollama_empty_input_sends_nothing(stand_in: StandIn) -> None:
    """No texts, no request."""
    assert await embedder().embed_queries([]) == []
    assert stand_in.requests == []


async def test_ollama_probe_learns_dimension(mock: respx.MockRouter) -> None:
    """probe() learns the dimension from the server's answer and puts it in the identity."""
    mock.post("/api/embed").mock(side_effect=StandIn(dimension=1024))
    e = embedder("qwen3-embedding")
    assert e.identity.dimension == 0  # unknown before the server answered
    identity = await e.probe()
    assert (identity.provider, identity.model, identity.dimension) == (
        "ollama",
        "qwen3-embedding:latest",
        1024,
    )


async def test_ollama_expected_dimension_mismatch(mock: respx.MockRouter) -> None:
    """A model answering in another dimension than the collection's is a clear EmbedError."""
    mock.post("/api/embed").mock(side_effect=StandIn(dimension=1024))
    e = embedder("nomic-embed-text", expected_dimension=768)
    with pytest.raises(EmbedError, match=r"1024-d vectors.*expect 768-d"):
        await e.embed_documents(["x"])


async def test_ollama_dimension_change_between_answers(mock: respx.MockRouter) -> None:
    """A server whose dimension changes mid-run (model swapped) is refused, not mixed."""
    route = mock.post("/api/embed")
    route.side_effect = [
        StandIn(dimension=768)(httpx.Request("POST", URL, json={"model": "m", "input": ["a"]})),
        StandIn(dimension=384)(httpx.Request("POST", URL, json={"model": "m", "input": ["b"]})),
    ]
    e = embedder("some-model")
    await e.embed_documents(["a"])
    with pytest.raises(EmbedError, match=r"384-d vectors.*expect 768-d"):
        await e.embed_documents(["b"])


async def test_ollama_vector_count_mismatch(mock: respx.MockRouter) -> None:
    """An answer with fewer vectors than texts is an EmbedError, not a silent shift."""
    mock.post("/api/embed").mock(
        return_value=httpx.Response(200, json={"model": "m", "embeddings": [[0.1, 0.2]]})
    )
    with pytest.raises(EmbedError, match="1 vectors for 2 texts"):
        await embedder("m").embed_documents(["a", "b"])


async def test_ollama_model_missing_says_pull(mock: respx.MockRouter) -> None:
    """Ollama's 404 for an unpulled model becomes an EmbedError telling to `ollama pull` it."""
    error_route(mock, 404, 'model "nomic-embed-text" not found, try pulling it first')
    with pytest.raises(EmbedError, match="run `ollama pull nomic-embed-text`") as info:
        await embedder().embed_documents(["x"])
    assert not isinstance(info.value, EmbedUnavailable)


@pytest.mark.parametrize(
    ("status", "unavailable"), [(503, True), (502, True), (500, False), (400, False)]
)
async def test_ollama_http_errors(mock: respx.MockRouter, status: int, unavailable: bool) -> None:
    """Gateway/overload statuses mean unavailable (degrade); others are plain EmbedErrors."""
    error_route(mock, status, "something went wrong")
    with pytest.raises(EmbedError, match="something went wrong") as info:
        await embedder().embed_queries(["x"])
    assert isinstance(info.value, EmbedUnavailable) is unavailable


async def test_ollama_read_timeout_is_unavailable(mock: respx.MockRouter) -> None:
    """A timeout raised by the transport is EmbedUnavailable."""
    mock.post("/api/embed").mock(side_effect=httpx.ReadTimeout("timed out"))
    with pytest.raises(EmbedUnavailable, match="ReadTimeout"):
        await embedder().embed_documents(["x"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_ollama_connection_refused_is_unavailable() -> None:
    """Nothing listening on the port (a real refused connection) is EmbedUnavailable."""
    url = f"http://127.0.0.1:{closed_port()}"
    e = OllamaEmbedder(url=url, model="nomic-embed-text", timeout_seconds=5)
    with pytest.raises(EmbedUnavailable, match="cannot be reached"):
        await e.embed_documents(["x"])
    await e.close()


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A loopback server that accepts connections and never answers."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.close()
    await server.wait_closed()


async def test_ollama_server_never_answers_is_unavailable(silent_server: str) -> None:
    """A server that accepts and never answers times out into EmbedUnavailable."""
    e = OllamaEmbedder(url=silent_server, model="nomic-embed-text", timeout_seconds=0.3)
    with pytest.raises(EmbedUnavailable, match="Timeout"):
        await e.embed_queries(["x"])
    await e.close()


def test_make_embedder_ollama_from_config() -> None:
    """kind: ollama builds the Ollama embedder with the configured model and batch size."""
    cfg = EmbedderConfig(kind="ollama", url=URL, model="qwen3-embedding", batch_size=8)
    e = make_embedder(cfg, expected_dimension=1024)
    assert isinstance(e, OllamaEmbedder) and isinstance(e, Embedder)
    assert e.identity.model == "qwen3-embedding:latest"
    assert e.identity.dimension == 1024
    assert e._batch_size == 8


async def test_ollama_probe_checks_expected_dimension(mock: respx.MockRouter) -> None:
    """probe() fails at once when the model's dimension is not the collection's."""
    mock.post("/api/embed").mock(side_effect=StandIn(dimension=768))
    with pytest.raises(EmbedError, match="768-d vectors"):
        await embedder("qwen3-embedding", expected_dimension=1024).probe()
