"""Read Matrix: the ingest adapter over the client-server API (read-only, plus join/leave).

One small request layer (`MatrixReader._request`) quotes path segments, authenticates, retries
and maps failures onto `ingest.errors`; every public method above it is a few lines that turn JSON
into the records of `ingest.types`. Events stay raw JSON dicts: normalising them is the job of
`ingest.events`.

Two modes behind one interface:
- client mode: a plain user's access token (`reader.access_token`);
- appservice mode: the registration's `as_token`, acting as the bot user
  `@<sender_localpart>:<server>` (every request carries `?user_id=` so the identity is explicit).
  That user cannot `/sync` (Synapse answers 500), which is why reading is `/messages` only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import yaml
from yarl import URL

from ingest.config import Config, is_placeholder, registration_path
from ingest.errors import (
    ConfigError,
    MatrixAuthError,
    MatrixError,
    MatrixForbidden,
    MatrixNotFound,
    MatrixUnavailable,
)
from ingest.membership import direct_in, membership, prev_content, prev_membership, walk_back
from ingest.types import RoomAlias, RoomID, RoomState, UserID

__all__ = [
    "USER_LOCALPART",
    "MatrixReader",
    "Page",
    "ReaderMode",
    "Registration",
    "Retry",
    "load_registration",
    "read_registration",
    "room_state_from",
]

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]
Query = Mapping[str, str | int]

_CS = "/_matrix/client/v3"
_DIRECT_WALKS = 65_536  # remembered membership walks (event ids), cleared when full
_DIRECT_WALKS_PER_READ = 32  # members whose history one room-state read follows back
_BRIDGE = ("m.bridge", "uk.half-shot.bridge")  # MSC2346 and its pre-spec name
_TOKEN_ERRCODES = {"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"}


class ReaderMode(enum.StrEnum):
    CLIENT = "client"
    APPSERVICE = "appservice"


@dataclass(frozen=True)
class Retry:
    """How hard one request tries before it raises `MatrixUnavailable`."""

    attempts: int = 5  # tries per request, the first included; 429, 5xx and connection errors
    backoff: float = 0.5  # seconds before the second try, doubling each time
    max_backoff: float = 30.0  # seconds, the cap of that doubling
    max_retry_after: float = 120.0  # seconds; a longer 429 retry_after_ms is waited only this long

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"Retry.attempts must be at least 1, got {self.attempts}")
        if min(self.backoff, self.max_backoff, self.max_retry_after) < 0:
            raise ValueError("Retry delays must not be negative")


@dataclass(frozen=True)
class Page:
    """One `/messages` response: events oldest first, and the tokens around them.

    `end` is the token to store as a cursor: a later `walk(room, page.end)` starts right after
    the last event of this page.
    """

    events: list[JSONDict]
    start: str | None
    end: str | None


@dataclass(frozen=True)
class _Retryable:
    """A failed attempt worth another try: why, and how long the server asked us to wait."""

    reason: str
    wait: float | None = None


def _q(segment: str) -> str:
    # Room ids, event ids and aliases carry '!', '$', '#' and ':'; none may pass unquoted.
    return quote(segment, safe="")


class MatrixReader:
    """The reader's view of the homeserver.

    Args:
        homeserver: client-server API base URL, e.g. `http://127.0.0.1:8008`.
        token: the access token (client mode) or the as_token (appservice mode).
        user_id: whom the token acts as (in appservice mode, the bot user).
        mode: `client` or `appservice`.
        token_name: how errors name the token, e.g. `as_token in registration.yaml`.
        retry: the retry bound for 429, 5xx and connection errors.
        timeout: seconds for one HTTP attempt, connect to last byte.
    """

    def __init__(
        self,
        homeserver: str,
        token: str,
        user_id: str,
        mode: ReaderMode | str = ReaderMode.CLIENT,
        *,
        token_name: str | None = None,
        retry: Retry | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.homeserver = homeserver.rstrip("/")
        self.user_id = UserID(user_id)
        self.mode = ReaderMode(mode)
        self.retry = retry or Retry()
        self.timeout = timeout
        self.connect_timeout: float | None = None  # seconds to connect; None: within timeout
        self._token = token
        default_name = (
            "reader.access_token"
            if self.mode is ReaderMode.CLIENT
            else "as_token in the appservice registration"
        )
        self.token_name = token_name or default_name
        self._session: aiohttp.ClientSession | None = None
        self._direct_walks: dict[str, bool] = {}  # member event id → is_direct in its history

    @classmethod
    def from_config(cls, cfg: Config, *, retry: Retry | None = None) -> MatrixReader:
        """Client mode from `reader`, or appservice mode from the registration file."""
        url = cfg.homeserver.url
        if cfg.reader is not None:
            reader = cfg.reader
            return cls(url, reader.access_token, reader.user_id, ReaderMode.CLIENT, retry=retry)
        if cfg.appservice is None:  # Config's own validator already forbids this
            raise ConfigError(["give reader (client mode) or appservice (appservice mode)"])
        path = registration_path(cfg)
        registration = load_registration(path)
        user_id = f"@{registration.sender_localpart}:{cfg.homeserver.server_name}"
        return cls(
            url,
            registration.as_token,
            user_id,
            ReaderMode.APPSERVICE,
            token_name=f"as_token in {path}",
            retry=retry,
        )

    async def __aenter__(self) -> MatrixReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------ the request layer

    async def _request(
        self, method: str, path: str, *, query: Query | None = None, body: Any = None
    ) -> Any:
        """One API call with retries; returns the decoded JSON body of a 200.

        `path` is already quoted (build it with `_q`). 429 waits `retry_after_ms`; 5xx and
        connection errors back off exponentially; both count against `retry.attempts`.
        """
        params = {k: str(v) for k, v in (query or {}).items()}
        if self.mode is ReaderMode.APPSERVICE:
            params["user_id"] = self.user_id
        last = "no attempt made"
        for attempt in range(1, self.retry.attempts + 1):
            outcome = await self._attempt(method, path, params, body)
            if not isinstance(outcome, _Retryable):
                return outcome
            last = outcome.reason
            if attempt == self.retry.attempts:
                break
            delay = outcome.wait if outcome.wait is not None else self._backoff(attempt)
            log.warning("%s %s: %s; retry %d in %.2fs", method, path, last, attempt, delay)
            await asyncio.sleep(delay)
        raise MatrixUnavailable(
            f"{method} {path} failed {self.retry.attempts} time(s) on {self.homeserver}: {last}"
        )

    async def _attempt(
        self, method: str, path: str, params: dict[str, str], body: Any
    ) -> Any | _Retryable:
        """One HTTP exchange: the JSON of a 200, a `_Retryable`, or a raised `MatrixError`."""
        url = URL(self.homeserver + path, encoded=True)
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with self._client().request(
                method, url, params=params, json=body, headers=headers
            ) as resp:
                raw = await resp.read()
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as e:
            return _Retryable(f"connection error: {type(e).__name__}: {e}")
        payload = _decode(raw)
        if status == 200:
            return payload
        if status == 429:
            return _Retryable("429 rate limited", self._retry_after(payload, retry_after))
        if status >= 500:
            return _Retryable(f"{status} {_describe(payload)}")
        raise self._error(method, path, status, payload)

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: a ClientSession belongs to the running event loop.
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    def _backoff(self, attempt: int) -> float:
        return float(min(self.retry.backoff * 2 ** (attempt - 1), self.retry.max_backoff))

    def _retry_after(self, payload: Any, header: str | None) -> float | None:
        """Seconds the server asked for: body `retry_after_ms`, else a `Retry-After` header."""
        wait: float | None = None
        ms = payload.get("retry_after_ms") if isinstance(payload, dict) else None
        if isinstance(ms, int | float) and ms >= 0:
            wait = ms / 1000
        elif header is not None and header.strip().isdigit():
            wait = float(header.strip())
        return None if wait is None else min(wait, self.retry.max_retry_after)

    def _error(self, method: str, path: str, status: int, payload: Any) -> MatrixError:
        errcode = payload.get("errcode") if isinstance(payload, dict) else None
        where = f"{method} {path} -> {status} {_describe(payload)}"
        if status == 401 or (status == 403 and errcode in _TOKEN_ERRCODES):
            return MatrixAuthError(
                f"the homeserver {self.homeserver} refused {self.token_name} "
                f"(acting as {self.user_id}): {where}",
                status=status,
                errcode=errcode,
            )
        kind = {403: MatrixForbidden, 404: MatrixNotFound}.get(status, MatrixError)
        return kind(where, status=status, errcode=errcode)

    async def _get_object(self, path: str, query: Query | None = None) -> JSONDict:
        payload = await self._request("GET", path, query=query)
        if not isinstance(payload, dict):
            raise MatrixError(f"GET {path}: expected a JSON object, got {type(payload).__name__}")
        return payload

    # ------------------------------------------------------------ who and where

    async def whoami(self) -> UserID:
        resp = await self._get_object(f"{_CS}/account/whoami")
        return UserID(str(resp["user_id"]))

    async def joined_rooms(self) -> list[RoomID]:
        resp = await self._get_object(f"{_CS}/joined_rooms")
        return [RoomID(str(r)) for r in resp.get("joined_rooms", [])]

    async def direct_rooms(self) -> set[RoomID]:
        """The rooms in the reader's own `m.direct` account data; empty if it has none."""
        path = f"{_CS}/user/{_q(self.user_id)}/account_data/m.direct"
        try:
            content = await self._get_object(path)
        except MatrixNotFound:
            return set()
        return {
            RoomID(str(r))
            for rooms in content.values()
            if isinstance(rooms, list)
            for r in rooms
            if isinstance(r, str)
        }

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        """The room's current state (or, for a room the reader left, the state at its leave)."""
        events = await self._request("GET", f"{_CS}/rooms/{_q(room_id)}/state")
        if not isinstance(events, list):
            raise MatrixError(f"state of {room_id}: expected a JSON list")
        state = room_state_from(RoomID(room_id), events, self.user_id)
        if not state.direct_flag and await self._direct_in_history(room_id, events):
            state = dataclasses.replace(state, direct_flag=True)
        return state

    async def _direct_in_history(self, room_id: RoomID | str, events: Sequence[Any]) -> bool:
        """is_direct further back than the state's one hop: a member whose event replaced a
        join (a profile change) may have been invited with it before (rule 3).

        Member events never change, so a walk is remembered by the state event's id and costs
        nothing on the next read of the room. One read walks at
        most `_DIRECT_WALKS_PER_READ` members, the reader's own first (its invite is where a
        DM with the reader carries is_direct); a large room's rest is walked on later reads.
        """

        async def get(event_id: str) -> JSONDict | None:
            return await self.get_event(room_id, event_id)

        candidates = [
            e
            for e in events
            if isinstance(e, dict)
            and e.get("type") == "m.room.member"
            and isinstance(e.get("event_id"), str)
            # a previous join may hide the invite; any other previous membership is in view
            and prev_membership(e) == "join"
            # who is in the room makes it a DM; a leaver's history is not read
            and membership(e) in ("join", "invite")
        ]
        candidates.sort(key=lambda e: e.get("state_key") != self.user_id)
        walks = 0
        for e in candidates:
            known = self._direct_walks.get(e["event_id"])
            if known is None:
                if walks >= _DIRECT_WALKS_PER_READ:
                    log.debug("room %s: membership histories left for the next read", room_id)
                    return False
                walks += 1
                chain = await walk_back(e, get, counted=frozenset({"join"}))
                known = direct_in(chain)
                # Remembered even when the walk stopped short: what the homeserver would not
                # show the reader (a 404) it will not show on the next read either.
                if len(self._direct_walks) >= _DIRECT_WALKS:
                    self._direct_walks.clear()
                self._direct_walks[e["event_id"]] = known
            if known:
                return True
        return False

    async def resolve_alias(self, alias: RoomAlias | str) -> RoomID | None:
        try:
            resp = await self._get_object(f"{_CS}/directory/room/{_q(alias)}")
        except MatrixNotFound:
            return None
        return RoomID(str(resp["room_id"]))

    # ------------------------------------------------------------ timelines

    async def walk(
        self, room_id: RoomID | str, from_token: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Page]:
        """Walk a room forward (`/messages?dir=f`), one page at a time, to the timeline's end.

        Without `from_token` the walk starts at the room's creation event. Every yielded page
        has `end` set: store it as the cursor once the page is written, and a later
        `walk(room, end)` yields exactly the events sent since, none of this page again.

        What Synapse 1.163 does at the end of a forward walk (found by experiment; pinned by
        `test_synapse_forward_walk_end_omits_end_and_resumes`):
        - the last page holding events still carries an `end` (`t<depth>-<stream>_...`);
        - the request from that `end` answers `{"chunk": [], "start": <that same token>}` with
          **no** `end`. That stops the walk and is not yielded (it holds nothing to store);
        - asked again from the same token after new events were sent, Synapse returns exactly
          those new events and a new `end`, so the last `end` is a lossless resume cursor;
        - a page can be empty yet carry an `end`: under `joined`/`invited` history visibility
          the events before the reader's join are filtered out. Such pages are yielded, so the
          cursor moves past history the reader may not see instead of re-asking for it.
        An `end` equal to the token asked from also stops the walk, so a server that never
        omits `end` cannot spin it forever.
        """
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        path = f"{_CS}/rooms/{_q(room_id)}/messages"
        token = from_token
        while True:
            query: dict[str, str | int] = {"dir": "f", "limit": page_size}
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            if page.end is None or page.end == token:
                if page.events:  # not seen from Synapse; yield rather than drop events
                    yield page
                return
            yield page
            token = page.end

    async def page_after(
        self, room_id: RoomID | str, token: str, *, types: Sequence[str], limit: int
    ) -> Page:
        """One forward `/messages` page of the events after `token` of the given `types` (a
        `RoomEventFilter`, spec: `filter` on `/messages`). Like `walk`, a page without `end`
        (or with `end == token`) is the timeline's end."""
        query: dict[str, str | int] = {
            "dir": "f",
            "from": token,
            "limit": limit,
            "filter": json.dumps({"types": list(types)}, separators=(",", ":")),
        }
        return _page(await self._get_object(f"{_CS}/rooms/{_q(room_id)}/messages", query))

    async def latest(
        self, room_id: RoomID | str, limit: int, page_size: int = 500
    ) -> list[JSONDict]:
        """Up to `limit` of the room's newest events, newest first (`/messages?dir=b`)."""
        path = f"{_CS}/rooms/{_q(room_id)}/messages"
        events: list[JSONDict] = []
        token: str | None = None
        while len(events) < limit:
            size = min(limit - len(events), page_size)
            query: dict[str, str | int] = {"dir": "b", "limit": size}
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            events.extend(page.events)
            if page.end is None or page.end == token:
                break
            token = page.end
        return events[:limit]

    async def newer_than(
        self, room_id: RoomID | str, known: Set[str], limit: int, page_size: int = 50
    ) -> tuple[list[JSONDict], bool]:
        """The room's events newer than the newest one in `known`, newest first.

        Returns `(events, met)`: `met` is False when `limit` events were read without reaching
        a known one (the caller's copy is then too old to extend and `events` replaces it).
        """
        path = f"{_CS}/rooms/{_q(room_id)}/messages"
        events: list[JSONDict] = []
        token: str | None = None
        while len(events) < limit:
            query: dict[str, str | int] = {
                "dir": "b",
                "limit": min(page_size, limit - len(events)),
            }
            if token is not None:
                query["from"] = token
            page = _page(await self._get_object(path, query))
            for event in page.events:
                if event.get("event_id") in known:
                    return events, True
                events.append(event)
            if page.end is None or page.end == token:
                return events, True  # the room's start: everything newer is here
            token = page.end
        return events[:limit], False

    async def get_event(self, room_id: RoomID | str, event_id: str) -> JSONDict | None:
        """One event as the reader may see it; None if it does not exist or is not visible."""
        try:
            return await self._get_object(f"{_CS}/rooms/{_q(room_id)}/event/{_q(event_id)}")
        except MatrixNotFound:
            return None

    async def relations(
        self, room_id: RoomID | str, event_id: str, rel_type: str, page_size: int = 100
    ) -> list[JSONDict]:
        """Every event relating to `event_id` with `rel_type`, oldest first, all pages."""
        path = f"/_matrix/client/v1/rooms/{_q(room_id)}/relations/{_q(event_id)}/{_q(rel_type)}"
        events: list[JSONDict] = []
        token: str | None = None
        while True:
            query: dict[str, str | int] = {"dir": "f", "limit": page_size}
            if token is not None:
                query["from"] = token
            resp = await self._get_object(path, query)
            events.extend(e for e in resp.get("chunk", []) if isinstance(e, dict))
            token = resp.get("next_batch")
            if not token:
                return events

    # ------------------------------------------------------------ membership (roster only)

    async def join(self, room_id_or_alias: RoomID | RoomAlias | str) -> RoomID:
        resp = await self._request("POST", f"{_CS}/join/{_q(room_id_or_alias)}", body={})
        return RoomID(str(resp["room_id"]))

    async def leave(self, room_id: RoomID | str) -> None:
        await self._request("POST", f"{_CS}/rooms/{_q(room_id)}/leave", body={})


# ---------------------------------------------------------------- pure helpers


def _decode(raw: bytes) -> Any:
    """JSON if it is JSON; a proxy's HTML error page becomes {"error": <its start>}."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return {"error": raw[:200].decode("utf-8", "replace")}


def _describe(payload: Any) -> str:
    if isinstance(payload, dict) and ("errcode" in payload or "error" in payload):
        return f"{payload.get('errcode', '?')}: {payload.get('error', '')}".strip()
    return ""


def _page(resp: JSONDict) -> Page:
    chunk = resp.get("chunk", [])
    events = [e for e in chunk if isinstance(e, dict)] if isinstance(chunk, list) else []
    start, end = resp.get("start"), resp.get("end")
    return Page(
        events=events,
        start=start if isinstance(start, str) else None,
        end=end if isinstance(end, str) else None,
    )


def _content(event: Mapping[str, Any]) -> Mapping[str, Any]:
    content = event.get("content")
    return content if isinstance(content, dict) else {}


def _members(events: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], bool]:
    """membership by user id, and whether any member event says is_direct (now or before)."""
    membership: dict[str, str] = {}
    direct = False
    for e in events:
        if e.get("type") != "m.room.member" or not isinstance(e.get("state_key"), str):
            continue
        membership[e["state_key"]] = str(_content(e).get("membership", ""))
        # is_direct sits only on the invite; after the join it survives in prev_content.
        direct = (
            direct or bool(_content(e).get("is_direct")) or bool(prev_content(e).get("is_direct"))
        )
    return membership, direct


def _past_members(events: Sequence[Mapping[str, Any]]) -> tuple[UserID, ...]:
    """Who was joined and is not now (left, kicked, banned): the member event's previous
    membership says so. An invite or a ban of someone who never joined names no sender."""
    past = {
        e["state_key"]
        for e in events
        if e.get("type") == "m.room.member"
        and isinstance(e.get("state_key"), str)
        and _content(e).get("membership") in ("leave", "ban")
        and prev_content(e).get("membership") == "join"
    }
    return tuple(sorted(UserID(u) for u in past))


def room_state_from(
    room_id: RoomID, events: Sequence[Mapping[str, Any]], reader: UserID
) -> RoomState:
    """Reduce a `/rooms/{id}/state` answer to a `RoomState` (pure; no I/O)."""
    state: dict[tuple[str, str], Mapping[str, Any]] = {}
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("type"), str):
            state[(e["type"], str(e.get("state_key", "")))] = _content(e)

    def content(event_type: str) -> Mapping[str, Any]:
        return state.get((event_type, ""), {})

    membership, direct = _members(events)
    joined = sorted(u for u, m in membership.items() if m == "join")
    alias, alt_aliases = _aliases(content("m.room.canonical_alias"))
    create = content("m.room.create")
    visibility = content("m.room.history_visibility").get("history_visibility")
    return RoomState(
        room_id=room_id,
        joined=membership.get(reader) == "join",
        name=_str_or_none(content("m.room.name").get("name")),
        canonical_alias=alias,
        alt_aliases=alt_aliases,
        join_rule=_str_or_none(content("m.room.join_rules").get("join_rule")),
        history_visibility=_str_or_none(visibility),
        # Encryption cannot be turned off: the state event's presence is what counts.
        encrypted=("m.room.encryption", "") in state,
        # A create event without room_version means version 1 (the spec's default).
        room_version=str(create.get("room_version", "1")) if create else None,
        create_type=_str_or_none(create.get("type")),
        members=tuple(UserID(u) for u in joined),
        invited=tuple(sorted(UserID(u) for u, m in membership.items() if m == "invite")),
        past_members=_past_members(events),
        direct_flag=direct,
        bridge_state_keys=tuple(sorted({k for (t, k), c in state.items() if t in _BRIDGE and c})),
        display_names=tuple(
            (UserID(u), name)
            for u in joined
            if (name := _str_or_none(state[("m.room.member", u)].get("displayname")))
        ),
    )


def _aliases(content: Mapping[str, Any]) -> tuple[RoomAlias | None, tuple[RoomAlias, ...]]:
    alt = content.get("alt_aliases")
    alts = (
        [a for a in alt if isinstance(a, str) and a.startswith("#")]
        if isinstance(alt, list)
        else []
    )
    return _alias_or_none(content.get("alias")), tuple(RoomAlias(a) for a in alts)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _alias_or_none(value: Any) -> RoomAlias | None:
    return RoomAlias(value) if isinstance(value, str) and value.startswith("#") else None


# ---------------------------------------------------------------- the appservice registration

USER_LOCALPART = re.compile(r"^[a-z0-9._=\-/+]+$")  # the spec's user id localpart grammar
_HINT = "run `muninn generate-registration`"


@dataclass(frozen=True)
class Registration:
    """What Muninn takes from its appservice registration; Synapse reads the rest."""

    as_token: str  # Muninn → Synapse: acts as the bot user
    hs_token: str  # Synapse → Muninn: authenticates the transactions Synapse pushes
    sender_localpart: str  # the bot user is @<sender_localpart>:<server_name>


def read_registration(path: Path) -> dict[str, Any]:
    """The registration file as a YAML mapping, its fields unchecked.

    The one reader of the file. A `ConfigError` names the file and the cause: no file,
    unreadable, not YAML, or not a mapping.
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([f"appservice.registration: no file at {path}; {_HINT}"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"appservice.registration: cannot read {path}: {e}"]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"not valid YAML ({e}); {_HINT} --force"], str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"the registration must be a YAML mapping; {_HINT} --force"], str(path))
    return raw


def load_registration(path: Path) -> Registration:
    """The registration at `path`, refused if a token is missing, a placeholder or shared.

    A placeholder `hs_token` matters as much as `as_token`: it is the only thing that
    authenticates Synapse's pushes to Muninn. Every problem is listed, each with its fix.
    """
    raw = read_registration(path)
    problems = []
    for key in ("as_token", "hs_token"):
        value = raw.get(key)
        if not isinstance(value, str) or is_placeholder(value):
            shown = f" ({value!r})" if isinstance(value, str) else ""
            problems.append(f"{key}: is missing or a placeholder{shown}; {_HINT} --force")
    as_token, hs_token = raw.get("as_token"), raw.get("hs_token")
    if isinstance(as_token, str) and as_token == hs_token:
        problems.append(f"as_token and hs_token are the same; {_HINT} --force")
    localpart = raw.get("sender_localpart")
    if not isinstance(localpart, str) or not USER_LOCALPART.match(localpart):
        problems.append(f"sender_localpart: is missing or not a user localpart; {_HINT}")
    if problems:
        raise ConfigError(problems, str(path))
    return Registration(str(as_token), str(hs_token), str(localpart))
