"""A private Synapse on loopback (its clients: `bot.demo.client`, `bot.demo.homeserver`).

Used by `muninn demo` and, through `tests/homeserver.py`, by the test suite and the benchmarks.
`start_synapse` writes a loopback-only config (SQLite unless told otherwise, no outbound
traffic, rate limits relaxed, one appservice registration: `bot.demo.synapse_config`) into a
directory, starts `python -m synapse.app.homeserver` from this interpreter and waits until
`/_matrix/client/versions` answers; `SynapseServer.stop` ends it by pid.

Facts this leans on (Synapse 1.163):
- the appservice bot user (`@muninn:<server>`) cannot `/sync` (500); it reads with `/messages`;
- room version 12 is the default: room ids have no server part;
- `is_direct` is only on the invite event; after the join it is in the join event's
  `unsigned.prev_content`;
- a redacted event keeps its id, with `content: {}` and `unsigned.redacted_because`;
- an appservice acting as a user of its namespaces (exclusive or not) may backdate with
  `?ts=<ms>`, honoured in `origin_server_ts`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from bot.demo.synapse_config import (
    APPSERVICE_ID,
    BOT_LOCALPART,
    JSON,
    SEED_PREFIX,
    SERVER_NAME,
    homeserver_config,
    registration_document,
    write_signing_key,
)

__all__ = [
    "APPSERVICE_ID",
    "BOT_LOCALPART",
    "SEED_PREFIX",
    "SERVER_NAME",
    "SynapseServer",
    "SynapseStartError",
    "file_tail",
    "free_port",
    "port_is_free",
    "start_synapse",
    "stop_stale_synapse",
    "synapse_available",
]

START_TIMEOUT = 90.0  # a cold start took 35 s with the 2 cores shared by ~7 test runs


# ---------------------------------------------------------------- the server process


@dataclass
class SynapseServer:
    """A running Synapse: where it listens, its secrets, and its files."""

    base_url: str
    port: int
    server_name: str
    shared_secret: str
    as_token: str
    hs_token: str
    appservice_port: int  # nothing listens here unless the bot (or a test) does
    registration_path: Path
    config_path: Path
    log_path: Path
    workdir: Path
    database_path: Path | None  # the SQLite file; None on a `database` given to start_synapse
    process: subprocess.Popen[bytes]
    scratch_dir: Path | None = None  # a tmpfs database directory, removed on stop

    @property
    def appservice_url(self) -> str:
        return f"http://127.0.0.1:{self.appservice_port}"

    @property
    def bot_user_id(self) -> str:
        return f"@{BOT_LOCALPART}:{self.server_name}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        return file_tail(self.log_path, lines)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM by pid, then SIGKILL if it has not exited within `grace` seconds."""
        try:
            if self.process.poll() is None:
                os.kill(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(grace)
                except subprocess.TimeoutExpired:
                    os.kill(self.process.pid, signal.SIGKILL)
                    self.process.wait(5)
        finally:
            if self.scratch_dir is not None:
                shutil.rmtree(self.scratch_dir, ignore_errors=True)


def file_tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a log file, for an error message that says why."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:])


class SynapseStartError(RuntimeError):
    """Synapse did not come up; the message carries the tail of its log."""


def synapse_available() -> bool:
    """True when `matrix-synapse` is importable by this interpreter."""
    import importlib.util

    return importlib.util.find_spec("synapse") is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:`port` (so Synapse can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _scratch_dir() -> Path | None:
    """A tmpfs directory if there is one: SQLite fsyncs every commit, which halves send speed."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="muninn-synapse-", dir=shm))
    return None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _spawn(
    config: Path, workdir: Path, log_path: Path, *, new_session: bool
) -> subprocess.Popen[bytes]:
    """`python -m synapse.app.homeserver` from this interpreter, its output into the log file.

    With `new_session` a Ctrl-C in the terminal does not reach Synapse: the caller stops it,
    after the parts that talk to it.
    """
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(config)],
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=new_session,
        )


def start_synapse(
    workdir: Path,
    *,
    timeout: float = START_TIMEOUT,
    server_name: str = SERVER_NAME,
    port: int | None = None,
    extra_user_namespaces: Sequence[JSON] = (),
    registration: JSON | None = None,
    tmpfs_database: bool = True,
    database: JSON | None = None,
    new_session: bool = False,
) -> SynapseServer:
    """Write config, keys and registration into `workdir`, start Synapse and wait for it.

    Args:
        workdir: where the config, registration, signing key, log and media go.
        server_name: the homeserver's name (the part after ':' in user ids).
        port: the client-server port on 127.0.0.1; a free one when None.
        extra_user_namespaces: more appservice user namespaces for the default
            registration, e.g. non-exclusive ones for users the appservice may act as.
        registration: the appservice registration to give Synapse instead of the default
            (the bot's and `@seed-*` namespaces); its `url` names the appservice port.
        tmpfs_database: put SQLite on /dev/shm when there is one (faster; gone on stop),
            else `workdir/data/homeserver.db`.
        database: Synapse's `database` block instead of SQLite (the benchmarks' PostgreSQL row).
        new_session: start Synapse in its own session, out of reach of the terminal's Ctrl-C.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data").mkdir(exist_ok=True)
    port = port or free_port()
    if registration is None:
        as_token, hs_token = secrets.token_hex(24), secrets.token_hex(24)
        reg = registration_document(
            as_token, hs_token, free_port(), server_name, extra_user_namespaces
        )
    else:
        reg = registration
    as_port = urlsplit(str(reg["url"])).port or 80
    shared_secret = secrets.token_hex(24)
    reg_path = workdir / "registration.yaml"
    reg_path.write_text(yaml.safe_dump(reg, sort_keys=False))
    reg_path.chmod(0o600)
    config = workdir / "homeserver.yaml"
    scratch = _scratch_dir() if tmpfs_database and database is None else None
    sqlite_path = None if database is not None else (scratch or workdir / "data") / "homeserver.db"
    if database is None:
        database = {"name": "sqlite3", "args": {"database": str(sqlite_path)}}
    cfg = homeserver_config(workdir, port, shared_secret, reg_path, database, server_name)
    config.write_text(yaml.safe_dump(cfg))
    write_signing_key(Path(cfg["signing_key_path"]))
    log_path = workdir / "homeserver.log"
    server = SynapseServer(
        base_url=f"http://127.0.0.1:{port}",
        port=port,
        server_name=server_name,
        shared_secret=shared_secret,
        as_token=str(reg["as_token"]),
        hs_token=str(reg["hs_token"]),
        appservice_port=as_port,
        registration_path=reg_path,
        config_path=config,
        log_path=log_path,
        workdir=workdir,
        database_path=sqlite_path,
        process=_spawn(config, workdir, log_path, new_session=new_session),
        scratch_dir=scratch,
    )
    # Synapse writes its pid_file only when it daemonizes: write it here, for stop_stale_synapse.
    Path(cfg["pid_file"]).write_text(f"{server.pid}\n", encoding="ascii")
    try:
        _wait_until_up(server, timeout)
    except KeyboardInterrupt:  # Ctrl-C while it starts: no orphaned Synapse
        server.stop()
        raise
    return server


def _wait_until_up(server: SynapseServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    url = f"{server.base_url}/_matrix/client/versions"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            server.stop()
            raise SynapseStartError(
                f"Synapse exited with {server.process.returncode}; log {server.log_path}:\n"
                + server.log_tail()
            )
        if _answers(url):
            return
        time.sleep(0.05)
    server.stop()
    raise SynapseStartError(
        f"Synapse did not answer {url} within {timeout:.0f}s; log {server.log_path}:\n"
        + server.log_tail()
    )


def stop_stale_synapse(workdir: Path, grace: float = 10.0) -> int | None:
    """Stop a Synapse left running from `workdir` (its pid file names it); its pid, or None.

    Only a live process whose command line runs Synapse on this directory's config is
    signalled, so a pid reused by something else is left alone.
    """
    pid_file = workdir / "homeserver.pid"
    try:
        pid = int(pid_file.read_text(encoding="ascii").strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    config = str(workdir / "homeserver.yaml").encode()
    if b"synapse.app.homeserver" not in cmdline or config not in cmdline:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    return pid
