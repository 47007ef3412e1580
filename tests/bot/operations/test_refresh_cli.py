"""`muninn refresh` as an operator watches it (issue 44): the progress line on a terminal names
the room it reads from the start, Ctrl-C says how far the pass got, and the report counts the
points `muninn status` counts. The real CLI against the real Synapse."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.operations.progress import OPENING
from ingest.matrix.transport import AiohttpTransport, Request, Response
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import PROJECT, admit, reader_config_doc, write_config
from tests.inprocess import muninn_here

# What rich draws between frames of the line: carriage returns, line and cursor controls;
# and, inside a frame, colours.
_BETWEEN = re.compile(r"\r|\n|\x1b\[[0-9;?]*[A-LN-Za-z]")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


async def two_rooms(hs: Homeserver, alice: MatrixUser, reader: MatrixUser) -> list[str]:
    """Two rooms of alice's with a message each, the reader in both; in the pass's order."""
    rooms = [await hs.fresh_room(alice) for _ in range(2)]
    for room in rooms:
        await admit(alice, room, reader)
        await alice.send_text(room, "the heron nests above the boathouse")
    return sorted(rooms)


def refresh_on_a_terminal(config: Path) -> str:
    """`muninn refresh` in a child whose stderr is a terminal (a pty); all it drew there."""
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "MUNINN_CONFIG"}
    env.update(TERM="xterm", COLUMNS="160")
    command = [sys.executable, "-m", "bot.cli.main", "--config", str(config), "refresh"]
    proc = subprocess.Popen(
        command, cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=secondary
    )
    os.close(secondary)
    drawn = bytearray()
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(primary)
    assert proc.wait(timeout=120) == 0, drawn.decode(errors="replace")
    return drawn.decode(errors="replace")


async def test_cli_refresh_on_a_terminal_names_the_room_from_its_start(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Every frame of the progress line that counts events names the room being read, and
    before the first room the line says what it waits for (regression: "0 events" for the
    first seconds, the model loading, no room named)."""
    reader = await hs.register()
    _, second = await two_rooms(hs, alice, reader)
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    drawn = await asyncio.to_thread(refresh_on_a_terminal, config)
    frames = [f.strip() for f in _BETWEEN.split(_COLOUR.sub("", drawn)) if f.strip()]
    counting = [f for f in frames if re.search(r"\d events\b", f)]
    assert counting, frames
    for frame in counting:
        assert frame.startswith(("room 1/2 ", "room 2/2 ")), frames
    assert any(f.startswith(f"room 2/2 {second}") for f in counting), frames
    assert all(f.startswith((OPENING, "room ")) for f in frames if "0:00:" in f), frames


async def test_cli_refresh_interrupted_says_how_far_it_got(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the second room of a pass (the transport raising it as the terminal would)
    says which room it stopped in and how many were done, then that nothing is lost and how
    to go on (regression: only the last)."""
    reader = await hs.register()
    _, second = await two_rooms(hs, alice, reader)
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    send = AiohttpTransport.send

    async def ctrl_c_in_the_second_room(self: AiohttpTransport, request: Request) -> Response:
        if request.url.path.endswith(f"/rooms/{second}/messages"):
            raise KeyboardInterrupt
        return await send(self, request)

    monkeypatch.setattr(AiohttpTransport, "send", ctrl_c_in_the_second_room)
    run = await muninn_here(config, "refresh")
    assert run.rc == 130 and run.out == ""
    said = run.err.splitlines()
    assert said[-2] == (
        f"muninn: stopped in room 2 of 2, {second} (0 events read in it); 1 room done before it"
    )
    assert said[-1].startswith("muninn: interrupted. Nothing is lost")
    assert "Traceback" not in run.err


async def test_cli_refresh_counts_the_points_status_counts(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """A window is written again as each page adds to it: the report says the room's points
    now, as `muninn status` counts them, beside its window writes (regression: `windows +3`
    where status said `1 point`, with nothing saying why)."""
    reader = await hs.register()
    room = await hs.fresh_room(alice)
    await admit(alice, room, reader)
    for n in range(5):
        await alice.send_text(room, f"heron sighting number {n} above the boathouse")
    doc: dict[str, Any] = reader_config_doc(hs, reader, tmp_path, refresh={"page_size": 2})
    config = write_config(tmp_path / "config.yaml", doc)

    run = await muninn_here(config, "refresh", "--json")
    report = next(r for r in run.doc()["rooms"] if r["room_id"] == room)
    points = report["points"]
    assert 1 <= points < report["windows_written"], report
    status = json.loads((await muninn_here(config, "status", "--json")).out)
    assert next(r for r in status["rooms"] if r["room_id"] == room)["points"] == points

    await alice.send_text(room, "and one more heron")
    text = await muninn_here(config, "refresh")
    line = next(x for x in text.out.splitlines() if x.startswith(room))
    now = int(re.findall(r"now (\d+) points? \(1 window write, 0 deletes\)", line)[0])
    shown = await muninn_here(config, "status")
    assert f"  {room}: indexed, {now} point{'s' if now > 1 else ''}" in shown.out.splitlines()
