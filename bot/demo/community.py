"""The demo community: `community.yaml` read into typed records, and seeded onto a homeserver.

Seeding acts as the people through the appservice (their namespace is non-exclusive, so they
also have passwords and can log in) because only an appservice may backdate a message with
`ts`: the conversation keeps its "minutes before now" times, spread over two days.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.demo.client import MatrixUser
from bot.demo.homeserver import BaseHomeserver
from ingest.errors import ConfigError

__all__ = ["Community", "Line", "RoomSpec", "Seeded", "SeededRoom", "Step", "load", "seed"]

COMMUNITY_FILE = "community.yaml"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Line(_Model):
    """One message: `[sender, minutes before now, text]` or `[..., key]` in the YAML."""

    sender: str
    minutes_ago: int = Field(ge=0)
    text: str = Field(min_length=1)
    key: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, raw: Any) -> Any:
        if isinstance(raw, list) and len(raw) in (3, 4):
            return dict(zip(("sender", "minutes_ago", "text", "key"), raw, strict=False))
        if isinstance(raw, list):
            raise ValueError("a message is [sender, minutes before now, text] or [..., key]")
        return raw


class RoomSpec(_Model):
    """A room: by alias, a bridged room (`bridged: protocol`), or a DM (`dm: [a, b]`)."""

    alias: str | None = Field(default=None, pattern=r"^[a-z0-9._=\-]+$")
    name: str | None = None
    topic: str | None = None
    bridged: str | None = None
    dm: tuple[str, str] | None = None
    messages: tuple[Line, ...] = ()

    @model_validator(mode="after")
    def _one_kind(self) -> RoomSpec:
        kinds = [k for k in (self.alias, self.bridged, self.dm) if k is not None]
        if len(kinds) != 1:
            raise ValueError("a room has exactly one of alias, bridged or dm")
        return self

    @property
    def key(self) -> str:
        """How the script names the room."""
        if self.alias is not None:
            return self.alias
        return f"bridged-{self.bridged}" if self.bridged else "dm-" + "-".join(self.dm or ())


class Step(_Model):
    """One move of the scripted session."""

    actor: str = Field(alias="as")
    room: str = Field(alias="in")
    say: str | None = None
    reply_to: str | None = None
    edit: str | None = None
    text: str | None = None
    redact: str | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        if sum(x is not None for x in (self.say, self.edit, self.redact)) != 1:
            raise ValueError("a step does exactly one of say, edit or redact")
        if (self.edit is None) != (self.text is None):
            raise ValueError("edit needs text (the new text), and text belongs to an edit")
        return self

    @property
    def kind(self) -> Literal["say", "edit", "redact"]:
        return "say" if self.say is not None else "edit" if self.edit is not None else "redact"


class Community(_Model):
    name: str
    owner: str
    people: dict[str, str]  # localpart → display name
    rooms: tuple[RoomSpec, ...]
    script: tuple[Step, ...]

    @model_validator(mode="after")
    def _references(self) -> Community:
        rooms = {r.key for r in self.rooms}
        keys = {m.key for r in self.rooms for m in r.messages if m.key}
        senders = {m.sender for r in self.rooms for m in r.messages}
        senders |= {person for r in self.rooms for person in r.dm or ()}
        problems = [f"unknown person {p!r}" for p in sorted(senders - set(self.people))]
        if self.owner not in self.people:
            problems.append(f"the owner {self.owner!r} is not one of the people")
        for n, step in enumerate(self.script, 1):
            if step.actor not in self.people:
                problems.append(f"script step {n}: unknown person {step.actor!r}")
            if step.room not in rooms:
                problems.append(f"script step {n}: unknown room {step.room!r}")
            for ref in (step.reply_to, step.edit, step.redact):
                if ref is not None and ref not in keys:
                    problems.append(f"script step {n}: no message has the key {ref!r}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def line(self, key: str) -> Line:
        return next(m for r in self.rooms for m in r.messages if m.key == key)


def load(text: str | None = None) -> Community:
    """The shipped community (or `text`), validated; a broken file is a ConfigError."""
    if text is None:
        text = resources.files("bot.demo").joinpath(COMMUNITY_FILE).read_text(encoding="utf-8")
    try:
        return Community.model_validate(yaml.safe_load(text))
    except (ValidationError, yaml.YAMLError) as e:
        raise ConfigError([str(e)], COMMUNITY_FILE) from None


# ---------------------------------------------------------------- seeding


@dataclass(frozen=True)
class SeededRoom:
    spec: RoomSpec
    room_id: str
    label: str  # what a person sees: the alias, the name, or "DM alice ↔ bob"


@dataclass(frozen=True)
class Seeded:
    """What the demo created: people (with their own tokens), rooms, and keyed messages."""

    users: dict[str, MatrixUser]
    rooms: dict[str, SeededRoom]  # by RoomSpec.key
    events: dict[str, str]  # message key → event id
    messages: int

    def room_of(self, key: str) -> SeededRoom:
        return self.rooms[key]


def _label(spec: RoomSpec, server_name: str) -> str:
    if spec.alias is not None:
        return f"#{spec.alias}:{server_name}"
    if spec.dm is not None:
        return f"DM {spec.dm[0]} ↔ {spec.dm[1]}"
    return spec.name or f"bridged {spec.bridged}"


async def _create(
    hs: BaseHomeserver[MatrixUser], spec: RoomSpec, users: dict[str, MatrixUser], owner: str
) -> str:
    """Create the room as clients would, with its members joined."""
    if spec.dm is not None:
        return await hs.make_dm(users[spec.dm[0]], users[spec.dm[1]])
    if spec.bridged is not None:
        room_id = await hs.make_bridged_room(
            users[owner], protocol=spec.bridged, channel_id="riverside-makers", name=spec.name
        )
    else:
        room_id = await users[owner].create_room(
            alias_localpart=spec.alias, name=spec.name, topic=spec.topic
        )
    for person, user in users.items():
        if person != owner:
            await user.join(room_id)
    return room_id


async def seed(hs: BaseHomeserver[MatrixUser], community: Community, password: str) -> Seeded:
    """Register the people, create the rooms, send the backdated messages, join the bot.

    The bot joins every room with the as_token, as `muninn roster apply` would join a room,
    and the refused ones too (a DM only after an invite): the demo shows them refused.
    """
    people = community.people.items()
    registered = await asyncio.gather(
        *(hs.register(person, password=password, displayname=name) for person, name in people)
    )
    users = dict(zip(community.people, registered, strict=True))
    now_ms = int(time.time() * 1000)
    events: dict[str, str] = {}

    async def one(spec: RoomSpec) -> SeededRoom:
        room_id = await _create(hs, spec, users, community.owner)
        for line in spec.messages:  # in order: the timeline is the conversation
            sender = hs.as_user(hs.mxid(line.sender))
            ts = now_ms - line.minutes_ago * 60_000
            event_id = await sender.send_text(room_id, line.text, ts=ts)
            if line.key is not None:
                events[line.key] = event_id
        bot = hs.bot()
        if spec.dm is not None:  # invite-only
            await users[spec.dm[0]].invite(room_id, bot.user_id)
        await bot.join(room_id)
        return SeededRoom(spec, room_id, _label(spec, hs.server_name))

    seeded = await asyncio.gather(*(one(spec) for spec in community.rooms))
    rooms = {room.spec.key: room for room in seeded}
    count = sum(len(spec.messages) for spec in community.rooms)
    return Seeded(users, rooms, events, count)
