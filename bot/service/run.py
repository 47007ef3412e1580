"""`muninn run`: the live stream, the refresh loop and command handling in one process.

Wiring only (the imperative shell): the appservice server (appservice mode) or the `/sync` loop
(client mode) hands event batches to a bounded queue, each event read once on receipt; one
dispatcher (`bot.service.dispatch`) takes them off in order: state, the bot's own invites,
refresh wake-ups, and every command to the `CommandPool`: up to `bot.max_concurrent_commands`
run at once, each within `bot.command_timeout_seconds`.
State, membership and wake-ups are thus handled in arrival order; commands overlap their
homeserver round trips. When every slot is busy the dispatcher waits, the queue fills, and the
appservice answers 503 (Synapse retries) or the `/sync` loop waits: nothing is dropped.
Every task started here is kept, cancelled on stop and awaited; `CancelledError` propagates.
A task that dies of an unexpected error stops the service loudly instead of limping on.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.chat.commands.dates import shown
from bot.chat.commands.incoming import Incoming, Received
from bot.chat.handlers import CommandHandler
from bot.chat.sender import BotClient
from bot.config import ServiceConfig
from bot.service.appservice import AppserviceServer
from bot.service.compose import Parts, build
from bot.service.dispatch import Dispatcher
from bot.service.http_api import HttpApi, PurgeRequest, store_check, token_path
from bot.service.inflight import CommandPool
from bot.service.invites import Invites
from bot.service.limits import freeze_startup_heap, quiet_accept_errors, raise_nofile
from bot.service.metrics import CountingEmbedder, ServiceMetrics
from bot.service.scheduler import RefreshScheduler
from bot.service.sync import SyncLoop
from ingest.config import IndexConfig, registration_path
from ingest.embed import Embedder, make_embedder
from ingest.errors import MatrixError, QueryError, StoreUnavailable
from ingest.index.facts import read_facts
from ingest.index.records import Tombstone
from ingest.index.refresh import Writer
from ingest.matrix import Transport, load_registration, read_registration
from ingest.matrix.rooms import RoomCache
from ingest.search import Searcher
from ingest.store import AsyncStore, Store, open_async
from ingest.types import RoomID

__all__ = ["Service", "run"]

log = logging.getLogger("muninn.service")

QUEUE_BATCHES = 1024
OUTBOX_DRAIN_SECONDS = 5.0  # of the stop: replies the homeserver has not taken yet
STORE_WAIT = 5.0  # seconds `start` waits for an embedded store another process holds
STORE_POLL = 0.005  # seconds between tries: a reader's hold ends within milliseconds of its answer
HELD = "held by another process"  # how the embedded store says so (`ingest.store.edge`)


async def open_store_waiting(cfg: IndexConfig, base_dir: Path, wait: float = STORE_WAIT) -> Store:
    """The store, waited for while another process holds the embedded one (issue 46). A
    `muninn search`, `status`, `pins` or an agent's `muninn mcp` holds it for the span of one
    call; back to back, an agent's searches held it 92 % of the time (~85 ms of each ~93 ms),
    so a restart beside them failed at once. Tried every few ms, it starts in the next gap
    between two calls (or once a CLI command is done); a holder that keeps it longer (a
    `muninn refresh`, another `muninn run`) still fails the start after `wait`, naming it."""
    deadline = time.monotonic() + wait
    waiting = False
    while True:
        try:
            return (await open_async(cfg, base_dir)).sync
        except StoreUnavailable as e:
            if HELD not in str(e) or time.monotonic() >= deadline:
                raise
            if not waiting:
                log.info("%s: waiting up to %.0f s for it", e, wait)
                waiting = True
        await asyncio.sleep(STORE_POLL)


class Service:
    """Build with the config; `start()`, then `stop()` (or `run_until_signal()`)."""

    def __init__(
        self,
        cfg: ServiceConfig,
        *,
        embedder: Embedder | None = None,
        store: Store | None = None,
        queue_batches: int = QUEUE_BATCHES,
        full_at_start: bool = True,
        transport: Transport | None = None,
    ) -> None:
        """`embedder`, `store` and `transport` (what sends the homeserver requests,
        `ingest.matrix.transport`) are made from the config when not given (tests and bench
        pass their own)."""
        self.cfg = cfg
        self.metrics = ServiceMetrics()
        self._own_embedder = embedder is None
        self.embedder = CountingEmbedder(
            embedder or make_embedder(cfg.embedder), self.metrics.embedder_errors
        )
        self._store = store  # opened by `start` when not given; closed by `stop`
        self._full_at_start = full_at_start
        client = BotClient.from_config(cfg, transport=transport)
        assert isinstance(client, BotClient)
        self.client: BotClient = client
        self.queue: asyncio.Queue[Sequence[Received]] = asyncio.Queue(queue_batches)
        self.tasks: list[asyncio.Task[None]] = []
        self._may_end: set[str] = set()  # tasks done when their work is (not a death)
        self._parts: Parts | None = None  # built by `start` (`bot.service.compose.build`)
        self.invites: Invites | None = None  # the bot's own invites, answered (`start`)
        self.server: AppserviceServer | None = None
        self.sync: SyncLoop | None = None
        self.api: HttpApi | None = None
        self._stop_request: asyncio.Event | None = None  # set by `run_until_signal`
        self.stopped = asyncio.Event()
        self.failure: BaseException | None = None

    # ------------------------------------------------------------ the parts, once started

    @property
    def parts(self) -> Parts:
        if self._parts is None:
            raise RuntimeError("the service is not started")
        return self._parts

    @property
    def bot_user_id(self) -> str:
        return self.parts.bot_user_id

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def writer(self) -> Writer:
        return self.parts.writer

    @property
    def rooms(self) -> RoomCache:
        return self.parts.rooms

    @property
    def searcher(self) -> Searcher:
        return self.parts.searcher

    @property
    def handler(self) -> CommandHandler:
        return self.parts.handler

    @property
    def commands(self) -> CommandPool:
        return self.parts.commands

    @property
    def scheduler(self) -> RefreshScheduler:
        return self.parts.scheduler

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        cfg = self.cfg
        bot_user_id = str(await self.client.whoami())
        if self._store is None:
            self._store = await open_store_waiting(cfg.index, cfg.base_dir)
        self._parts = await build(
            cfg,
            self.client,
            self._store,
            self.embedder,
            self.metrics,
            bot_user_id=bot_user_id,
            full_at_start=self._full_at_start,
            timed_out=self._timed_out,
        )
        self.invites = invites = Invites(
            self.client,
            self.handler,
            roster=cfg.resolve(cfg.bot.roster) if cfg.bot.roster is not None else None,
            server_name=cfg.homeserver.server_name,
        )
        dispatcher = Dispatcher(
            self.queue,
            rooms=self.rooms,
            handler=self.handler,
            commands=self.commands,
            scheduler=self.scheduler,
            own_membership=invites.invited,
        )
        self._spawn(self.scheduler.run(), "refresh")
        if self.handler.command_alias.pending:  # not resolved at start: tried again until it is
            self._spawn(self.handler.command_alias.run(), "command-room", may_end=True)
        self._spawn(dispatcher.run(), "dispatcher")
        if cfg.appservice is not None:
            self.server = AppserviceServer(
                load_registration(registration_path(cfg)).hs_token,
                dispatcher.accept,
                host=cfg.appservice.host,
                port=cfg.appservice.port,
            )
            await self.server.start()
            await self._ping_appservice()
        else:
            self.sync = SyncLoop(self.client, dispatcher.accept)
            self._spawn(self.sync.run(), "sync")
        if cfg.metrics.port is not None:
            self.api = HttpApi(
                cfg.metrics,
                self.metrics,
                checks={
                    "service": self._loop_health,
                    "store": store_check(self.store),
                    "homeserver": self._homeserver_health,
                },
                search=self.searcher.search,
                resolve_room=self._resolve_search_room,
                purge=self._purge,
                token_file=token_path(cfg),
                status=self._status,
            )
            await self.api.start()
        freeze_startup_heap()  # no full collection walks the start's heap inside a command
        log.info("muninn is running as %s", self.bot_user_id)

    async def stop(self) -> None:
        if self.api is not None:
            await self.api.stop()
            self.api = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        if self._parts is not None:
            await self._parts.commands.close()
            # Replies still waiting for the homeserver: one last try.
            await self._parts.handler.outbox.drain(OUTBOX_DRAIN_SECONDS)
        await self.client.close()
        if self._own_embedder:  # first: it unloads the model before the store compacts
            await self.embedder.close()
        if self._store is not None:
            await AsyncStore(self._store).close()
        self.stopped.set()

    async def run_until_signal(self) -> None:
        """Serve until SIGTERM or SIGINT (or a task's unexpected death), then stop cleanly."""
        loop = asyncio.get_running_loop()
        raise_nofile()  # idle connections must not starve the service of descriptors
        quiet_accept_errors(loop)
        stop = asyncio.Event()
        self._stop_request = stop
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _on_signal, sig, stop)
        error: BaseException | None = None
        try:
            # A stop is honoured during the start too (a homeserver that does not answer
            # yet): systemd's SIGKILL follows TimeoutStopSec, whatever is in flight.
            starting = asyncio.create_task(self.start(), name="muninn-start")
            stopping = asyncio.create_task(stop.wait(), name="muninn-stop-request")
            await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                log.info("stop requested while starting; stopping")
                starting.cancel()
            stopping.cancel()
            await asyncio.gather(starting, stopping, return_exceptions=True)
            error = None if starting.cancelled() else starting.exception()
            if error is not None:
                raise error
            await stop.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop()
            if error is None:
                log.info("muninn stopped")
            else:
                # Issue 36: not "stopped", which an operator tailing the log reads as the
                # live service stopping; the CLI then prints the cause as `muninn: …`.
                log.error("muninn did not start: %s", error)
        if self.failure is not None:
            raise self.failure

    def _spawn(self, coro: Any, name: str, *, may_end: bool = False) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=f"muninn-{name}")
        if may_end:
            self._may_end.add(task.get_name())
        task.add_done_callback(self._task_done)
        self.tasks.append(task)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        self.failure = task.exception()
        log.error("task %s died: %r; stopping", task.get_name(), self.failure)
        if self._stop_request is not None:
            self._stop_request.set()

    # ------------------------------------------------------------ health and the search API

    async def _loop_health(self) -> str:
        if self.failure is not None:
            raise RuntimeError(f"a task died: {self.failure!r}")
        dead = [t.get_name() for t in self.tasks if t.done() and t.get_name() not in self._may_end]
        if dead or not self.tasks:
            raise RuntimeError(f"not running: {', '.join(dead) or 'no tasks'}")
        return f"{len(self.tasks)} tasks, {self.queue.qsize()} batches queued"

    async def _homeserver_health(self) -> str:
        return f"{self.cfg.homeserver.url} knows {await self.client.whoami()}"

    async def _status(self) -> dict[str, Any]:
        """`POST /_muninn/status`: the store's half of `muninn status`, and what only the
        running service knows: whether its command room's alias is resolved (issue 46)."""
        facts = await AsyncStore(self.store).run(read_facts)
        return {
            **facts.as_json(),
            "service": {"command_room": self.handler.command_alias.as_json()},
        }

    async def _resolve_search_room(self, room: str) -> str:
        if room.startswith("!"):
            return room
        found = await self.client.resolve_alias(room) if room.startswith("#") else None
        if found is None:
            raise QueryError("room_ids", f"{room!r} is neither a room id nor a known alias")
        return found

    async def _purge(self, request: PurgeRequest) -> Tombstone:
        """`POST /_muninn/purge`: our writer records it; the room's next refresh applies it."""
        try:
            room_id = RoomID(await self._resolve_search_room(request.room_id))
        except QueryError as e:
            raise QueryError("room_id", str(e).removeprefix(f"{e.field}: ")) from None
        stone = await self.writer.add_tombstone(room_id, request.from_ts, request.to_ts)
        # Dates an operator reads (issue 36: milliseconds before); the ms stay in the file.
        when = f"from {shown(stone.from_ts)} to {shown(stone.to_ts)}"
        log.info("purge of %s %s recorded", room_id, when)
        self.scheduler.wake(room_id)
        return stone

    # ------------------------------------------------------------ the event path

    async def _timed_out(self, msg: Incoming) -> None:
        """A command past its deadline: a short error reply where it would have been answered.

        Only once the handler has admitted it (room and asker checked): a command cut off
        earlier stays silent, as it would have been in a room Muninn does not serve. The reply
        reuses the command's transaction id, so a real answer that made it out first wins."""
        if not self.handler.admitted(msg.event_id):
            return
        seconds = self.cfg.bot.command_timeout_seconds
        text = f"Sorry, that took longer than {seconds:g} s and was stopped; please try again."
        await self.handler.say(msg, text, "error")

    async def _ping_appservice(self) -> None:
        """Once listening: have the homeserver ping us, so transactions it held back while we
        were down (an invite, a command) come now, not after its retry backoff. Best effort:
        a homeserver without the endpoint, or a registration without an `id`, still pushes."""
        appservice_id = read_registration(registration_path(self.cfg)).get("id")
        if not isinstance(appservice_id, str) or not appservice_id:
            return
        try:
            await self.client.ping_appservice(appservice_id, f"muninn-start-{uuid.uuid4().hex}")
        except MatrixError as e:
            log.warning("the homeserver could not ping this appservice: %s", e)


def _on_signal(sig: signal.Signals, stop: asyncio.Event) -> None:
    # Said at once: the stop that follows may take seconds (tasks, the store's close).
    log.info("%s received: stopping", sig.name)
    stop.set()


async def run(cfg: ServiceConfig) -> int:
    """`muninn run`."""
    await Service(cfg).run_until_signal()
    return 0
