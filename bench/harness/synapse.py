"""A throwaway Synapse for the benchmarks, on SQLite or on PostgreSQL: start it, seed LoCoMo
conversations, ask its `/search`.

The server is the test suite's launcher (`bot.demo.synapse.start_synapse`: loopback only, no
outbound traffic, rate limits relaxed, one appservice whose `@seed-*` users may backdate with
`?ts=`), seen through `bot.demo.homeserver`. Each conversation becomes one public room: its
speakers are seed users with the speakers' names as display names, every turn one `m.text` sent
at the session's time (turns 30 s apart), and the event id of every `dia_id` is recorded.

PostgreSQL is Debian's server (`apt-get install postgresql`), found through
`$MUNINN_PG_BINDIR`, `pg_config --bindir` or `/usr/lib/postgresql/N/bin` (newest N). The
cluster lives in a temporary directory of its own, listens on 127.0.0.1 at a free port (and a
socket in that directory), trusts loopback connections, and is deleted on stop. PostgreSQL
refuses to run as root; started by root, the cluster belongs to the `postgres` system user.
Durability is off (`fsync`, `synchronous_commit`, `full_page_writes`): the benchmarks measure
how Synapse ranks and answers, not how it survives a crash of a cluster thrown away anyway.
Databases are created `UTF8` with the `C` collation, as Synapse requires.
"""

from __future__ import annotations

import asyncio
import glob
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness.locomo import Conversation
from bot.demo.client import HarnessError, MatrixUser
from bot.demo.homeserver import Homeserver
from bot.demo.synapse import SynapseServer, file_tail, free_port, start_synapse
from bot.demo.synapse_config import SEED_PREFIX

SYNAPSE_DBS = ("sqlite", "postgres")
SUPERUSER = "muninn_bench"
START_TIMEOUT = 60.0

# ---------------------------------------------------------------- PostgreSQL


class PostgresError(RuntimeError):
    """The cluster could not be found, created or started; the message says which and why."""


def find_bindir() -> Path:
    """The directory holding `initdb` and `postgres`, or PostgresError naming the install."""
    candidates: list[Path] = []
    if env := os.environ.get("MUNINN_PG_BINDIR"):
        candidates.append(Path(env))
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))

    def version(path: str) -> int:
        name = Path(path).parent.name
        return int(name) if name.isdigit() else 0

    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    candidates += [Path(p) for p in debian]
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise PostgresError(
        "no PostgreSQL server found (looked in $MUNINN_PG_BINDIR, `pg_config --bindir` and "
        "/usr/lib/postgresql/*/bin): install it with `apt-get install postgresql`"
    )


@dataclass
class PostgresCluster:
    """A running cluster: where it listens and its files; `stop()` ends it and deletes them."""

    bindir: Path
    root: Path
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    run_as: pwd.struct_passwd | None

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log_path, lines)

    def version(self) -> str:
        """What the server says it is, e.g. "postgres (PostgreSQL) 15.18 (Debian ...)"."""
        argv = [str(self.bindir / "postgres"), "--version"]
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()

    def create_database(self, name: str) -> None:
        """A new database owned by the superuser, UTF8 with the C collation (Synapse's need)."""
        _run(
            [
                str(self.bindir / "createdb"),
                *("-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER),
                *("-E", "UTF8", "--locale=C", "-T", "template0", name),
            ],
            "createdb",
        )

    def synapse_database(self, name: str) -> dict[str, Any]:
        """Synapse's `database` block for database `name` of this cluster."""
        return {
            "name": "psycopg2",
            "args": {
                "user": SUPERUSER,
                "dbname": name,
                "host": "127.0.0.1",
                "port": self.port,
                "cp_min": 1,
                "cp_max": 5,
            },
        }

    def stop(self, grace: float = 15.0) -> None:
        """Fast shutdown (SIGINT), SIGKILL after `grace` seconds; then the files are deleted."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
                try:
                    self.process.wait(grace)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(5)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(argv: list[str], what: str, run_as: pwd.struct_passwd | None = None) -> None:
    kwargs: dict[str, Any] = {}
    if run_as is not None:
        kwargs = {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}
    out = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if out.returncode != 0:
        raise PostgresError(f"{what} exited with {out.returncode}: {out.stderr.strip()[-800:]}")


def _owner() -> pwd.struct_passwd | None:
    """Who runs the server: this user, or `postgres` when this is root (PostgreSQL's rule)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresError(
            "PostgreSQL does not run as root and there is no `postgres` user to run it as: "
            "install the server with `apt-get install postgresql` (it creates that user), "
            "or run the benchmark as an ordinary user"
        ) from None


def _ready(bindir: Path, port: int) -> bool:
    """Accepting queries, not only connections (a starting server answers "starting up")."""
    isready = bindir / "pg_isready"
    if isready.is_file():
        argv = [str(isready), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", SUPERUSER]
        return subprocess.run(argv, check=False).returncode == 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_postgres(timeout: float = START_TIMEOUT) -> PostgresCluster:
    """initdb a fresh cluster in a temporary directory, start it on loopback, wait for it."""
    bindir = find_bindir()
    run_as = _owner()
    root = Path(tempfile.mkdtemp(prefix="muninn-pg-"))
    try:
        if run_as is not None:
            os.chown(root, run_as.pw_uid, run_as.pw_gid)
        datadir, sockets = root / "data", root / "sockets"
        _run(
            [
                str(bindir / "initdb"),
                *("-D", str(datadir), "-U", SUPERUSER, "--auth=trust"),
                *("-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"),
            ],
            "initdb",
            run_as,
        )
        _run(["mkdir", "-m", "0700", str(sockets)], "mkdir", run_as)
        port = free_port()
        log_path = root / "postgres.log"
        kwargs: dict[str, Any] = {}
        if run_as is not None:
            kwargs = {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    str(bindir / "postgres"),
                    *("-D", str(datadir), "-p", str(port), "-k", str(sockets)),
                    *("-c", "listen_addresses=127.0.0.1"),
                    *("-c", "fsync=off", "-c", "synchronous_commit=off"),
                    *("-c", "full_page_writes=off"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C reaches the bench, which stops the cluster
                **kwargs,
            )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    cluster = PostgresCluster(bindir, root, port, process, log_path, run_as)
    deadline = time.monotonic() + timeout
    while not _ready(bindir, port):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = cluster.log_tail()
            cluster.stop()
            state = (
                f"exited with {process.returncode}"
                if process.poll() is not None
                else (f"did not listen on 127.0.0.1:{port} within {timeout:.0f}s")
            )
            raise PostgresError(f"postgres {state}; its log:\n{tail}")
        time.sleep(0.1)
    return cluster


def postgres_problem() -> str | None:
    """Why `--synapse-db postgres` cannot run here (checked before minutes of seeding)."""
    try:
        find_bindir()
    except PostgresError as e:
        return str(e)
    if importlib.util.find_spec("psycopg2") is None:  # Synapse's driver, in this interpreter
        return "Synapse on PostgreSQL needs psycopg2: pip install -e '.[bench]'"
    return None


# ---------------------------------------------------------------- Synapse


@dataclass
class SeededRoom:
    conversation: Conversation
    room_id: str
    event_ids: dict[str, str] = field(default_factory=dict)  # dia_id -> event id
    dia_ids: dict[str, str] = field(default_factory=dict)  # event id -> dia_id


@dataclass(frozen=True)
class SearchAnswer:
    """Synapse's ranked events: (event id, body), best first; `error` if it refused."""

    events: tuple[tuple[str, str], ...]
    error: str | None = None


class SynapseBench:
    """`async with SynapseBench(workdir, db) as sb:` — a started Synapse and a client session.

    `db` is "sqlite" (a file on /dev/shm) or "postgres" (a cluster started here and deleted on
    exit, after Synapse has stopped).
    """

    def __init__(self, workdir: Path, db: str = "sqlite") -> None:
        if db not in SYNAPSE_DBS:
            raise ValueError(f"db must be one of {', '.join(SYNAPSE_DBS)}, not {db!r}")
        self.workdir = workdir
        self.db = db
        self.postgres: PostgresCluster | None = None
        self.server: SynapseServer | None = None
        self.session: aiohttp.ClientSession | None = None
        self.hs: Homeserver | None = None

    async def __aenter__(self) -> SynapseBench:
        try:
            database = None
            if self.db == "postgres":
                self.postgres = await asyncio.to_thread(start_postgres)
                await asyncio.to_thread(self.postgres.create_database, "synapse")
                database = self.postgres.synapse_database("synapse")
            self.server = await asyncio.to_thread(
                lambda: start_synapse(self.workdir, database=database)
            )
        except BaseException:
            await self.__aexit__()
            raise
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        self.hs = Homeserver(self.server, self.session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.session is not None:
                await self.session.close()
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
        finally:
            if self.postgres is not None:
                await asyncio.to_thread(self.postgres.stop)

    @property
    def homeserver(self) -> Homeserver:
        if self.hs is None:
            raise RuntimeError("SynapseBench is not started")
        return self.hs

    @property
    def synapse(self) -> SynapseServer:
        if self.server is None:
            raise RuntimeError("SynapseBench is not started")
        return self.server


def _localpart(sample_id: str, name: str, n: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", f"{sample_id}-{name}".lower()).strip("-")
    return f"{SEED_PREFIX}{slug}-{n}"


async def seed_conversation(
    hs: Homeserver, conversation: Conversation, members: Sequence[MatrixUser]
) -> SeededRoom:
    """One room a conversation; `members` (the reader, the searcher) join before any turn."""
    speakers: dict[str, MatrixUser] = {}
    for n, name in enumerate(conversation.speakers):
        user = await hs.seed_user(_localpart(conversation.sample_id, name, n))
        await user.set_displayname(name)
        speakers[name] = user
    owner = speakers[conversation.speakers[0]]
    room_id = await owner.create_room(preset="public_chat", name=conversation.sample_id)
    for user in [*list(speakers.values())[1:], *members]:
        await user.join(room_id)
    seeded = SeededRoom(conversation, room_id)
    for turn in conversation.turns:
        sender = speakers.get(turn.speaker)
        if sender is None:  # a speaker not named in speaker_a/b: give them a seat too
            sender = await hs.seed_user(
                _localpart(conversation.sample_id, turn.speaker, len(speakers))
            )
            await sender.set_displayname(turn.speaker)
            await sender.join(room_id)
            speakers[turn.speaker] = sender
        event_id = await sender.send_text(room_id, turn.text or " ", ts=turn.ts)
        seeded.event_ids[turn.dia_id] = event_id
        seeded.dia_ids[event_id] = turn.dia_id
    return seeded


async def synapse_search(
    user: MatrixUser, room_id: str, term: str, limit: int = 50
) -> SearchAnswer:
    """`POST /_matrix/client/v3/search`, `order_by: rank`, this room only, up to `limit`."""
    if not term.strip():
        return SearchAnswer((), "empty search term")
    body: dict[str, Any] = {
        "search_categories": {
            "room_events": {
                "search_term": term,
                "order_by": "rank",
                "keys": ["content.body"],
                "filter": {"rooms": [room_id], "limit": limit},
            }
        }
    }
    try:
        resp = await user.call("POST", "/_matrix/client/v3/search", body)
    except HarnessError as e:
        return SearchAnswer((), f"{e.status}: {e.body}")
    results = resp.get("search_categories", {}).get("room_events", {}).get("results", [])
    events = tuple(
        (str(r["result"]["event_id"]), str(r["result"].get("content", {}).get("body", "")))
        for r in results[:limit]
    )
    return SearchAnswer(events)
