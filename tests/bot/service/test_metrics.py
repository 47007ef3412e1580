"""`bot.service.metrics`: the service's metrics (on prometheus_client), and logs without secrets.

The exposition is read back by a strict parser written here from the text format's spec; the
service's metrics are tested pure (folding reports) and against the real Synapse, store and
embedder.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from bot.config import ServiceConfig
from bot.demo.synapse import SynapseServer, free_port
from bot.service.metrics import ServiceMetrics
from bot.service.run import Service
from ingest.index.reports import RefreshReport, RoomReport
from ingest.types import RoomID
from tests.botkit import ask, service_config
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import shared_embedder

# ---------------------------------------------------------------- a tiny text-format parser

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)(?: -?\d+)?$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

Labels = frozenset[tuple[str, str]]


@dataclass
class Family:
    name: str
    kind: str
    help: str
    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)


def _unescape(text: str, escapes: dict[str, str]) -> str:
    return re.sub(r"\\.", lambda m: escapes.get(m.group(), m.group()), text)


def _labels(text: str | None) -> Labels:
    pairs: list[tuple[str, str]] = []
    pos = 0
    while text and pos < len(text):
        m = _LABEL.match(text, pos)
        assert m is not None, f"bad labels at {text[pos:]!r}"
        pairs.append((m.group(1), _unescape(m.group(2), _UNESCAPE)))
        pos = m.end()
    assert len({k for k, _ in pairs}) == len(pairs), f"duplicate label in {text!r}"
    return frozenset(pairs)


def _value(text: str) -> float:
    return {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(text) or float(text)


def parse_exposition(text: str) -> dict[str, Family]:
    """Parse the Prometheus text format strictly: every line is HELP, TYPE, or a sample of a
    family declared above it; histograms are cumulative and end at `+Inf` == `_count`."""
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, doc = line[7:].partition(" ")
            helps[name] = _unescape(doc, {"\\\\": "\\", "\\n": "\n"})
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert kind in {"counter", "gauge", "histogram", "summary", "untyped"}, line
            assert name not in families, f"{name} declared twice"
            families[name] = Family(name, kind, helps.get(name, ""))
        elif line.startswith("#") or not line:
            continue
        else:
            m = _SAMPLE.match(line)
            assert m is not None, f"not a sample line: {line!r}"
            name = m.group("name")
            owner = next(
                (
                    f
                    for f in families.values()
                    if name == f.name
                    or (f.kind == "histogram" and name in {f"{f.name}{s}" for s in _SUFFIXES})
                ),
                None,
            )
            assert owner is not None, f"sample {name} has no TYPE line before it"
            key = (name, _labels(m.group("labels")))
            assert key not in owner.samples, f"duplicate series {key}"
            owner.samples[key] = _value(m.group("value"))
    for f in families.values():
        if f.kind == "histogram":
            _check_histogram(f)
    return families


_SUFFIXES = ("_bucket", "_sum", "_count")


def _check_histogram(f: Family) -> None:
    series: dict[Labels, list[tuple[float, float]]] = {}
    for (name, labels), value in f.samples.items():
        if name.endswith("_bucket"):
            le = dict(labels)["le"]
            rest = frozenset((k, v) for k, v in labels if k != "le")
            series.setdefault(rest, []).append((_value(le), value))
    for labels, buckets in series.items():
        counts = [n for _, n in sorted(buckets)]
        assert counts == sorted(counts), f"{f.name}{dict(labels)}: buckets not cumulative"
        assert sorted(buckets)[-1][0] == math.inf
        assert f.samples[(f"{f.name}_count", labels)] == counts[-1]


def value(families: dict[str, Family], name: str, **labels: str) -> float:
    """A sample's value (0 when the series does not exist yet)."""
    key = (name, frozenset(labels.items()))
    return next((f.samples[key] for f in families.values() if key in f.samples), 0.0)


# ---------------------------------------------------------------- the service's metrics, pure


def test_service_metrics_fold_refresh_reports() -> None:
    """Verdicts, lag and skip reasons follow the reports; a full pass forgets vanished rooms;
    per-room lag only in the detailed rendering, the open one has the largest lag alone."""
    now = [1000.0]
    m = ServiceMetrics(clock=lambda: now[0])
    a, b, dm = RoomID("!a"), RoomID("!b"), RoomID("!dm")
    report = RefreshReport("gen")
    report.rooms = [
        RoomReport(a, events_read=5, indexed=3, skipped=Counter({"command": 1, "own": 1})),
        RoomReport(b, events_read=1, indexed=1),
        RoomReport(dm, verdict="dm", detail="is_direct"),
    ]
    m.record_refresh(report, full=True)
    now[0] = 1012.5
    open_text = m.render().decode()
    assert "!a" not in open_text and "!b" not in open_text
    assert value(parse_exposition(open_text), "muninn_refresh_lag_max_seconds") == 12.5
    fams = parse_exposition(m.render(detail=True).decode())
    assert value(fams, "muninn_events_indexed_total") == 4
    assert value(fams, "muninn_events_skipped_total", reason="command") == 1
    assert value(fams, "muninn_rooms", verdict="eligible") == 2
    assert value(fams, "muninn_rooms", verdict="dm") == 1
    assert value(fams, "muninn_rooms", verdict="bridged") == 0  # every verdict is exported
    assert value(fams, "muninn_rooms", verdict="command_room") == 0  # issue 44's too
    assert value(fams, "muninn_refresh_lag_seconds", room=a) == 12.5
    assert value(fams, "muninn_refresh_passes_total", kind="full") == 1
    partial = RefreshReport("gen", rooms=[RoomReport(a, indexed=2)])
    m.record_refresh(partial, full=False)
    fams = parse_exposition(m.render(detail=True).decode())
    assert value(fams, "muninn_refresh_lag_seconds", room=a) == 0
    assert value(fams, "muninn_refresh_lag_seconds", room=b) == 12.5
    m.record_refresh(RefreshReport("gen", rooms=[RoomReport(a)]), full=True)
    fams = parse_exposition(m.render(detail=True).decode())
    assert value(fams, "muninn_rooms", verdict="eligible") == 1
    assert ("muninn_refresh_lag_seconds", frozenset({("room", b)})) not in fams[
        "muninn_refresh_lag_seconds"
    ].samples


# ---------------------------------------------------------------- the running service


@asynccontextmanager
async def running(cfg: ServiceConfig, hs: Homeserver) -> AsyncIterator[Service]:
    service = Service(cfg, embedder=shared_embedder(), full_at_start=False)
    await service.start()
    try:
        if cfg.appservice is not None:
            await hs.ping_appservice()  # Synapse backs off a listener that was down
        yield service
    finally:
        await service.stop()


async def scrape(port: int, service: Service) -> dict[str, Family]:
    """/metrics as the listener token's holder reads it (with the per-room series)."""
    assert service.api is not None and service.api.token_file is not None
    auth = {"Authorization": f"Bearer {service.api.token_file.read_text().strip()}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics", headers=auth) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse_exposition(await resp.text())


async def test_metrics_counters_move_after_a_refresh(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """/metrics parses; a refresh moves indexed/skipped/passes; a !search moves the histogram."""
    port = free_port()
    cfg = service_config(synapse, tmp_path, metrics={"port": port})
    async with running(cfg, hs) as service:
        room = await hs.fresh_room(alice)
        await hs.bot().join(room)
        before = await scrape(port, service)
        for text in ("the heron nests by the canal", "herons again", "a third heron note"):
            await alice.send_text(room, text)
        await ask(alice, room, "!search heron", synapse.bot_user_id)  # a command and a reply
        await service.scheduler.settle([RoomID(room)])
        after = await scrape(port, service)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("muninn_events_indexed_total") >= 3
    assert delta("muninn_events_skipped_total", reason="command") >= 1
    assert delta("muninn_events_skipped_total", reason="own") >= 1
    assert delta("muninn_refresh_passes_total", kind="rooms") >= 1
    assert value(after, "muninn_refresh_failures_total", kind="rooms") == 0
    assert value(after, "muninn_rooms", verdict="eligible") >= 1
    assert 0 <= value(after, "muninn_refresh_lag_seconds", room=room) < 30
    assert delta("muninn_commands_total", command="search", outcome="ok") == 1
    assert delta("muninn_search_latency_seconds_count", source="command") == 1
    assert value(after, "muninn_store_errors_total", op="count") == 0
    expected = {
        "muninn_events_indexed_total": "counter",
        "muninn_events_skipped_total": "counter",
        "muninn_rooms": "gauge",
        "muninn_refresh_lag_seconds": "gauge",
        "muninn_refresh_lag_max_seconds": "gauge",
        "muninn_refresh_passes_total": "counter",
        "muninn_refresh_failures_total": "counter",
        "muninn_search_latency_seconds": "histogram",
        "muninn_embedder_errors_total": "counter",
        "muninn_store_errors_total": "counter",
        "muninn_commands_total": "counter",
    }
    assert {n: after[n].kind for n in expected} == expected


# ---------------------------------------------------------------- secrets never logged


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the records carry: formatted messages, raw args, exception text."""
    parts = [caplog.text]
    for r in caplog.records:
        parts += [r.getMessage(), repr(r.args), str(r.msg), r.exc_text or ""]
    return "\n".join(parts)


async def test_service_logs_no_appservice_token_at_debug_level(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At debug level, a run with pushes (header and legacy query token), a refused push,
    commands, a search over HTTP and /healthz logs none of as_token, hs_token, listener token."""
    caplog.set_level(logging.DEBUG)
    port = free_port()
    cfg = service_config(synapse, tmp_path, metrics={"port": port})
    async with running(cfg, hs) as service, aiohttp.ClientSession() as session:
        room = await hs.fresh_room(alice)
        await hs.bot().join(room)
        await alice.send_text(room, "the lighthouse keeper logs the weather")
        await ask(alice, room, "!search lighthouse", synapse.bot_user_id)
        await ask(alice, room, "!search /unclosed(/", synapse.bot_user_id)
        txn = f"{synapse.appservice_url}/_matrix/app/v1/transactions"
        for url, headers in (
            (f"{txn}/legacy-1?access_token={synapse.hs_token}", {}),
            (f"{txn}/header-1", {"Authorization": f"Bearer {synapse.hs_token}"}),
            (f"{txn}/wrong-1?access_token=not-{synapse.hs_token}", {}),
        ):
            async with session.put(url, json={"events": []}, headers=headers) as resp:
                assert resp.status in (200, 403)
        base = f"http://127.0.0.1:{port}"
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        assert service.api is not None and service.api.token_file is not None
        token = service.api.token_file.read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        async with session.post(
            f"{base}/_muninn/search", json={"texts": ["weather"]}, headers=auth
        ) as resp:
            assert resp.status == 200
    logged = _logged(caplog)
    assert "muninn is running" in logged and any(
        r.levelno == logging.DEBUG for r in caplog.records
    )
    assert synapse.as_token not in logged
    assert synapse.hs_token not in logged
    assert token not in logged


async def test_service_logs_no_access_token_in_client_mode(
    synapse: SynapseServer,
    hs: Homeserver,
    alice: MatrixUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Client mode at debug level (a /sync loop, a command answered) never logs the token."""
    caplog.set_level(logging.DEBUG)
    me = await hs.register(displayname="Muninn client")
    cfg = service_config(synapse, tmp_path, client=me, metrics={"port": free_port()})
    room = await hs.fresh_room(alice)
    await me.join(room)
    async with running(cfg, hs):
        await ask(alice, room, "!help", me.user_id)
    logged = _logged(caplog)
    assert "muninn is running" in logged
    assert me.access_token not in logged
