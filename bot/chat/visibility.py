"""Who reads a reply, and so what it may quote (rule 14): the one owner of the visibility cut.

A reply in a room is read by the room, not by the asker alone, so what it may quote is what
*every* reader of the reply could read themselves. Per the spec's history visibility, judged
by the visibility in force at each quoted event (the `m.room.history_visibility` state at that
point of the timeline, not today's):

| in force at the event | the reply may quote it when                                        |
|-----------------------|--------------------------------------------------------------------|
| `world_readable`      | always                                                             |
| `shared` (the default)| the reply is not `world_readable` itself (a non-member reads that) |
| `joined` / `invited`  | the reply is `joined`/`invited` itself (only the current members    |
|                       | will ever read it) and the event is no older than the LATEST start |
|                       | of a current member's continuous membership (join; or join or      |
|                       | invite under `invited`)                                            |

The reply's own visibility is today's: under `shared`, everyone who ever joins reads it, and
under `world_readable` anyone, so an event from a `joined` period is never quoted there. Under
`joined` the reply's readers are the members joined now (an invitee who joins later does not see
it); under `invited`, the joined and the invited. The cut is the latest start among them, not
the earliest: the newest member must not read what was said before they came. The bot itself
is the reply's author, not its audience. (An invitee under `invited` reads `shared` history it
could read by joining; that is quoted.)

Timestamps place an event against the visibility changes; an event in the same millisecond as a
change must pass under both. Where a history cannot be read to its end, the rule errs towards
showing less: an unreadable earlier visibility counts as `joined`, an unreadable earlier member
event ends that member's membership at the last one read — except that the homeserver hides
from the bot only what came before the bot's own membership, so such a member's start is taken
no later than the bot's own (`_start`).

Member events never change, so every one fetched or seen in the state is remembered
(`EventMemo`, by room and id, bounded): a profile change replaces a state event the previous
read saw, so member churn costs no new fetch. One read makes at most `MAX_FETCHES` new
fetches; a walk cut short by that bound takes the member's start at the oldest event it read
(later than the true start: less is quoted, never more).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field, replace
from functools import cached_property

from mautrix.types import EventType

from bot.chat.ports import RoomStates
from ingest.errors import failure_retrieved
from ingest.matrix import ClientEvent, content_of
from ingest.matrix.membership import Chain, membership, walk_back

__all__ = [
    "ANYONE",
    "NOTHING",
    "Audience",
    "Audiences",
    "EventMemo",
    "Period",
    "audience_basis",
    "audience_of",
    "audience_unchanged",
    "periods_of",
    "room_audience",
]

log = logging.getLogger("muninn.chat")

NOTHING = 2**62  # a start later than any event: nothing restricted may be quoted
_MAX_HOPS = 20  # history-visibility changes followed back
MAX_FETCHES = 64  # new `GET /event` one audience read may make (member churn, issue 21)
_RESTRICTED = ("joined", "invited")
_COUNTED = {"joined": frozenset({"join"}), "invited": frozenset({"join", "invite"})}


@dataclass(frozen=True)
class Period:
    """A history visibility in force from `start` (ms) until the next period's start."""

    start: int
    visibility: str


@dataclass(frozen=True)
class Audience:
    """A room's readers of a reply sent now, reduced to what `sees` needs (pure)."""

    now: str  # the visibility a reply sent now is under
    periods: tuple[Period, ...]  # oldest first; the first starts at 0
    # The latest start of a current reader's continuous membership counting joins only, and
    # counting joins and invites; None: no reader besides the bot.
    joined_from: int | None
    invited_from: int | None
    # The member and visibility state events it was read from (empty: not read from a room);
    # two audiences that judge alike are equal whatever state they came from.
    basis: frozenset[str] = field(default=frozenset(), compare=False)

    def _allows(self, visibility: str, ts: int) -> bool:
        if visibility == "world_readable":
            return True
        if visibility not in _RESTRICTED:  # shared, or a value the spec may add: as shared
            return self.now != "world_readable"
        if self.now not in _RESTRICTED:
            return False
        start = self.joined_from if visibility == "joined" else self.invited_from
        return start is None or ts >= start

    @cached_property
    def _spans(self) -> tuple[tuple[Period, int | None], ...]:
        """Each period with its end (None: still in force); `sees` asks it for every message."""
        ends: list[int | None] = [p.start for p in self.periods[1:]]
        return tuple(zip(self.periods, [*ends, None], strict=True))

    @cached_property
    def _open(self) -> bool:
        """No period restricts by time: every event from the first period's start is seen."""
        return all(
            p.visibility not in _RESTRICTED and self._allows(p.visibility, p.start)
            for p in self.periods
        )

    def sees(self, ts: int) -> bool:
        """Whether every reader of the reply may see an event sent at `ts`."""
        if self._open and self.periods and ts >= self.periods[0].start:
            return True  # asked of every message a command folds
        in_force = [
            period.visibility
            for period, end in self._spans
            if period.start <= ts and (end is None or ts <= end)
        ]
        return bool(in_force) and all(self._allows(v, ts) for v in in_force)

    def seen(self, stamps: Iterable[int]) -> frozenset[int]:
        """Those of `stamps` every reader may see (`sees`): the read path asks once a room for
        every stamp it judges there (`ingest.search.logs.request.Visibility`)."""
        return frozenset(ts for ts in stamps if self.sees(ts))

    @property
    def after(self) -> int | None:
        """A lower bound of what `sees` may pass (for the index's own filter); None: none."""
        firsts = []
        for period, end in self._spans:
            first = period.start
            if period.visibility in _RESTRICTED and self.now in _RESTRICTED:
                start = self.joined_from if period.visibility == "joined" else self.invited_from
                first = max(first, start or 0)
            elif not self._allows(period.visibility, first):
                continue
            if end is None or first <= end:
                firsts.append(first)
        bound = min(firsts, default=NOTHING)
        return bound if bound > 0 else None


ANYONE = Audience("world_readable", (Period(0, "world_readable"),), None, None)  # no cut


def _visibility(event: ClientEvent | None) -> str:
    value = content_of(event).get("history_visibility") if event else None
    return value if isinstance(value, str) else "shared"  # the spec's default


def _ts(event: ClientEvent, default: int = NOTHING) -> int:
    ts = event.get("origin_server_ts")
    return ts if isinstance(ts, int) else default


def periods_of(changes: Sequence[ClientEvent], complete: bool) -> tuple[Period, ...]:
    """Periods from the room's history-visibility events, newest first as walked back;
    before the oldest: the spec's default `shared` if the walk reached the first, else `joined`."""
    ordered = list(reversed(changes))
    before = "shared" if complete or not ordered else "joined"
    periods = [Period(0, before)]
    periods.extend(Period(_ts(e, 0), _visibility(e)) for e in ordered)
    return tuple(periods)


def _start(chain: Chain | None, own: int | None) -> int:
    """A member's continuous membership start from its walked chain (NOTHING: not counted)."""
    if chain is None or chain.oldest_ts is None:
        return NOTHING
    if chain.complete or own is None:
        return chain.oldest_ts
    return min(chain.oldest_ts, own)


def audience_of(
    now: str, periods: tuple[Period, ...], starts: Sequence[tuple[int, int]]
) -> Audience:
    """The audience from the visibility now, its periods, and each current reader's
    (joined-from, invited-from) starts."""
    if now not in _RESTRICTED or not starts:
        return Audience(now, periods, None, None)
    return Audience(now, periods, max(s[0] for s in starts), max(s[1] for s in starts))


class EventMemo:
    """State events by (room, event id), as fetched (None: not visible to the bot, which stays
    so: it hides only what came before the bot's own membership) or seen in a room's state;
    events never change, so an entry never goes stale. Bounded: cleared whole when full (a
    miss only costs a fetch)."""

    MAX_EVENTS = 8192

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], ClientEvent | None] = {}

    def remember(self, room_id: str, event_id: str, event: ClientEvent | None) -> None:
        if len(self._events) >= self.MAX_EVENTS:
            self._events.clear()
        self._events[(room_id, event_id)] = event

    def known(self, room_id: str, event_id: str) -> tuple[bool, ClientEvent | None]:
        key = (room_id, event_id)
        return key in self._events, self._events.get(key)


class _Fetches:
    """One audience read's `GET /event`s: through the memo, at most `MAX_FETCHES` new ones."""

    def __init__(self, client: RoomStates, room_id: str, memo: EventMemo) -> None:
        self._client, self._room, self._memo = client, room_id, memo
        self.made = 0
        self.exhausted = False

    async def get(self, event_id: str) -> ClientEvent | None:
        found, event = self._memo.known(self._room, event_id)
        if found:
            return event
        if self.made >= MAX_FETCHES:
            self.exhausted = True  # the walk ends short; its start errs late (less quoted)
            return None
        self.made += 1
        event = await self._client.get_event(self._room, event_id)
        self._memo.remember(self._room, event_id, event)
        return event


async def room_audience(
    client: RoomStates, room_id: str, own_users: Set[str], memo: EventMemo | None = None
) -> Audience:
    """The readers of a reply in `room_id` now, read from the room's state and the history
    behind it (member and visibility events, fetched back through `replaces_state`)."""
    state = await client.state_events(room_id)
    basis = audience_basis(state)
    memo = memo if memo is not None else EventMemo()
    for e in state:
        if isinstance(e.get("event_id"), str):
            memo.remember(room_id, e["event_id"], e)
    fetches = _Fetches(client, room_id, memo)
    get = fetches.get

    current = next(
        (e for e in state if e.get("type") == EventType.ROOM_HISTORY_VISIBILITY.t), None
    )
    changes: list[ClientEvent] = []
    complete = True
    event = current
    while event is not None:
        changes.append(event)
        unsigned = event.get("unsigned")
        prev_id = unsigned.get("replaces_state") if isinstance(unsigned, dict) else None
        if not isinstance(prev_id, str):
            break
        if len(changes) > _MAX_HOPS:
            complete = False
            break
        event = await get(prev_id)
        complete = event is not None
    now = _visibility(current)
    periods = periods_of(changes, complete)
    if now not in _RESTRICTED:
        return replace(audience_of(now, periods, ()), basis=basis)
    members = [
        e
        for e in state
        if e.get("type") == EventType.ROOM_MEMBER.t and membership(e) in _COUNTED[now]
    ]
    kinds = {p.visibility for p in periods}
    ours = next((e for e in members if e.get("state_key") in own_users), None)
    own_starts: dict[str, int | None] = {}

    async def start(event: ClientEvent, kind: str) -> int:
        if kind not in kinds:
            return 0  # no period of that kind: the start is never asked
        if membership(event) not in _COUNTED[kind]:
            return NOTHING  # an invitee saw nothing of a `joined` period
        chain = await walk_back(event, get, counted=_COUNTED[kind])
        if chain.complete or event is ours or fetches.exhausted:
            return _start(chain, None)
        if kind not in own_starts:  # the bot's own start, read only when a walk fell short
            own_starts[kind] = await start(ours, kind) if ours is not None else None
        return _start(chain, own_starts[kind])

    readers = [e for e in members if e.get("state_key") not in own_users]
    # A start is no later than the member's current event: newest first, and a member whose
    # current event is older than the latest starts found so far cannot raise them.
    readers.sort(key=_ts, reverse=True)  # no timestamp: first, and never skipped
    asked = [i for i, kind in enumerate(("joined", "invited")) if kind in kinds]
    found: list[tuple[int, int]] = []
    for event in readers:
        if found and membership(event) == "join":
            latest = min(max(s[i] for s in found) for i in asked)
            if _ts(event) <= latest:
                continue
        found.append((await start(event, "joined"), await start(event, "invited")))
    return replace(audience_of(now, periods, found), basis=basis)


_AUDIENCE_STATE = (EventType.ROOM_MEMBER.t, EventType.ROOM_HISTORY_VISIBILITY.t)


def audience_basis(state: Sequence[ClientEvent]) -> frozenset[str]:
    """The ids of the state events an audience is read from: who is a member, and the room's
    history visibility. Any change to either is a new event id."""
    return frozenset(str(e.get("event_id")) for e in state if e.get("type") in _AUDIENCE_STATE)


async def audience_unchanged(client: RoomStates, room_id: str, cut: Audience) -> bool:
    """Whether the room's member and visibility state is still what `cut` was read from (one
    `/state`): asked just before a reply quoting under `cut` is sent, since a member may have
    joined while it was built (issue 21 item 3)."""
    return audience_basis(await client.state_events(room_id)) == cut.basis


class Audiences:
    """Each room's audience, kept between commands until the room's state may have changed.

    `room_audience` costs the homeserver a `/state` (and more under `joined`) a command; a
    burst in one room asks it the same answer hundreds of times. Privacy first: the owner
    drops a room's entry on any sign of a state change (`drop`) — the dispatcher on a state
    event in the room, and the room's log read on a state event, a redaction or a gap in what
    it read (client mode's limited `/sync` can skip state the dispatcher then never sees; the
    log read sees every event). Commands asking at once share one read; a drop during a read
    keeps its answer from the next command, which reads again.
    """

    MAX_ROOMS = 256

    def __init__(self) -> None:
        self._rooms: dict[str, asyncio.Future[Audience]] = {}
        self.memo = EventMemo()  # outlives a dropped audience: member events never change

    async def get(self, room_id: str, read: Callable[[], Awaitable[Audience]]) -> Audience:
        known = self._rooms.pop(room_id, None)
        if known is None or (known.done() and (known.cancelled() or known.exception())):
            known = asyncio.ensure_future(read())
            known.add_done_callback(failure_retrieved)
        self._rooms[room_id] = known  # the most recently used last
        while len(self._rooms) > self.MAX_ROOMS:
            del self._rooms[next(iter(self._rooms))]
        return await asyncio.shield(known)  # a command cut off leaves the read to the others

    def drop(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)
