"""The private Synapse seen from outside (`bot.demo.synapse`): registration, login, the
appservice and its ping, setup shortcuts (DMs, bridged rooms, fresh rooms), and the service's
config on it (`service_config`: what the tests and the benchmarks run `muninn run` with).

Every user it hands out is a `bot.demo.client.MatrixUser` (or a subclass: the tests add calls).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from pathlib import Path as FilePath
from typing import Any, Generic, TypeVar

import aiohttp

from bot.config import ServiceConfig, parse_config
from bot.demo.client import HarnessError, MatrixUser, unique_localpart
from bot.demo.synapse import SynapseServer
from bot.demo.synapse_config import APPSERVICE_ID, JSON, SEED_PREFIX
from ingest.matrix import Path, endpoint

__all__ = [
    "BACKLOG_TIMEOUT",
    "PING_ATTEMPTS",
    "BaseHomeserver",
    "Homeserver",
    "registration_mac",
    "service_config",
    "service_doc",
]

PING_ATTEMPTS = 5  # pings of a listener that refuses connections
PING_BACKOFF = 0.2  # seconds between pings
PING_FAILED = "M_CONNECTION_FAILED"  # Synapse's errcode for an unreachable or failed ping
BACKLOG_TIMEOUT = 120.0  # seconds for Synapse to push what it stored while nothing listened


def _errcode(body: Any) -> str | None:
    return str(body.get("errcode")) if isinstance(body, Mapping) else None


UserT = TypeVar("UserT", bound=MatrixUser)


class BaseHomeserver(Generic[UserT]):
    """The Synapse seen from outside: registration, the appservice, and setup shortcuts.

    Every user it hands out is a `user_class` (a subclass may add client calls).
    """

    user_class: type[UserT]

    def __init__(self, server: SynapseServer, session: aiohttp.ClientSession) -> None:
        self.server = server
        self.session = session

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def server_name(self) -> str:
        return self.server.server_name

    def mxid(self, localpart: str) -> str:
        return f"@{localpart}:{self.server_name}"

    def _user(
        self,
        user_id: str,
        token: str,
        *,
        masquerade: bool = False,
        password: str | None = None,
    ) -> UserT:
        return self.user_class(
            self.session, self.base_url, user_id, token, masquerade=masquerade, password=password
        )

    async def _post(self, path: str, body: JSON, token: str | None = None) -> JSON:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.session.post(self.base_url + path, json=body, headers=headers) as resp:
            payload = await resp.json()
            if resp.status != 200:
                raise HarnessError("POST", path, resp.status, payload)
            return dict(payload)

    async def register(
        self,
        localpart: str | None = None,
        *,
        password: str | None = None,
        admin: bool = False,
        displayname: str | None = None,
    ) -> UserT:
        """Register a user with the shared secret (`/_synapse/admin/v1/register`)."""
        localpart = localpart or unique_localpart()
        password = password or secrets.token_hex(8)
        path = "/_synapse/admin/v1/register"
        async with self.session.get(self.base_url + path) as resp:
            nonce = str((await resp.json())["nonce"])
        mac = registration_mac(self.server.shared_secret, nonce, localpart, password, admin)
        body: JSON = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac,
        }
        if displayname is not None:
            body["displayname"] = displayname
        resp_body = await self._post(path, body)
        user_id, token = str(resp_body["user_id"]), str(resp_body["access_token"])
        return self._user(user_id, token, password=password)

    async def login(self, localpart: str, password: str) -> UserT:
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": localpart},
            "password": password,
        }
        resp = await self._post(endpoint(Path.v3.login), body)
        return self._user(str(resp["user_id"]), str(resp["access_token"]), password=password)

    def bot(self) -> UserT:
        """The appservice's own user (`@muninn:<server>`), acting with the as_token."""
        return self._user(self.server.bot_user_id, self.server.as_token, masquerade=True)

    def as_user(self, user_id: str) -> UserT:
        """The appservice acting as `user_id`, a user of one of its namespaces (may backdate)."""
        return self._user(user_id, self.server.as_token, masquerade=True)

    async def seed_user(self, localpart: str | None = None) -> UserT:
        """Register an `@seed-*` appservice user and act as it (it may backdate with `ts`)."""
        localpart = localpart or unique_localpart(SEED_PREFIX)
        if not localpart.startswith(SEED_PREFIX):
            raise ValueError(f"seed users live in the {SEED_PREFIX}* namespace: {localpart}")
        body = {"type": "m.login.application_service", "username": localpart}
        resp = await self._post(
            "/_matrix/client/v3/register?inhibit_login=true", body, self.server.as_token
        )
        return self.as_user(str(resp["user_id"]))

    async def ping_appservice(self, *, patience: float = BACKLOG_TIMEOUT) -> JSON:
        """Make Synapse ping the appservice URL now (MSC2659 `/appservice/{id}/ping`), and
        return once it has pushed what it stored meanwhile.

        While nothing listens on `appservice_port`, Synapse backs off pushing transactions (up
        to ~8.5 min) and stores every batch for the appservice as a transaction of its own. A
        successful ping sends that backlog, oldest first and one at a time, and an event sent
        meanwhile is queued behind it. Until the last is sent, a ping is refused with 502
        M_CONNECTION_FAILED (Synapse 1.163 cancels its spent retry timer again: "AlreadyCalled"
        or "AlreadyCancelled", the CI flake of stop 9); then it answers 200. So pinging until a
        200 means a caller's next pushed event (a command) is not stuck behind the backlog.
        Whoever starts a listener calls this first. A listener that refuses connections gets
        `PING_ATTEMPTS` pings, the backlog `patience` seconds; any other answer than a 502
        M_CONNECTION_FAILED is raised at once.
        """
        path = endpoint(Path.v1.appservice[APPSERVICE_ID].ping)
        deadline = time.monotonic() + patience
        refused = 0
        while True:
            try:
                return await self._post(path, {}, self.server.as_token)
            except HarnessError as e:
                if not (e.status == 502 and _errcode(e.body) == PING_FAILED):
                    raise
                refused += "refused" in str(e.body).lower()  # nothing listens (yet)
                if refused >= PING_ATTEMPTS or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(PING_BACKOFF)

    async def join_bot(self, inviter: MatrixUser, room_id: str) -> UserT:
        """Invite the appservice bot into a room and join it there with the as_token.

        A room the bot is already in is left as it is.
        """
        bot = self.bot()
        if room_id in await bot.joined_rooms():
            return bot
        await inviter.invite(room_id, bot.user_id)
        await bot.join(room_id)
        return bot

    async def make_dm(self, a: MatrixUser, b: MatrixUser) -> str:
        """A DM as clients make one: invite with is_direct, m.direct on both sides, join."""
        room_id = await a.create_room(
            preset="trusted_private_chat", invite=[b.user_id], is_direct=True
        )
        await a.add_direct(b.user_id, room_id)
        await b.join(room_id)
        await b.add_direct(a.user_id, room_id)
        return room_id

    async def make_bridged_room(
        self,
        owner: MatrixUser,
        *,
        protocol: str = "discord",
        channel_id: str | None = None,
        name: str | None = None,
    ) -> str:
        """A room carrying both MSC2346 bridge events with the same state_key."""
        state_key = f"org.example.{protocol}://{channel_id or secrets.token_hex(4)}"
        room_id = await owner.create_room(name=name or f"bridged {protocol}")
        await owner.set_bridge_state(room_id, state_key, protocol=protocol)
        return room_id

    async def fresh_room(self, owner: MatrixUser, **kwargs: Any) -> str:
        """A new room (the server may be shared; rooms are not)."""
        kwargs.setdefault("name", unique_localpart("room"))
        return await owner.create_room(**kwargs)


class Homeserver(BaseHomeserver[MatrixUser]):
    """`BaseHomeserver` handing out plain `MatrixUser`s."""

    user_class = MatrixUser


def registration_mac(secret: str, nonce: str, user: str, password: str, admin: bool) -> str:
    """HMAC-SHA1 over `nonce\\0user\\0password\\0admin|notadmin`, as the admin API expects."""
    mac = hmac.new(secret.encode(), digestmod=hashlib.sha1)
    for part in (nonce, user, password):
        mac.update(part.encode())
        mac.update(b"\x00")
    mac.update(b"admin" if admin else b"notadmin")
    return mac.hexdigest()


def service_config(
    synapse: SynapseServer,
    tmp: FilePath,
    *,
    client: MatrixUser | None = None,
    **sections: dict[str, Any],
) -> ServiceConfig:
    """Appservice mode on the private Synapse's registration, or client mode as `client`."""
    return parse_config(service_doc(synapse, tmp, client=client, **sections), tmp)


def service_doc(
    synapse: SynapseServer,
    tmp: FilePath,
    *,
    client: MatrixUser | None = None,
    **sections: dict[str, Any],
) -> dict[str, Any]:
    """`service_config`'s document, for a caller that writes the config file itself."""
    doc: dict[str, Any] = {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "index": {"store": {"path": str(tmp / "qdrant")}, "collection": "muninn_bot"},
        "refresh": {"debounce_seconds": 0.3, "interval_seconds": 3600},
    }
    if client is None:
        doc["appservice"] = {
            "registration": str(synapse.registration_path),
            "host": "127.0.0.1",
            "port": synapse.appservice_port,
        }
    else:
        doc["reader"] = {"user_id": client.user_id, "access_token": client.access_token}
    for name, values in sections.items():
        doc[name] = {**doc.get(name, {}), **values}
    return doc
