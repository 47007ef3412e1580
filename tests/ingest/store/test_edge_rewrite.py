"""Rule 13b: redacted and edited-away text leaves the embedded store's files (issue 21 item 10).

Real Synapse, MiniLM and qdrant-edge: the text is indexed, taken out by a redaction and an
edit, the writer stops cleanly, and every file under the store directory is read, bytes, for
it. Before the rewrite both words stayed in the write-ahead log and the payload pages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from ingest.config import IndexConfig, StoreConfig
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.store import generation_name, open_store
from ingest.store.edge_rewrite import sweep
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, reader_config

GEN = generation_name("muninn_test", {"embedder": "test", "dimension": 4})


def _files_holding(root: Path, word: str) -> list[str]:
    needle = word.encode()
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


async def test_redacted_and_edited_away_text_is_in_no_file_after_a_clean_stop(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    room = await hs.fresh_room(alice)
    reader = await hs.register(displayname="Reader")
    await admit(alice, room, reader)
    redacted_word = f"lockercode{uuid.uuid4().hex[:10]}"
    edited_word = f"meetingspot{uuid.uuid4().hex[:10]}"
    secret = await alice.send_text(room, f"my locker code is {redacted_word}")
    kept = await alice.send_text(room, "the tortoise enclosure opens at noon")
    moved = await alice.send_text(room, f"we meet at {edited_word} tonight")
    cfg = reader_config(hs, reader, tmp_path)
    ix = Indexer(cfg)
    try:
        await ix.refresh()
        dump = await ix.dump()
        assert redacted_word in dump and edited_word in dump
        await alice.redact(room, secret)
        await alice.send_edit(room, moved, "we meet at the usual place tonight")
        await ix.refresh()
        assert redacted_word not in await ix.dump()
    finally:
        await ix.close()  # a clean stop

    store = tmp_path / "qdrant"
    assert _files_holding(store, redacted_word) == []
    assert _files_holding(store, edited_word) == []

    async with Indexer(cfg) as ix:  # what is left is whole, and searched as before
        col = await ix.collection()
        assert col.damage is None
        assert set(await ix.bodies()) == {kept, moved}
        searcher = Searcher(ix.store, ix.embedder, server_name=hs.server_name)
        for text in ("tortoise enclosure", "usual place"):
            result = await searcher.search(SearchQuery.build([text], room_ids=[room]))
            assert {m["event_id"] for h in result.hits for m in h.messages} & {kept, moved}, text
        report = await ix.refresh()
        assert sum(r.windows_written for r in report.rooms) == 0  # cursors and hashes kept


def test_a_rewrite_cut_short_between_its_renames_puts_the_shard_back(tmp_path: Path) -> None:
    gen = generation_name("muninn_test", {"x": 1})
    (tmp_path / f".replaced-{gen}").mkdir()
    (tmp_path / f".replaced-{gen}" / "edge_config.json").write_text("{}")
    (tmp_path / f".rewrite-{gen}").mkdir()
    sweep(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [gen]
    assert (tmp_path / gen / "edge_config.json").is_file()
    shutil.copytree(tmp_path / gen, tmp_path / f".replaced-{gen}")  # both: the swap was done
    sweep(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [gen]


def test_a_writer_killed_before_its_clean_stop_has_the_next_clean_stop_rewrite(
    tmp_path: Path,
) -> None:
    """Regression (issue 37 item 7): a writer killed (SIGKILL) after text was taken out and
    before its clean stop left the text in the write-ahead log, and the next process, knowing
    nothing of it, closed without a rewrite. The shard is marked when text is taken out, so
    the next clean stop rewrites it: the word is in no file."""
    word = f"lockercode{uuid.uuid4().hex[:10]}"
    point = str(uuid.uuid5(uuid.NAMESPACE_URL, "a"))
    code = f"""
        import os
        from pathlib import Path
        from ingest.config import IndexConfig, StoreConfig
        from ingest.store import PointRecord, open_store
        from ingest.types import SparseVector
        cfg = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection="muninn_test")
        store = open_store(cfg, Path({str(tmp_path)!r}))
        coll = store.open({GEN!r}, dense_dim=4, create=True)
        def record(text):
            return PointRecord({point!r}, [1.0, 0, 0, 0], SparseVector((1,), (1.0,)),
                               {{"room_id": "!r1", "text": text}})
        coll.upsert([record("my locker code is {word}")])
        coll.upsert([record("my locker code is gone")])  # an edit took it out
        coll.forget_removed()
        coll.flush()
        store.activate({GEN!r})
        os.kill(os.getpid(), 9)
    """
    root = Path(__file__).resolve().parents[3]
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == -9, run.stderr
    store_dir = tmp_path / "qdrant"
    assert _files_holding(store_dir, word) != []  # the killed writer's log holds it
    cfg = IndexConfig(store=StoreConfig(path=Path("qdrant")), collection="muninn_test")
    store = open_store(cfg, tmp_path)
    coll = store.open(GEN, dense_dim=None, create=False)
    assert coll.retrieve([point])[0].payload["text"] == "my locker code is gone"
    store.close()  # a clean stop that took nothing out itself
    assert _files_holding(store_dir, word) == []
    store = open_store(cfg, tmp_path)  # whole after the rewrite, and no rewrite due
    coll = store.open(GEN, dense_dim=None, create=False)
    assert coll.retrieve([point])[0].payload["text"] == "my locker code is gone"
    assert not list(store_dir.rglob("muninn_rewrite_due"))
    store.close()
