"""What a chat room is told about the index, in process (tests/bot/fastkit.py, no Synapse):
short notices a room can read, never the operator's details (issue 36 item 1)."""

from __future__ import annotations

from collections.abc import Callable

from ingest.index.records import COMPAT_KEY
from ingest.search.notices import REBUILDING
from tests.bot.fastkit import SERVER, FastBot

ALICE = f"@alice:{SERVER}"
OTHER = {"provider": "local", "model": "another-model", "dimension": 768}

MakeBot = Callable[..., FastBot]


def an_older_generation_is_active(bot: FastBot) -> None:
    """What a search meets while an embedder change rebuilds the index: the active
    generation is another embedder's (rule 13); the new one is built beside it."""
    name = f"{bot.cfg.index.collection}-0123456789ab"
    col = bot.store.open(name, dense_dim=768, create=True)
    col.put_meta(COMPAT_KEY, {"embedder": OTHER, "complete": True})
    bot.store.activate(name)


async def test_fast_a_rebuild_is_a_short_notice_in_chat_not_the_operators_warning(
    make_bot: MakeBot,
) -> None:
    """During an embedder rebuild a `!search` reply says the index is being rebuilt, in one
    short line; which embedders and dimensions are involved is not the room's business."""
    bot = make_bot()
    an_older_generation_is_active(bot)
    room = bot.rooms.create_room(ALICE)
    bot.rooms.say(room, ALICE, "the backup job failed again last night")
    content = await bot.reply(room, ALICE, "!search backup job")
    for text in (content["body"], content["formatted_body"]):
        assert REBUILDING in text
        assert "embedder" not in text and "768-d" not in text and "another-model" not in text
