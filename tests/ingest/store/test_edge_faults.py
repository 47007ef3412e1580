"""The embedded store's own faults: one process holds it, its directory is the owner's only, a
killed writer keeps what it acknowledged, a killed compaction leaves no half-built segment.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ingest.config import IndexConfig, StoreConfig
from ingest.errors import StoreUnavailable
from ingest.store import open_store
from tests.ingest.store.storekit import COLLECTION, DIM, GEN, pid, point


def _edge_cfg() -> IndexConfig:
    return IndexConfig(store=StoreConfig(path=Path("qdrant")), collection=COLLECTION)


def test_edge_store_second_open_is_unavailable(tmp_path: Path) -> None:
    """A store path already open (same process here) is refused with StoreUnavailable."""
    first = open_store(_edge_cfg(), tmp_path)
    try:
        with pytest.raises(StoreUnavailable, match="held by another process"):
            open_store(_edge_cfg(), tmp_path)
    finally:
        first.close()
    open_store(_edge_cfg(), tmp_path).close()


def test_edge_store_directory_is_the_owners_only(tmp_path: Path) -> None:
    """Under a permissive umask the store directory (every room's text) is still created 0700;
    an operator's mode on an existing store is left alone."""
    old = os.umask(0o002)
    try:
        open_store(_edge_cfg(), tmp_path / "fresh").close()
        mine = tmp_path / "theirs" / "qdrant"
        mine.mkdir(parents=True, mode=0o750)
        open_store(_edge_cfg(), tmp_path / "theirs").close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "fresh" / "qdrant").stat().st_mode) == 0o700
    assert stat.S_IMODE(mine.stat().st_mode) == 0o750


def _run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[3]
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_edge_store_other_process_is_refused(tmp_path: Path) -> None:
    """A second process opening a held store path gets StoreUnavailable naming the holder."""
    held = open_store(_edge_cfg(), tmp_path)
    try:
        code = f"""
            from pathlib import Path
            from ingest.config import IndexConfig, StoreConfig
            from ingest.errors import StoreUnavailable
            from ingest.store import open_store
            cfg = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection={COLLECTION!r})
            try:
                open_store(cfg, Path({str(tmp_path)!r}))
            except StoreUnavailable as e:
                print("refused:", e)
        """
        out = _run_python(code, tmp_path)
    finally:
        held.close()
    assert "refused:" in out.stdout, out.stderr
    assert "held by another process" in out.stdout


def test_edge_killed_writer_keeps_acknowledged_writes(tmp_path: Path) -> None:
    """A process killed (SIGKILL) after upsert and put_meta, without flush or close, loses none."""
    code = f"""
        import os, uuid
        from pathlib import Path
        from ingest.config import IndexConfig, StoreConfig
        from ingest.store import PointRecord, open_store
        from ingest.types import SparseVector
        cfg = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection={COLLECTION!r})
        store = open_store(cfg, Path({str(tmp_path)!r}))
        coll = store.open({GEN!r}, dense_dim={DIM}, create=True)
        coll.upsert([PointRecord({pid("A")!r}, [1.0, 0, 0, 0], SparseVector((1,), (1.0,)),
                                 {{"room_id": "!r1"}})])
        coll.put_meta("cursor/!r1", {{"event_id": "$a"}})
        store.activate({GEN!r})
        os.kill(os.getpid(), 9)
    """
    out = _run_python(code, tmp_path)
    assert out.returncode == -9, out.stderr
    store = open_store(_edge_cfg(), tmp_path)
    try:
        assert store.active() == GEN
        coll = store.open(GEN, dense_dim=DIM, create=False)
        assert [p.id for p in coll.retrieve([pid("A")])] == [pid("A")]
        assert coll.get_meta("cursor/!r1") == {"event_id": "$a"}
    finally:
        store.close()


def test_edge_compaction_killed_midway_leaves_no_half_built_segment(tmp_path: Path) -> None:
    """A compaction killed mid-way (the import compacts as it goes) leaves its half-built
    segment in the shard's `temp_segments`, up to a segment's size on disk each time: the next
    open deletes it, and the generation is whole."""
    store = open_store(_edge_cfg(), tmp_path)
    store.open(GEN, dense_dim=DIM, create=True).upsert([point("A")])
    store.close()
    shard_dir = tmp_path / "qdrant" / GEN
    segment = next((shard_dir / "segments").iterdir())
    shutil.copytree(segment, shard_dir / "temp_segments" / "segment_builder_x")  # as left
    store = open_store(_edge_cfg(), tmp_path)
    try:
        coll = store.open(GEN, dense_dim=DIM, create=False)
        assert not (shard_dir / "temp_segments").exists()
        assert [p.id for p in coll.retrieve([pid("A")])] == [pid("A")]
    finally:
        store.close()
