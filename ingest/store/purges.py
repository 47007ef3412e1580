"""The operator's purges, kept where every reader can read them without the vector store.

A purge tombstone lives in the store (the writer applies it there and never re-indexes its
events, docs/ARCHITECTURE.md §3 rule 12), but every reply that quotes the room log — search
hits, the transcript fold, the pinboard, a `!pin` confirmation — must honour it *before* a refresh
applied it, and also while the store is down (when the bot answers from the transcript).
So the writer also appends each tombstone to a small JSON-lines file beside the store, and
readers take the union of that file and the store's records. The file outlives the index: a
store rebuilt from nothing gets its purges back from it (`Writer.open`). A file that exists
but cannot be read raises `PurgesUnreadable`: the caller then shows no log text of any room,
never text a purge may cover.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ingest.config import IndexConfig
from ingest.errors import StoreError

__all__ = ["PurgeLog", "PurgesUnreadable", "purge_log_path"]

_FILE = "purges-{collection}.jsonl"


class PurgesUnreadable(StoreError):
    """The purge file exists but cannot be read: no log text may be shown."""


def purge_log_path(cfg: IndexConfig, base_dir: Path) -> Path:
    """`index.purges`, else beside the embedded store's folder (not in it: deleting the index
    must not forget a purge), or for a Qdrant server in `data/` beside the config. Relative
    paths resolve against `base_dir` (the config file's folder), as the store's do.
    """
    if cfg.purges is not None:
        return cfg.purges if cfg.purges.is_absolute() else base_dir / cfg.purges
    store = cfg.store.path if cfg.store.path is not None else Path("data/qdrant")
    folder = store.parent if cfg.store.url is None else Path("data")
    folder = folder if folder.is_absolute() else base_dir / folder
    return folder / _FILE.format(collection=cfg.collection)


class PurgeLog:
    """An append-only file of purge records `{room_id, from_ts, to_ts}`, one JSON a line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one purge durably (fsync) before the caller reports it written."""
        line = json.dumps({k: record[k] for k in ("room_id", "from_ts", "to_ts")}, sort_keys=True)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # the service and `muninn purge` may both write
                size = os.fstat(fd).st_size
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    # A line a crash cut short (never reported written): drop it, so that
                    # only the last line of the file can ever be torn.
                    head = os.pread(fd, size, 0)
                    os.ftruncate(fd, head.rfind(b"\n") + 1)
                    size = head.rfind(b"\n") + 1
                os.pwrite(fd, (line + "\n").encode("utf-8"), size)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise StoreError(f"cannot record the purge in {self.path}: {e}") from e

    def read(self) -> list[dict[str, Any]]:
        """Every recorded purge ([] if none was ever written).

        Raises:
            PurgesUnreadable: the file exists but cannot be read or holds a bad record.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as e:
            raise PurgesUnreadable(f"cannot read the purges in {self.path}: {e}") from e
        out: list[dict[str, Any]] = []
        lines = text.split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                out.append(
                    {
                        "room_id": str(record["room_id"]),
                        "from_ts": int(record["from_ts"]),
                        "to_ts": int(record["to_ts"]),
                    }
                )
            except (ValueError, KeyError, TypeError) as e:
                if n == len(lines):
                    continue  # cut short by a crash mid-append: never reported written
                raise PurgesUnreadable(f"{self.path} line {n} is not a purge record") from e
        return out
