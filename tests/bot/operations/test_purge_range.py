"""`muninn purge`'s range as an operator gives it (issue 44): `now` and the chat's relative
dates, a `--to` in the future ended now, a range with nothing the index holds or would hold
written as nothing, and `--dry-run` counting only those messages. The real CLI against the
real Synapse (client mode), in this process (`tests.inprocess`)."""

from __future__ import annotations

import time
from pathlib import Path

from bot.chat.commands.dates import shown
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import admit, reader_config_doc, write_config
from tests.inprocess import muninn_here

SLACK_MS = 120_000  # a run's own minutes: "now" as the CLI read it, give or take


def purges_filed(folder: Path) -> list[str]:
    return [line for p in folder.glob("purges-*.jsonl") for line in p.read_text().splitlines()]


async def test_cli_purge_takes_now_and_ends_a_future_range_now(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """`--to now` and `--to tomorrow` are times (regression: "not a time"); a `--to` in the
    future is ended now, and says so, so the tombstone never keeps out what is still to come;
    a `--from` in the future is refused naming it."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    await alice.send_text(room, "the heron nests above the boathouse")
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    span = ("purge", "--room", room, "--from", "1h", "--dry-run", "--json")

    for to in ("now", "tomorrow"):
        started = int(time.time() * 1000)
        run = await muninn_here(config, *span, "--to", to)
        doc = run.doc()
        assert started - SLACK_MS <= doc["to_ts"] <= int(time.time() * 1000), to
        assert doc["messages"] == 1 and doc["counted_all"] is True
        future = "is in the future; the purge ends now" in run.err
        assert future is (to == "tomorrow"), run.err

    later = await muninn_here(config, "purge", "--room", room, "--from", "tomorrow", "--to", "2d")
    assert later.rc == 1 and "muninn: to: is before --from" in later.err
    ahead = await muninn_here(
        config, "purge", "--room", room, "--from", "tomorrow", "--to", "tomorrow"
    )
    assert ahead.rc == 1 and ahead.err.startswith("muninn: from: is later than now (")
    assert not purges_filed(tmp_path)


async def test_cli_purge_counts_and_purges_only_what_the_index_holds_or_would_hold(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """`--dry-run` counts a person's message, not a command or Muninn's own replies (rule 9:
    the index never holds them); a range holding only those says "nothing to purge" and writes
    no tombstone (regression: counted as messages, and a tombstone written for 0)."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    said = await alice.send_text(room, "the heron nests above the boathouse")
    after_it = int((await alice.get_event(room, said))["origin_server_ts"]) + 1
    await alice.send_text(room, "!search heron")
    await reader.send_notice(room, "1 result for heron")  # the bot's reply, as client mode sends
    await reader.send_text(room, "and its own plain words")
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))

    everything = ("purge", "--room", room, "--from", "1h", "--to", "now")
    dry = await muninn_here(config, *everything, "--dry-run")
    assert dry.rc == 0, dry.err
    assert dry.out.startswith(f"would purge 1 message of {room} from ")
    assert (await muninn_here(config, *everything, "--dry-run", "--json")).doc()["messages"] == 1

    only_ours = ("purge", "--room", room, "--from", str(after_it), "--to", "now")
    dry = await muninn_here(config, *only_ours, "--dry-run")
    assert dry.rc == 0 and dry.out.startswith(f"nothing to purge in {room} from ")
    text = await muninn_here(config, *only_ours)
    assert text.rc == 0, text.err
    assert text.out.startswith(f"nothing to purge: no message of {room} from {shown(after_it)}")
    assert "nothing written" in text.out
    doc = (await muninn_here(config, *only_ours, "--json")).doc()
    assert doc["key"] is None and doc["room_id"] == room and doc["from_ts"] == after_it
    assert not purges_filed(tmp_path)

    written = (await muninn_here(config, *everything, "--json")).doc()
    assert written["key"] == f"tombstone:{room}:{written['from_ts']}:{written['to_ts']}"
    assert len(purges_filed(tmp_path)) == 1
