"""`muninn status`: the reader, the active generation and every joined room's verdict.

It runs beside `muninn run`: while the service holds the embedded store, the store's half
(`ingest.facts`) comes from the service's loopback listener, as `muninn search`'s does."""

from __future__ import annotations

import time
from typing import Any

from bot.config import ServiceConfig
from bot.operations.common import HELD, cli_reader, print_json, resolve_room, service_token
from bot.replies.budget import plural
from ingest.errors import MatrixForbidden, MatrixNotFound, QueryError, StoreUnavailable
from ingest.facts import StoreFacts, read_facts
from ingest.matrix import MatrixReader
from ingest.scope import RoomScope, decide
from ingest.store import open_async
from ingest.types import Refusal, RoomID, Verdict


async def status(cfg: ServiceConfig, *, as_json: bool) -> int:
    facts = await store_facts(cfg)
    reader = cli_reader(cfg)
    try:
        me = await reader.whoami()
        joined = await reader.joined_rooms()
        direct = await reader.direct_rooms()
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
            cursor, marker, failing, points = facts.room(room_id)
            if verdict.eligible and marker is not None:
                # The writer refused it by what its timeline showed (a puppet sender).
                verdict = Verdict(room_id, Refusal.BRIDGED, str(marker.get("detail", "")))
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
        command = await _command_room(cfg, reader, me, direct)
    finally:
        await reader.close()
    total = facts.points
    active = facts.generation
    # Rooms `muninn import` indexed from an export (still their record), joined or not.
    imported: list[dict[str, Any]] = [
        {
            "room_id": room_id,
            "source": source,
            "points": facts.room_points.get(room_id, 0),
            "joined": room_id in joined,
        }
        for room_id, source in sorted(facts.imported.items())
    ]
    doc = {
        "reader": me,
        "generation": active,
        "versions": facts.versions,
        "points": total,
        # Rule 13a: the generation no longer holds what was written (None: it does).
        "damage": facts.damage,
        "rooms": rooms,
        "command_room": command,
        "imported": imported,
    }
    if as_json:
        print_json(doc)
        return 0
    print(f"reader {me}; generation {active}; {plural(total, 'point')}")
    if doc["damage"] is not None:
        print(f"DAMAGED: {doc['damage']}; the next refresh rebuilds it")
    for r in rooms:
        if r["verdict"] != "eligible":
            shown = r["verdict"]
        elif r["indexed"]:
            shown = f"indexed, {plural(r['points'], 'point')}"
        else:  # no pass has read it into this store (none yet, or an archive store)
            shown = "eligible, not indexed yet"
        if r["error"]:
            passes = plural(r["failed_passes"], "pass", "passes")
            shown += f"; FAILED {passes} in a row, retried: {r['error']}"
        print(f"  {r['room_alias'] or r['room_id']}: {shown} {r['detail']}".rstrip())
    if command is not None:
        served = "served" if command["serving"] else f"NOT served, {command['verdict']}:"
        print(f"command room {command['room']}: {served} {command['detail']}".rstrip())
    for i in imported:
        where = "" if i["joined"] else " (not joined: a homeserver pass over this store purges it)"
        counted = plural(i["points"], "point")
        print(f"imported {i['room_id']}: {counted} from {i['source']}{where}")
    return 0


async def store_facts(cfg: ServiceConfig) -> StoreFacts:
    """The store's records, read from the store, or from the running service while it holds
    the embedded store (its loopback listener, with its token, as `muninn search` does)."""
    try:
        store = await open_async(cfg.index, cfg.base_dir)
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        from bot.http_api import post_status, service_url

        token = service_token(cfg, held, "status")
        try:
            return StoreFacts.from_json(await post_status(service_url(cfg.metrics), token))
        except StoreUnavailable as e:
            raise StoreUnavailable(f"{held}; {e}") from None
    try:
        return await store.run(read_facts)
    finally:
        await store.close()


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
