"""The production embedder: an Ollama server, through the official `ollama` client.

Each model family has a profile: the prefixes its training expects on documents and queries.
A wrong or missing prefix does not fail, it silently costs recall, so the prefixes are part of
the embedder identity the collection records. The dimension is learned from the server's first
answer and checked against the one the collection was built with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import ollama
import pydantic

from ingest.embed.base import WindowVectors, lines_alone
from ingest.errors import EmbedError, EmbedUnavailable
from ingest.types import EmbedderIdentity

__all__ = ["PROFILES", "ModelProfile", "OllamaEmbedder", "profile_for"]

QWEN3_QUERY_PREFIX = "Instruct: Given a chat search query, retrieve relevant conversation\nQuery: "


@dataclass(frozen=True)
class ModelProfile:
    """How a model family wants its input, and its dimension when it is fixed and known."""

    document_prefix: str = ""
    query_prefix: str = ""
    dimension: int | None = None


PROFILES: dict[str, ModelProfile] = {
    "nomic-embed-text": ModelProfile("search_document: ", "search_query: ", 768),
    "qwen3-embedding": ModelProfile("", QWEN3_QUERY_PREFIX),
}

# Statuses that mean "the server is there but cannot serve now": degrade, don't fail.
_UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


def _split_name(model: str) -> tuple[str, str]:
    """`hf.co/x/nomic-embed-text:v1.5` → (`hf.co/x/nomic-embed-text`, `v1.5`); tag defaults."""
    head, _, last = model.rpartition("/")
    name, _, tag = last.partition(":")
    return (f"{head}/{name}" if head else name), (tag or "latest")


def profile_for(model: str) -> ModelProfile:
    """The profile of a model name with or without tag or namespace; plain if unknown."""
    family = _split_name(model)[0].rpartition("/")[2]
    return PROFILES.get(family, ModelProfile())


class OllamaEmbedder:
    """Embeds through `POST /api/embed`, `batch_size` texts a request."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        batch_size: int = 32,
        timeout_seconds: float = 60.0,
        expected_dimension: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._url = url
        self._model = model
        self._batch_size = batch_size
        self._expected = expected_dimension
        self._profile = profile_for(model)
        self._dimension: int | None = None
        self._client = ollama.AsyncClient(host=url, timeout=timeout_seconds)

    @property
    def identity(self) -> EmbedderIdentity:
        """The vector space; `dimension` is 0 until known (call `probe()` before relying on it)."""
        name, tag = _split_name(self._model)
        dimension = self._dimension or self._expected or self._profile.dimension or 0
        return EmbedderIdentity(
            provider="ollama",
            # `x` and `x:latest` are one model to Ollama, so they are one identity here.
            model=f"{name}:{tag}",
            dimension=dimension,
            document_profile=self._profile.document_prefix,
            query_profile=self._profile.query_prefix,
        )

    async def probe(self) -> EmbedderIdentity:
        """Embed one short document to learn (and check) the dimension; return the identity."""
        await self.embed_documents(["probe"])
        return self.identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, self._profile.document_prefix)

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        """Ollama's API returns pooled vectors only, no token states, so a window's lines
        cannot be pooled from its pass: each line is embedded as a document of its own, in
        the same requests as the windows (`lines_alone`): a line reads alone, not in its
        window, and a window costs a pass a line more."""
        return await lines_alone(self.embed_documents, texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, self._profile.query_prefix)

    async def close(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]  # untyped upstream

    async def _embed(self, texts: Sequence[str], prefix: str) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [prefix + t for t in texts[start : start + self._batch_size]]
            vectors.extend(await self._request(batch))
        return vectors

    async def _request(self, batch: list[str]) -> list[list[float]]:
        try:
            response = await self._client.embed(model=self._model, input=batch)
        except ollama.ResponseError as e:
            raise self._response_error(e) from e
        except (ConnectionError, httpx.TransportError) as e:
            # The client turns a refused connection into ConnectionError; timeouts and resets
            # arrive as httpx errors.
            detail = type(e).__name__ if isinstance(e, httpx.TimeoutException) else str(e)
            raise EmbedUnavailable(f"Ollama at {self._url} cannot be reached: {detail}") from e
        except pydantic.ValidationError as e:
            raise EmbedError(f"Ollama at {self._url} sent a malformed embed response") from e
        vectors = [list(map(float, v)) for v in response.embeddings]
        if len(vectors) != len(batch):
            raise EmbedError(
                f"Ollama model {self._model!r} returned {len(vectors)} vectors "
                f"for {len(batch)} texts"
            )
        for v in vectors:
            self._check_dimension(len(v))
        return vectors

    def _response_error(self, e: ollama.ResponseError) -> EmbedError:
        if e.status_code == 404:
            return EmbedError(
                f"Ollama at {self._url} has no model {self._model!r} ({e.error}); "
                f"run `ollama pull {self._model}` on the Ollama host"
            )
        if e.status_code in _UNAVAILABLE_STATUSES:
            return EmbedUnavailable(f"Ollama at {self._url} is unavailable: {e}")
        return EmbedError(f"Ollama at {self._url} refused to embed with {self._model!r}: {e}")

    def _check_dimension(self, dimension: int) -> None:
        known = self._dimension or self._expected
        if known is not None and dimension != known:
            source = "earlier answers" if self._dimension else "the collection"
            raise EmbedError(
                f"Ollama model {self._model!r} returned {dimension}-d vectors, but {source} "
                f"expect {known}-d; a different model needs a new index generation"
            )
        self._dimension = dimension
