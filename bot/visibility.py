"""Who may see what: the asker's history visibility cut, and revalidation of hits (§3 rules 14–15).

Under `joined` (or `invited`) history visibility a member sees the room from their join (or
invite) on; under `shared` and `world_readable` they see everything. The cut is the start of the
asker's *current, continuous* membership: the current member event, followed back through
`unsigned.replaces_state` while the earlier membership still counted (a display-name change is a
new member event but not a new join). A missing or broken chain errs towards showing less.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from bot.sender import BotClient
from ingest.errors import MatrixError

__all__ = ["NOTHING", "LiveCheck", "visible_from"]

log = logging.getLogger("muninn.visibility")

NOTHING = 2**62  # a cut later than any event: the asker may see nothing
_MAX_HOPS = 20


def _member(events: Sequence[dict[str, Any]], user_id: str) -> dict[str, Any] | None:
    return next(
        (e for e in events if e.get("type") == "m.room.member" and e.get("state_key") == user_id),
        None,
    )


def _membership(event: dict[str, Any]) -> str | None:
    content = event.get("content")
    value = content.get("membership") if isinstance(content, dict) else None
    return value if isinstance(value, str) else None


async def visible_from(
    client: BotClient, room_id: str, user_id: str, history_visibility: str | None
) -> int | None:
    """The earliest `origin_server_ts` the asker may see, or None for "everything"."""
    if history_visibility not in ("joined", "invited"):
        return None  # shared (the spec's default when unset) and world_readable
    counted = {"join"} if history_visibility == "joined" else {"join", "invite"}
    member = _member(await client.state_events(room_id), user_id)
    if member is None or _membership(member) not in counted:
        return NOTHING
    cut = int(member.get("origin_server_ts", NOTHING))
    for _ in range(_MAX_HOPS):
        unsigned = member.get("unsigned")
        prev_id = unsigned.get("replaces_state") if isinstance(unsigned, dict) else None
        if not isinstance(prev_id, str):
            break
        prev = await client.get_event(room_id, prev_id)
        if prev is None or _membership(prev) not in counted:
            break
        member, cut = prev, int(prev.get("origin_server_ts", cut))
    return cut


class LiveCheck:
    """Searcher revalidation: every cited event still exists unredacted, in a joined room.

    The joined-room list is cached for `ttl` seconds (joins and leaves are rare, a search is
    not); events are fetched in parallel, at most `parallel` at a time.
    """

    def __init__(self, client: BotClient, *, ttl: float = 30.0, parallel: int = 16) -> None:
        self.client = client
        self.ttl = ttl
        self._joined: set[str] = set()
        self._fetched = 0.0
        self._gate = asyncio.Semaphore(parallel)

    def forget_rooms(self) -> None:
        self._fetched = 0.0

    async def _joined_rooms(self) -> set[str]:
        if time.monotonic() - self._fetched > self.ttl:
            self._joined = set(await self.client.joined_rooms())
            self._fetched = time.monotonic()
        return self._joined

    async def _live(self, room_id: str, event_id: str) -> bool:
        async with self._gate:
            try:
                event = await self.client.get_event(room_id, event_id)
            except MatrixError as e:
                log.warning("cannot revalidate %s: %s", event_id, e)
                return False
        unsigned = event.get("unsigned") if event else None
        redacted = isinstance(unsigned, dict) and "redacted_because" in unsigned
        return bool(event and event.get("content")) and not redacted

    async def __call__(self, room_id: str, event_ids: Sequence[str]) -> bool:
        if room_id not in await self._joined_rooms():
            return False
        results = await asyncio.gather(*(self._live(room_id, e) for e in event_ids))
        return all(results)
