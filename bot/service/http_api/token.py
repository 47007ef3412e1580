"""The listener tokens: written by the service at each start, read by `muninn search`/`purge`.

They live in the embedded store's 0700 directory, 0600, so only the service's own user (and
root) may search or purge through the running service. `LISTENER_TOKEN` may do everything the
listener serves; `LISTENER_READ_TOKEN` (issue 46) only what reads: search, status and the
detail of `/metrics` and `/healthz`, never a purge. `muninn mcp` holds only the read one.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ingest.config import Config
from ingest.errors import StoreUnavailable
from ingest.store import embedded_path

__all__ = [
    "READ_TOKEN_FILE",
    "TOKEN_FILE",
    "read_token",
    "read_token_path",
    "token_path",
    "write_token",
]

TOKEN_FILE = "LISTENER_TOKEN"
READ_TOKEN_FILE = "LISTENER_READ_TOKEN"


def token_path(cfg: Config) -> Path | None:
    """Where the service keeps its listener token: in the embedded store's 0700 directory.
    None with a server store (no search or purge endpoint then)."""
    store = embedded_path(cfg.index, cfg.base_dir)
    return store / TOKEN_FILE if store is not None else None


def read_token_path(cfg: Config) -> Path | None:
    """Where the service keeps its read-only listener token, beside the other."""
    path = token_path(cfg)
    return path.with_name(READ_TOKEN_FILE) if path is not None else None


def write_token(path: Path) -> str:
    """A fresh random token, written 0600 (never readable by others, not even for an instant)
    and swapped in atomically: a restart retires the old one."""
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, f"{token}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


def read_token(path: Path) -> str:
    """The running service's token, or a StoreUnavailable naming the file and who may read it."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise StoreUnavailable(
            f"cannot read the service's listener token {path}: {e.strerror or e}. Only the "
            "service's own user (or root) may search or purge through the running service: "
            "run `muninn` as that user"
        ) from None
    if not token:
        raise StoreUnavailable(f"the listener token {path} is empty: is `muninn run` running?")
    return token
