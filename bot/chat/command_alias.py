"""Which room `bot.command_room` names, resolved until it is (docs/ARCHITECTURE.md §3 rule 14).

A room id names it at once. An alias is resolved at start and, while the homeserver cannot say
(a 5xx past the request layer's retries, a homeserver still starting, an alias not created
yet), again in the background, `FIRST_RETRY` seconds doubling to `MAX_RETRY` (`run`): one
transient error at start turned cross-room search off for the whole run (issue 46). Until it
is resolved, nothing is answered under the command room's rules; a command in a room that may
be the command room (`may_be`) tries once more (`now`) and is otherwise answered
`NOT_RESOLVED`, never "No results" from that room alone; `muninn status` reads `as_json`
from the running service and says so instead of "served".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from bot.chat.ports import Aliases
from ingest.errors import MatrixError
from ingest.rules.scope import expand_alias
from ingest.types import RoomID, RoomState

__all__ = ["FIRST_RETRY", "MAX_RETRY", "NOT_RESOLVED", "CommandRoomAlias"]

log = logging.getLogger("muninn.chat")

FIRST_RETRY = 1.0  # seconds before the first retry of an alias start could not resolve
MAX_RETRY = 60.0  # seconds between retries at most
NOT_RESOLVED = (
    "The command room is not resolved yet: {why}. Cross-room search starts here once it is; "
    "Muninn keeps trying. Please ask again shortly."
)


class CommandRoomAlias:
    """`bot.command_room` as a room id once known (`room_id`), and why not yet (`error`)."""

    def __init__(
        self,
        configured: str | None,
        aliases: Aliases,
        server_name: str,
        *,
        resolved: RoomID | None,
        on_resolved: Callable[[RoomID], None],
        first: float = FIRST_RETRY,
        most: float = MAX_RETRY,
    ) -> None:
        """`resolved`: the id `configured` names, known already (resolved at start, or an
        id); `on_resolved(room_id)` is called once, when an alias resolves later."""
        self.configured = configured
        self.alias = (
            expand_alias(configured, server_name)
            if configured is not None and configured.startswith("#")
            else None
        )
        self.room_id = resolved
        self.error: str | None = None  # the last try's failure while unresolved
        self._aliases = aliases
        self._on_resolved = on_resolved
        self._first, self._most = first, most
        self._kick = asyncio.Event()  # a command asked: try now, not after the back-off
        self._tried = asyncio.Condition()  # notified after every try

    @property
    def pending(self) -> bool:
        """An alias is configured and not resolved yet."""
        return self.alias is not None and self.room_id is None

    async def resolve(self) -> RoomID | None:
        """One try (behind the request layer's retries); the id, or None (`error` says why)."""
        if not self.pending:
            return self.room_id
        assert self.alias is not None
        try:
            found = await self._aliases.resolve_alias(self.alias)
        except MatrixError as e:
            self.error = f"resolving {self.alias} failed ({e})"
            found = None
        else:
            if found is None:
                self.error = f"{self.alias} names no room on the homeserver yet"
        if found is not None and self.room_id is None:
            self.room_id, self.error = found, None
            log.info("the command room %s is %s", self.alias, found)
            self._on_resolved(found)
        async with self._tried:
            self._tried.notify_all()
        return self.room_id

    async def run(self) -> None:
        """Resolve again until resolved: `first` seconds, doubling to `most` between tries, or
        at once when a command asks (`now`)."""
        delay = self._first
        while self.pending and await self.resolve() is None:
            log.warning(
                "the command room %s is not resolved: %s; trying again within %.0f s "
                "(cross-room search is off until then)",
                self.alias,
                self.error,
                delay,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._kick.wait()
            self._kick.clear()
            delay = min(delay * 2, self._most)

    async def now(self, wait: float) -> RoomID | None:
        """Have the background loop try at once, and wait up to `wait` seconds for it."""
        if not self.pending:
            return self.room_id
        self._kick.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait), self._tried:
                await self._tried.wait()
        return self.room_id

    def may_be(self, state: RoomState | None) -> bool:
        """Whether a room's state names the configured alias (canonical or alternative,
        case-folded, as scope compares aliases): while unresolved, it may be the command room."""
        if self.alias is None or state is None:
            return False
        named = [state.canonical_alias, *state.alt_aliases]
        return self.alias.casefold() in {a.casefold() for a in named if a}

    def as_json(self) -> dict[str, Any]:
        """What `muninn status` reads of the running service (`POST /_muninn/status`)."""
        return {"room": self.configured, "room_id": self.room_id, "error": self.error}
