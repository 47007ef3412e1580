"""Who may see what: the asker's history visibility cut (§3; hits: `ingest.revalidate`).

Under `joined` (or `invited`) history visibility a member sees the room from their join (or
invite) on; under `shared` and `world_readable` they see everything. The cut is the start of the
asker's *current, continuous* membership: the current member event, followed back through
`unsigned.replaces_state` while the earlier membership still counted (a display-name change is a
new member event but not a new join). A missing or broken chain errs towards showing less.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from bot.sender import BotClient

__all__ = ["NOTHING", "visible_from"]

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
