"""The bot's own error: the one whose message may be posted to a room."""

from __future__ import annotations

from ingest.errors import MuninnError

__all__ = ["CommandError"]


class CommandError(MuninnError):
    """A user's command is malformed or refused; its message is safe to post to the room."""
