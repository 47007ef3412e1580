"""Free space for the embedded store (docs/ARCHITECTURE.md §3 rule 13c).

qdrant-edge maps its files (the write-ahead log's 32 MiB segments, payload pages, vector
chunks) and grows them by writing into the mapping: with the disk full the kernel cannot back
a page, and the process dies of SIGBUS mid-write, after one warning and with no message. So
every write first asks the filesystem for its free space and refuses (`DiskFull`, naming the
path and the bytes free) below a margin: `index.store.min_free_mb`, 256 MiB by default, room
for several of those segments to grow at once. Reads go on; the next write asks again, so
writing resumes by itself once space returns.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ingest.errors import DiskFull

MIB = 1024 * 1024
DEFAULT_MARGIN = 256 * MIB

Probe = Callable[[Path], int]


def free_bytes(path: Path) -> int:
    """The bytes an unprivileged writer may still use on `path`'s filesystem."""
    return shutil.disk_usage(path).free


def allocated_bytes(path: Path) -> int:
    """The disk a directory's files take (blocks, not their sparse lengths)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class SpaceGuard:
    """Refuses a write while `path` has less than `margin` bytes free (plus what it needs)."""

    path: Path
    margin: int = DEFAULT_MARGIN
    probe: Probe = free_bytes  # the seam a test turns to a full disk

    def check(self, need: int = 0) -> None:
        try:
            free = self.probe(self.path)
        except OSError as e:
            raise DiskFull(f"{self.path}: cannot read the free space: {e}") from e
        wanted = self.margin + need
        if free < wanted:
            raise DiskFull(
                f"disk full: {self.path} has {free:,} bytes free, under the {wanted:,} "
                "kept to write safely; writing stopped until space returns"
            )


__all__ = ["DEFAULT_MARGIN", "MIB", "Probe", "SpaceGuard", "allocated_bytes", "free_bytes"]
