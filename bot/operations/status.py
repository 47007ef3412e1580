"""`muninn status`: the reader, the active generation and every joined room's verdict."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot.config import ServiceConfig
from bot.operations.common import (
    adapters,
    print_json,
    resolve_room,
)
from ingest.errors import MatrixForbidden, MatrixNotFound, QueryError
from ingest.matrix import MatrixReader
from ingest.records import (
    COMPAT_KEY,
    CURSOR_PREFIX,
    REFUSED_PREFIX,
    RETRY_PREFIX,
)
from ingest.scope import RoomScope, decide
from ingest.store import PointFilter
from ingest.types import Refusal, RoomID, Verdict


async def status(cfg: ServiceConfig, *, as_json: bool) -> int:
    async with adapters(cfg, embed=False) as (reader, store, _):
        me = await reader.whoami()
        joined = await reader.joined_rooms()
        direct = await reader.direct_rooms()
        active = await asyncio.to_thread(store.active)
        col = None
        if active is not None:
            col = await asyncio.to_thread(store.open, active, dense_dim=None, create=False)
        cursors = await asyncio.to_thread(col.list_meta, CURSOR_PREFIX) if col else {}
        refused = await asyncio.to_thread(col.list_meta, REFUSED_PREFIX) if col else {}
        retries = await asyncio.to_thread(col.list_meta, RETRY_PREFIX) if col else {}
        compat = await asyncio.to_thread(col.get_meta, COMPAT_KEY) if col else None
        rooms: list[dict[str, Any]] = []
        now = int(time.time() * 1000)
        for room_id in sorted(joined):
            try:
                state = await reader.room_state(room_id)
            except MatrixNotFound:
                continue
            verdict = decide(
                state, direct_rooms=direct, scope=cfg.scope, server_name=cfg.homeserver.server_name
            )
            marker = refused.get(REFUSED_PREFIX + room_id)
            if verdict.eligible and marker is not None:
                # The writer refused it by what its timeline showed (a puppet sender).
                verdict = Verdict(room_id, Refusal.BRIDGED, str(marker.get("detail", "")))
            cursor = cursors.get(CURSOR_PREFIX + room_id)
            failing = retries.get(RETRY_PREFIX + room_id) or {}
            points = (
                await asyncio.to_thread(col.count, PointFilter(room_ids=(room_id,))) if col else 0
            )
            rooms.append(
                {
                    "room_id": room_id,
                    "room_alias": state.canonical_alias,
                    "name": state.name,
                    "verdict": "eligible" if verdict.eligible else str(verdict.reason),
                    "detail": verdict.detail,
                    "indexed": cursor is not None,
                    "points": points,
                    "cursor": cursor.get("token") if cursor else None,
                    "lag_seconds": (now - int(cursor["updated_ms"])) / 1000 if cursor else None,
                    "error": failing.get("error"),
                    "failed_passes": int(failing.get("failed_passes", 0)),
                }
            )
        total = await asyncio.to_thread(col.count) if col else 0
        command = await _command_room(cfg, reader, me, direct)
        doc = {
            "reader": me,
            "generation": active,
            "versions": compat,
            "points": total,
            # Rule 13a: the generation no longer holds what was written (None: it does).
            "damage": col.damage if col else None,
            "rooms": rooms,
            "command_room": command,
        }
    if as_json:
        print_json(doc)
        return 0
    print(f"reader {me}; generation {active}; {total} points")
    if doc["damage"] is not None:
        print(f"DAMAGED: {doc['damage']}; the next refresh rebuilds it")
    for r in rooms:
        shown = r["verdict"] if r["verdict"] != "eligible" else f"indexed, {r['points']} points"
        if r["error"]:
            shown += f"; FAILED {r['failed_passes']} pass(es) in a row, retried: {r['error']}"
        print(f"  {r['room_alias'] or r['room_id']}: {shown} {r['detail']}".rstrip())
    if command is not None:
        served = "served" if command["serving"] else f"NOT served, {command['verdict']}:"
        print(f"command room {command['room']}: {served} {command['detail']}".rstrip())
    return 0


async def _command_room(
    cfg: ServiceConfig, reader: MatrixReader, me: str, direct: set[RoomID]
) -> dict[str, Any] | None:
    """Whether `bot.command_room` would be served (`RoomScope.serves_commands`), and why not."""
    room = cfg.bot.command_room
    if room is None:
        return None
    doc: dict[str, Any] = {"room": room, "room_id": None, "serving": False}
    try:
        room_id = await resolve_room(reader, room)
        state = await reader.room_state(room_id)
    except QueryError as e:
        return {**doc, "verdict": str(Refusal.NOT_JOINED), "detail": str(e)}
    except (MatrixNotFound, MatrixForbidden):
        return {**doc, "verdict": str(Refusal.NOT_JOINED), "detail": "the bot is not in it"}
    scope = RoomScope.from_config(
        cfg.scope, cfg.homeserver.server_name, cfg.bot.command_room_askers
    )
    verdict = scope.serves_commands(state, direct, {me})
    return {
        **doc,
        "room_id": room_id,
        "serving": verdict.eligible,
        "verdict": "eligible" if verdict.eligible else str(verdict.reason),
        "detail": verdict.detail,
    }
