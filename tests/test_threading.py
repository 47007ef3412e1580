"""Threading is decided at the adapters (issue 22): `asyncio.to_thread` appears only in the store
adapter (`ingest/store/`, its async facade `ingest.store.aio`) and the embedder adapters
(`ingest/embed/`); everyone else awaits them. A few CPU folds and the export file are named
below, each with why, and each capped at today's count so that no new call hides among them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ADAPTERS = ("ingest/store/", "ingest/embed/")

# path → (calls allowed, why it is not a store or embedder call)
EXCEPTIONS: dict[str, tuple[int, str]] = {
    "ingest/matrix/export.py": (
        2,
        "the export file is a room source of its own: its scan and pages",
    ),
    "ingest/search/searcher.py": (1, "the transcript fold: seconds of CPU over large logs"),
    "bot/chat/pins.py": (2, "the pinboard fold scrubs up to SCAN_TEXT of a log: CPU"),
    "bot/chat/commands/patterns.py": (
        1,
        "a /regex/ compiled: up to ~10 ms of CPU (`compile_off_loop`)",
    ),
}

# A worker thread by any of these names is the same decision as `asyncio.to_thread`.
THREAD_CALLS = {"to_thread", "run_in_executor"}


def _thread_calls(path: Path) -> list[int]:
    """The lines of `path` that call a worker thread (`asyncio.to_thread`, `run_in_executor`)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in THREAD_CALLS:
            lines.append(node.lineno)
    return lines


def _calls_outside_the_adapters() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for package in ("bot", "ingest"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(ADAPTERS):
                continue
            lines = _thread_calls(path)
            if lines:
                found[rel] = lines
    return found


def test_to_thread_only_in_the_store_and_embedder_adapters() -> None:
    """A store or embedder call awaits its adapter; a new `to_thread` elsewhere fails here."""
    offenders = [
        f"{rel}:{line}"
        for rel, lines in _calls_outside_the_adapters().items()
        if len(lines) > EXCEPTIONS.get(rel, (0, ""))[0]
        for line in lines
    ]
    assert not offenders, (
        "asyncio.to_thread outside ingest/store/ and ingest/embed/ (await the store facade, "
        "ingest.store.aio, or the embedder instead): " + ", ".join(offenders)
    )


def test_to_thread_exceptions_are_still_needed() -> None:
    """An exception whose calls are gone leaves the list: it must not cover a later one."""
    found = _calls_outside_the_adapters()
    stale = [
        f"{rel} (allowed {allowed}, found {len(found.get(rel, []))})"
        for rel, (allowed, _) in EXCEPTIONS.items()
        if len(found.get(rel, [])) != allowed
    ]
    assert not stale, "update EXCEPTIONS in tests/test_threading.py: " + ", ".join(stale)


def test_the_store_facade_is_where_the_store_threads() -> None:
    """The check sees what it looks for: the store's facade and an embedder do thread."""
    assert len(_thread_calls(ROOT / "ingest/store/aio.py")) >= 15
    assert _thread_calls(ROOT / "ingest/embed/local.py")
