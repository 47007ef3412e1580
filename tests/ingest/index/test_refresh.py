"""ingest.index.refresh end to end: content rules 5–9 and rule 11 (idempotence) against the real
parts (rules 10, 12 and 13: test_refresh_restarts.py, test_refresh_writes.py).

Real Synapse, the embedded qdrant-edge store in tmp_path and the real MiniLM embedder. Faults the
real parts cannot produce on demand (a refused upsert, an embedder that is down) are injected at
the adapter edge by wrappers from `tests.indexing`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.index.records import CURSOR_PREFIX
from ingest.search import Searcher
from ingest.search.query import SearchQuery
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import (
    Indexer,
    reader_config,
    send_texts,
)
from tests.ingest.index.refreshkit import hashes, reader_in, room_report

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SYNAPSE_TOKEN = "syt_" + "bXVuaW5u_QWxpY2VTZWNyZXRUb2tlbg_1a2B3c"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
PEM_KEY = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
PASSWORD = "Hunter2-Zebra-9931"
MYSQL_PASSWORD = "Zebra-Sql-4471"
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"

# ---------------------------------------------------------------- rule 5: encrypted and media
# (media by filename and caption: tests/bot/operations/test_search_media.py)


async def test_refresh_skips_encrypted_and_media_and_counts_them(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """m.room.encrypted events and locations are counted in report.skipped and stored nowhere;
    an image is indexed by its filename alone, its content's `mxc://` address nowhere."""
    reader = await reader_in(hs, alice, room)
    await alice.send_text(room, "plain words before")
    for _ in range(2):
        await alice.send_encrypted(room)
    await alice.send_image(room, "holiday-snapshot-qx71.png")
    where = {"msgtype": "m.location", "body": "the qz82 shed", "geo_uri": "geo:51.5,0.1"}
    await alice.send(room, "m.room.message", where)
    await alice.send_text(room, "plain words after")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = room_report(await ix.refresh(), room)
        assert report.skipped["encrypted"] == 2
        assert report.skipped["media"] == 1
        assert sorted((await ix.bodies()).values()) == [
            "holiday-snapshot-qx71.png",
            "plain words after",
            "plain words before",
        ]
        dump = await ix.dump()
        for needle in ("megolm", "AwgAEnAC", "FAKEDEVICE", "qz82", "geo:", "mxc://"):
            assert needle not in dump
        assert not any("AwgAEnAC" in d or "qz82" in d or "mxc" in d for d in ix.embedder.documents)


# ---------------------------------------------------------------- rule 6: edits


async def test_refresh_edit_replaces_original_and_old_word_is_gone(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """An edit replaces the original by event id; the old word and `* fallback` are nowhere."""
    reader = await reader_in(hs, alice, room)
    original = await alice.send_text(room, "meet at the quokkabridge tonight")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        assert (await ix.bodies())[original] == "meet at the quokkabridge tonight"
        await alice.send_edit(room, original, "meet at the harbour tonight")
        report = room_report(await ix.refresh(), room)
        assert report.edits_applied == 1
        assert await ix.bodies() == {original: "meet at the harbour tonight"}
        dump = await ix.dump()
        assert "quokkabridge" not in dump
        assert "* meet" not in dump
        assert not any("* meet" in d for d in ix.embedder.documents)


@pytest.mark.parametrize(
    ("msgtype", "new_body"),
    [("m.notice", "moved to the wiki"), ("m.text", "!pins #later"), ("m.location", "the shed")],
)
async def test_refresh_edit_into_what_is_not_indexed_removes_the_old_words(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path, msgtype: str, new_body: str
) -> None:
    """A message edited into a notice, a command or a location no longer says its old words:
    they are in no point, and the new content is not indexed either."""
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
    notice = {"msgtype": "m.notice", "body": "build 41: 10% done"}
    progress = await alice.send(room, "m.room.message", notice)
    await alice.send_edit(room, progress, "build 41: 90% done", msgtype="m.notice")
    await alice.send_text(room, "thanks, bot")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = room_report(await ix.refresh(), room)
        assert report.skipped["notice"] == 2
        assert report.skipped["invalid_edit"] == 0
        assert list((await ix.bodies()).values()) == ["thanks, bot"]


async def test_search_never_shows_a_message_edited_into_what_is_not_indexed(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """The withdrawn message is kept (a redaction of its edit reverts it) but says nothing: a
    search, by its sender's name or its old meaning, returns no hit for it and no empty line;
    the window beside it is still found."""
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
    original = await alice.send_text(room, "the budget is approved")
    await bob.send_edit(room, original, "the budget is forged by mallory")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = room_report(await ix.refresh(), room)
        assert report.edits_applied == 0
        assert await ix.bodies() == {original: "the budget is approved"}
        assert "mallory" not in await ix.dump()


async def test_refresh_ignores_edit_of_an_edit(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """An m.replace whose target is itself an edit is not applied (spec: no edits of edits)."""
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
    secret = await alice.send_text(room, "my flat is at platypuslane seven")
    kept = await alice.send_text(room, "unrelated chatter")
    reply = await bob.send_reply(room, secret, "noted, thanks")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        bodies = await ix.bodies()
        assert bodies[reply] == "noted, thanks"  # the fallback quote was never indexed
        assert "platypuslane" in bodies[secret]
        await alice.redact(room, secret)
        report = room_report(await ix.refresh(), room)
        assert report.redactions_applied == 1
        assert await ix.bodies() == {kept: "unrelated chatter", reply: "noted, thanks"}
        assert "platypuslane" not in await ix.dump()


async def test_refresh_redacted_edit_reverts_to_previous_edit(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """original → edit1 → edit2; redacting edit2 brings back edit1's text, not the original's
    (nor a later edit by another sender, nor an edit of an edit)."""
    await bob.join(room)
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
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
        report = room_report(await ix.refresh(), room)
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
    reader = await reader_in(hs, alice, room)
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
    reader = await reader_in(hs, alice, room)
    kept = await alice.send_text(room, "a real message")
    await alice.send_notice(room, "notice from a bot wombatnotice")
    await alice.send_text(room, "!search wombatcommand")
    await reader.send_text(room, "the reader itself speaks wombatreader")
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        report = room_report(await ix.refresh(), room)
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
    reader = await reader_in(hs, alice, room)
    kept = await alice.send_text(room, "!important: the deploy moved to noon")
    await alice.send_text(room, "?search wombatcommand")
    async with Indexer(reader_config(hs, reader, tmp_path), command_prefix="?") as ix:
        report = room_report(await ix.refresh(), room)
        assert await ix.bodies() == {kept: "!important: the deploy moved to noon"}
        assert report.skipped["command"] == 1


async def test_refresh_thread_replies_chunk_with_their_root(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Thread replies sit in a thread window whose payload names the root; the root stays main."""
    await bob.join(room)
    reader = await reader_in(hs, alice, room)
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


# ---------------------------------------------------------------- rule 11: idempotence


async def test_refresh_second_run_writes_and_embeds_nothing(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """With nothing new, a second refresh embeds no text and writes or deletes no point."""
    reader = await reader_in(hs, alice, room)
    await send_texts(alice, room, [f"steady message {i}" for i in range(12)])
    async with Indexer(reader_config(hs, reader, tmp_path, chunker={"max_bytes": 200})) as ix:
        await ix.refresh()
        before = await hashes(ix)
        embedded = len(ix.embedder.documents)
        report = room_report(await ix.refresh(), room)
        assert report.events_read == 0  # resumed at the cursor: nothing indexed is re-read
        assert len(ix.embedder.documents) == embedded
        assert (report.windows_written, report.windows_deleted, report.windows_embedded) == (
            0,
            0,
            0,
        )
        assert await hashes(ix) == before


async def test_refresh_resent_unchanged_window_costs_no_embedding(
    hs: Homeserver, alice: MatrixUser, room: str, tmp_path: Path
) -> None:
    """Replaying pages from an old cursor re-derives the same windows and embeds none of them."""
    reader = await reader_in(hs, alice, room)
    await send_texts(alice, room, [f"replayed message {i}" for i in range(10)])
    async with Indexer(reader_config(hs, reader, tmp_path, refresh={"page_size": 4})) as ix:
        await ix.refresh()
        before = await hashes(ix)
        col = await ix.collection()
        col.delete_meta(CURSOR_PREFIX + room)  # as if every page's cursor save had been lost
        embedded = len(ix.embedder.documents)
        report = room_report(await ix.refresh(), room)
        assert report.skipped["duplicate"] == 10
        assert len(ix.embedder.documents) == embedded
        assert report.windows_embedded == 0
        assert await hashes(ix) == before


async def test_refresh_tail_closed_by_new_message_is_not_re_embedded(
    hs: Homeserver, seeder: MatrixUser, tmp_path: Path
) -> None:
    """The open tail is re-chunked with each new message; once closed unchanged, it is re-sent
    to the writer but not re-embedded or rewritten (its content hash is unchanged)."""
    room = await hs.fresh_room(seeder)
    reader = await reader_in(hs, seeder, room)
    base = 1_700_000_000_000
    for i in range(3):
        await seeder.send_text(room, f"morning message {i}", ts=base + i * 1000)
    async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
        await ix.refresh()
        embedded = len(ix.embedder.documents)
        # Past gap_seconds: the tail closes unchanged and the new message opens a new window.
        late = await seeder.send_text(room, "evening message", ts=base + 7_200_000)
        report = room_report(await ix.refresh(), room)
        assert ix.embedder.documents[embedded:] == [
            next(
                str(p.payload["text"]) for p in await ix.points() if late in p.payload["event_ids"]
            )
        ]
        assert report.windows_written == 1
        assert len(await ix.points()) == 2
