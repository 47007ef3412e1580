"""One error tree, rooted at `MuninnError`. The bot adds its `CommandError` (`bot.errors`), the
only error whose own message is ever posted to a room."""

from __future__ import annotations

import asyncio
from typing import Any


class MuninnError(Exception):
    """Root of every error Muninn raises on purpose."""


class ConfigError(MuninnError):
    """The configuration is invalid; the message lists every problem."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


class MatrixError(MuninnError):
    """The homeserver refused or failed a request."""

    def __init__(self, message: str, *, status: int | None = None, errcode: str | None = None):
        self.status = status
        self.errcode = errcode
        super().__init__(message)


class MatrixAuthError(MatrixError):
    """401/403 on the reader's own token: stop, and name the token."""


class MatrixForbidden(MatrixError):
    """403 on a room or event the reader may not see (not a token problem)."""


class MatrixNotFound(MatrixError):
    """404: the room, event or alias does not exist."""


class MatrixUnavailable(MatrixError):
    """5xx, 429 or connection errors that outlasted the retry bound."""


class MatrixBadPaging(MatrixError):
    """A pagination that would not end: a token answered again, the same events served again,
    more pages than any room holds. The room fails; the pass goes on."""


class StoreError(MuninnError):
    """The vector store failed or refused an operation."""


class StoreUnavailable(StoreError):
    """The vector store cannot be reached."""


class DiskFull(StoreError):
    """Too little free space where the embedded store writes: writing stops (searches go on)
    until space returns, instead of the mapped files killing the process with SIGBUS."""


class CompatibilityError(StoreError):
    """A collection's compatibility record does not match what this process writes."""


class EmbedError(MuninnError):
    """The embedder failed."""


class EmbedUnavailable(EmbedError):
    """The embedder cannot be reached (Ollama down, connection refused)."""


class QueryError(MuninnError):
    """A search request is malformed; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def failure_retrieved(future: asyncio.Future[Any]) -> None:
    """A shared read's done callback: its failure is read here, so a read whose every waiter was
    cut off fails quietly (the next asker reads again), with no "exception was never retrieved"
    warning left behind."""
    if not future.cancelled():
        future.exception()
