"""`muninn demo [--data-dir DIR] [--once] [--port N]`: the whole thing on one machine, no config.

1. A private Synapse on 127.0.0.1 (SQLite, no outbound traffic) in `DIR/synapse`.
2. The demo community (`community.yaml`): people with passwords, rooms, a backdated conversation,
   and the bot joined to every room, the DM and the bridged one included.
3. Muninn in appservice mode on the embedded defaults (Qdrant edge in `DIR/qdrant`, the default
   embedder),
   one full refresh, then the verdict of every room, as `muninn status` gives it.
4. The scripted session, each command and reply printed; then how to log in with a Matrix
   client and the `muninn search` command for the config it wrote (`DIR/config.yaml`, with a
   loopback listener), serving until Ctrl-C (`--once`: exit when the script is done, printing
   no login details for the server it stops).

Every run starts clean: the directory is emptied first, but only if an earlier demo made it
(it holds the `.muninn-demo` marker); anything else is refused rather than deleted.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bot.config import ServiceConfig, parse_config
from bot.demo.client import HarnessError
from bot.demo.community import Community, Seeded, load, seed
from bot.demo.homeserver import Homeserver
from bot.demo.script import Exchange, play
from bot.demo.synapse import (
    SynapseServer,
    SynapseStartError,
    free_port,
    port_is_free,
    start_synapse,
    stop_stale_synapse,
    synapse_available,
)
from bot.mcp.host import host_config
from bot.service.registration import new_registration
from bot.service.run import Service
from ingest.errors import MuninnError
from ingest.store import PointFilter
from ingest.types import RoomID

__all__ = ["DEFAULT_DIR", "DemoError", "claim", "run_demo"]

DEFAULT_DIR = Path("muninn-demo")
SERVER_NAME = "localhost"
MARKER = ".muninn-demo"
CONFIG_FILE = "config.yaml"
INDEX_TIMEOUT = 120.0
# From a checkout, as the README installs it (PyPI's `muninn` is another project).
INSTALL_HINT = "pip install -e '.[demo]' in the checkout (the README's install includes it)"

log = logging.getLogger("muninn.demo")


class DemoError(MuninnError):
    """The demo cannot run; the message says why and what to do."""


def out(text: str = "") -> None:
    print(text, flush=True)


# ---------------------------------------------------------------- the data directory


def claim(data_dir: Path) -> tuple[str, int]:
    """Create `data_dir`, or empty the one an earlier demo left, and lock it for this run.

    Returns "fresh" or "emptied", and the descriptor holding the lock (an `flock` on the
    marker file; closing it releases the directory).
    """
    if data_dir.exists() and not data_dir.is_dir():
        raise DemoError(f"{data_dir} exists and is not a directory; pick another --data-dir")
    marker = data_dir / MARKER
    used = data_dir.is_dir() and any(data_dir.iterdir())
    if used and not marker.is_file():
        raise DemoError(
            f"{data_dir} is not empty and was not made by `muninn demo` (no {MARKER} "
            "in it), so the demo will not delete it; pick another --data-dir"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = os.open(marker, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        raise DemoError(
            f"another `muninn demo` is running in {data_dir}; stop it first (Ctrl-C there) "
            "or pick another --data-dir"
        ) from None
    try:
        if used:
            _empty(data_dir, keep=marker)
        os.ftruncate(lock, 0)
        os.write(lock, _MARKER_TEXT.encode())
    except BaseException:
        os.close(lock)
        raise
    return ("emptied" if used else "fresh"), lock


_MARKER_TEXT = "Made by `muninn demo`; every run empties this directory and starts again.\n"


def _empty(data_dir: Path, *, keep: Path) -> None:
    """Stop a Synapse a killed demo left behind, then delete everything but `keep`."""
    pid = stop_stale_synapse(data_dir / "synapse")
    if pid is not None:
        out(f"Stopped the Synapse an earlier demo left running (pid {pid}).")
    for child in data_dir.iterdir():
        if child == keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def demo_registration(server_name: str, people: list[str]) -> dict[str, object]:
    """What `muninn generate-registration` writes, plus the people as a non-exclusive namespace
    (they keep their passwords; the demo acts as them to backdate the conversation)."""
    reg = new_registration(
        url=f"http://127.0.0.1:{free_port()}", server_name=server_name, localpart="muninn"
    )
    names = "|".join(people)
    domain = server_name.replace(".", r"\.")
    users = reg["namespaces"]["users"]
    users.append({"exclusive": False, "regex": f"^@({names}):{domain}$"})
    return reg


def demo_config_doc(server: SynapseServer, data_dir: Path) -> dict[str, Any]:
    """The config `muninn run` would read, on the embedded defaults (store and embedder), with
    a loopback listener so that `muninn search` reaches the running demo."""
    return {
        "homeserver": {"url": server.base_url, "server_name": server.server_name},
        "appservice": {
            "registration": str(server.registration_path),
            "host": "127.0.0.1",
            "port": server.appservice_port,
        },
        "index": {"store": {"path": str(data_dir / "qdrant")}, "collection": "muninn_demo"},
        "embedder": {"kind": "local"},
        "refresh": {"debounce_seconds": 0.2},
        "bot": {"rate_per_minute": 60},
        "metrics": {"host": "127.0.0.1", "port": free_port()},
    }


def demo_config(server: SynapseServer, data_dir: Path) -> ServiceConfig:
    """`demo_config_doc`, written to `DIR/config.yaml` for the CLI (`muninn --config …
    search`), and validated as `muninn run` validates it."""
    doc = demo_config_doc(server, data_dir)
    path = data_dir / CONFIG_FILE
    header = "# Written by `muninn demo` for the CLI while the demo runs; every run replaces it.\n"
    path.write_text(header + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return parse_config(doc, data_dir, str(path))


# ---------------------------------------------------------------- the run


@contextmanager
def _quiet(verbose: bool) -> Iterator[None]:
    """Only errors on stderr (the demo tells its own story, refusals included), unless -v."""
    root = logging.getLogger()
    before = root.level
    if not verbose:
        root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(before)


def run_demo(
    data_dir: Path = DEFAULT_DIR,
    *,
    once: bool = False,
    port: int | None = None,
    verbose: bool = False,
) -> int:
    """`muninn demo`; 0 when the script ran and every command was answered."""
    if not synapse_available():
        raise DemoError(
            f"the demo runs its own Synapse, and matrix-synapse is not installed: {INSTALL_HINT}"
        )
    if port is not None and not port_is_free(port):
        raise DemoError(f"port {port} is in use on 127.0.0.1; pick another --port or omit it")
    community = load()
    data_dir = data_dir.resolve()
    out("Muninn demo: a private Matrix homeserver and Muninn, on this machine only.")
    state, lock = claim(data_dir)
    try:
        out(f"Data directory: {data_dir} ({state})")
        return _serve(data_dir, community, once=once, port=port, verbose=verbose)
    except KeyboardInterrupt:
        out("\nInterrupted; Muninn and Synapse are stopped.")
        raise
    finally:
        os.close(lock)


def _serve(
    data_dir: Path, community: Community, *, once: bool, port: int | None, verbose: bool
) -> int:
    """Synapse up, the session, Synapse down (by pid), whatever happens in between."""
    started = time.monotonic()
    reg = demo_registration(SERVER_NAME, list(community.people))
    try:
        server = start_synapse(
            data_dir / "synapse",
            server_name=SERVER_NAME,
            port=port,
            registration=reg,
            tmpfs_database=False,
            new_session=True,
            timeout=60.0,
        )
    except SynapseStartError as e:
        raise DemoError(f"Synapse did not start. {e}") from None
    out(f"Synapse is up at {server.base_url} (pid {server.pid}, {_since(started)}).")
    try:
        with _quiet(verbose):
            return asyncio.run(_session(server, community, data_dir, once=once))
    except (HarnessError, aiohttp.ClientError, OSError, TimeoutError) as e:
        what = f"{type(e).__name__}: {e}".rstrip(": ")
        raise DemoError(
            f"the demo stopped on {what}; Synapse's log is {server.log_path}"
        ) from None
    finally:
        server.stop()
        out(f"Stopped Synapse (pid {server.pid}).")


def _since(started: float) -> str:
    return f"{time.monotonic() - started:.1f} s"


async def _session(
    server: SynapseServer, community: Community, data_dir: Path, *, once: bool
) -> int:
    password = secrets.token_urlsafe(9)
    async with aiohttp.ClientSession() as http:
        hs = Homeserver(server, http)
        started = time.monotonic()
        seeded = await seed(hs, community, password)
        out(
            f"Created the {community.name} community: {len(seeded.users)} people, "
            f"{len(seeded.rooms)} rooms, {seeded.messages} messages ({_since(started)})."
        )
        started = time.monotonic()
        out("Starting Muninn (appservice; embedded Qdrant and embedder) and indexing the rooms…")
        service = Service(demo_config(server, data_dir))
        try:
            await service.start()
            await hs.ping_appservice()  # Synapse backed off while nothing listened
            eligible = await _index(service, seeded)
            out(f"Indexed in {_since(started)}.")
            await _verdicts(service, seeded, eligible)
            exchanges = await _script(service, community, seeded)
            _login_help(server, community, password, data_dir / CONFIG_FILE, once=once)
            if not once:
                await _until_signal()
                out("\nStopping…")
        finally:
            await service.stop()
    missing = [e for e in exchanges if e.reply is None]
    if missing:
        raise DemoError(f"Muninn did not answer {missing[0].command!r} in {missing[0].room}")
    return 0


async def _index(service: Service, seeded: Seeded) -> list[RoomID]:
    """The one full refresh; the rooms it found eligible."""
    eligible = []
    for room in seeded.rooms.values():
        if (await service.rooms.get(room.room_id)).verdict.eligible:
            eligible.append(RoomID(room.room_id))
    await asyncio.wait_for(service.scheduler.settle(eligible), INDEX_TIMEOUT)
    return eligible


async def _verdicts(service: Service, seeded: Seeded, eligible: list[RoomID]) -> None:
    out("\nThe rooms Muninn has joined, and what it does with them (as `muninn status` says):")
    col = await service.writer.opened()
    width = max(len(r.label) for r in seeded.rooms.values())
    for room in seeded.rooms.values():
        info = await service.rooms.get(room.room_id)
        if info.verdict.eligible:
            flt = PointFilter(room_ids=(room.room_id,))
            windows = await col.count(flt)
            shown = f"indexed, {windows} windows of {len(room.spec.messages)} messages"
        else:
            reason = str(info.verdict.reason)
            detail = info.verdict.detail.removeprefix(f"{reason}: ")
            shown = f"refused, {reason}: {detail}"
        out(f"  {room.label:<{width}}  {shown}")


async def _script(service: Service, community: Community, seeded: Seeded) -> list[Exchange]:
    first = community.script[0].actor if community.script else community.owner
    out(f"\nA short session as {first}: each line is a real Matrix message, each reply Muninn's.")

    async def settle(room_id: str) -> None:
        await asyncio.wait_for(service.scheduler.settle([RoomID(room_id)]), INDEX_TIMEOUT)

    return await play(community, seeded, service.bot_user_id, out, settle)


def _login_help(
    server: SynapseServer, community: Community, password: str, config: Path, *, once: bool
) -> None:
    """How to go on: the CLI's config, and (unless the server is about to stop) how to log in."""
    cli = f"{cli_command()} --config {shlex.quote(str(config))}"
    search = f"{cli} search 'why could nobody log in' --json"
    if once:
        # Synapse stops a moment later: login details would name a server that is gone, and
        # an agent host's MCP entry would start a server whose every call fails (issue 44).
        out(
            f"\n--once: the script is done, stopping. The CLI's config is {config}; while a "
            f"`muninn demo` (without --once) runs, try:\n  {search}\n"
            "That run also prints the MCP entry an agent host adds for this index; it answers "
            "only while `muninn demo` runs."
        )
        return
    # An agent host (Claude, a coding agent) starts `muninn mcp` over the same index.
    search += (
        "\nAn agent host's MCP configuration for the same index (it answers while this demo "
        f"runs):\n  {host_config(config)}"
    )
    others = ", ".join(p for p in community.people if p != community.owner)
    out(
        "\nLog in with your own Matrix client (Element Desktop, nheko, …):\n"
        f"  homeserver  {server.base_url}\n"
        f"  user        {community.owner}   (or {others}: the same password)\n"
        f"  password    {password}\n"
        "Then try !search, !pin (as a reply), !pins and !help in the rooms above.\n"
        f"From a shell, the same index (the config is {config}):\n  {search}\n"
        "Muninn and Synapse keep running; press Ctrl-C to stop them."
    )


def cli_command() -> str:
    """`muninn` as a shell in this directory runs it (issue 36: the README's set-up leaves the
    venv unactivated): plain `muninn` when PATH finds this very program, else the path it
    was started by (`.venv/bin/muninn`), else this interpreter running the CLI module."""
    started = Path(sys.argv[0])
    found = shutil.which("muninn")
    if started.name == "muninn":
        if found is not None and Path(found).resolve() == started.resolve():
            return "muninn"
        if started.exists():
            return shlex.quote(str(started))
    return f"{shlex.quote(sys.executable)} -m bot.cli.main"


async def _until_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
