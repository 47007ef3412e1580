"""The roster file: `rooms: [{room: "#alias:server" | "!id", note: "..."}]`, or a bare alias or
id as shorthand. Validated at once, every problem named by entry, in an operator's words.

Read by `muninn roster plan|apply` (`bot.cli.roster`), and by `muninn run` when the config names
it (`bot.roster`): an invite to a room it lists is kept for the apply, never declined
(`bot.service.invites`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ingest.config_errors import operator_message, yaml_problem
from ingest.errors import ConfigError
from ingest.rules.scope import expand_alias

__all__ = ["Roster", "RosterEntry", "RosterError", "load_roster"]


class RosterError(ConfigError):
    """The roster file is invalid; the message lists every problem, naming the entries."""


class RosterEntry(BaseModel):
    """One room the reader should be in: an alias (`#name:server`) or a room id (`!id`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    room: str
    note: str = ""  # free text for the operator; shown in the plan

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """`- "#townhall:example.org"` is shorthand for `- {room: "#townhall:example.org"}`."""
        return {"room": data} if isinstance(data, str) else data

    @field_validator("room")
    @classmethod
    def _room(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("#"):
            localpart = v[1:].split(":", 1)[0]
            if not localpart or any(c.isspace() for c in v):
                raise ValueError(f"not a room alias: {v!r}")
        elif v.startswith("!"):
            if len(v) < 2 or any(c.isspace() for c in v):
                raise ValueError(f"not a room id: {v!r}")
        else:
            raise ValueError(f"must be an alias (#name:server) or a room id (!id), got {v!r}")
        return v


class Roster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rooms: tuple[RosterEntry, ...]


_ENTRY_FORM = (
    'must be a room alias or id (- "#townhall:example.org") '
    'or a mapping (- {room: "#townhall:example.org", note: "why"})'
)


def _entry_label(raw: Any, index: int) -> str:
    room = raw.get("room") if isinstance(raw, dict) else raw
    return f"rooms[{index}] ({room!r})" if isinstance(room, str) else f"rooms[{index}]"


def _problems(err: ValidationError, raw: Mapping[str, Any]) -> list[str]:
    rooms = raw.get("rooms")
    entries: list[Any] = rooms if isinstance(rooms, list) else []
    out = []
    for e in err.errors():
        loc = list(e["loc"])
        msg = operator_message(e)
        if len(loc) == 2 and loc[0] == "rooms" and e["type"] in ("model_type", "dict_type"):
            msg = f"{_ENTRY_FORM}, got {e.get('input')!r}"
        if len(loc) >= 2 and loc[0] == "rooms" and isinstance(loc[1], int):
            where = _entry_label(entries[loc[1]] if loc[1] < len(entries) else None, loc[1])
            field = ".".join(str(p) for p in loc[2:])
            out.append(f"{where}{' ' + field if field else ''}: {msg}")
        else:
            out.append(f"{'.'.join(str(p) for p in loc) or 'roster'}: {msg}")
    return out


def _duplicates(roster: Roster, server_name: str) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    for i, entry in enumerate(roster.rooms):
        key = normal_room(entry.room, server_name).casefold()
        if key in seen:
            problems.append(f"rooms[{i}] ({entry.room!r}): repeats rooms[{seen[key]}]")
        else:
            seen[key] = i
    return problems


def normal_room(room: str, server_name: str) -> str:
    """An alias without a server part means this homeserver's, as in the scope config."""
    return expand_alias(room, server_name) if room.startswith("#") else room


def load_roster(path: Path, server_name: str) -> Roster:
    """Read and validate a roster file; raise `RosterError` listing every problem at once."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RosterError([f"no roster file at {path}"], str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise RosterError([f"cannot read the roster: {e}"], str(path)) from None
    except yaml.YAMLError as e:
        raise RosterError([yaml_problem(e)], str(path)) from None
    if not isinstance(raw, dict):
        raise RosterError(
            ['the roster must be a mapping with a `rooms` list: rooms: ["#townhall:example.org"]'],
            str(path),
        )
    try:
        roster = Roster.model_validate(raw)
    except ValidationError as e:
        raise RosterError(_problems(e, raw), str(path)) from None
    if problems := _duplicates(roster, server_name):
        raise RosterError(problems, str(path))
    return roster
