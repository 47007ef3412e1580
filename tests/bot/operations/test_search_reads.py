"""`muninn search`'s reads of issue 49 from the shell: `--context N`, `--match words`,
`--reply-to EVENT` and `--json`'s `indexing`, against a help desk indexed from the real Synapse
(`tests.bot.answers`), as MCP `search` answers them; `--help` names each."""

from __future__ import annotations

import contextlib
import json

import pytest_asyncio

from bot.cli.main import main
from ingest.rules import lexical
from tests.bot.answers import EDITED_AWAY, REDACTED, SECRET, Desk, said, seed_desk
from tests.bot.search_contract import check_contract, search_json
from tests.homeserver import Homeserver
from tests.inprocess import muninn_here


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def desk(hs: Homeserver, tmp_path_factory: object) -> Desk:
    return await seed_desk(hs, tmp_path_factory.mktemp("cli-desk"))  # type: ignore[attr-defined]


def test_cli_search_help_names_the_new_flags(capsys: object) -> None:
    """`muninn search --help` lists --has, --context, --match and --reply-to."""
    with contextlib.suppress(SystemExit):
        main(["search", "--help"])
    shown = capsys.readouterr().out  # type: ignore[attr-defined]
    for flag in ("--has KIND", "--context N", "--match {meaning,words}", "--reply-to EVENT"):
        assert flag in shown, flag
    assert "--match words" in shown and "--reply-to" in shown.split("examples")[-1]


async def test_cli_search_context_prints_the_conversation_around_each_result(desk: Desk) -> None:
    """`--context 2 --json` gives each hit's best message its `context` as MCP does (what an
    edit took back, a redacted message and a secret in none); the text shows the lines around
    the result; `--context 11` is a usage error."""
    doc = await search_json(desk.config, "spare key server cabinet", "--context", "2")
    check_contract(doc, desk.server_name)
    best = [m for h in doc["hits"] for m in h["messages"] if m["event_id"] == h["best_event_id"]]
    assert best and all(set(m["context"]) == {"before", "after"} for m in best)
    assert any(m["context"]["before"] or m["context"]["after"] for m in best)
    wide = await search_json(desk.config, "key", "--context", "10", "--limit", "20")
    assert not any(w in json.dumps(wide) for w in (REDACTED, EDITED_AWAY, SECRET))
    text = await muninn_here(desk.config, "search", "spare key server cabinet", "--context", "1")
    assert text.rc == 0, text.err
    assert "    · 2024-08-01" in text.out
    bad = await muninn_here(desk.config, "search", "key", "--context", "11")
    assert bad.rc == 2 and "--context" in bad.err


async def test_cli_search_match_words_lists_only_messages_holding_every_word(desk: Desk) -> None:
    """`--match words`: the lexical list alone, each message listed holding every word."""
    doc = await search_json(desk.config, "PX-4471 gasket", "--match", "words", "--limit", "20")
    check_contract(doc, desk.server_name)
    assert doc["retrievers"] == ["lexical"]
    listed = said(doc)
    assert {desk.ids["answer"], desk.ids["gasket"]} <= set(listed)
    assert desk.ids["part"] not in listed
    for m in listed.values():
        assert {"px-4471", "gasket"} <= set(lexical.tokens(m["body"]))


async def test_cli_search_reply_to_lists_the_replies_and_the_thread(desk: Desk) -> None:
    """`--reply-to PERMALINK` (no TEXT needed) lists the replies and the thread in the order
    sent, as they read now; a bare id takes its `--room`; a DM's message is refused; neither
    TEXT nor --reply-to is a usage error."""
    ids = desk.ids
    doc = await search_json(desk.config, "--reply-to", desk.link("question"), "--limit", "20")
    check_contract(doc, desk.server_name)
    order = [h["best_event_id"] for h in doc["hits"]]
    assert order == [ids[k] for k in ("answer", "thread1", "thread2", "edited", "secret")]
    assert not any(w in json.dumps(doc) for w in (REDACTED, EDITED_AWAY, SECRET))
    bare = await search_json(
        desk.config, "gasket", "--reply-to", ids["question"], "--room", desk.desk
    )
    assert [h["best_event_id"] for h in bare["hits"]] == [ids["answer"]]
    text = await muninn_here(desk.config, "search", "--reply-to", desk.link("question"))
    assert text.rc == 0 and "the spare key hangs behind" in text.out
    dm = await muninn_here(desk.config, "search", "--reply-to", desk.link("dm_q", desk.dm))
    assert dm.rc == 1 and "refused" in dm.err and "private cabinet" not in dm.err + dm.out
    lonely = await muninn_here(desk.config, "search", "--reply-to", ids["question"])
    assert lonely.rc == 1 and "--room" in lonely.err
    nothing = await muninn_here(desk.config, "search", "--limit", "3")
    assert nothing.rc == 2 and "--reply-to" in nothing.err


async def test_cli_search_json_names_the_rooms_not_read_or_behind(desk: Desk) -> None:
    """`--json`'s `indexing` names the room joined since the last pass (`not_read`) and the
    one said more in since (`behind`); the text says so on stderr; `[]` when all are current."""
    doc = await search_json(desk.config, "cabinet key", "--limit", "3")
    check_contract(doc, desk.server_name)
    reasons = {r["room_id"]: r["reason"] for r in doc["indexing"]}
    assert reasons == {desk.annex: "not_read", desk.desk: "behind"}
    current = await search_json(desk.config, "quiet room key", "--room", desk.quiet)
    assert current["indexing"] == []
    text = await muninn_here(desk.config, "search", "annex cabinet key", "--room", desk.annex)
    assert text.rc == 0 and "is not indexed yet" in text.err
