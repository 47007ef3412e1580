"""What the command handler reads and writes of the homeserver, as the small parts it is given.

`bot.chat.handlers.CommandHandler` takes these (with the searcher and the room verdicts) instead
of the whole client: a room's log (`RoomLogSource`, read through
`ingest.search.logs.recent.RecentEvents`), the room states and events that say who reads a reply
(`RoomStates`, `bot.chat.visibility`), the alias directory (`Aliases`, `in:#room`) and the one
write, the reply (`Sender`). In `muninn run` every part is the one `bot.chat.sender.BotClient`
(`HomeserverParts.of`); the fast tests give each its in-memory part (tests/bot/fastkit.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.chat.content import ReplyContent
from ingest.matrix import ClientEvent
from ingest.search.logs.recent import RoomLogSource
from ingest.types import EventID, RoomAlias, RoomID

__all__ = ["Aliases", "Homeserver", "HomeserverParts", "RoomLogSource", "RoomStates", "Sender"]


class RoomStates(Protocol):
    """A room's current state as full events, and single events as the bot may see them."""

    async def state_events(self, room_id: RoomID | str) -> list[ClientEvent]: ...

    async def get_event(self, room_id: RoomID | str, event_id: str) -> ClientEvent | None: ...


class Aliases(Protocol):
    async def resolve_alias(self, alias: RoomAlias | str) -> RoomID | None: ...


class Sender(Protocol):
    async def send_message(
        self,
        room_id: RoomID | str,
        content: ReplyContent,
        txn_id: str,
        *,
        attempts: int | None = None,
    ) -> EventID: ...


class Homeserver(RoomLogSource, RoomStates, Aliases, Sender, Protocol):
    """Every part in one client: `bot.chat.sender.BotClient` in `muninn run`."""


@dataclass(frozen=True)
class HomeserverParts:
    """The command handler's parts of the homeserver."""

    log: RoomLogSource
    states: RoomStates
    aliases: Aliases
    sender: Sender

    @classmethod
    def of(cls, client: Homeserver) -> HomeserverParts:
        """Every part the one client (`muninn run`)."""
        return cls(client, client, client, client)
