"""`muninn run` against the real Synapse: `sort:recent`, searches without words and the pages
they make (issues 44 and 47; docs/ARCHITECTURE.md §3 rule 22a).

The module's one service is tests/bot/conftest.py's `env`, as in test_searching_pages.py.
"""

from __future__ import annotations

import asyncio

from bot.chat.html import WORD_JOINER
from tests.bot.botenv import BASE_TS, Env, body_of, link, pages
from tests.botkit import ask
from tests.homeserver import MatrixUser

MINUTE = 60_000
TOOLS = ("vinyl cutter", "laser cutter", "sewing machine", "3D printer", "soldering station")
GROUPS = ("kids club", "robotics team", "costume guild", "repair cafe", "bike collective")


def _order(body: str, room: str, sent: dict[str, str]) -> list[str]:
    """The keys of `sent` (key → event id) whose permalinks the reply carries, in its order."""
    at = {key: body.find(link(room, e)) for key, e in sent.items()}
    return sorted((k for k, i in at.items() if i >= 0), key=lambda k: at[k])


async def test_bot_sort_recent_lists_only_messages_holding_the_words_across_pages(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """Issue 47, regression: in a room of 300 look-alike notes, a handful about the kiln,
    `!search kiln sort:recent limit:3` and its `!more` pages list the kiln notes alone (never
    a note whose letters merely spell k…i…l…n), newest first across pages; each page header
    says it is sorted newest first, a page of one reads "Result N", and the CLI's order is
    the same."""
    room = await env.room(alice)
    await seeder.join(room)
    notes: dict[str, str] = {}
    kiln: list[str] = []

    async def note(i: int) -> None:
        if i % 43 == 5:
            said = f"Note {i}: the kiln was fired by the pottery circle, cone 6 glaze"
            kiln.append(f"n{i}")
        else:
            tool, group = TOOLS[i % len(TOOLS)], GROUPS[(i // 5) % len(GROUPS)]
            said = f"Note {i}: the {tool} was used by the {group} on bench {i % 7}"
        notes[f"n{i}"] = await seeder.send_text(room, said, ts=BASE_TS + i * MINUTE)

    for start in range(0, 300, 30):
        await asyncio.gather(*(note(i) for i in range(start, start + 30)))
    await env.settle(room)
    newest = sorted(kiln, key=lambda k: -int(k[1:]))
    assert len(newest) == 7

    bodies = await pages(alice, room, "!search kiln sort:recent limit:3", env.bot_id)
    listed = [k for body in bodies for k in _order(body, room, notes)]
    assert listed == newest
    assert [len(_order(b, room, notes)) for b in bodies] == [3, 3, 1]
    assert all("sorted newest first" in b.split("\n", 1)[0] for b in bodies)
    assert bodies[-1].startswith("Result 7 for “kiln”")


async def test_bot_sort_recent_in_the_command_room_is_newest_first_across_pages(
    env: Env, alice: MatrixUser, seeder: MatrixUser
) -> None:
    """Issue 47, regression: `sort:recent` in the command room, across three rooms of
    look-alike notes, pages by `!more` newest first from the first result to the last, not
    only within each page."""
    rooms = [await env.room(alice) for _ in range(3)]
    for room in rooms:
        await seeder.join(room)
    sent: dict[str, tuple[str, str]] = {}

    async def note(i: int) -> None:
        room = rooms[(i * 7) % 3]
        tool, group = TOOLS[i % len(TOOLS)], GROUPS[(i // 5) % len(GROUPS)]
        said = f"heron survey {i}: the {tool} was used by the {group}"
        sent[f"h{i}"] = (room, await seeder.send_text(room, said, ts=BASE_TS + i * 40 * MINUTE))

    await asyncio.gather(*(note(i) for i in range(45)))
    await env.settle(*rooms)
    bodies = await pages(
        env.persona, env.command_room, "!search heron survey sort:recent limit:4", env.bot_id, 20
    )
    listed: list[str] = []
    for body in bodies:
        at = {k: body.find(link(r, e)) for k, (r, e) in sent.items()}
        listed += sorted((k for k, i in at.items() if i >= 0), key=lambda k: at[k])
    assert listed == [f"h{i}" for i in range(44, -1, -1)][: len(listed)]
    assert len(listed) == 45


async def test_bot_search_without_words_lists_the_latest_messages(
    env: Env, alice: MatrixUser, bob: MatrixUser
) -> None:
    """Issue 44: `!search from:@bob` (no words) lists bob's latest messages, newest first,
    paged by `!more`; `has:link` alone the latest messages with a link; in the command room
    `in:#room from:` alike, and without `in:` it says to name a room."""
    room = await env.room(alice)
    await bob.join(room)
    said: dict[str, str] = {}
    for i in range(7):
        said[f"b{i}"] = await bob.send_text(room, f"bob's remark number {i}")
        said[f"a{i}"] = await alice.send_text(room, f"alice answers {i}")
    said["url"] = await alice.send_text(room, "the rota is at https://example.org/rota")
    await env.settle(room)
    bob_id = bob.user_id.split(":")[0]
    bodies = await pages(alice, room, f"!search from:{bob_id} limit:3", env.bot_id)
    listed = [k for body in bodies for k in _order(body, room, said)]
    assert listed == [f"b{i}" for i in range(6, -1, -1)]
    bob_said = bob.user_id.replace("@", "@" + WORD_JOINER)  # an echoed mention pings no one
    head = f"3 results for the latest messages, only from {bob_said}, sorted newest first"
    assert bodies[0].startswith(head)
    _, reply = await ask(alice, room, "!search has:link", env.bot_id)
    assert _order(body_of(reply), room, said) == ["url"]

    command = f"!search in:{room} from:{bob.user_id} limit:2"
    _, reply = await ask(env.persona, env.command_room, command, env.bot_id)
    assert _order(body_of(reply), room, said) == ["b6", "b5"]
    _, reply = await ask(env.persona, env.command_room, f"!search from:{bob_id}", env.bot_id)
    assert "in:#room" in body_of(reply)


async def test_bot_search_marks_whole_words_and_word_starts(env: Env, alice: MatrixUser) -> None:
    """Issue 44: a reply marks the words searched as whole words (`the` is not marked in
    "them") and a `word*` at a word's start ("**quillbacks**")."""
    room = await env.room(alice)
    await alice.send_text(room, "give them the quillbacks before noon")
    await env.settle(room)
    _, reply = await ask(alice, room, "!search the sort:recent", env.bot_id)
    assert "give them **the** quillbacks" in body_of(reply)
    assert "<mark>the</mark>m" not in reply["content"]["formatted_body"]
    _, reply = await ask(alice, room, "!search quillb*", env.bot_id)
    assert "the **quillbacks** before" in body_of(reply)
    assert "<mark>quillbacks</mark>" in reply["content"]["formatted_body"]
