"""The service's configuration: `ingest`'s sections plus the bot's own, one file
(docs/ARCHITECTURE.md §4.2).

`ServiceConfig` extends `ingest.config.Config` with `bot`, `metrics` and `mcp`; `parse_config` and
`load_config` validate the operator's file into it with `ingest`'s checks, secret handling and
errors, so the keys and the messages naming them are the same as ever.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator

from ingest.config import Config, Section, load_as, parse_as, regexes

__all__ = [
    "BotConfig",
    "McpConfig",
    "MetricsConfig",
    "ServiceConfig",
    "load_config",
    "parse_config",
]


# A command is the prefix then a letter (`ingest.rules.events.is_command`): a few characters
# without whitespace. Anything else is a YAML slip (issue 36: an open quote that swallowed
# the next lines) or no prefix a person could type, and would silence every command.
PREFIX_MAX = 8


class BotConfig(Section):
    prefix: str = "!"  # 1 to PREFIX_MAX characters, no whitespace
    command_room: str | None = None  # alias or id; cross-room search only here
    command_room_askers: tuple[str, ...] = ()  # regexes over user ids
    # false: the command room is where people ask, not where answers live, so its messages
    # (askers' notes, an agent's questions) are left out of the index and of `in:`; true
    # indexes it like any other room (rule 2)
    index_command_room: bool = False
    # raw events the transcript fold scans
    transcript_limit: Annotated[int, Field(ge=1, le=100_000)] = 2048
    rate_per_minute: Annotated[int, Field(ge=1)] = 10  # commands one asker may send a minute
    # commands answered at once. 16, measured (bench/RESULTS.md §7e): a command mostly waits
    # on the homeserver, and commands waiting at once share one read of the room's log, so a
    # burst on 2 cores is answered ~1.5x as fast as at 2, p99 within 15 s (each command still
    # has its deadline; a command's memory is bounded by the log's text bound)
    max_concurrent_commands: Annotated[int, Field(ge=1, le=256)] = 16
    # a command still running after this gets a short error reply instead of its answer
    command_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 30.0
    # the roster file `muninn roster apply --roster` applies (relative: beside this file).
    # `muninn run` reads it on an invite: one to a room it lists is kept for the apply, one
    # to a room it does not list is declined; unset, every invite is kept (none is declined)
    roster: Path | None = None

    @property
    def unindexed_room(self) -> str | None:
        """The room the scope leaves out of the index: the command room, unless opted in."""
        return None if self.index_command_room else self.command_room

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if 1 <= len(v) <= PREFIX_MAX and not any(c.isspace() for c in v):
            return v
        why = f'must be 1 to {PREFIX_MAX} characters without spaces (e.g. "!" or "?")'
        if "\n" in v or ": " in v or " #" in v:
            why += "; it holds the lines after it: is a quote left open?"
        shown = v if len(v) <= 40 else v[:39] + "…"
        raise ValueError(f"{why}, got {shown!r}")

    @field_validator("command_room_askers")
    @classmethod
    def _askers(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return regexes(v)


class MetricsConfig(Section):
    host: str = "127.0.0.1"
    port: Annotated[int | None, Field(ge=1, le=65535)] = None  # None: no metrics endpoint


class McpConfig(Section):
    # rooms `muninn mcp` serves (ids or aliases; #dev is this server's); None: every room
    # `muninn search` can search. A room not listed is refused by every tool, named.
    rooms: tuple[str, ...] | None = None

    @field_validator("rooms")
    @classmethod
    def _rooms(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("list at least one room, or leave the key out to serve every room")
        for room in v:
            if not re.fullmatch(r"[!#][^\s]+", room):
                raise ValueError(f"a room id starts with '!' and an alias with '#': {room!r}")
        return v


class ServiceConfig(Config):
    """The whole file: what `ingest` reads, and the bot's command and listener settings."""

    bot: BotConfig = BotConfig()
    metrics: MetricsConfig = MetricsConfig()
    mcp: McpConfig = McpConfig()


def parse_config(raw: Any, base_dir: Path = Path("."), source: str = "config") -> ServiceConfig:
    """Validate a parsed YAML document; raise ConfigError listing every problem at once."""
    return parse_as(ServiceConfig, raw, base_dir, source)


def load_config(explicit: str | Path | None = None) -> ServiceConfig:
    """`--config`, else $MUNINN_CONFIG, else ./config.yaml, validated."""
    return load_as(ServiceConfig, explicit)
