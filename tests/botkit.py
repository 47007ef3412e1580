"""Helpers for the bot's end-to-end tests: a config for `muninn run` (`bot.demo.homeserver`, which
the benchmarks share), waiting for replies, and a step between a reply's build and its
audience re-check (`before_recheck`, both tiers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.chat.commands.incoming import Incoming
from bot.chat.replying import Replier
from bot.chat.visibility import Audience
from bot.demo.homeserver import service_config, service_doc
from tests.homeserver import MatrixUser

__all__ = [
    "ask",
    "before_recheck",
    "replies",
    "service_config",
    "service_doc",
    "wait_membership",
    "wait_reply",
]

REPLY_TIMEOUT = 30.0  # a bound on a wait under load, not a speed target


def _in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def replies(
    user: MatrixUser, room_id: str, event_id: str, bot_id: str
) -> list[dict[str, Any]]:
    """The bot's events replying to `event_id` among the room's latest 100."""
    chunk = (await user.messages(room_id, direction="b", limit=100))["chunk"]
    return [e for e in chunk if e["sender"] == bot_id and _in_reply_to(e) == event_id]


async def wait_reply(
    user: MatrixUser, room_id: str, event_id: str, bot_id: str, wait: float = REPLY_TIMEOUT
) -> dict[str, Any]:
    """The bot's reply to `event_id`, polled until `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        found = await replies(user, room_id, event_id, bot_id)
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no reply from {bot_id} to {event_id} in {wait}s")
        await asyncio.sleep(0.1)


async def ask(
    user: MatrixUser, room_id: str, body: str, bot_id: str, **kw: Any
) -> tuple[str, dict[str, Any]]:
    """Send a command and wait for the answer: (command event id, reply event)."""
    event_id = await user.send_text(room_id, body, **kw)
    return event_id, await wait_reply(user, room_id, event_id, bot_id)


async def wait_membership(user: MatrixUser, room_id: str, member: str, want: str) -> None:
    """Poll `member`'s membership in `room_id` (as `user` sees it) until it is `want`."""
    deadline = time.monotonic() + REPLY_TIMEOUT
    while True:
        state = await user.state(room_id)
        current = next(
            (
                e["content"].get("membership")
                for e in state
                if e["type"] == "m.room.member" and e["state_key"] == member
            ),
            None,
        )
        if current == want:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{member} is {current!r} in {room_id}, not {want!r}")
        await asyncio.sleep(0.1)


def before_recheck(
    replier: Replier, act: Callable[[], Awaitable[None]]
) -> Callable[[Incoming, Audience | None], Awaitable[str | None]]:
    """`replier.withheld`, running `act` first: something happens (a join) between a
    reply's build and its audience re-check (rule 14)."""
    withheld = replier.withheld

    async def acted_then_holds(msg: Incoming, cut: Audience | None) -> str | None:
        await act()
        return await withheld(msg, cut)

    return acted_then_holds
