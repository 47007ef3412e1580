"""What the in-process embedders share: batches cut by tokens, and the idle unload.

A subclass names its model's blocking calls (`_counts`, `_run`, `_load`, `_unload_if_idle`);
this class runs them in a worker thread so the event loop keeps serving, groups texts into
batches bounded by count and by padded tokens (which bounds the runtime's memory whatever the
input), and drops the model once no call has used it for `unload_after_seconds`.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ingest.types import EmbedderIdentity

__all__ = ["LocalEmbedder", "batches", "cores", "sha256", "trim_heap"]

log = logging.getLogger("muninn.embed")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def trim_heap() -> None:
    """glibc keeps freed memory in its arenas; without a trim an unload frees ~40 MiB of
    RSS instead of ~150 MiB (bench/RESULTS.md §10). Nothing to do on another libc."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


def batches(counts: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indexes of `counts` grouped into batches of similar length: at most `batch_size` texts,
    and at most `max_tokens` once padded to the batch's longest (a longer text goes alone)."""
    out: list[list[int]] = []
    batch: list[int] = []
    for i in sorted(range(len(counts)), key=lambda i: counts[i]):
        if batch and (len(batch) >= batch_size or (len(batch) + 1) * counts[i] > max_tokens):
            out.append(batch)
            batch = []
        batch.append(i)
    if batch:
        out.append(batch)
    return out


class LocalEmbedder:
    """An in-process model behind the `Embedder` protocol (subclasses: MiniLM, e5).

    `unload_after_seconds`: drop the process's model after this long without a call (None
    keeps it loaded for the life of the process).
    """

    name = "the model"  # for the log

    def __init__(
        self, batch_size: int, max_batch_tokens: int, unload_after_seconds: float | None
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if unload_after_seconds is not None and unload_after_seconds <= 0:
            raise ValueError("unload_after_seconds must be positive (or None: never)")
        self._batch_size = batch_size
        self._max_batch_tokens = max_batch_tokens
        self._unload_after = unload_after_seconds
        self._timer: asyncio.TimerHandle | None = None
        self._unloading: asyncio.Future[bool] | None = None

    # The model's blocking calls.
    @property
    def identity(self) -> EmbedderIdentity:
        raise NotImplementedError

    def _load(self) -> None:
        raise NotImplementedError

    def _counts(self, texts: list[str], query: bool) -> list[int]:
        raise NotImplementedError

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        raise NotImplementedError

    def _unload_if_idle(self, idle_seconds: float) -> bool:
        raise NotImplementedError

    @property
    def unload_after_seconds(self) -> float | None:
        return self._unload_after

    async def probe(self) -> EmbedderIdentity:
        """Load and verify the model now, so a bad install fails at start, not mid-refresh."""
        await asyncio.to_thread(self._load)
        self._arm()
        return self.identity

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, query=False)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, query=True)

    async def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        # Batch texts of similar length together: a batch pads to its longest text, and
        # padding is pure cost. Masked padding does not change a vector, so order is free.
        if not texts:
            return []
        counts = await asyncio.to_thread(self._counts, list(texts), query)
        vectors: list[list[float]] = [[] for _ in texts]
        try:
            for chunk in batches(counts, self._batch_size, self._max_batch_tokens):
                batch = await asyncio.to_thread(self._run, [texts[i] for i in chunk], query)
                for i, vector in zip(chunk, batch, strict=True):
                    vectors[i] = vector
        finally:
            self._arm()
        return vectors

    def _arm(self) -> None:
        """(Re)start the idle countdown after a call; `_unload_if_idle` re-checks under the
        model's lock, so a call from another embedder or thread meanwhile keeps the model."""
        if self._unload_after is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self._unload_after, self._on_idle)

    def _on_idle(self) -> None:
        self._timer = None
        if self._unloading is None or self._unloading.done():
            self._unloading = asyncio.ensure_future(
                asyncio.to_thread(self._unload_if_idle, self._unload_after or 0.0)
            )
            self._unloading.add_done_callback(self._log_unload)

    async def close(self) -> None:
        """Stop the idle countdown; an embedder that unloads when idle also unloads now, unless
        a run is in progress (then the process's model stays for it, as it does without)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unloading is not None:
            await asyncio.gather(self._unloading, return_exceptions=True)
            self._unloading = None
        if self._unload_after is not None:
            await asyncio.to_thread(self._unload_if_idle, 0.0)

    def _log_unload(self, done: asyncio.Future[bool]) -> None:
        if done.cancelled():
            return
        if done.exception() is not None:
            log.warning("unloading %s failed: %r", self.name, done.exception())
        elif done.result():
            log.info("%s unloaded after an idle spell; the next call loads it again", self.name)
