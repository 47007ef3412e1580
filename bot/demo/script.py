"""The scripted session of `muninn demo`: a person types, Muninn answers, the demo prints both.

Each step is a real Matrix event sent with the person's own access token. A `!command` waits
for the bot's `m.notice` that replies to it; an edit or a redaction waits until the one writer
has refreshed the room, so the next search shows it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.demo.client import MatrixUser
from bot.demo.community import Community, Seeded, Step

__all__ = ["REPLY_TIMEOUT", "Exchange", "play"]

REPLY_TIMEOUT = 30.0
BOT_PROMPT = "muninn> "
QUOTE_WIDTH = 60

Print = Callable[[str], None]
Settle = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Exchange:
    """A command and the body of the bot's reply (None: no reply within the timeout)."""

    room: str
    command: str
    reply: str | None


def _short(text: str, width: int = QUOTE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def indent(text: str, prefix: str) -> str:
    """`prefix` before the first line, as many spaces before the others."""
    pad = " " * len(prefix)
    lines = text.splitlines() or [""]
    return "\n".join([prefix + lines[0], *(pad + line for line in lines[1:])])


def _in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def wait_reply(
    user: MatrixUser, room_id: str, event_id: str, bot_id: str, wait: float = REPLY_TIMEOUT
) -> dict[str, Any] | None:
    """The bot's reply to `event_id` among the room's latest events, or None after `wait` s."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        chunk = (await user.messages(room_id, direction="b", limit=30))["chunk"]
        for event in chunk:
            if event.get("sender") == bot_id and _in_reply_to(event) == event_id:
                return dict(event)
        await asyncio.sleep(0.1)
    return None


@dataclass(eq=False)
class Session:
    """Plays the steps of a community's script against what `seed` created."""

    community: Community
    seeded: Seeded
    bot_id: str
    out: Print
    settle: Settle
    _room: str | None = field(default=None, init=False)  # the room the last step was in

    def _enter(self, step: Step) -> str:
        room = self.seeded.room_of(step.room)
        if room.spec.key != self._room:
            self._room = room.spec.key
            self.out(f"\n  [{room.label} — {room.spec.name}]")
        return room.room_id

    async def step(self, step: Step) -> Exchange | None:
        room_id = self._enter(step)
        user = self.seeded.users[step.actor]
        me = f"  {step.actor}> "
        if step.say is not None:
            return await self._say(step, user, room_id, me)
        key = step.edit or step.redact or ""
        line = self.community.line(key)
        event_id = self.seeded.events[key]
        whose = "the" if line.sender == step.actor else f"{line.sender}'s"
        if step.edit is not None:
            self.out(f'{me}(edits {whose} message "{_short(line.text)}")')
            self.out(indent(f'"{step.text}"', " " * len(me) + "→ now: "))
            await user.send_edit(room_id, event_id, step.text or "")
        else:
            why = f": {step.reason}" if step.reason else ""
            self.out(f'{me}(deletes {whose} message "{_short(line.text)}"{why})')
            await user.redact(room_id, event_id, step.reason)
        await self.settle(room_id)
        return None

    async def _say(self, step: Step, user: MatrixUser, room_id: str, me: str) -> Exchange | None:
        text = step.say or ""
        if step.reply_to is not None:
            line = self.community.line(step.reply_to)
            self.out(f"{me}{text}")
            self.out(f'{" " * len(me)}(as a reply to {line.sender}: "{_short(line.text)}")')
            event_id = await user.send_reply(room_id, self.seeded.events[step.reply_to], text)
        else:
            self.out(f"{me}{text}")
            event_id = await user.send_text(room_id, text)
        if not text.startswith("!"):
            return None
        reply = await wait_reply(user, room_id, event_id, self.bot_id)
        body = str(reply["content"].get("body", "")) if reply else None
        shown = body if body is not None else f"(no reply within {REPLY_TIMEOUT:.0f} s)"
        self.out(indent(shown, "  " + BOT_PROMPT))
        return Exchange(step.room, text, body)


async def play(
    community: Community, seeded: Seeded, bot_id: str, out: Print, settle: Settle
) -> list[Exchange]:
    """Play the whole script; the commands and the bodies of Muninn's replies, in order."""
    session = Session(community, seeded, bot_id, out, settle)
    exchanges = []
    for step in community.script:
        done = await session.step(step)
        if done is not None:
            exchanges.append(done)
    return exchanges
