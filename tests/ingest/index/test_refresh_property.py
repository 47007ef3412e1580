"""Properties of the writer: page boundaries, refresh points and replays never change the result.

Two levels. `WindowSet` (the writer's pure core) runs many random logs against an in-memory
`WindowLookup`. The whole writer runs a few random logs written to the real Synapse. Both compare
with the message → text map computed independently from the log, with the spec's semantics:
the latest valid edit by (origin_server_ts, event_id) wins (same sender, not an edit of an edit,
not redacted); a redacted message is absent; a redacted edit falls back to the previous valid
edit or the original.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.index.windows import ChunkParams, EditOutcome, RevertEdit, StoredWindow, WindowSet
from ingest.types import Edit, EventID, Message, Redaction, RoomID, UserID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, reader_config

WORDS = ("kiwi", "fjord", "umber", "quill", "mosaic", "tundra", "lychee", "cobalt", "oriole")


# ---------------------------------------------------------------- the log and its meaning


@dataclass(frozen=True)
class Op:
    """One event of a random log. `target` indexes an earlier op (message, or message/edit)."""

    kind: Literal["msg", "edit", "redact"]
    sender: int  # 0 or 1
    text: str = ""
    target: int = -1
    thread: int = -1  # for a message: the op index of its thread root, or -1 (main timeline)


@st.composite
def logs(draw: st.DrawFn, max_size: int = 25) -> list[Op]:
    """Messages (some in threads), edits of earlier events and redactions of earlier events."""
    ops: list[Op] = []
    for i in range(draw(st.integers(1, max_size))):
        msgs = [j for j, o in enumerate(ops) if o.kind == "msg"]
        edits = [j for j, o in enumerate(ops) if o.kind == "edit"]
        kind = draw(st.sampled_from(["msg", "msg", "edit", "redact"]) if msgs else st.just("msg"))
        sender = draw(st.integers(0, 1))
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
        text = f"{text} n{i}"
        if kind == "msg":
            roots = [j for j in msgs if ops[j].thread < 0]
            thread = draw(st.sampled_from([-1, -1, *roots[-2:]])) if roots else -1
            ops.append(Op("msg", sender, text, thread=thread))
        elif kind == "edit":
            # Mostly a message; sometimes an earlier edit (an edit of an edit, never applied).
            target = draw(st.sampled_from(msgs * 3 + edits))
            # Mostly the target's own sender (a valid edit), sometimes someone else.
            same = draw(st.sampled_from([True, True, True, False]))
            who = ops[target].sender if same else 1 - ops[target].sender
            ops.append(Op("edit", who, text, target=target))
        else:
            ops.append(Op("redact", 0, target=draw(st.sampled_from(msgs + edits))))
    return ops


def expected_texts(
    ops: Sequence[Op], ids: Sequence[str], stamps: Sequence[int], n: int | None = None
) -> dict[str, str]:
    """event id → text after the first `n` ops, from the spec's rules (independent of Muninn)."""
    ops = ops[: len(ops) if n is None else n]
    redacted = {o.target for o in ops if o.kind == "redact"}
    out: dict[str, str] = {}
    for i, o in enumerate(ops):
        if o.kind != "msg" or i in redacted:
            continue
        valid = [
            j
            for j, e in enumerate(ops)
            if e.kind == "edit" and e.target == i and e.sender == o.sender and j not in redacted
        ]
        best = max(valid, key=lambda j: (stamps[j], ids[j]), default=None)
        out[ids[i]] = ops[best].text if best is not None else o.text
    return out


# ---------------------------------------------------------------- WindowSet without a server


class DictLookup:
    """The index as a dict of stored windows: the in-memory `WindowLookup`."""

    def __init__(self) -> None:
        self.points: dict[str, StoredWindow] = {}

    def windows_of_events(self, event_ids: Sequence[EventID]) -> list[StoredWindow]:
        wanted = set(event_ids)
        return [
            w
            for w in self.points.values()
            if wanted & {i for m in w.messages for i in (m.event_id, m.edit_event_id) if i}
        ]

    def window_by_id(self, point_id: str) -> StoredWindow | None:
        return self.points.get(point_id)

    def commit(self, ws: WindowSet) -> None:
        upserts, deletes = ws.changes()
        for pid, (root, messages) in upserts.items():
            self.points[pid] = StoredWindow(pid, messages, root)
        for pid in deletes:
            self.points.pop(pid, None)

    def texts(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for w in self.points.values():
            for m in w.messages:
                assert m.event_id not in out, f"{m.event_id} is in two windows"
                out[m.event_id] = m.body
        return out


ROOM = RoomID("!room:test")
SENDERS = (UserID("@a:test"), UserID("@b:test"))


class PureServer:
    """The log as a homeserver would serve it after its first `n` events."""

    def __init__(self, ops: Sequence[Op], stamps: Sequence[int]) -> None:
        self.ops = ops
        self.stamps = stamps
        self.ids = [EventID(f"$e{i:03d}") for i in range(len(ops))]

    def message(self, i: int) -> Message:
        o = self.ops[i]
        root = self.ids[o.thread] if o.thread >= 0 else None
        return Message(self.ids[i], ROOM, SENDERS[o.sender], self.stamps[i], o.text, root)

    def event(self, i: int, n: int) -> Message | Edit | Redaction | None:
        """Event i as seen once n events exist (None: it arrives already redacted)."""
        o = self.ops[i]
        if any(r.kind == "redact" and r.target == i for r in self.ops[:n]):
            return None
        ts, sender = self.stamps[i], SENDERS[o.sender]
        if o.kind == "msg":
            return self.message(i)
        if o.kind == "edit":
            return Edit(self.ids[i], ROOM, sender, ts, self.ids[o.target], o.text)
        return Redaction(self.ids[i], ROOM, sender, ts, self.ids[o.target])

    def reread(self, target: EventID, n: int) -> Message | None:
        """What the writer's shell re-reads for a reverted edit: the current valid text."""
        i = self.ids.index(target)
        text = expected_texts(self.ops, self.ids, self.stamps, n).get(target)
        if text is None:
            return None
        msg = self.message(i)
        edits = [
            j
            for j in range(n)
            if self.ops[j].kind == "edit" and self.ids[self.ops[j].target] == target
        ]
        best = [j for j in edits if self.event(j, n) and self.ops[j].sender == self.ops[i].sender]
        if not best:
            return msg
        j = max(best, key=lambda j: (self.stamps[j], self.ids[j]))
        return dataclasses.replace(
            msg, body=text, edit_event_id=self.ids[j], edit_ts=self.stamps[j]
        )


def run_pages(
    server: PureServer,
    lookup: DictLookup,
    params: ChunkParams,
    tails: dict[str, str],
    start: int,
    n: int,
    pages: Iterable[int],
) -> dict[str, str]:
    """Apply events [start, n) as a walk at time n, cut into pages; the tails after it."""
    pos = start
    for size in pages:
        if pos >= n:
            break
        ws = WindowSet(ROOM, lookup, params, dict(tails))
        batch = [server.event(i, n) for i in range(pos, min(n, pos + size))]
        ws.prefetch(
            [
                x.event_id
                if isinstance(x, Message)
                else x.target
                if isinstance(x, Edit)
                else x.redacts
                for x in batch
                if x is not None
            ]
        )
        for item in batch:
            if isinstance(item, Message):
                ws.add_message(item)
            elif isinstance(item, Edit):
                assert ws.apply_edit(item, item.new_body) in vars(EditOutcome).values()
            elif isinstance(item, Redaction):
                result = ws.redact(item)
                if isinstance(result, RevertEdit):
                    ws.set_message(result.target, server.reread(result.target, n))
        lookup.commit(ws)
        tails = ws.tails
        pos += size
    return tails


@settings(max_examples=150, deadline=None)
@given(
    ops=logs(max_size=40),
    data=st.data(),
    max_bytes=st.sampled_from([60, 120, 400]),
)
def test_windowset_pages_and_refresh_points_never_change_the_texts(
    ops: list[Op], data: st.DataObject, max_bytes: int
) -> None:
    """Any refresh points and page sizes, with replays, give the spec's map in one window each."""
    stamps = data.draw(st.lists(st.integers(0, 50), min_size=len(ops), max_size=len(ops)))
    stamps = [i * 10_000 + s * 1000 for i, s in enumerate(stamps)]  # out of order, some ties
    server = PureServer(ops, stamps)
    params = ChunkParams(gap_seconds=data.draw(st.sampled_from([90, 3600])), max_bytes=max_bytes)
    cuts = [*sorted(set(data.draw(st.lists(st.integers(1, len(ops)), max_size=4)))), len(ops)]

    incremental, tails, done = DictLookup(), dict[str, str](), 0
    for n in cuts:
        pages = data.draw(st.lists(st.integers(1, 8), min_size=n - done, max_size=n - done))
        if data.draw(st.booleans()):
            # A crash after the upsert and before the cursor: replay from the old cursor.
            run_pages(server, incremental, params, dict(tails), done, n, pages[:1])
        tails = run_pages(server, incremental, params, tails, done, n, pages)
        done = n
        assert incremental.texts() == expected_texts(ops, server.ids, stamps, n)

    rebuild = DictLookup()
    run_pages(server, rebuild, params, {}, 0, len(ops), [len(ops)])
    assert rebuild.texts() == incremental.texts() == expected_texts(ops, server.ids, stamps)
    for w in incremental.points.values():
        assert w.messages and len({m.thread_root for m in w.messages}) == 1


# ---------------------------------------------------------------- the writer against Synapse


async def _send(users: Sequence[MatrixUser], room: str, ops: Sequence[Op], ids: list[str]) -> None:
    for o in ops[len(ids) :]:
        user = users[o.sender]
        if o.kind == "msg":
            if o.thread >= 0:
                ids.append(await user.send_thread_reply(room, ids[o.thread], o.text))
            else:
                ids.append(await user.send_text(room, o.text))
        elif o.kind == "edit":
            ids.append(await user.send_edit(room, ids[o.target], o.text))
        else:
            ids.append(await users[0].redact(room, ids[o.target]))


async def _stamps(user: MatrixUser, room: str, ids: Sequence[str]) -> list[int]:
    """origin_server_ts of each event, read back from the room."""
    stamps: dict[str, int] = {}
    token: str | None = None
    while True:
        page = await user.messages(room, from_token=token, limit=100)
        stamps.update({e["event_id"]: int(e["origin_server_ts"]) for e in page["chunk"]})
        token = page.get("end")
        if not page["chunk"] or not token:
            return [stamps[i] for i in ids]


def _in_room(bodies: dict[str, str], ids: Iterable[str]) -> dict[str, str]:
    wanted = set(ids)
    return {k: v for k, v in bodies.items() if k in wanted}


@dataclass
class Writers:
    """One reader, an incremental store and a rebuild store, shared by a test's examples."""

    reader: MatrixUser
    incremental: Indexer
    rebuild: Indexer


@pytest_asyncio.fixture(loop_scope="session")
async def writers(hs: Homeserver, tmp_path: Path) -> AsyncIterator[Writers]:
    """Function-scoped on purpose: every hypothesis example reuses it with its own room."""
    reader = await hs.register()
    chunker = {"max_bytes": 150}
    inc = Indexer(reader_config(hs, reader, tmp_path / "incremental", chunker=chunker))
    full = Indexer(reader_config(hs, reader, tmp_path / "rebuild", chunker=chunker))
    try:
        yield Writers(reader, inc, full)
    finally:
        await inc.close()
        await full.close()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=logs(max_size=25), data=st.data())
async def test_refresh_incremental_equals_rebuild_and_spec(
    hs: Homeserver,
    alice: MatrixUser,
    bob: MatrixUser,
    writers: Writers,
    ops: list[Op],
    data: st.DataObject,
) -> None:
    """Refreshing after random prefixes in random page sizes gives the rebuild's and the spec's
    message → text map, every live message in exactly one window."""
    inc, full = writers.incremental, writers.rebuild
    room = await hs.fresh_room(alice)
    await bob.join(room)
    await admit(alice, room, writers.reader)
    cuts = [*sorted(set(data.draw(st.lists(st.integers(1, len(ops)), max_size=3)))), len(ops)]
    ids: list[str] = []
    for n in cuts:
        await _send((alice, bob), room, ops[:n], ids)
        size = data.draw(st.integers(1, 12), label="page_size")
        inc.writer.cfg = inc.cfg.model_copy(
            update={"refresh": inc.cfg.refresh.model_copy(update={"page_size": size})}
        )
        await inc.refresh([RoomID(room)])
        partial = expected_texts(ops, ids, await _stamps(alice, room, ids), n)
        assert _in_room(await inc.bodies(), ids) == partial
    await full.refresh([RoomID(room)])
    want = expected_texts(ops, ids, await _stamps(alice, room, ids))
    assert _in_room(await inc.bodies(), ids) == want
    assert _in_room(await full.bodies(), ids) == want
