"""The query side of an in-process embedder: the questions waiting at once embedded as one
batch, and a question asked again (`!more`, a repeat) not embedded again.

Calls that arrive in the same turn of the event loop, or while a run is in progress, wait for
the next run and share it: a burst of commands is many short texts, which is what a batch is for
(eight short questions cost little more than one), and a quiet service waits for nothing. A text
already in the run in progress waits for that run, not the next. The vectors are remembered by
(embedder identity, text) in a bounded LRU of float32 rows, so a repeated question costs a dict
read. Only vectors of what is asked (questions; the messages `Nearest` compares with them) are
kept, in this process's memory, never on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import numpy.typing as npt

from ingest.errors import failure_retrieved
from ingest.types import EmbedderIdentity

__all__ = ["QUERY_PADDING", "REMEMBERED", "QueryVectors", "batches"]

# Vectors remembered an embedder: 512 of 384 float32s are 0.75 MiB (a model's vectors are
# float32, so a remembered one is the very one computed and an answer does not change with it).
REMEMBERED = 512

Run = Callable[[list[str]], Awaitable[list[list[float]]]]

# Questions of a batch pad to its longest: one of 40 tokens among seven of 8 triples the work,
# and a question's run has little fixed cost to save (8 questions of one length in a batch:
# MiniLM 1.6x faster than 8 runs, e5 even; of mixed lengths both slower, bench/RESULTS.md §14).
# So a batch of questions holds at most this many times its own tokens once padded.
QUERY_PADDING = 1.25


def batches(
    counts: Sequence[int],
    batch_size: int,
    max_tokens: int,
    slack: float | None = None,
    max_attention: int | None = None,
) -> list[list[int]]:
    """Indexes of `counts` grouped into batches of similar length: at most `batch_size` texts,
    and at most `max_tokens` once padded to the batch's longest (a longer text goes alone);
    with `slack`, also at most `slack` times the batch's own tokens once padded; with
    `max_attention`, also at most that many padded tokens times the padded length (a head's
    attention scores: a batch of long texts needs as many tokens' memory squared)."""
    out: list[list[int]] = []
    batch: list[int] = []
    own = 0  # the batch's tokens before padding
    for i in sorted(range(len(counts)), key=lambda i: counts[i]):
        padded = (len(batch) + 1) * counts[i]
        wasteful = slack is not None and padded > slack * (own + counts[i])
        square = max_attention is not None and padded * counts[i] > max_attention
        if batch and (len(batch) >= batch_size or padded > max_tokens or wasteful or square):
            out.append(batch)
            batch, own = [], 0
        batch.append(i)
        own += counts[i]
    if batch:
        out.append(batch)
    return out


class QueryVectors:
    """`run` (texts → their query vectors, one call a batch) batched, and its vectors
    remembered under `identity()` (the embedder's, read at each call)."""

    def __init__(
        self, run: Run, identity: Callable[[], EmbedderIdentity], remembered: int = REMEMBERED
    ) -> None:
        self._run = run
        self._identity = identity
        self._max = remembered
        self._vectors: OrderedDict[tuple[EmbedderIdentity, str], npt.NDArray[np.float32]] = (
            OrderedDict()
        )
        self._next: dict[str, asyncio.Future[list[float]]] = {}  # the next run's texts
        self._running: dict[str, asyncio.Future[list[float]]] = {}  # the run in progress's
        self._runner: asyncio.Task[None] | None = None
        self.runs = 0  # calls of `run` (what the batching and the memory save is visible)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Each text's vector, in order: remembered, or from the next run."""
        identity = self._identity()
        found = {t: v for t in texts if (v := self._recall(identity, t)) is not None}
        waits = {t: self._wait_for(t) for t in texts if t not in found}
        for t, future in waits.items():
            # Shielded: a command cancelled (its deadline) leaves the run to the others.
            found[t] = await asyncio.shield(future)
        return [list(found[t]) for t in texts]  # copies: no caller changes another's

    def _recall(self, identity: EmbedderIdentity, text: str) -> list[float] | None:
        row = self._vectors.get((identity, text))
        if row is None:
            return None
        self._vectors.move_to_end((identity, text))
        vector: list[float] = row.tolist()
        return vector

    def _remember(self, identity: EmbedderIdentity, text: str, vector: list[float]) -> None:
        self._vectors[(identity, text)] = np.asarray(vector, dtype=np.float32)
        self._vectors.move_to_end((identity, text))
        while len(self._vectors) > self._max:
            self._vectors.popitem(last=False)

    def _wait_for(self, text: str) -> asyncio.Future[list[float]]:
        """The future of `text`'s vector in the next run (started unless one is on its way)."""
        loop = asyncio.get_running_loop()
        if self._runner is not None and self._runner.get_loop() is not loop:
            # a loop that has ended (tests run several)
            self._runner, self._next, self._running = None, {}, {}
        # A burst asks the same text twice while its run is under way: join it, not the next.
        future = self._running.get(text) or self._next.get(text)
        if future is None:
            future = self._next[text] = loop.create_future()
            future.add_done_callback(failure_retrieved)
        if self._runner is None:
            self._runner = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        """One run a batch of what waits, until nothing does. It starts a loop turn after the
        first call, so the calls of that turn share its run."""
        batch: dict[str, asyncio.Future[list[float]]] = {}
        try:
            while self._next:
                batch, self._next = self._next, {}
                self._running = batch
                texts = list(batch)
                self.runs += 1
                try:
                    vectors = await self._run(texts)
                except Exception as e:  # each waiter's call raises it, as it would alone
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(e)
                    continue
                identity = self._identity()
                for text, vector in zip(texts, vectors, strict=True):
                    self._remember(identity, text, vector)
                    if not batch[text].done():
                        batch[text].set_result(vector)
        finally:
            # Only when cancelled (close): no waiter is left waiting for a run that will not come.
            for future in [*batch.values(), *self._next.values()]:
                future.cancel()
            self._next, self._running = {}, {}
            self._runner = None

    async def close(self) -> None:
        """Cancel a run in progress (its waiters' calls raise `CancelledError`)."""
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._runner = None
