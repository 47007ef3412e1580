"""A faulty homeserver's pagination holds one room, never the writer (issue 37 item 5).

Real Synapse, the embedded store and the real embedder; the fault is injected in the reader's
transport for one room only (tests/transport.py `Recorder`), as a faulty homeserver or a proxy
before it answers: the same page under a new `end` each time, an `end` given before, new pages
forever, a `/messages` that never answers, a `/relations` that always has a `next_batch`. The
other room of the pass is written, the faulty one fails (or is cut short) by name, and the
walk makes a bounded number of requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from ingest.index import walkbounds
from ingest.matrix import MatrixReader, Request, Response
from ingest.matrix.timeline import MAX_RELATION_PAGES
from ingest.types import RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, reader_config, two_rooms
from tests.transport import Recorder, answer


def _is(request: Request, room_id: str, endpoint: str) -> bool:
    path = unquote(request.path)
    return f"/rooms/{room_id}/" in path and f"/{endpoint}" in path


class Faulty(Recorder):
    """The real transport, except `answer(request)` for one room's `endpoint` requests; an
    answer of None hangs (a homeserver that never answers)."""

    def __init__(self, room_id: str, endpoint: str, answer: Any) -> None:
        super().__init__()
        self.room_id, self.endpoint, self._answer = room_id, endpoint, answer
        self.faulted: list[Request] = []

    async def send(self, request: Request) -> Response:
        if not _is(request, self.room_id, self.endpoint):
            return await super().send(request)
        self.requests.append(request)
        self.faulted.append(request)
        response = self._answer(request)
        if response is None:
            await asyncio.Event().wait()
        return response


def _message(n: int, sender: str) -> dict[str, Any]:
    return {
        "event_id": f"$fault{n}",
        "type": "m.room.message",
        "sender": sender,
        "origin_server_ts": 1_764_547_200_000 + n,
        "content": {"msgtype": "m.text", "body": f"looped words {n}"},
    }


def same_page_new_end(sender: str) -> Any:
    ends = itertools.count()
    return lambda r: answer(payload={"chunk": [_message(0, sender)], "end": f"e{next(ends)}"})


def an_end_given_before(sender: str) -> Any:
    n = itertools.count()
    return lambda r: answer(
        payload={"chunk": [_message(k := next(n), sender)], "end": f"e{k % 2}"}
    )


FAULTS = {
    "same_page_new_end": (same_page_new_end, "events it gave before"),
    "an_end_given_before": (an_end_given_before, "a token it gave before"),
    "never_answers": (lambda sender: lambda r: None, "did not answer"),
}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
async def test_a_messages_fault_fails_its_room_and_the_other_rooms_are_written(
    hs: Homeserver,
    seeder: MatrixUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    """Regression (issue 37 item 5): each `/messages` fault of one room fails that room by
    name after a few requests (it spun for 76 s at ~85 requests/s, or waited 316 s, holding
    every room); the other room is written in the same pass."""
    monkeypatch.setattr(walkbounds, "WALK_READ_SECONDS", 1.0)  # the hang's wait, shortened
    reader, faulty, healthy = await two_rooms(hs, seeder)
    cfg = reader_config(hs, reader, tmp_path)
    make, named = FAULTS[fault]
    transport = Faulty(faulty, "messages", make(seeder.user_id))
    caplog.set_level(logging.WARNING, logger="muninn.index")
    async with Indexer(cfg, reader=MatrixReader.from_config(cfg, transport=transport)) as ix:
        report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert rooms[healthy].error is None and rooms[healthy].indexed == 1
        assert rooms[faulty].error is not None and named in rooms[faulty].error
        assert faulty in rooms[faulty].error
        assert len(transport.faulted) <= 3
        assert any(faulty in r.getMessage() for r in caplog.records)


async def test_new_pages_forever_cut_the_room_short_and_the_next_pass_goes_on(
    hs: Homeserver,
    seeder: MatrixUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A room whose pages never end (new events under new tokens) is read `WALK_PAGES` pages a
    pass, logged and reported as cut short, its cursor kept; the other room is written."""
    monkeypatch.setattr(walkbounds, "WALK_PAGES", 4)
    reader, faulty, healthy = await two_rooms(hs, seeder)
    cfg = reader_config(hs, reader, tmp_path)
    n = itertools.count()
    forever = lambda r: answer(  # noqa: E731
        payload={"chunk": [_message(k := next(n), seeder.user_id)], "end": f"e{k}"}
    )
    transport = Faulty(faulty, "messages", forever)
    caplog.set_level(logging.WARNING, logger="muninn.index")
    async with Indexer(cfg, reader=MatrixReader.from_config(cfg, transport=transport)) as ix:
        report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert rooms[healthy].error is None and rooms[healthy].indexed == 1
        assert rooms[faulty].error is None and "cut short after 4 pages" in rooms[faulty].detail
        assert len(transport.faulted) == 4
        assert any(
            faulty in r.getMessage() and "cut short" in r.getMessage() for r in caplog.records
        )
        report = await ix.refresh([RoomID(faulty)])  # on from its cursor: e3
        assert transport.faulted[4].params.get("from") == "e3"
        assert len(transport.faulted) == 8


async def test_a_relations_fault_fails_its_room_within_bounded_pages(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """Regression (issue 37 item 5): a `/relations` that always has a `next_batch` (81 s, every
    page kept) fails its room after `MAX_RELATION_PAGES` pages; the other room is written."""
    reader, faulty, healthy = await two_rooms(hs, seeder)
    said = await seeder.send_text(faulty, "the gate code is old")
    edit = await seeder.send_edit(faulty, said, "the gate code is new")
    cfg = reader_config(hs, reader, tmp_path)
    batches = itertools.count()
    always = lambda r: answer(payload={"chunk": [], "next_batch": f"b{next(batches)}"})  # noqa: E731
    transport = Faulty(faulty, "relations", always)
    async with Indexer(cfg, reader=MatrixReader.from_config(cfg, transport=transport)) as ix:
        await ix.refresh()
        await seeder.redact(faulty, edit)  # the writer re-reads the message's edits
        beta = await seeder.send_text(healthy, "beta second words")
        report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert rooms[healthy].error is None and beta in await ix.bodies()
        assert rooms[faulty].error is not None and "too many pages" in rooms[faulty].error
        assert len(transport.faulted) == MAX_RELATION_PAGES + 1


async def test_a_room_whose_pass_time_runs_out_is_behind_and_goes_on_next_pass(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 46): one sender's flood held the one writer until every page of it
    was embedded. In a pass of `muninn run` (`room_time`) a room's walk gets that much time
    (here none: one page), is reported `behind` with its cursor kept, and the next pass goes
    on from it; the other room is written in the same pass. A `muninn refresh` reads on."""
    reader, faulty, healthy = await two_rooms(hs, seeder)
    cfg = reader_config(hs, reader, tmp_path)
    n = itertools.count()
    flood = lambda r: answer(  # noqa: E731
        payload={"chunk": [_message(k := next(n), seeder.user_id)], "end": f"f{k}"}
    )
    transport = Faulty(faulty, "messages", flood)
    async with Indexer(cfg, reader=MatrixReader.from_config(cfg, transport=transport)) as ix:
        with walkbounds.room_time(0.0):
            report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert rooms[healthy].indexed == 1 and not rooms[healthy].behind
        assert rooms[faulty].behind and rooms[faulty].error is None
        assert report.behind() == [faulty] and len(transport.faulted) == 2  # one page left
        assert rooms[faulty].as_json()["behind"] is True
        monkeypatch.setattr(walkbounds, "WALK_PAGES", 5)  # a refresh reads on (to a bound)
        again = await ix.refresh([RoomID(faulty)])  # on from its cursor
        assert transport.faulted[2].params.get("from") == "f0"
        assert not again.rooms[0].behind and "cut short after 5 pages" in again.rooms[0].detail


async def test_a_cursor_the_homeserver_refuses_is_reset_and_the_room_read_again(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (issue 46): a room whose stored cursor the homeserver refuses (400 "'from'
    parameter is invalid": a database restored or replaced) failed at every pass, never
    indexed again. The refusal resets that room's cursor: it is read again from its start,
    what is indexed kept until replaced, the reset reported and logged, and the message sent
    since is indexed; the other room goes on from its own cursor."""
    reader, faulty, healthy = await two_rooms(hs, seeder)
    cfg = reader_config(hs, reader, tmp_path)
    refused: list[Request] = []
    armed: list[bool] = []  # from the second pass on: its first request is from the cursor

    def once(request: Request) -> Response | None:
        if not armed or refused or not _is(request, faulty, "messages"):
            return None
        refused.append(request)
        return answer(400, {"errcode": "M_UNKNOWN", "error": "'from' parameter is invalid"})

    transport = Recorder(fault=once)
    caplog.set_level(logging.WARNING, logger="muninn.index")
    async with Indexer(cfg, reader=MatrixReader.from_config(cfg, transport=transport)) as ix:
        await ix.refresh()
        before = await ix.bodies()
        since = await seeder.send_text(faulty, "alpha second words")
        armed.append(True)
        report = await ix.refresh()
        rooms = {r.room_id: r for r in report.rooms}
        assert len(refused) == 1 and rooms[faulty].error is None
        assert rooms[faulty].cursor_reset and "refused the room's cursor" in rooms[faulty].detail
        assert not rooms[healthy].cursor_reset and rooms[healthy].error is None
        bodies = await ix.bodies()
        assert bodies[since] == "alpha second words" and before.items() <= bodies.items()
        assert any(
            faulty in r.getMessage() and "from the room's start" in r.getMessage()
            for r in caplog.records
        )
        assert "from" in refused[0].params
        at = next(i for i, r in enumerate(transport.requests) if r is refused[0])
        walked = [r for r in transport.requests[at + 1 :] if _is(r, faulty, "messages")]
        assert "from" not in walked[0].params  # from the room's start
        report = await ix.refresh([RoomID(faulty)])  # the new cursor is taken again
        assert not report.rooms[0].cursor_reset and report.rooms[0].error is None
