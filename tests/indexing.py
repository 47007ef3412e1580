"""Test helpers for the writer and the read path: a config, a refresh, a collection scan."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

import yaml

from bot.demo.client import unique_localpart
from ingest.config import Config, EmbedderConfig, parse_config
from ingest.embed import DelegatingEmbedder, Embedder, WindowVectors, make_embedder
from ingest.errors import EmbedUnavailable, StoreError
from ingest.index.records import CURSOR_PREFIX
from ingest.index.refresh import Writer
from ingest.index.reports import RefreshReport
from ingest.matrix import MatrixReader, Request, Response
from ingest.store import Collection, Store, open_store
from ingest.types import EmbedderIdentity, RoomID, RoomState, StoredPoint
from tests.homeserver import Homeserver, MatrixUser
from tests.transport import Recorder

_EMBEDDER: Embedder | None = None


def shared_embedder() -> Embedder:
    """The real MiniLM embedder, loaded once for the whole session."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = make_embedder(EmbedderConfig(model="minilm"))
    return _EMBEDDER


_E5: Embedder | None = None


def shared_e5() -> Embedder:
    """The real multilingual-e5-small embedder, loaded once for the whole session."""
    global _E5
    if _E5 is None:
        _E5 = make_embedder(EmbedderConfig(model="multilingual-e5-small"))
    return _E5


def shared_pair() -> Embedder:
    """MiniLM and e5 as one pair embedder (`ingest.embed.pair`), over the shared models; never
    closed by a test (closing it would close both)."""
    from ingest.embed.pair import PairEmbedder

    return PairEmbedder(shared_embedder(), shared_e5())


class RecordingEmbedder(DelegatingEmbedder):
    """The real embedder, remembering every text it was given (to prove what never reached it)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.documents: list[str] = []
        self.queries: list[str] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return await self.inner.embed_documents(texts)

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        self.documents.extend(texts)
        return await self.inner.embed_windows(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.queries.extend(texts)
        return await self.inner.embed_queries(texts)

    async def close(self) -> None:
        """The shared embedder outlives a test."""


def _base(server_name: str, user_id: str, token: str, store: Path, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": server_name},
        "reader": {"user_id": user_id, "access_token": token},
        "index": {"store": {"path": str(store)}, "collection": "muninn_test"},
        # The model `shared_embedder` is, so a CLI run over an index the tests built in process
        # reads it as it is (the default pair: tests/ingest/embed/test_pair.py,
        # tests/ingest/search/test_small_rooms.py).
        "embedder": {"model": "minilm"},
    }
    for section, values in extra.items():
        doc[section] = {**doc.get(section, {}), **values}
    return doc


def reader_config_doc(
    hs: Homeserver, reader: MatrixUser, tmp_path: Path, **extra: Any
) -> dict[str, Any]:
    """The YAML document of `reader_config` (to write a config file for the CLI)."""
    doc = _base(hs.server_name, reader.user_id, reader.access_token, tmp_path / "qdrant", **extra)
    doc["homeserver"]["url"] = hs.base_url
    return doc


def reader_config(hs: Homeserver, reader: MatrixUser, tmp_path: Path, **extra: Any) -> Config:
    """A client-mode config for `reader` with an embedded store under tmp_path."""
    return parse_config(reader_config_doc(hs, reader, tmp_path, **extra), tmp_path)


PROJECT = Path(__file__).resolve().parents[1]  # the repository root


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def doc(self) -> dict[str, Any]:
        assert self.rc == 0, self.err
        doc = json.loads(self.out)
        assert isinstance(doc, dict)
        return doc


async def spawn_muninn(config: Path, *args: str, **pipes: int) -> asyncio.subprocess.Process:
    """Start `python -m bot.cli.main --config FILE ARGS…` in a child process (`pipes`:
    stdout=…)."""
    env = {k: v for k, v in os.environ.items() if k != "MUNINN_CONFIG"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli.main",
        "--config",
        str(config),
        *args,
        cwd=PROJECT,
        env=env,
        **pipes,
    )


async def muninn(config: Path, *args: str) -> Run:
    """`python -m bot.cli.main --config FILE ARGS…` in a child process, run to its end."""
    proc = await spawn_muninn(
        config, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def write_config(path: Path, doc: dict[str, Any]) -> Path:
    """Write a config document as YAML (the CLI's `--config FILE`)."""
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


class Indexer:
    """One test's writer: the real reader, the embedded store, the real (recorded) embedder."""

    def __init__(
        self,
        cfg: Config,
        *,
        embedder: RecordingEmbedder | None = None,
        reader: MatrixReader | None = None,
        command_prefix: str = "!",
    ) -> None:
        self.cfg = cfg
        self.embedder = embedder or RecordingEmbedder(shared_embedder())
        self.store: Store = open_store(cfg.index, cfg.base_dir)
        self.reader = reader or MatrixReader.from_config(cfg)
        self.writer = Writer(
            cfg, self.reader, self.store, self.embedder, command_prefix=command_prefix
        )

    async def refresh(self, rooms: Sequence[RoomID] | None = None) -> RefreshReport:
        return await self.writer.refresh(only=rooms)

    async def collection(self) -> Collection:
        return await self.writer.open()

    async def points(self) -> list[StoredPoint]:
        col = await self.collection()
        return await asyncio.to_thread(lambda: list(col.scroll()))

    async def dump(self) -> str:
        """Every chat point and every meta entry as one string: what a grep of the index sees."""
        col = await self.collection()
        points = await self.points()
        meta = await asyncio.to_thread(col.list_meta, "")
        return json.dumps([p.payload for p in points] + [meta], ensure_ascii=False)

    async def bodies(self) -> dict[str, str]:
        """event id → indexed body, over the whole collection."""
        out: dict[str, str] = {}
        for p in await self.points():
            for m in p.payload["messages"]:
                assert m["event_id"] not in out, f"{m['event_id']} is in two windows"
                out[m["event_id"]] = m["body"]
        return out

    async def close(self) -> None:
        await self.reader.close()
        await asyncio.to_thread(self.store.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---------------------------------------------------------------- a shared search corpus


def utc_ms(text: str) -> int:
    """`2024-01-10T09:00` (UTC) as milliseconds since the epoch."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Sent:
    """One message of a seeded corpus, as the homeserver took it."""

    key: str
    room: str  # the corpus room name (see `Corpus.rooms`)
    room_id: str
    event_id: str
    sender: str  # mxid
    ts: int
    body: str


@dataclass
class Corpus:
    """Rooms, senders and messages seeded for search tests, and the reader that may see them."""

    reader: MatrixUser
    rooms: dict[str, str] = field(default_factory=dict)  # name → room id
    aliases: dict[str, str] = field(default_factory=dict)  # name → canonical alias
    senders: dict[str, str] = field(default_factory=dict)  # name → mxid
    sent: dict[str, Sent] = field(default_factory=dict)  # key → message

    def by_event(self) -> dict[str, Sent]:
        return {s.event_id: s for s in self.sent.values()}


# (room, key, sender, UTC time, body). Conversations are days apart and each message a minute
# after the last, so each conversation is exactly one window (gap 30 min, ≤ 1,000 bytes).
# No body shares a lexical token with the paraphrase query of the dense test.
SEARCH_CORPUS: tuple[tuple[str, str, str, str, str], ...] = (
    ("eng", "migration", "ana", "2024-01-10T09:00", "the database migration broke the login page"),
    ("eng", "migration-ack", "ben", "2024-01-10T09:01", "ugh, rolling it back now"),
    ("eng", "budget-1", "ana", "2024-01-20T10:00", "the quarterly budget review moved to friday"),
    ("eng", "err-target", "ben", "2024-02-01T10:00", "the build failed with ERR_7731X on arm64"),
    ("eng", "err-d1", "cai", "2024-02-03T10:00", "ERR_7731Y showed up on the staging box"),
    ("eng", "err-d2", "ana", "2024-02-05T10:00", "ERR_7732X is the cache timeout, ignore it"),
    ("eng", "err-d3", "ben", "2024-02-07T10:00", "ERR_7730X was fixed by the last patch"),
    ("eng", "err-d4", "cai", "2024-02-09T10:00", "another ERR_7713X from the flaky test runner"),
    ("eng", "err-d5", "ana", "2024-02-11T10:00", "ERR_1731X means the disk is full"),
    ("eng", "hex-target", "cai", "2024-02-13T10:00", "windows update fails with 0x80070005 again"),
    ("eng", "hex-d1", "ben", "2024-02-15T10:00", "0x80070006 is an invalid handle, not ours"),
    ("eng", "hex-d2", "ana", "2024-02-17T10:00", "update error 0x8007000e: out of memory"),
    ("eng", "budget-2", "ben", "2024-03-10T10:00", "budget review notes are posted on the wiki"),
    ("eng", "budget-3", "cai", "2024-05-10T10:00", "budget review: we cut the cloud bill by half"),
    ("ops", "budget-ops", "ben", "2024-02-20T10:00", "ops budget review is on monday"),
    ("ops", "printer", "ana", "2024-02-22T10:00", "the printer on floor two jams daily"),
    ("ops", "coffee", "ben", "2024-02-24T10:00", "the coffee machine is fixed, enjoy"),
    ("ops", "rota", "ana", "2024-02-26T10:00", "on-call rota for march is up"),
    ("travel", "beijing", "cai", "2024-04-01T10:00", "我们明天去北京开会"),
    ("travel", "tokyo", "ana", "2024-04-03T10:00", "明日は東京で会議があります"),
    ("travel", "shanghai", "cai", "2024-04-05T10:00", "上海的天气很好"),
    ("travel", "osaka", "ana", "2024-04-07T10:00", "大阪でラーメンを食べた"),
)
CORPUS_ROOMS = ("eng", "ops", "travel")
CORPUS_SENDERS = {"ana": "Ana", "ben": "Ben", "cai": "Cai"}


async def seed_corpus(
    hs: Homeserver, spec: Sequence[tuple[str, str, str, str, str]] = SEARCH_CORPUS
) -> Corpus:
    """Seed `spec` into fresh aliased rooms with backdated appservice senders; a fresh reader
    (client mode) joins every room."""
    corpus = Corpus(reader=await hs.register(displayname="Reader"))
    users: dict[str, MatrixUser] = {}
    for name, display in CORPUS_SENDERS.items():
        users[name] = await hs.seed_user()
        await users[name].set_displayname(display)
        corpus.senders[name] = users[name].user_id
    owner = await hs.register(displayname="Owner")  # appservice users may not make aliases
    for room in CORPUS_ROOMS:
        localpart = unique_localpart(room)
        room_id = await owner.create_room(name=room, alias_localpart=localpart)
        corpus.rooms[room] = room_id
        corpus.aliases[room] = f"#{localpart}:{hs.server_name}"
        for user in [*users.values(), corpus.reader]:
            await user.join(room_id)
    for room, key, sender, when, body in spec:
        ts = utc_ms(when)
        room_id = corpus.rooms[room]
        event_id = await users[sender].send_text(room_id, body, ts=ts)
        corpus.sent[key] = Sent(key, room, room_id, event_id, users[sender].user_id, ts, body)
    return corpus


# ---------------------------------------------------------------- writer tests: faults and probes


class CountingReader(MatrixReader):
    """The real reader, remembering every request path (to prove a room was never read): its
    transport is a `Recorder` that notes each request's path and query as it goes out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.paths: list[str] = []
        self.queries: list[Any] = []  # each request's query, in the order of `paths`
        super().__init__(*args, transport=_Noting(self.paths, self.queries), **kwargs)

    @classmethod
    def counting(cls, cfg: Config) -> CountingReader:
        assert cfg.reader is not None
        return cls(cfg.homeserver.url, cfg.reader.access_token, cfg.reader.user_id)

    def touched(self, room_id: str) -> list[str]:
        """Every request path naming this room."""
        quoted = quote(room_id, safe="")
        return [p for p in self.paths if quoted in p or room_id in p]


class _Noting(Recorder):
    """The product's transport, each request's path and query noted in the given lists
    (cleared by the tests between the reads they compare)."""

    def __init__(self, paths: list[str], queries: list[Any]) -> None:
        super().__init__()
        self._paths, self._queries = paths, queries

    async def send(self, request: Request) -> Response:
        self._paths.append(request.path)
        self._queries.append(dict(request.params))
        return await super().send(request)


def without_past_members(state: RoomState) -> RoomState:
    """The state as a reader may see it before it knows the room's full member list (a partial
    state after a faster join, MSC3706): no past members, so no left puppet. Synapse's `/state`
    for a local room always names them, so this fault is injected, not produced."""
    return dataclasses.replace(state, past_members=())


class PartialStateReader(CountingReader):
    """The counting reader, its room states `without_past_members`."""

    async def room_state(self, room_id: RoomID | str) -> RoomState:
        return without_past_members(await super().room_state(room_id))


class FlakyCollection:
    """A real collection whose next `fail_upserts` upserts raise StoreError (a fault on demand)."""

    def __init__(
        self, inner: Collection, fail_upserts: int = 1, *, fail_cursor_saves: bool = False
    ) -> None:
        self.inner = inner
        self.fail_upserts = fail_upserts
        self.fail_cursor_saves = fail_cursor_saves  # every `cursor:` put_meta raises while set
        self.upserts = 0

    def put_meta(self, key: str, value: Mapping[str, Any]) -> None:
        if self.fail_cursor_saves and key.startswith(CURSOR_PREFIX):
            raise StoreError("injected: the store refused the cursor")
        self.inner.put_meta(key, value)

    def upsert(self, points: Sequence[Any]) -> None:
        if self.fail_upserts > 0:
            self.fail_upserts -= 1
            raise StoreError("injected: the store refused the upsert")
        self.upserts += 1
        self.inner.upsert(points)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FlakyEmbedder(RecordingEmbedder):
    """The recorded real embedder, failing its next `fail` document batches (Ollama down)."""

    def __init__(self, inner: Embedder, fail: int = 1) -> None:
        super().__init__(inner)
        self.fail = fail

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail > 0:
            self.fail -= 1
            raise EmbedUnavailable("injected: the embedder is down")
        return await super().embed_documents(texts)

    async def embed_windows(self, texts: Sequence[str]) -> list[WindowVectors]:
        if self.fail > 0:
            self.fail -= 1
            raise EmbedUnavailable("injected: the embedder is down")
        return await super().embed_windows(texts)


class RenamedEmbedder(FlakyEmbedder):
    """The real vectors under another identity: a compatibility change (rule 13)."""

    def __init__(self, inner: Embedder, model: str, fail: int = 0) -> None:
        super().__init__(inner, fail)
        self.model = model

    @property
    def identity(self) -> EmbedderIdentity:
        return dataclasses.replace(self.inner.identity, model=self.model)

    async def probe(self) -> EmbedderIdentity:
        return dataclasses.replace(await self.inner.probe(), model=self.model)


async def admit(owner: MatrixUser, room_id: str, reader: MatrixUser) -> None:
    """Invite `reader` into the room and join it."""
    await owner.invite(room_id, reader.user_id)
    await reader.join(room_id)


async def two_rooms(hs: Homeserver, seeder: MatrixUser) -> tuple[MatrixUser, str, str]:
    """A fresh reader in two fresh rooms of `seeder`'s, one message in each: the first room
    is the one a test faults, the second the one that must go on."""
    reader = await hs.register(displayname="Reader")
    faulty, healthy = await hs.fresh_room(seeder), await hs.fresh_room(seeder)
    for room_id in (faulty, healthy):
        await admit(seeder, room_id, reader)
    await seeder.send_text(faulty, "alpha first words")
    await seeder.send_text(healthy, "beta first words")
    return reader, faulty, healthy


async def send_texts(user: MatrixUser, room_id: str, bodies: Sequence[str]) -> list[str]:
    """Send messages in order; their event ids."""
    return [await user.send_text(room_id, b) for b in bodies]
