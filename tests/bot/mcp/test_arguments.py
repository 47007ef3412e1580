"""What `muninn mcp` takes and refuses, as an agent author meets it through the reference SDK's
client (`tests.bot.mcp.harness`): users in the CLI's short forms, arguments exactly as typed,
refusals naming the argument in the schema's words, never pydantic's, never a value whole
(issues 44 and 46); and the wording itself (`bot.mcp.arguments`), without a server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bot.mcp.arguments import expects, shown
from tests.bot.mcp.harness import Seeded, call, event_ids, muninn_mcp, names, refusal
from tests.inprocess import muninn_here


async def test_mcp_users_take_the_short_forms_the_cli_takes(seeded: Seeded) -> None:
    """`sender: "bob"` and `"@bob"` are `@bob:<server>`, as `--sender bob` and chat's `from:bob`
    take them: the same hits as the full id (they gave 0 hits, silently); `exclude_sender` and
    `mentions` take them too; a sender that cannot be a user id is refused naming `sender`."""
    full = seeded.seeder
    local = full[1:].split(":")[0]
    cli = await muninn_here(
        seeded.config, "search", "kiwi", "harvest", "--sender", local, "--limit", "20", "--json"
    )
    async with muninn_mcp(seeded.config) as session:
        by_full = await call(session, "search", query="kiwi harvest", sender=full, limit=20)
        by_local = await call(session, "search", query="kiwi harvest", sender=local, limit=20)
        by_at = await call(session, "search", query="kiwi harvest", sender=[f"@{local}"], limit=20)
        without = await call(session, "search", query="kiwi harvest", exclude_sender=local)
        said = await refusal(session, "search", query="kiwi", sender="bob smith")
    assert seeded.ids["harvest"] in event_ids(by_full)
    assert event_ids(by_local) == event_ids(by_at) == event_ids(by_full)
    assert event_ids(by_full) == event_ids(cli.doc())
    assert without["hits"] == []  # every kiwi message is the seeder's
    assert names("sender", said) and "@user:server" in said


async def test_mcp_refuses_bad_arguments_in_its_own_words(seeded: Seeded, tmp_path: Path) -> None:
    """Each bad argument is a refusal naming it with what the schema takes, in a line or two:
    no pydantic error, no link to pydantic's site, no CLI flag; a value of another type is
    refused, not read (`true` as 1, `"5"` as 5); an argument the tool does not take, a ninth
    room (chat's bound), an unknown room id and a malformed sender are refused, not searched
    into 0 hits; a 100,000-character room id is refused at once and is in neither the answer
    nor the log. The server answers the next call."""
    huge = "!" + "x" * 100_000
    bad: list[tuple[str, str, dict[str, Any], str]] = [
        ("limit", "search", {"limit": 0}, "takes a whole number from 1 to 50, not 0"),
        ("limit", "search", {"limit": True}, "not true"),
        ("limit", "search", {"limit": "5"}, 'not "5"'),
        ("cursor", "search", {"cursor": 1.5}, "not 1.5"),
        ("has_link", "search", {"has_link": "yes"}, "true or false"),
        ("sort", "search", {"sort": "oldest"}, 'one of "relevance", "recent"'),
        ("colour", "search", {"colour": "red"}, "search takes no such argument"),
        ("room", "search", {"room": [f"!r{i}:hs" for i in range(9)]}, "at most 8"),
        ("room", "search", {"room": huge}, "not a string of 100001 characters"),
        ("room", "search", {"room": f"!nosuchroom:{seeded.server_name}"}, "no room the reader"),
        ("sender", "search", {"sender": "@"}, "takes @user:server"),
        ("before", "context", {"event": "$e", "before": -1}, "from 0 to 25"),
        ("room", "pins", {"room": 42}, "takes a string of at most 255 characters, not 42"),
    ]
    log = tmp_path / "stderr.log"
    with log.open("w", encoding="utf-8") as errlog:
        async with muninn_mcp(seeded.config, errlog) as session:
            said = {}
            for argument, tool, arguments, words in bad:
                query = {"query": "kiwi"} if tool == "search" else {}
                said[argument, words] = await refusal(session, tool, **query, **arguments)
            doc = await call(session, "search", query="kiwi harvest")
    for (argument, words), text in said.items():
        assert text.startswith(f"{argument}: ") and words in text, text
        assert "pydantic" not in text and "validation error" not in text, text
        assert "(--" not in text and len(text) < 400, text
    assert seeded.ids["harvest"] in event_ids(doc)
    assert "x" * 100 not in log.read_text(encoding="utf-8")


async def test_mcp_publishes_closed_schemas_and_dedented_descriptions(seeded: Seeded) -> None:
    """`tools/list` says what the server enforces: no other argument (`additionalProperties:
    false`), at most 8 rooms; each description reads as prose, not with its source's
    indentation."""
    async with muninn_mcp(seeded.config) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    for tool in tools.values():
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        assert tool.description and not re.search(r"\n\s", tool.description), tool.description
    rooms = tools["search"].input_schema["properties"]["room"]["anyOf"]
    assert {"type": "string", "maxLength": 255} in rooms
    assert any(r.get("maxItems") == 8 for r in rooms)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 50}, "a whole number from 1 to 50"),
        (
            {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            "a string or a list of strings",
        ),
        (
            {"anyOf": [{"type": "array", "maxItems": 8, "items": {"type": "string"}}, {}]},
            "a list of at most 8 strings or a value",
        ),
        ({"anyOf": [{"type": "boolean"}, {"type": "null"}]}, "true or false"),
        ({"enum": ["relevance", "recent"]}, 'one of "relevance", "recent"'),
    ],
)
def test_expects_says_what_a_schema_takes(schema: dict[str, Any], words: str) -> None:
    assert expects(schema) == words


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("#dev", '"#dev"'),
        ("x" * 41, "a string of 41 characters"),
        (True, "true"),
        (None, "null"),
        (list(range(100)), "a list of 100 entries"),
        ({"a": 1}, "an object"),
        (10**60, "a number of 61 digits"),
    ],
)
def test_shown_never_repeats_a_long_value(value: Any, words: str) -> None:
    assert shown(value) == words
    assert len(json.dumps(shown(value))) < 50
