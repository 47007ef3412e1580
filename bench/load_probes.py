"""What `bench.load` measures a burst with: the service's homeserver requests by kind, where its
commands in flight wait, CPU seconds of a process, the peak RSS, and the replies read forward."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

POLL_SECONDS = 1.0
WAIT_SAMPLE_SECONDS = 0.25  # how often the burst notes where each command in flight waits


class Requests:
    """The service's homeserver requests by kind (wraps its client's one request layer)."""

    KINDS = ("/messages", "/state", "/event/", "/send/", "/members", "/context/")

    def __init__(self, client: Any) -> None:
        self.by_kind: dict[str, int] = {}
        inner = client._request

        async def counted(method: str, path: str, **kwargs: Any) -> Any:
            kind = next((k.strip("/") for k in self.KINDS if k in path), f"{method} other")
            if kind == "messages":  # whose: the room log's, revalidation's or the writer's
                query = kwargs.get("query") or {}
                which = "log" if query.get("dir") == "b" else "walk"
                kind = "messages " + ("tail" if "filter" in query else which)
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            return await inner(method, path, **kwargs)

        client._request = counted


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: its innermost coroutine's function and line."""
    coro: Any = task.get_coro()
    where = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where = f"{frame.f_code.co_qualname}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


async def sample_waits(into: dict[str, int]) -> None:
    """Every `WAIT_SAMPLE_SECONDS`, count where each command task in flight is suspended."""
    while True:
        await asyncio.sleep(WAIT_SAMPLE_SECONDS)
        for task in asyncio.all_tasks():
            if task.get_name().startswith("muninn-command-") and not task.done():
                where = awaiting(task)
                into[where] = into.get(where, 0) + 1


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and every process under it, the reaped ones included (a
    PostgreSQL cluster: its postmaster and a backend per connection)."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        spent[child] = sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    tree, grown = {pid}, True
    while grown:
        below = {c for c, p in parents.items() if p in tree} - tree
        tree |= below
        grown = bool(below)
    return sum(spent.get(p, 0.0) for p in tree)


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def in_reply_to(event: dict[str, Any]) -> str | None:
    rel = event.get("content", {}).get("m.relates_to", {})
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    return reply.get("event_id") if isinstance(reply, dict) else None


async def now_token(user: Any, room: str) -> str:
    """A `/messages` token at the room's present, to read forward from."""
    return str((await user.messages(room, direction="b", limit=1))["start"])


async def read_new(
    user: Any,
    room: str,
    token: str,
    bot_id: str,
    wanted: set[str],
    seen: dict[str, dict[str, Any]],
    answer: dict[str, dict[str, Any]],
) -> str:
    """Read the room forward from `token` (each event once: a poll of the latest 1,000 events
    cost Synapse and this process, which hosts the service, more than the replies did);
    record the events in `seen` and the bot's replies to `wanted` commands in `answer`; the token
    to go on from."""
    while True:
        page = await user.messages(room, direction="f", from_token=token, limit=500)
        for event in page["chunk"]:
            seen[event["event_id"]] = event
            target = in_reply_to(event)
            if event["sender"] == bot_id and target in wanted and target not in answer:
                answer[target] = event
        end = page.get("end")
        if not page["chunk"] or not isinstance(end, str) or end == token:
            return token if not isinstance(end, str) else end
        token = end
