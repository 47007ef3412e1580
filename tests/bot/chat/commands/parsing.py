"""What the grammar's tests share: a fixed now, and `parse` as the command path calls it."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.chat.commands.grammar import parse
from bot.chat.commands.records import (
    Command,
)

NOW = int(datetime(2026, 11, 15, 12, 0, tzinfo=UTC).timestamp() * 1000)


def run(body: str, *, command_room: bool = False, prefix: str = "!") -> Command | None:
    return parse(
        body, prefix=prefix, now_ms=NOW, in_command_room=command_room, server_name="example.org"
    )
