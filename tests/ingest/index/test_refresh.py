"""ingest.index.refresh end to end: content rules 5–9 and writer rules 10–13 against the real
parts.

Real Synapse, the embedded qdrant-edge store in tmp_path and the real MiniLM embedder. Faults the
real parts cannot produce on demand (a refused upsert, an embedder that is down) are injected at
the adapter edge by wrappers from `tests.indexing`.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from ingest.config import load_config
from ingest.errors import EmbedUnavailable, StoreError
from ingest.index.records import COMPAT_KEY, CURSOR_PREFIX, TOMBSTONE_PREFIX, add_tombstone
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from ingest.types import RoomID
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    PROJECT,
    FlakyCollection,
    FlakyEmbedder,
    Indexer,
    RenamedEmbedder,
    admit,
    reader_config,
    send_texts,
    shared_embedder,
)
from tests.inprocess import muninn_here

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SYNAPSE_TOKEN = "syt_" + "bXVuaW5u_QWxpY2VTZWNyZXRUb2tlbg_1a2B3c"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
PEM_KEY = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
PASSWORD = "Hunter2-Zebra-9931"
MYSQL_PASSWORD = "Zebra-Sql-4471"
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"


async def _reader_in(hs: Homeserver, owner: MatrixUser, *rooms: str) -> MatrixUser:
    """A fresh client-mode reader user joined to exactly these rooms."""
    reader = await hs.register(displayname="Reader")
    for room_id in rooms:
        await admit(owner, room_id, reader)
    return reader


def _room_report(report: Any, room_id: str) -> Any:
    return next(r for r in report.rooms if r.room_id == room_id)


async def _hashes(ix: Indexer) -> dict[str, str]:
    return {str(p.id): str(p.payload["content_hash"]) for p in await ix.points()}


# ---------------------------------------------------------------- rule 5: encrypted and media


async def test_refresh_skips_encrypted_and_media_and_counts_them(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """m.room.encrypted and media events are counted in report.skipped and stored nowhere."""
    reader = await _reader_in(hs, alice, room)
    await alice.send_text(room, "plain words before")
    for _ in range(2):
        await alice.send_encrypted(room)
    await alice.send_image(room, "holiday-snapshot-qx71.png")
    await alice.send_text(room, "plain words after")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = _room_report(await ix.refresh(), room)
        assert report.skipped["encrypted"] == 2
        assert report.skipped["media"] == 1
        assert sorted((await ix.bodies()).values()) == ["plain words after", "plain words before"]
        dump = await ix.dump()
        for needle in ("megolm", "AwgAEnAC", "FAKEDEVICE", "holiday-snapshot-qx71", "mxc://"):
            assert needle not in dump
        assert not any("AwgAEnAC" in d or "qx71" in d for d in ix.embedder.documents)


# ---------------------------------------------------------------- rule 6: edits


async def test_refresh_edit_replaces_original_and_old_word_is_gone(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """An edit replaces the original by event id; the old word and `* fallback` are nowhere."""
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "meet at the quokkabridge tonight")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert (await ix.bodies())[original] == "meet at the quokkabridge tonight"
        await alice.send_edit(room, original, "meet at the harbour tonight")
        report = _room_report(await ix.refresh(), room)
        assert report.edits_applied == 1
        assert await ix.bodies() == {original: "meet at the harbour tonight"}
        dump = await ix.dump()
        assert "quokkabridge" not in dump
        assert "* meet" not in dump
        assert not any("* meet" in d for d in ix.embedder.documents)


@pytest.mark.parametrize(
    ("msgtype", "new_body"),
    [("m.notice", "moved to the wiki"), ("m.text", "!pins #later"), ("m.image", "map.png")],
)
async def test_refresh_edit_into_what_is_not_indexed_removes_the_old_words(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path, msgtype: str, new_body: str
) -> None:
    """A message edited into a notice, a command or an image no longer says its old words:
    they are in no point, and the new content is not indexed either."""
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "the vault code is stored at wombatgate")
    kept = await alice.send_text(room, "unrelated words stay")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        await alice.send_edit(room, original, new_body, msgtype=msgtype)
        await ix.refresh()
        bodies = await ix.bodies()
        assert bodies[kept] == "unrelated words stay"
        assert bodies.get(original, "") == ""
        dump = await ix.dump()
        assert "wombatgate" not in dump
        assert new_body not in dump


async def test_refresh_counts_another_bots_edited_notice_as_notices(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """A bot updating its own progress notice: the notice and its edit are counted as notices,
    not as an invalid edit (an operator watches that counter), and neither is indexed."""
    reader = await _reader_in(hs, alice, room)
    notice = {"msgtype": "m.notice", "body": "build 41: 10% done"}
    progress = await alice.send(room, "m.room.message", notice)
    await alice.send_edit(room, progress, "build 41: 90% done", msgtype="m.notice")
    await alice.send_text(room, "thanks, bot")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = _room_report(await ix.refresh(), room)
        assert report.skipped["notice"] == 2
        assert report.skipped["invalid_edit"] == 0
        assert list((await ix.bodies()).values()) == ["thanks, bot"]


async def test_search_never_shows_a_message_edited_into_what_is_not_indexed(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """The withdrawn message is kept (a redaction of its edit reverts it) but says nothing: a
    search, by its sender's name or its old meaning, returns no hit for it and no empty line;
    the window beside it is still found."""
    reader = await _reader_in(hs, alice, room)
    pad = "and it has been so since the spring audit of the whole building"
    original = await alice.send_text(room, f"the vault code is stored at wombatgate, {pad}")
    kept = await alice.send_text(room, f"the vault inspection is on friday, {pad}")
    # two lines do not fit in 100 bytes: each message is a window of its own
    async with Indexer(reader_config(hs, reader, tmp_path, chunker={"max_bytes": 100})) as ix:
        await ix.refresh()
        await alice.send_edit(room, original, "!pins", msgtype="m.text")
        await ix.refresh()
        assert original in {e for p in await ix.points() for e in p.payload["event_ids"]}
        searcher = Searcher(ix.store, ix.embedder, server_name=hs.server_name)
        for text in ("Alice", "where is the vault code stored", "vault"):
            result = await searcher.search(SearchQuery.build([text], room_ids=[room]))
            shown = [m for h in result.hits for m in h.messages]
            assert all(m["body"] for m in shown), text
            assert original not in {m["event_id"] for m in shown}, text
        result = await searcher.search(SearchQuery.build(["vault inspection"], room_ids=[room]))
        assert kept in {m["event_id"] for h in result.hits for m in h.messages}


async def test_refresh_edit_of_a_long_message_rewrites_its_payload(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Regression: an edit past the embedded cut of a long message must still replace its body.

    A message longer than `max_bytes` is a window alone whose embedded text is truncated; an edit
    of its tail leaves that text (and so the content hash) equal, and the writer skipped the
    upsert: the old word stayed in the payload and the lexical vector.
    """
    reader = await _reader_in(hs, alice, room)
    head = "lorem ipsum dolor sit amet " * 20
    original = await alice.send_text(room, head + "the tail word is zanzibarite")
    async with Indexer(reader_config(hs, reader, tmp_path, chunker={"max_bytes": 200})) as ix:
        await ix.refresh()
        await alice.send_edit(room, original, head + "the tail word is quartzfield")
        await ix.refresh()
        assert (await ix.bodies())[original].endswith("quartzfield")
        assert "zanzibarite" not in await ix.dump()


async def test_refresh_ignores_edit_by_another_sender(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """An m.replace sent by someone other than the original's sender changes nothing."""
    await bob.join(room)
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "the budget is approved")
    await bob.send_edit(room, original, "the budget is forged by mallory")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = _room_report(await ix.refresh(), room)
        assert report.edits_applied == 0
        assert await ix.bodies() == {original: "the budget is approved"}
        assert "mallory" not in await ix.dump()


async def test_refresh_ignores_edit_of_an_edit(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """An m.replace whose target is itself an edit is not applied (spec: no edits of edits)."""
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "version one")
    edit = await alice.send_edit(room, original, "version two")
    await alice.send_edit(room, edit, "version three nested")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert await ix.bodies() == {original: "version two"}
        assert "nested" not in await ix.dump()


# ---------------------------------------------------------------- rule 7: redactions


async def test_refresh_redaction_removes_text_and_reply_quote(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """A redacted message's text is gone after the next refresh, also as a reply's fallback."""
    await bob.join(room)
    reader = await _reader_in(hs, alice, room)
    secret = await alice.send_text(room, "my flat is at platypuslane seven")
    kept = await alice.send_text(room, "unrelated chatter")
    reply = await bob.send_reply(room, secret, "noted, thanks")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        bodies = await ix.bodies()
        assert bodies[reply] == "noted, thanks"  # the fallback quote was never indexed
        assert "platypuslane" in bodies[secret]
        await alice.redact(room, secret)
        report = _room_report(await ix.refresh(), room)
        assert report.redactions_applied == 1
        assert await ix.bodies() == {kept: "unrelated chatter", reply: "noted, thanks"}
        assert "platypuslane" not in await ix.dump()


async def test_refresh_redacted_edit_reverts_to_previous_edit(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """original → edit1 → edit2; redacting edit2 brings back edit1's text, not the original's
    (nor a later edit by another sender, nor an edit of an edit)."""
    await bob.join(room)
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "draft alpha")
    edit1 = await alice.send_edit(room, original, "draft beta")
    edit2 = await alice.send_edit(room, original, "draft gamma")
    await bob.send_edit(room, original, "draft forged")
    await alice.send_edit(room, edit1, "draft nested")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert await ix.bodies() == {original: "draft gamma"}
        await alice.redact(room, edit2)
        await ix.refresh()
        assert await ix.bodies() == {original: "draft beta"}
        dump = await ix.dump()
        assert "gamma" not in dump and "forged" not in dump and "nested" not in dump


async def test_refresh_redacted_edit_reverts_to_a_scrubbed_earlier_text(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """A redacted latest edit brings back the earlier text as the homeserver re-reads it: an
    earlier edit holding a secret (or, with no edit left, an original holding one) comes back
    scrubbed, in no point and never embedded."""
    reader = await _reader_in(hs, alice, room)
    edited = await alice.send_text(room, "draft without secrets")
    await alice.send_edit(room, edited, f"draft with password={PASSWORD} inside")
    latest = await alice.send_edit(room, edited, "draft cleaned up")
    leaky = await alice.send_text(room, f"token {GITHUB_TOKEN} pasted")
    fixed = await alice.send_edit(room, leaky, "token removed")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert await ix.bodies() == {edited: "draft cleaned up", leaky: "token removed"}
        embedded = len(ix.embedder.documents)
        await alice.redact(room, latest)
        await alice.redact(room, fixed)
        report = _room_report(await ix.refresh(), room)
        assert report.redactions_applied == 2
        assert await ix.bodies() == {
            edited: "draft with password=[redacted:password] inside",
            leaky: "token [redacted:github_token] pasted",
        }
        assert len(ix.embedder.documents) > embedded  # the re-read texts were embedded
        for secret in (PASSWORD, GITHUB_TOKEN):
            assert secret not in await ix.dump()
            assert not any(secret in d for d in ix.embedder.documents)


# ---------------------------------------------------------------- rule 8: the scrub


async def test_refresh_secrets_never_reach_embedder_or_payload(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Access tokens, GitHub tokens, PEM keys, password=…, a command line's password and a
    Telegram bot token are scrubbed before embedding."""
    reader = await _reader_in(hs, alice, room)
    original = await alice.send_text(room, "harmless first version")
    await send_texts(
        alice,
        room,
        [
            f"my token is {SYNAPSE_TOKEN} oops",
            f"ci uses {GITHUB_TOKEN}",
            f"here is the key\n{PEM_KEY}",
            f"login with password={PASSWORD} please",
            f"restore with mysql -u root -p{MYSQL_PASSWORD} app < dump.sql",
            f"the alerts bot is {TELEGRAM_TOKEN}",
        ],
    )
    await alice.send_edit(room, original, f"edited: password={PASSWORD}")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert len(await ix.bodies()) == 7
        dump = await ix.dump()
        assert "[redacted:" in dump
        for secret in (
            SYNAPSE_TOKEN,
            GITHUB_TOKEN,
            PEM_BODY,
            PASSWORD,
            MYSQL_PASSWORD,
            TELEGRAM_TOKEN.split(":")[1],
        ):
            assert secret not in dump
            assert not any(secret in d for d in ix.embedder.documents)


# ---------------------------------------------------------------- rule 9: not indexed


async def test_refresh_skips_notices_commands_and_own_messages(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """m.notice from anyone, !commands and the reader's own messages are never indexed."""
    reader = await _reader_in(hs, alice, room)
    kept = await alice.send_text(room, "a real message")
    await alice.send_notice(room, "notice from a bot wombatnotice")
    await alice.send_text(room, "!search wombatcommand")
    await reader.send_text(room, "the reader itself speaks wombatreader")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = _room_report(await ix.refresh(), room)
        assert await ix.bodies() == {kept: "a real message"}
        assert (report.skipped["notice"], report.skipped["command"], report.skipped["own"]) == (
            1,
            1,
            1,
        )
        assert "wombat" not in await ix.dump()


async def test_refresh_skips_the_commands_of_the_prefix_it_is_given(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """The writer reads no bot setting: it skips commands by the prefix the bot hands it, so
    with `?` a `?search` stays out and a message that starts with `!` is chat like any other."""
    reader = await _reader_in(hs, alice, room)
    kept = await alice.send_text(room, "!important: the deploy moved to noon")
    await alice.send_text(room, "?search wombatcommand")
    async with Indexer(reader_config(hs, reader, tmp_path), command_prefix="?") as ix:
        report = _room_report(await ix.refresh(), room)
        assert await ix.bodies() == {kept: "!important: the deploy moved to noon"}
        assert report.skipped["command"] == 1


async def test_refresh_thread_replies_chunk_with_their_root(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Thread replies sit in a thread window whose payload names the root; the root stays main."""
    await bob.join(room)
    reader = await _reader_in(hs, alice, room)
    root = await alice.send_text(room, "thread root question")
    main = await bob.send_text(room, "main timeline chatter")
    r1 = await bob.send_thread_reply(room, root, "first thread answer")
    r2 = await alice.send_thread_reply(room, root, "second thread answer")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        by_root: dict[str | None, list[str]] = {}
        for p in await ix.points():
            ids = [m["event_id"] for m in p.payload["messages"]]
            by_root.setdefault(p.payload["thread_root"], []).extend(ids)
        assert by_root == {None: [root, main], root: [r1, r2]}


# ---------------------------------------------------------------- rule 10: faults


async def test_refresh_failed_upsert_keeps_cursor_and_next_run_converges(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """A StoreError on upsert leaves the cursor unchanged; the next refresh indexes everything."""
    reader = await _reader_in(hs, alice, room)
    first = await send_texts(alice, room, ["one fish", "two fish"])
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        col = await ix.collection()
        cursor = col.get_meta(CURSOR_PREFIX + room)
        more = await send_texts(alice, room, ["red fish", "blue fish"])
        flaky = FlakyCollection(col, fail_upserts=1)
        ix.writer.collection = flaky
        with pytest.raises(StoreError, match="injected"):
            await ix.refresh()
        assert col.get_meta(CURSOR_PREFIX + room) == cursor
        await ix.refresh()
        assert flaky.upserts >= 1
        bodies = await ix.bodies()
        assert sorted(bodies) == sorted(first + more)


async def test_refresh_failed_embed_keeps_cursor_and_next_run_converges(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """EmbedUnavailable mid-refresh leaves the cursor unchanged; the next refresh converges."""
    reader = await _reader_in(hs, alice, room)
    first = await send_texts(alice, room, ["alpha line", "beta line"])
    embedder = FlakyEmbedder(shared_embedder(), fail=0)
    async with Indexer(reader_config(hs, reader, tmp_path), embedder=embedder) as ix:
        await ix.refresh()
        col = await ix.collection()
        cursor = col.get_meta(CURSOR_PREFIX + room)
        before = await _hashes(ix)
        more = await send_texts(alice, room, ["gamma line"])
        embedder.fail = 1
        with pytest.raises(EmbedUnavailable):
            await ix.refresh()
        assert col.get_meta(CURSOR_PREFIX + room) == cursor
        assert await _hashes(ix) == before
        await ix.refresh()
        assert sorted(await ix.bodies()) == sorted(first + more)


# ---------------------------------------------------------------- rule 11: idempotence


async def test_refresh_second_run_writes_and_embeds_nothing(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """With nothing new, a second refresh embeds no text and writes or deletes no point."""
    reader = await _reader_in(hs, alice, room)
    await send_texts(alice, room, [f"steady message {i}" for i in range(12)])
    async with Indexer(reader_config(hs, reader, tmp_path, chunker={"max_bytes": 200})) as ix:
        await ix.refresh()
        before = await _hashes(ix)
        embedded = len(ix.embedder.documents)
        report = _room_report(await ix.refresh(), room)
        assert report.events_read == 0  # resumed at the cursor: nothing indexed is re-read
        assert len(ix.embedder.documents) == embedded
        assert (report.windows_written, report.windows_deleted, report.windows_embedded) == (
            0,
            0,
            0,
        )
        assert await _hashes(ix) == before


async def test_refresh_resent_unchanged_window_costs_no_embedding(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Replaying pages from an old cursor re-derives the same windows and embeds none of them."""
    reader = await _reader_in(hs, alice, room)
    await send_texts(alice, room, [f"replayed message {i}" for i in range(10)])
    async with Indexer(reader_config(hs, reader, tmp_path, refresh={"page_size": 4})) as ix:
        await ix.refresh()
        before = await _hashes(ix)
        col = await ix.collection()
        col.delete_meta(CURSOR_PREFIX + room)  # as if every page's cursor save had been lost
        embedded = len(ix.embedder.documents)
        report = _room_report(await ix.refresh(), room)
        assert report.skipped["duplicate"] == 10
        assert len(ix.embedder.documents) == embedded
        assert report.windows_embedded == 0
        assert await _hashes(ix) == before


async def test_refresh_tail_closed_by_new_message_is_not_re_embedded(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """The open tail is re-chunked with each new message; once closed unchanged, it is re-sent
    to the writer but not re-embedded or rewritten (its content hash is unchanged)."""
    room = await hs.fresh_room(seeder)
    reader = await _reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    for i in range(3):
        await seeder.send_text(room, f"morning message {i}", ts=base + i * 1000)
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        embedded = len(ix.embedder.documents)
        # Past gap_seconds: the tail closes unchanged and the new message opens a new window.
        late = await seeder.send_text(room, "evening message", ts=base + 7_200_000)
        report = _room_report(await ix.refresh(), room)
        assert ix.embedder.documents[embedded:] == [
            next(
                str(p.payload["text"]) for p in await ix.points() if late in p.payload["event_ids"]
            )
        ]
        assert report.windows_written == 1
        assert len(await ix.points()) == 2


# ---------------------------------------------------------------- rule 10: killed and restarted


_KILLED_REFRESH = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pathlib import Path
    from ingest.config import load_config
    from ingest.index.records import CURSOR_PREFIX
    from tests.indexing import Indexer

    mode, after = sys.argv[2], int(sys.argv[3])

    async def main() -> None:
        ix = Indexer(load_config(sys.argv[1]))
        col = await ix.collection()
        upsert, put_meta = col.upsert, col.put_meta
        page_writes: list[str] = []  # the current page's upsert and cursor save, in order
        pages = [0]

        def write(kind):
            # The page's second write, whichever it is: its first is done, this one never is.
            if mode == "between-writes" and pages[0] + 1 == after and len(page_writes) == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            page_writes.append(kind)

        def upsert_between(points):
            write("upsert")
            upsert(points)

        def put_meta_between(key, value):
            if key.startswith(CURSOR_PREFIX):
                write("cursor")
            put_meta(key, value)

        col.upsert, col.put_meta = upsert_between, put_meta_between

        def progress(tick):
            pages[0] += 1
            page_writes.clear()
            print(f"page {tick.events}", flush=True)

        await ix.writer.refresh(progress=progress)

    asyncio.run(main())
    """
)


async def _run_killed_refresh(config: Path, mode: str, after: int) -> int:
    """Run a refresh in a subprocess and SIGKILL it partway; the events of the pages it
    reported done (their cursor saved)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_REFRESH,
        str(config),
        mode,
        str(after),
        cwd=PROJECT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    done = 0
    if mode == "external":
        pages = 0
        while pages < after:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, (await proc.stderr.read()).decode() if proc.stderr else "no output"
            pages += line.startswith(b"page ")
        os.kill(proc.pid, signal.SIGKILL)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    for line in out.decode().splitlines():
        done = int(line.removeprefix("page ")) if line.startswith("page ") else done
    return done


def _write_config(
    path: Path, hs: Homeserver, reader: MatrixUser, store: Path, **extra: Any
) -> None:
    doc: dict[str, Any] = {
        "homeserver": {"url": hs.base_url, "server_name": hs.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        "index": {"store": {"path": str(store)}, "collection": "muninn_test"},
        **extra,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def long_room(hs: Homeserver) -> tuple[MatrixUser, str]:
    """One room of a few hundred events (messages, edits, redactions), seeded once a module."""
    seeder = await hs.seed_user()
    room = await hs.fresh_room(seeder)
    base = 1_700_000_000_000
    ids: list[str] = []
    for i in range(150):
        # Backdated, with a long silence every 50 messages, so windows close by gap and size.
        ts = base + i * 20_000 + (i // 50) * 7_200_000
        ids.append(await seeder.send_text(room, f"line {i} of the long log, word w{i}", ts=ts))
        if i % 30 == 29:
            await seeder.send_edit(room, ids[i - 5], f"line {i - 5} edited, word e{i}", ts=ts + 1)
            await seeder.redact(room, ids[i - 20])
    return seeder, room


_KILLED_EXTRA: dict[str, Any] = {"chunker": {"max_bytes": 700}, "refresh": {"page_size": 20}}


@dataclass(frozen=True)
class CleanRun:
    reader: MatrixUser  # the killed runs read as the same user: the same room, joins and all
    events_read: int
    hashes: dict[str, str]
    bodies: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def clean_run(
    hs: Homeserver, long_room: tuple[MatrixUser, str], tmp_path_factory: pytest.TempPathFactory
) -> CleanRun:
    """One uninterrupted refresh of `long_room` (which no test changes), once a module: what
    every killed-and-restarted run, by the same reader, must equal."""
    seeder, room = long_room
    reader = await _reader_in(hs, seeder, room)
    folder = tmp_path_factory.mktemp("clean")
    clean = Indexer(reader_config(hs, reader, folder, **_KILLED_EXTRA))
    try:
        every = _room_report(await clean.refresh(), room)
        return CleanRun(reader, every.events_read, await _hashes(clean), await clean.bodies())
    finally:
        await clean.close()


@pytest.mark.parametrize("mode", ["between-writes", "external"])
async def test_refresh_killed_midway_converges_to_clean_run(
    hs: Homeserver,
    long_room: tuple[MatrixUser, str],
    clean_run: CleanRun,
    tmp_path: Path,
    mode: str,
) -> None:
    """SIGKILL mid-refresh, then restart: the same point ids and content hashes as a clean run.

    `between-writes` kills a page between its two writes (its points and its cursor, in
    whichever order the writer makes them): the restart must read that page again, so the
    cursor may only move once the page's points are written."""
    room = long_room[1]
    config = tmp_path / "killed.yaml"
    _write_config(config, hs, clean_run.reader, tmp_path / "killed", **_KILLED_EXTRA)
    acknowledged = await _run_killed_refresh(config, mode, after=2)
    killed = Indexer(load_config(config))
    try:
        partial = await _hashes(killed)
        assert partial, "the killed run wrote nothing"
        restarted = _room_report(await killed.refresh(), room)
        assert len(partial) < len(clean_run.hashes), "the kill came after the refresh had finished"
        if mode == "between-writes":
            # The killed page and everything after it, read again: nothing skipped.
            assert acknowledged == 20
            assert restarted.events_read == clean_run.events_read - acknowledged
        assert await _hashes(killed) == clean_run.hashes
        assert await killed.bodies() == clean_run.bodies
    finally:
        await killed.close()


# ---------------------------------------------------------------- rule 12: purge tombstones


async def test_refresh_tombstone_deletes_window_and_never_reindexes(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """A purge tombstone deletes its messages on the next refresh; later ones never return them."""
    room = await hs.fresh_room(seeder)
    reader = await _reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    early = await seeder.send_text(room, "early kept message", ts=base)
    doomed = [
        await seeder.send_text(room, f"doomed message dodo{i}", ts=base + 60_000 * (i + 1))
        for i in range(3)
    ]
    late = await seeder.send_text(room, "late kept message", ts=base + 600_000)
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert set(await ix.bodies()) == {early, late, *doomed}
        add_tombstone(await ix.collection(), RoomID(room), base + 30_000, base + 300_000)
        report = _room_report(await ix.refresh(), room)
        assert report.purged_messages == 3
        assert set(await ix.bodies()) == {early, late}
        await seeder.send_edit(room, doomed[0], "doomed message edited back dodoX", ts=base + 1)
        await seeder.send_text(room, "after the purge", ts=base + 700_000)
        await ix.refresh()
        col = await ix.collection()
        col.delete_meta(CURSOR_PREFIX + room)  # walk the whole room again from its start
        await ix.refresh()
        bodies = await ix.bodies()
        assert not set(doomed) & set(bodies)
        assert early in bodies and late in bodies
        assert "dodo" not in json.dumps([p.payload for p in await ix.points()])


async def test_refresh_applies_tombstone_written_by_purge_cli(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`muninn purge --room R --from T1 --to T2` writes a tombstone the next refresh applies;
    `--dry-run` counts the messages the range covers and writes nothing, and on a terminal
    the count is shown and a purge not confirmed writes nothing (issue 36 item 4)."""
    room = await hs.fresh_room(seeder)
    reader = await _reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    kept = await seeder.send_text(room, "kept message", ts=base)
    await seeder.send_text(room, "purged by the operator zqcliq", ts=base + 3_600_000)
    store = tmp_path / "qdrant"
    config = tmp_path / "config.yaml"
    _write_config(config, hs, reader, store)
    ix = Indexer(load_config(config))
    await ix.refresh()
    await ix.close()  # one process per store path
    span = ("purge", "--room", room, "--from", str(base + 1), "--to", "2023-11-15T00:00")
    dry = await muninn_here(config, *span, "--dry-run")
    assert dry.rc == 0, dry.err
    assert dry.out.startswith(f"would purge 1 message of {room} from ")
    assert "nothing written" in dry.out
    monkeypatch.setattr(sys, "stdin", _Terminal("n\n"))
    declined = await muninn_here(config, *span)
    assert declined.rc == 1 and declined.out.startswith(f"purge 1 message of {room} from ")
    assert "for good? [y/N]" in declined.out and "nothing purged" in declined.out
    assert not _purges_filed(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # a script: not a terminal, not asked
    run = await muninn_here(config, *span, "--json")
    assert run.doc()["room_id"] == room and _purges_filed(tmp_path)
    async with Indexer(load_config(config)) as ix:
        report = _room_report(await ix.refresh(), room)
        assert report.purged_messages == 1
        assert set(await ix.bodies()) == {kept}
        assert "zqcliq" not in json.dumps([p.payload for p in await ix.points()])


def _purges_filed(folder: Path) -> list[str]:
    return [line for p in folder.glob("purges-*.jsonl") for line in p.read_text().splitlines()]


class _Terminal(io.StringIO):
    """Standard input as a terminal gives it: the operator's typed answer."""

    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------- rule 13: generations


async def test_refresh_compat_change_builds_new_generation_then_switches(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another embedder identity builds a new generation beside the active one, switching only
    once it is complete, with the old generation's tombstones carried over; the log marks the
    switch (issue 36)."""
    room = await hs.fresh_room(seeder)
    reader = await _reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    kept = await seeder.send_text(room, "kept across generations", ts=base)
    purged = await seeder.send_text(room, "purged emuword", ts=base + 60_000)
    cfg = reader_config(hs, reader, tmp_path)
    old = Indexer(cfg)
    await old.refresh()
    old_gen = old.writer.generation
    add_tombstone(await old.collection(), RoomID(room), base + 30_000, base + 90_000)
    await old.close()

    renamed = RenamedEmbedder(shared_embedder(), "minilm-renamed", fail=1)
    new = Indexer(cfg, embedder=renamed)
    try:
        with pytest.raises(EmbedUnavailable):
            await new.refresh()  # the new generation's build fails partway
        new_gen = new.writer.generation
        assert new_gen != old_gen
        assert new.store.active() == old_gen
        assert set(new.store.generations()) == {old_gen, new_gen}
        with caplog.at_level(logging.WARNING, logger="muninn.refresh"):
            report = await new.refresh()
        assert report.activated
        assert f"switched to {new_gen}: searches read it from now on" in caplog.text
        assert new.store.active() == new_gen
        assert new.store.generations() == [new_gen]
        col = new.store.open(new_gen, dense_dim=None, create=False)
        compat = col.get_meta(COMPAT_KEY)
        assert compat is not None and compat["complete"]
        assert compat["embedder"]["model"] == "minilm-renamed"
        assert any(k.startswith(TOMBSTONE_PREFIX) for k in col.list_meta(""))
        assert set(await new.bodies()) == {kept}
        assert purged not in await new.dump()
    finally:
        await new.close()
