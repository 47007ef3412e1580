"""`muninn status`: the reader, the active generation and every joined room's verdict.

It runs beside `muninn run`: while the service holds the embedded store, the store's half
(`ingest.index.facts`) comes from the service's loopback listener, as `muninn search`'s does."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from bot.chat.command_room import CommandRoomPolicy
from bot.chat.replies.words import plural
from bot.config import ServiceConfig
from bot.operations.common import HELD, cli_reader, print_json, resolve_room, service_token
from bot.service import wiring
from ingest.errors import (
    MatrixForbidden,
    MatrixNotFound,
    MatrixUnavailable,
    QueryError,
    StoreUnavailable,
)
from ingest.index.facts import StoreFacts, read_facts
from ingest.matrix import MatrixReader
from ingest.store import open_async
from ingest.types import Refusal, RoomID, Verdict


async def status(cfg: ServiceConfig, *, as_json: bool) -> int:
    facts, service = await facts_and_service(cfg)
    joined: set[RoomID] | None
    try:
        me, joined, rooms, command = await _homeserver_half(cfg, facts)
        unreachable = None
    except MatrixUnavailable as e:
        # Issue 36: the store's half still tells an operator what is indexed; exit 1 after it.
        me, command, unreachable = None, None, f"{cfg.homeserver.url} unreachable ({e})"
        joined = None
        rooms = [_stored_room(facts, room_id) for room_id in facts.homeserver_rooms]
    command = _as_the_service_has_it(command, service)
    # Rooms `muninn import` indexed from an export (still their record), joined or not.
    imported: list[dict[str, Any]] = [
        {
            "room_id": room_id,
            "room_alias": facts.room_aliases.get(room_id),
            "source": source,
            "points": facts.room_points.get(room_id, 0),
            "joined": None if joined is None else room_id in joined,
        }
        for room_id, source in sorted(facts.imported.items())
    ]
    doc = {
        "reader": me,
        "homeserver": {"url": cfg.homeserver.url, "error": unreachable},
        "generation": facts.generation,
        "versions": facts.versions,
        "points": facts.points,
        # Rule 13a: the generation no longer holds what was written (None: it does).
        "damage": facts.damage,
        "rebuilding": facts.rebuilding,
        "rooms": rooms,
        "command_room": command,
        "imported": imported,
        # Issue 44: built by `muninn import` alone; the homeserver's rooms are not in it.
        "archive": facts.archive,
    }
    if as_json:
        print_json(doc)
    else:
        print("\n".join(status_lines(doc, command_room=cfg.bot.command_room)))
    if unreachable is not None:
        print(f"muninn: homeserver {unreachable}", file=sys.stderr)
        return 1
    return 0


async def _homeserver_half(
    cfg: ServiceConfig, facts: StoreFacts
) -> tuple[str, set[RoomID], list[dict[str, Any]], dict[str, Any] | None]:
    """The reader, its joined rooms with their verdicts now, and the command room's."""
    reader = cli_reader(cfg)
    try:
        me = await reader.whoami()
        joined = await reader.joined_rooms()
        direct = await reader.direct_rooms()
        command = await _command_room(cfg, reader, me, direct)
        # The writer's rules: the command room (unless opted in) is refused, `command_room`.
        scope = wiring.room_scope(cfg).with_command_room_id((command or {}).get("room_id"))
        rooms: list[dict[str, Any]] = []
        for room_id in sorted(joined):
            try:
                state = await reader.room_state(room_id)
            except MatrixNotFound:
                continue
            verdict = scope.decide(state, direct)
            marker = facts.room(room_id)[1]
            if verdict.eligible and marker is not None:
                # The writer refused it by what its timeline showed (a puppet sender).
                verdict = Verdict(room_id, Refusal.BRIDGED, str(marker.get("detail", "")))
            rooms.append(
                {
                    **_stored_room(facts, room_id),
                    "room_alias": state.canonical_alias,
                    "name": state.name,
                    "verdict": "eligible" if verdict.eligible else str(verdict.reason),
                    "detail": verdict.detail,
                }
            )
    finally:
        await reader.close()
    return me, set(joined), rooms, command


def _stored_room(facts: StoreFacts, room_id: str) -> dict[str, Any]:
    """A room as the store knows it; its verdict is the homeserver's ("unknown" without it)."""
    cursor, _, failing, points = facts.room(room_id)
    now = int(time.time() * 1000)
    return {
        "room_id": room_id,
        "room_alias": facts.room_aliases.get(room_id),  # the homeserver's, when it answers
        "name": None,
        "verdict": "unknown",
        "detail": "",
        "indexed": cursor is not None,
        "points": points,
        "cursor": cursor.get("token") if cursor else None,
        "lag_seconds": (now - int(cursor["updated_ms"])) / 1000 if cursor else None,
        "error": failing.get("error"),
        "failed_passes": int(failing.get("failed_passes", 0)),
    }


def status_lines(doc: Mapping[str, Any], *, command_room: str | None = None) -> list[str]:
    """`muninn status` as text: the reader and index, each room, the command room, imports.

    What needs the homeserver (verdicts, whether the command room is served, whether an
    imported room is joined) is said to be unknown while it does not answer; an archive store
    (`StoreFacts.archive`) names the joined rooms only by their number: none is in it."""
    error = doc["homeserver"]["error"]
    generation = doc["generation"]
    index = (
        f"generation {generation}; {plural(doc['points'], 'point')}"
        if generation is not None
        else "no index yet (`muninn run` or `muninn refresh` builds it)"
    )
    who = f"reader {doc['reader']}" if error is None else f"homeserver {error}"
    lines = [f"{who}; {index}"]
    if doc["damage"] is not None:
        lines.append(f"DAMAGED: {doc['damage']}; the next refresh rebuilds it")
    if doc.get("rebuilding") is not None:
        lines.append(rebuilding_line(doc["rebuilding"]))
    if doc.get("archive") and error is None:
        lines.append(_archive_line(doc, command_room))
    else:
        lines += _rooms_lines(doc, command_room)
    for i in doc["imported"]:
        where = {
            False: " (not joined: a homeserver pass over this store purges it)",
            None: " (joined or not: unknown while the homeserver is unreachable)",
        }.get(i["joined"], "")
        counted = plural(i["points"], "point")
        lines.append(f"imported {_named(i)}: {counted} from {i['source']}{where}")
    return lines


def _rooms_lines(doc: Mapping[str, Any], command_room: str | None) -> list[str]:
    """Each room with what is known of it, then the command room's line."""
    lines = []
    unreachable = doc["homeserver"]["error"] is not None
    if unreachable and doc["rooms"]:
        lines.append("rooms in the index (their verdicts need the homeserver: unknown):")
    for r in doc["rooms"]:
        lines.append(f"  {r['room_alias'] or r['room_id']}: {_room_shown(r)}")
    command = doc["command_room"]
    if command is not None:
        served = "served" if command["serving"] else f"NOT served, {command['verdict']}:"
        lines.append(f"command room {command['room']}: {served} {command['detail']}".rstrip())
    elif unreachable and command_room is not None:
        lines.append(f"command room {command_room}: served or not: unknown (needs the homeserver)")
    return lines


def _archive_line(doc: Mapping[str, Any], command_room: str | None) -> str:
    """An archive store, in place of the homeserver's rooms: none of them is in it."""
    command_id = (doc["command_room"] or {}).get("room_id")
    joined = sum(1 for r in doc["rooms"] if r["room_id"] != command_id)
    also = " and the command room" if command_room is not None else ""
    return (
        "archive store: every room in it was indexed by `muninn import`, none by a homeserver "
        f"pass; the reader's joined rooms ({joined}){also} are not in it (`muninn "
        "refresh` or `muninn run` with this config would index them, and purge the imports "
        "of rooms the reader has not joined)"
    )


def _named(room: Mapping[str, Any]) -> str:
    """A room by the alias the store knows, with its id; by its id alone without one."""
    alias = room.get("room_alias")
    return f"{alias} ({room['room_id']})" if alias else str(room["room_id"])


def rebuilding_line(rebuild: Mapping[str, Any]) -> str:
    """A rebuild under way (`StoreFacts.rebuilding`), in an operator's words."""
    return (
        f"rebuilding: {rebuild['generation']} is being built beside the active generation "
        f"({rebuild['rooms_read']} of {plural(rebuild['rooms'], 'room')} read so far, "
        f"{plural(rebuild['points'], 'point')}); it switches in once a full pass completes"
    )


def _room_shown(r: Mapping[str, Any]) -> str:
    if r["verdict"] == "unknown":
        shown = f"indexed, {plural(r['points'], 'point')}" if r["indexed"] else "not indexed"
    elif r["verdict"] != "eligible":
        # The detail already starts with the reason ("bridged: bridge state event").
        detail = str(r["detail"]).removeprefix(f"{r['verdict']}: ")
        shown = f"refused, {r['verdict']}: {detail}".rstrip(": ")
    elif r["indexed"]:
        shown = f"indexed, {plural(r['points'], 'point')}"
    else:  # no pass has read it into this store (none yet, or an archive store)
        shown = "eligible, not indexed yet"
    if r["error"]:
        passes = plural(r["failed_passes"], "pass", "passes")
        shown += f"; FAILED {passes} in a row, retried: {r['error']}"
    return shown


def _as_the_service_has_it(
    command: dict[str, Any] | None, service: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The command room as the running service serves it: while its alias is unresolved there
    (`bot.chat.command_alias`), not served, whatever the homeserver answers now (issue 46)."""
    mine = (service or {}).get("command_room") or {}
    if command is None or not mine.get("room") or mine.get("room_id") is not None:
        return command
    why = mine.get("error") or "not tried yet"
    detail = f"the running service has not resolved it yet ({why}); it keeps trying"
    return {**command, "serving": False, "verdict": "unresolved", "detail": detail}


async def store_facts(cfg: ServiceConfig) -> StoreFacts:
    """The store's records (`facts_and_service`)."""
    return (await facts_and_service(cfg))[0]


async def facts_and_service(cfg: ServiceConfig) -> tuple[StoreFacts, Mapping[str, Any] | None]:
    """The store's records, read from the store, or from the running service while it holds
    the embedded store (its loopback listener, with its token, as `muninn search` does); and
    then what the service says of itself (its `service` part), else None."""
    try:
        store = await open_async(cfg.index, cfg.base_dir)
    except StoreUnavailable as held:
        if HELD not in str(held):
            raise
        from bot.service.http_api import post_status, service_url

        token = service_token(cfg, held, "status")
        try:
            doc = await post_status(service_url(cfg.metrics), token)
        except StoreUnavailable as e:
            raise StoreUnavailable(f"{held}; {e}") from None
        return StoreFacts.from_json(doc), doc.get("service")
    try:
        return await store.run(read_facts), None
    finally:
        await store.close()


async def _command_room(
    cfg: ServiceConfig, reader: MatrixReader, me: str, direct: set[RoomID]
) -> dict[str, Any] | None:
    """Whether `bot.command_room` would be served (`bot.chat.command_room`), and why not."""
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
    readable = wiring.room_scope(cfg).readable(state, direct)
    verdict = CommandRoomPolicy.of(cfg.bot.command_room_askers, me).serves(state, readable)
    return {
        **doc,
        "room_id": room_id,
        "serving": verdict.eligible,
        "verdict": "eligible" if verdict.eligible else str(verdict.reason),
        "detail": verdict.detail,
    }
