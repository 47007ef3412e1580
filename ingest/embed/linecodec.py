"""A message's line vector as a window's payload keeps it: int8 with one scale, base64.

The writer stores, for each message of a window of two or more, the vector of its line pooled
from the window's one pass (`Embedder.embed_windows`, late chunking); the read path compares a
question's vector with them to choose the message a window quotes (rule 22b), with no model run
at query time. A float32 pair vector is 3,072 bytes; this code is 4 + one byte a dimension (516
characters for an English window's line, MiniLM's 384; 1,032 for both of the pair's halves), and
a cosine read through it moves by under 0.01 (tests/ingest/embed/test_late_chunking.py).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["LINES", "decode_line", "encode_line"]

LINES = "lines"  # the payload key: {event id: code}

_SCALE = np.dtype("<f4")


def encode_line(vector: Sequence[float] | npt.NDArray[np.float32]) -> str:
    """`vector` as int8 steps of one float32 scale (its largest magnitude over 127)."""
    v = np.asarray(vector, dtype=np.float32)
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    steps = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
    return base64.b64encode(np.float32(scale).tobytes() + steps.tobytes()).decode("ascii")


def decode_line(code: str) -> npt.NDArray[np.float32] | None:
    """The vector `encode_line` wrote (None for anything else: a payload is read untyped)."""
    try:
        raw = base64.b64decode(code.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    if len(raw) < 5:
        return None
    scale = float(np.frombuffer(raw[:4], dtype=_SCALE)[0])
    steps = np.frombuffer(raw[4:], dtype=np.int8).astype(np.float32)
    out: npt.NDArray[np.float32] = steps * np.float32(scale)
    return out
