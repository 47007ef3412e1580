"""What the in-process embedders share: batches cut by tokens, the process's one copy of a
model (`Resident`), and the idle unload.

A subclass names its model (`resident`) and its blocking calls (`_counts`, `_run`; `_load` and
`_unload_if_idle` are the resident's unless it says else); this class runs them in a worker
thread so the event loop keeps serving, groups texts into batches bounded by count and by padded
tokens (which bounds the runtime's memory whatever the input), and drops the model once no call
has used it for `unload_after_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ingest.embed.base import LineVector, WindowVectors, lines_of
from ingest.embed.queries import QUERY_PADDING, QueryVectors, batches
from ingest.types import EmbedderIdentity

__all__ = [
    "LocalEmbedder",
    "Resident",
    "batches",
    "cores",
    "line_spans",
    "session_options",
    "sha256",
    "span_pools",
    "trim_heap",
    "unit",
]

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


def session_options() -> ort.SessionOptions:
    """How a bundled model's onnxruntime session runs: every core for one run, one run at a
    time, and no spinning."""
    options = ort.SessionOptions()
    # Every core even for the pair's two models running at once: half the cores each was
    # slower on the shared 2-core host (bench/RESULTS.md §14; the lever in §16).
    options.intra_op_num_threads = cores()
    options.inter_op_num_threads = 1
    # Idle intra-op threads spin by default, burning a core after every run: on a small host
    # shared with the homeserver that is CPU a burst of commands needs (bench/RESULTS.md §7).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initialisers are noise here
    return options


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


def unit(vector: npt.NDArray[np.float32]) -> list[float]:
    """`vector` at unit length, as a list (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    out: list[float] = (vector / norm if norm > 1e-12 else vector).astype(np.float32).tolist()
    return out


def span_pools(
    states: npt.NDArray[np.float32], spans: Sequence[tuple[int, int]]
) -> list[LineVector | None]:
    """Each span's token states (`states[start:end]`, one row a token) mean-pooled at unit
    length, a float32 array; None for an empty span (a line the model did not read)."""
    out: list[LineVector | None] = []
    for a, b in spans:
        if b <= a:
            out.append(None)
            continue
        v = states[a:b].mean(axis=0)
        out.append((v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32))
    return out


def line_spans(lengths: Sequence[int], first: int, limit: int) -> list[tuple[int, int]]:
    """Where each line's tokens stand once the lines' token runs are laid end to end from
    position `first`, cut at position `limit` (the model's token bound)."""
    spans: list[tuple[int, int]] = []
    at = first
    for n in lengths:
        spans.append((min(at, limit), min(at + n, limit)))
        at += n
    return spans


M = TypeVar("M")


class Resident(Generic[M]):
    """A model per file, as `load(path())` builds it: under the lock, once a path a process
    (the modules pass lambdas, so that the functions tests patch are looked up at each load).
    Blocking throughout: callers run it in a worker thread."""

    def __init__(self, load: Callable[[Path], M], path: Callable[[], Path]) -> None:
        self._load = load
        self._path = path
        self._lock = threading.Lock()
        self.held: dict[Path, M] = {}  # a file's model
        # Under `_lock`: runs in progress, and when the last one ended (or the model was loaded).
        self._busy = 0
        self._last_used = 0.0
        self.loads = 0  # how many times this process loaded the model

    def get(self, *, busy: bool = False) -> M:
        """The model, loaded if need be; `busy`: counted as a run (`in_use` ends it)."""
        path = self._path()
        with self._lock:
            if path not in self.held:
                self.held[path] = self._load(path)
                self.loads += 1
                self._last_used = time.monotonic()
            self._busy += busy
            return self.held[path]

    @contextlib.contextmanager
    def in_use(self) -> Iterator[M]:
        """The model, counted busy while the caller runs it: an unload never drops it mid-run."""
        model = self.get(busy=True)
        try:
            yield model
        finally:
            with self._lock:
                self._busy -= 1
                self._last_used = time.monotonic()

    def loaded(self) -> bool:
        """Whether this process holds the model now."""
        with self._lock:
            return bool(self.held)

    def unload_if_idle(self, idle_seconds: float) -> bool:
        """Drop the model if no run is in progress and none ended in the last `idle_seconds`;
        then return the freed heap to the system. True when it was dropped."""
        with self._lock:
            if not self.held or self._busy or time.monotonic() - self._last_used < idle_seconds:
                return False
            self.held.clear()  # the only reference: the runtime frees the model here
        trim_heap()
        return True


class LocalEmbedder:
    """An in-process model behind the `Embedder` protocol (subclasses: MiniLM, e5).

    `unload_after_seconds`: drop the process's model after this long without a call (None
    keeps it loaded for the life of the process).
    """

    name = "the model"  # for the log
    max_batch_tokens: ClassVar[int]  # padded tokens a batch (the model's `MAX_BATCH_TOKENS`)
    # Padded tokens times the padded length a batch (`batches`), where the model needs it.
    max_attention: ClassVar[int | None] = None
    resident: ClassVar[Resident[Any]]  # the model, unless `_load` and `_unload_if_idle` say else

    def __init__(self, batch_size: int = 32, unload_after_seconds: float | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if unload_after_seconds is not None and unload_after_seconds <= 0:
            raise ValueError("unload_after_seconds must be positive (or None: never)")
        self._batch_size = batch_size
        self._unload_after = unload_after_seconds
        self._timer: asyncio.TimerHandle | None = None
        self._unloading: asyncio.Future[bool] | None = None
        # Questions waiting at once embedded as one batch, a repeated one not again.
        self.queries = QueryVectors(self._embed_queries, lambda: self.identity)

    # The model's blocking calls.
    @property
    def identity(self) -> EmbedderIdentity:
        raise NotImplementedError

    def _load(self) -> None:
        self.resident.get()

    def _counts(self, texts: list[str], query: bool) -> list[int]:
        raise NotImplementedError

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        raise NotImplementedError

    def _run_lines(self, texts: list[list[str]]) -> list[WindowVectors]:
        """Documents given as their lines: each one's vector and its lines' pools, one pass."""
        raise NotImplementedError

    def _unload_if_idle(self, idle_seconds: float) -> bool:
        return self.resident.unload_if_idle(idle_seconds)

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

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        """Late chunking (Günther et al. 2024): one pass of the model over each window's
        text, batched as `embed_documents` batches; each line's token states mean-pooled
        where they stand, so a line is read in its window's context at no further pass."""
        if not texts:
            return []
        try:
            counts = await asyncio.to_thread(self._counts, list(texts), False)
            out: list[WindowVectors | None] = [None for _ in texts]
            for chunk in self._batches(counts):
                done = await asyncio.to_thread(
                    self._run_lines, [lines_of(texts[i]) for i in chunk]
                )
                for i, vectors in zip(chunk, done, strict=True):
                    out[i] = vectors
            return [v for v in out if v is not None]
        finally:
            self._arm()

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.queries.embed(texts)

    async def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return await self._embed(texts, query=True)

    async def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        # Batch texts of similar length together: a batch pads to its longest text, and
        # padding is pure cost. Masked padding does not change a vector, so order is free.
        if not texts:
            return []
        try:
            if query:
                # A question is on the read path: its count and its run in one thread hop
                # (two hops a model cost the pair's question ~2 ms of its ~14, RESULTS §14).
                return await asyncio.to_thread(self._embed_now, list(texts))
            counts = await asyncio.to_thread(self._counts, list(texts), query)
            vectors: list[list[float]] = [[] for _ in texts]
            # A hop a batch: a cancelled import stops between batches.
            for chunk in self._batches(counts):
                batch = await asyncio.to_thread(self._run, [texts[i] for i in chunk], query)
                for i, vector in zip(chunk, batch, strict=True):
                    vectors[i] = vector
            return vectors
        finally:
            self._arm()

    def _embed_now(self, texts: list[str]) -> list[list[float]]:
        """Questions' vectors, batched as `_embed`'s, all in the calling thread. Blocking."""
        if len(texts) == 1:  # one question is one batch whatever its length: no count
            return self._run(texts, True)
        vectors: list[list[float]] = [[] for _ in texts]
        counts = self._counts(texts, True)
        for chunk in self._batches(counts, QUERY_PADDING):
            batch = self._run([texts[i] for i in chunk], True)
            for i, vector in zip(chunk, batch, strict=True):
                vectors[i] = vector
        return vectors

    def _batches(self, counts: list[int], slack: float | None = None) -> list[list[int]]:
        return batches(counts, self._batch_size, self.max_batch_tokens, slack, self.max_attention)

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
        await self.queries.close()
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
