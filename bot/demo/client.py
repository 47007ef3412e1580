"""One person's client of the private Synapse (`bot.demo.synapse`): `MatrixUser`.

Used by `muninn demo` and, through `tests/homeserver.py`, by the test suite and the benchmarks;
`bot.demo.homeserver` hands the users out. `MatrixUser` talks to Synapse with plain aiohttp over
the request paths of `ingest.matrix` (not through Muninn's reader and its retries: it stands for
other people's clients, not for Muninn). The facts about Synapse this leans on are listed in
`bot.demo.synapse`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from html import escape as html_escape
from typing import Any, Literal

import aiohttp
from mautrix.types import EventType, MessageType, RelationType

from bot.demo.synapse_config import JSON
from ingest.matrix import BRIDGE_TYPES, Path, endpoint

__all__ = [
    "HarnessError",
    "MatrixUser",
    "Preset",
    "bridge_content",
    "reply_content",
    "unique_localpart",
]


Preset = Literal["public_chat", "private_chat", "trusted_private_chat"]


class HarnessError(RuntimeError):
    """The homeserver refused a request of this client (a setup problem, not a finding)."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        super().__init__(f"{method} {path} -> {status}: {body}")


_names = itertools.count(1)


def unique_localpart(prefix: str = "user") -> str:
    """A localpart no other caller in this process uses."""
    return f"{prefix}{next(_names)}-{secrets.token_hex(3)}"


def _txn() -> str:
    return uuid.uuid4().hex


@dataclass(eq=False)  # a user is one identity: equal only to itself, hashable
class MatrixUser:
    """One user's side of the client-server API.

    With `masquerade=True` the token is the appservice's as_token and every request carries
    `?user_id=<user_id>` (how an appservice acts as its users; such users may backdate with `ts`).
    """

    session: aiohttp.ClientSession
    base_url: str
    user_id: str
    access_token: str
    _: KW_ONLY
    masquerade: bool = False
    password: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.user_id!r})"

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str | int] | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> JSON:
        """One request; raise HarnessError unless 200. `path` is already quoted."""
        params: dict[str, str] = {k: str(v) for k, v in (query or {}).items()}
        if self.masquerade:
            params["user_id"] = self.user_id
        headers = {"Authorization": f"Bearer {self.access_token}"}
        if content_type:
            headers["Content-Type"] = content_type
        url = self.base_url + path
        kwargs: dict[str, Any] = {"params": params, "headers": headers}
        if data is not None:
            kwargs["data"] = data
        elif body is not None:
            kwargs["json"] = body
        async with self.session.request(method, url, **kwargs) as resp:
            text = await resp.text()
            payload: Any = json.loads(text) if text else {}
            if resp.status != 200:
                raise HarnessError(method, path, resp.status, payload)
            return payload if isinstance(payload, dict) else {"value": payload}

    # ------------------------------------------------------------ rooms

    async def create_room(
        self,
        *,
        preset: Preset = "public_chat",
        name: str | None = None,
        alias_localpart: str | None = None,
        topic: str | None = None,
        initial_state: Iterable[JSON] = (),
        invite: Iterable[str] = (),
        is_direct: bool = False,
        room_version: str | None = None,
        creation_content: JSON | None = None,
    ) -> str:
        body: JSON = {"preset": preset, "is_direct": is_direct, "invite": list(invite)}
        body["initial_state"] = list(initial_state)
        if name is not None:
            body["name"] = name
        if alias_localpart is not None:
            body["room_alias_name"] = alias_localpart
        if topic is not None:
            body["topic"] = topic
        if room_version is not None:
            body["room_version"] = room_version
        if creation_content is not None:
            body["creation_content"] = creation_content  # e.g. {"type": "m.space"}
        resp = await self.call("POST", endpoint(Path.v3.createRoom), body)
        return str(resp["room_id"])

    async def join(self, room_id_or_alias: str) -> str:
        resp = await self.call("POST", endpoint(Path.v3.join[room_id_or_alias]), {})
        return str(resp["room_id"])

    async def leave(self, room_id: str) -> None:
        await self.call("POST", endpoint(Path.v3.rooms[room_id].leave), {})

    async def invite(self, room_id: str, user_id: str) -> None:
        path = endpoint(Path.v3.rooms[room_id].invite)
        await self.call("POST", path, {"user_id": user_id})

    async def create_alias(self, alias: str, room_id: str) -> None:
        await self.call("PUT", endpoint(Path.v3.directory.room[alias]), {"room_id": room_id})

    # ------------------------------------------------------------ profile and account data

    async def set_displayname(self, name: str) -> None:
        path = endpoint(Path.v3.profile[self.user_id].displayname)
        await self.call("PUT", path, {"displayname": name})

    async def set_account_data(self, event_type: str, content: JSON) -> None:
        path = endpoint(Path.v3.user[self.user_id].account_data[event_type])
        await self.call("PUT", path, content)

    async def get_account_data(self, event_type: str) -> JSON | None:
        path = endpoint(Path.v3.user[self.user_id].account_data[event_type])
        try:
            return await self.call("GET", path)
        except HarnessError as e:
            if e.status == 404:
                return None
            raise

    async def add_direct(self, other_user_id: str, room_id: str) -> None:
        """Add a room to this user's `m.direct`, keeping what is already there."""
        direct = await self.get_account_data(EventType.DIRECT.t) or {}
        rooms = list(direct.get(other_user_id, []))
        if room_id not in rooms:
            rooms.append(room_id)
        direct[other_user_id] = rooms
        await self.set_account_data(EventType.DIRECT.t, direct)

    # ------------------------------------------------------------ state

    async def send_state(
        self, room_id: str, event_type: str, content: JSON, state_key: str = ""
    ) -> str:
        path = endpoint(Path.v3.rooms[room_id].state[event_type][state_key])
        resp = await self.call("PUT", path, content)
        return str(resp["event_id"])

    async def set_canonical_alias(
        self, room_id: str, alias: str, alt_aliases: Iterable[str] = ()
    ) -> str:
        """Create the directory entries (Synapse checks they point here), then the state event."""
        alts = list(alt_aliases)
        for a in [alias, *alts]:
            with contextlib.suppress(HarnessError):  # already points here
                await self.create_alias(a, room_id)
        content: JSON = {"alias": alias, "alt_aliases": alts}
        return await self.send_state(room_id, EventType.ROOM_CANONICAL_ALIAS.t, content)

    async def set_bridge_state(
        self, room_id: str, state_key: str, *, protocol: str = "discord", bridgebot: str = ""
    ) -> tuple[str, str]:
        """`m.bridge` and `uk.half-shot.bridge` with the same state_key, as real bridges do."""
        content = bridge_content(protocol, bridgebot or self.user_id, state_key)
        first, second = [
            await self.send_state(room_id, t, content, state_key) for t in BRIDGE_TYPES
        ]
        return first, second

    # ------------------------------------------------------------ timeline

    async def send(
        self, room_id: str, event_type: str, content: JSON, *, ts: int | None = None
    ) -> str:
        """Send a message event; `ts` backdates it (honoured for appservice users only)."""
        path = endpoint(Path.v3.rooms[room_id].send[event_type][_txn()])
        query: dict[str, str | int] = {"ts": ts} if ts is not None else {}
        resp = await self.call("PUT", path, content, query=query)
        return str(resp["event_id"])

    async def send_text(
        self, room_id: str, body: str, *, ts: int | None = None, html: str | None = None
    ) -> str:
        content: JSON = {"msgtype": MessageType.TEXT.value, "body": body}
        if html is not None:
            content |= {"format": "org.matrix.custom.html", "formatted_body": html}
        return await self.send(room_id, EventType.ROOM_MESSAGE.t, content, ts=ts)

    async def send_reply(
        self, room_id: str, parent_id: str, body: str, *, ts: int | None = None
    ) -> str:
        """A rich reply with the spec's fallbacks (`> <@user> quoted` and `<mx-reply>`)."""
        parent = await self.get_event(room_id, parent_id)
        content = reply_content(room_id, parent, body)
        return await self.send(room_id, EventType.ROOM_MESSAGE.t, content, ts=ts)

    async def send_edit(
        self,
        room_id: str,
        target_id: str,
        new_body: str,
        *,
        ts: int | None = None,
        msgtype: str = MessageType.TEXT.value,
    ) -> str:
        content = {
            "msgtype": msgtype,
            "body": f"* {new_body}",
            "m.new_content": {"msgtype": msgtype, "body": new_body},
            "m.relates_to": {"rel_type": RelationType.REPLACE.value, "event_id": target_id},
        }
        return await self.send(room_id, EventType.ROOM_MESSAGE.t, content, ts=ts)

    async def redact(self, room_id: str, event_id: str, reason: str | None = None) -> str:
        path = endpoint(Path.v3.rooms[room_id].redact[event_id][_txn()])
        resp = await self.call("PUT", path, {"reason": reason} if reason else {})
        return str(resp["event_id"])

    # ------------------------------------------------------------ reading

    async def get_event(self, room_id: str, event_id: str) -> JSON:
        return await self.call("GET", endpoint(Path.v3.rooms[room_id].event[event_id]))

    async def messages(
        self,
        room_id: str,
        *,
        direction: str = "f",
        from_token: str | None = None,
        limit: int = 100,
    ) -> JSON:
        query: dict[str, str | int] = {"dir": direction, "limit": limit}
        if from_token is not None:
            query["from"] = from_token
        return await self.call("GET", endpoint(Path.v3.rooms[room_id].messages), query=query)

    async def joined_rooms(self) -> list[str]:
        return list((await self.call("GET", endpoint(Path.v3.joined_rooms)))["joined_rooms"])

    async def state(self, room_id: str) -> list[JSON]:
        resp = await self.call("GET", endpoint(Path.v3.rooms[room_id].state))
        return list(resp["value"])


def bridge_content(protocol: str, bridgebot: str, channel_id: str) -> JSON:
    """MSC2346 bridge-event content."""
    return {
        "bridgebot": bridgebot,
        "protocol": {"id": protocol, "displayname": protocol.title()},
        "channel": {"id": channel_id, "displayname": f"#{channel_id}"},
    }


def reply_content(room_id: str, parent: JSON, body: str) -> JSON:
    """The content of a rich reply to `parent`, with both spec fallbacks."""
    sender = str(parent["sender"])
    parent_body = str(parent.get("content", {}).get("body", ""))
    lines = parent_body.splitlines() or [""]
    quoted = "\n".join([f"> <{sender}> {lines[0]}", *(f"> {line}" for line in lines[1:])])
    link = f"https://matrix.to/#/{room_id}/{parent['event_id']}"
    parent_html = parent.get("content", {}).get("formatted_body") or _escape(parent_body)
    html = (
        f'<mx-reply><blockquote><a href="{link}">In reply to</a> '
        f'<a href="https://matrix.to/#/{sender}">{sender}</a><br />{parent_html}'
        f"</blockquote></mx-reply>{_escape(body)}"
    )
    return {
        "msgtype": MessageType.TEXT.value,
        "body": f"{quoted}\n\n{body}",
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.relates_to": {"m.in_reply_to": {"event_id": parent["event_id"]}},
    }


def _escape(text: str) -> str:
    # As a client renders plain text: quotes stay as typed, line breaks become <br />.
    return html_escape(text, quote=False).replace("\n", "<br />")
