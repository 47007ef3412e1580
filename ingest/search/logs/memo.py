"""`ingest.search.logs.memo`: a pure function of a string, remembered (the folds and the scrub of a
room's log read the same bodies command after command)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["TextMemo"]


class TextMemo:
    """A pure function of a string remembered by its argument, bounded by characters rather
    than entries (bodies run to 64 KB); shared by the threads the folds run in. The oldest
    entries go first; a hit is a plain dict read (atomic), only a miss takes the lock."""

    def __init__(self, fn: Callable[[str], str], max_chars: int) -> None:
        self._fn = fn
        self._max = max_chars
        self._chars = 0
        self._done: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        out = self._done.get(text)
        if out is not None:
            return out
        out = self._fn(text)
        with self._lock:
            if text not in self._done:
                self._done[text] = out
                self._chars += len(text) + len(out)
            while self._chars > self._max:
                old = next(iter(self._done))
                self._chars -= len(old) + len(self._done.pop(old))
        return out
