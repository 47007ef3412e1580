"""`muninn pins ROOM [--json]` as an operator or a Persona runs it: the real CLI against the
real Synapse (in a child process for the first test, in this process for the rest). The board
is a fold over the room's own `!pin` events, so no service needs to run; it is the board the bot
shows (edits applied, secrets scrubbed, purged messages hidden), and a room scope refuses has no
board to show."""

from __future__ import annotations

import json
from pathlib import Path

from bot.demo.client import unique_localpart
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import admit, muninn, reader_config_doc, write_config
from tests.inprocess import muninn_here


async def _reader_and_room(hs: Homeserver, alice: MatrixUser, tmp_path: Path) -> tuple[Path, str]:
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    return write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path)), room


async def test_cli_pins_prints_the_board_the_bot_folds(
    hs: Homeserver, alice: MatrixUser, bob: MatrixUser, tmp_path: Path
) -> None:
    """Each pin with its event id, sender, time, label, note and the message as it reads now:
    edited text, not the original; a secret scrubbed; later pins first; unpinned ones gone."""
    config, room = await _reader_and_room(hs, alice, tmp_path)
    await alice.invite(room, bob.user_id)
    await bob.join(room)
    kettle = await bob.send_text(room, "the kettle in the lab is broken")
    await bob.send_edit(room, kettle, "the kettle in the lab is fixed, it was the fuse")
    await alice.send_reply(room, kettle, "!pin #facilities kettle status")
    token = await alice.send_text(room, "wifi password=correcthorsebattery for guests")
    await bob.send_text(room, "!pin ^1 #onboarding")
    gone = await alice.send_text(room, "a pin that will be taken back")
    await alice.send_text(room, "!pin ^1")
    await alice.send_reply(room, gone, "!unpin")

    run = await muninn(config, "pins", room, "--json")
    assert run.rc == 0, run.err
    board = json.loads(run.out)
    assert board["room_id"] == room
    pins = board["pins"]
    assert [p["target"] for p in pins] == [token, kettle]  # most recently pinned first
    first, second = pins
    assert (first["label"], first["sender"], first["pinned_by"]) == (
        "onboarding",
        alice.user_id,
        bob.user_id,
    )
    assert "correcthorsebattery" not in run.out and "[redacted:" in first["body"]
    assert (second["label"], second["note"]) == ("facilities", "kettle status")
    assert second["body"] == "the kettle in the lab is fixed, it was the fuse"
    assert isinstance(second["ts"], int) and second["ts"] <= first["ts"]
    assert second["permalink"].startswith("https://matrix.to/#/")

    run = await muninn(config, "pins", room)
    assert run.rc == 0, run.err
    assert "the kettle in the lab is fixed" in run.out and "#facilities" in run.out
    assert "broken" not in run.out and "correcthorsebattery" not in run.out


async def test_cli_pins_takes_a_short_alias_on_this_homeserver(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """`muninn pins '#dev'` means `#dev:<server_name>`, as the roster does (regression: a raw
    400 M_INVALID_PARAM); an unknown short alias is named in full."""
    config, room = await _reader_and_room(hs, alice, tmp_path)
    local = unique_localpart("dev")
    await alice.create_alias(f"#{local}:{hs.server_name}", room)
    await alice.send_text(room, "the build server moved to rack 4")
    await alice.send_text(room, "!pin ^1 #infra")
    run = await muninn_here(config, "pins", f"#{local}", "--json")
    assert run.rc == 0, run.err
    assert json.loads(run.out)["room_id"] == room
    missing = await muninn_here(config, "pins", f"#{local}-gone")
    assert missing.rc == 1
    assert f"no room has the alias #{local}-gone:{hs.server_name}" in missing.err


async def test_cli_pins_hides_a_purged_message(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A message `muninn purge` covers is never shown on the board, pinned or not."""
    config, room = await _reader_and_room(hs, alice, tmp_path)
    secret = await alice.send_text(room, "the vault combination is 12-34-56")
    await alice.send_text(room, "!pin ^1 #vault")
    before = json.loads((await muninn_here(config, "pins", room, "--json")).out)
    assert "12-34-56" in before["pins"][0]["body"]
    event = await alice.get_event(room, secret)
    ts = str(event["origin_server_ts"])
    run = await muninn_here(config, "purge", "--room", room, "--from", ts, "--to", ts)
    assert run.rc == 0, run.err
    run = await muninn_here(config, "pins", room, "--json")
    assert run.rc == 0, run.err
    assert "12-34-56" not in run.out
    assert [p["target"] for p in json.loads(run.out)["pins"]] == [secret]  # pinned, not shown


async def test_cli_pins_refuses_a_room_scope_refuses(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A DM has no board to show: exit 1, the refusal named, nothing on stdout."""
    reader = await hs.register()
    dm = await hs.make_dm(alice, reader)
    await alice.send_text(dm, "just between us")
    await alice.send_text(dm, "!pin ^1")
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    run = await muninn_here(config, "pins", dm, "--json")
    assert run.rc == 1
    assert "refused (dm" in run.err and run.out == ""
