"""`muninn roster plan` and `muninn roster apply` against the real Synapse."""

from __future__ import annotations

import asyncio
import json
import os
from asyncio.subprocess import PIPE
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.cli.roster.cli import roster_apply, roster_plan
from bot.config import ServiceConfig, parse_config
from bot.demo.client import unique_localpart
from bot.demo.synapse import SynapseServer
from tests.bot.cli.roster.rosterkit import SERVER, write_roster
from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import spawn_muninn, write_config


@dataclass
class Kit:
    """One roster test against Synapse: a fresh reader (leaving is what the roster does), its
    config and roster files in the test's directory, and the CLI's JSON answer."""

    synapse: SynapseServer
    hs: Homeserver
    reader: MatrixUser
    tmp_path: Path
    capsys: pytest.CaptureFixture[str]

    def config(
        self,
        *,
        exclude_aliases: tuple[str, ...] = ("#users", "#members", "#patrons"),
        command_room: str | None = None,
    ) -> ServiceConfig:
        """Client mode as the reader."""
        raw: dict[str, Any] = {
            "homeserver": {"url": self.synapse.base_url, "server_name": self.synapse.server_name},
            "reader": {"user_id": self.reader.user_id, "access_token": self.reader.access_token},
            "scope": {"exclude_aliases": list(exclude_aliases)},
        }
        if command_room is not None:
            raw["bot"] = {"command_room": command_room}
        return parse_config(raw, base_dir=self.tmp_path)

    def roster(self, *rooms: str) -> Path:
        return write_roster(self.tmp_path, *rooms)

    async def run(
        self, command: Any, cfg: ServiceConfig, roster: Path
    ) -> tuple[int, dict[str, dict[str, Any]]]:
        """Run plan or apply with --json; the actions keyed by room id (or room, if unresolved)."""
        code = await command(cfg, roster, as_json=True)
        doc = json.loads(self.capsys.readouterr().out)
        return code, {a["room_id"] or a["room"]: a for a in doc["actions"]}


@pytest_asyncio.fixture(loop_scope="session")
async def kit(
    synapse: SynapseServer,
    hs: Homeserver,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> Kit:
    """A fresh reader for every test."""
    return Kit(synapse, hs, await hs.register(), tmp_path, capsys)


async def alias_room(owner: MatrixUser, prefix: str, **kwargs: Any) -> tuple[str, str]:
    """A public room with a fresh local alias: (room id, full alias)."""
    localpart = unique_localpart(prefix)
    room_id = await owner.create_room(alias_localpart=localpart, **kwargs)
    return room_id, f"#{localpart}:{SERVER}"


# ---------------------------------------------------------------- against Synapse


async def test_roster_plan_shows_the_diff_and_changes_nothing(kit: Kit, alice: MatrixUser) -> None:
    """plan lists join/leave/refuse/keep/unresolved with reasons; the reader's rooms stay."""
    reader = kit.reader
    wanted, wanted_alias = await alias_room(alice, "wanted")
    kept = await alice.create_room()
    unlisted = await alice.create_room()
    _, excluded_alias = await alias_room(alice, "excluded")
    for room_id in (kept, unlisted):
        await reader.join(room_id)
    cfg = kit.config(exclude_aliases=(excluded_alias.split(":")[0],))
    gone = f"#{unique_localpart('gone')}:{SERVER}"
    roster = kit.roster(wanted_alias, kept, excluded_alias, gone)
    code, actions = await kit.run(roster_plan, cfg, roster)
    assert code == 0
    assert actions[wanted]["action"] == "join" and actions[wanted]["verdict_known"] is False
    assert actions[wanted]["note"] == f"note for {wanted_alias}"
    assert actions[kept]["action"] == "keep"
    assert actions[unlisted]["action"] == "leave"
    refused_ = next(a for a in actions.values() if a["room"] == excluded_alias)
    assert refused_["action"] == "refuse" and "excluded" in refused_["reason"]
    assert actions[gone]["action"] == "unresolved"
    assert set(await reader.joined_rooms()) == {kept, unlisted}
    await roster_plan(cfg, roster, as_json=False)
    text = kit.capsys.readouterr().out
    assert text.splitlines()[0] == "1 to join, 1 to leave, 1 refused, 1 kept, 1 unresolved"
    assert f"+ join       {wanted_alias}" in text


async def test_roster_plan_names_an_excluding_alias_for_what_it_is(
    kit: Kit, alice: MatrixUser
) -> None:
    """Issue 44: an alias the roster names is called the room's canonical alias where its
    state says so, and the roster's where the state cannot be read before joining (regression:
    "alt alias" for the canonical one)."""
    outside, outside_alias = await alias_room(alice, "members")  # the reader is not in it
    inside, inside_alias = await alias_room(alice, "members")
    await kit.reader.join(inside)
    short = (outside_alias.split(":")[0], inside_alias.split(":")[0])
    cfg = kit.config(exclude_aliases=short)
    code, actions = await kit.run(roster_plan, cfg, kit.roster(outside_alias, inside_alias))
    assert code == 0
    assert actions[outside]["reason"] == (
        f"excluded: alias {outside_alias} (the roster's) matches excluded alias {short[0]}"
    )
    assert actions[inside]["reason"] == (
        f"refused by scope, excluded: canonical alias {inside_alias} matches excluded alias "
        f"{short[1]}"
    )


async def test_roster_apply_joins_eligible_refuses_dm_bridged_excluded_encrypted(
    kit: Kit, alice: MatrixUser
) -> None:
    """apply joins the eligible room and ends NOT joined to any refused one, saying why."""
    reader = kit.reader
    eligible, eligible_alias = await alias_room(alice, "eligible")
    dm = await alice.create_room(
        preset="trusted_private_chat", invite=[reader.user_id], is_direct=True
    )
    bridged = await kit.hs.make_bridged_room(alice)
    encrypted = await alice.create_room()
    await alice.enable_encryption(encrypted)
    excluded, excluded_alias = await alias_room(alice, "members")
    cfg = kit.config(exclude_aliases=(excluded_alias.split(":")[0],))
    roster = kit.roster(eligible_alias, dm, bridged, encrypted, excluded_alias)
    code, actions = await kit.run(roster_apply, cfg, roster)
    assert code == 0
    assert await reader.joined_rooms() == [eligible]
    assert (
        actions[eligible]["action"] == "join" and actions[eligible]["reason"] == "joined, eligible"
    )
    for room_id, refusal in [
        (dm, "dm"),
        (bridged, "bridged"),
        (encrypted, "encrypted"),
        (excluded, "excluded"),
    ]:
        assert actions[room_id]["action"] == "refuse", actions[room_id]
        assert actions[room_id]["refusal"] == refusal
    assert "left at once" in actions[dm]["reason"]
    assert "left at once" not in actions[excluded]["reason"]  # refused without joining


async def test_roster_apply_second_run_does_nothing(kit: Kit, alice: MatrixUser) -> None:
    """After one apply, a second joins and leaves nothing, and knows the DM without joining."""
    reader = kit.reader
    eligible = await alice.create_room()
    dm = await alice.create_room(
        preset="trusted_private_chat", invite=[reader.user_id], is_direct=True
    )
    bridged = await kit.hs.make_bridged_room(alice)
    unlisted = await alice.create_room()
    await reader.join(unlisted)
    cfg = kit.config()
    roster = kit.roster(eligible, dm, bridged)
    assert (await kit.run(roster_apply, cfg, roster))[0] == 0
    code, actions = await kit.run(roster_apply, cfg, roster)
    assert code == 0
    assert {a["action"] for a in actions.values()} <= {"keep", "refuse"}
    assert actions[dm]["refusal"] == "dm" and actions[bridged]["refusal"] == "bridged"
    assert await reader.joined_rooms() == [eligible]
    code, actions = await kit.run(roster_plan, cfg, roster)
    assert not [a for a in actions.values() if a["action"] in ("join", "leave")]


async def test_roster_apply_leaves_a_room_removed_from_the_roster(
    kit: Kit, alice: MatrixUser
) -> None:
    """A room dropped from the roster is left; adding it back joins it again."""
    reader = kit.reader
    first, second = await alice.create_room(), await alice.create_room()
    cfg = kit.config()
    await kit.run(roster_apply, cfg, kit.roster(first, second))
    assert set(await reader.joined_rooms()) == {first, second}
    code, actions = await kit.run(roster_apply, cfg, kit.roster(first))
    assert code == 0 and actions[second]["action"] == "leave"
    assert await reader.joined_rooms() == [first]
    code, actions = await kit.run(roster_apply, cfg, kit.roster(first, second))
    assert actions[second]["action"] == "join" and second in await reader.joined_rooms()


async def test_roster_apply_leaves_a_listed_room_that_became_bridged(
    kit: Kit, alice: MatrixUser
) -> None:
    """A joined roster room that scope now refuses is left, and not re-joined next time."""
    reader = kit.reader
    room = await alice.create_room()
    cfg = kit.config()
    roster = kit.roster(room)
    await kit.run(roster_apply, cfg, roster)
    await alice.set_bridge_state(room, "org.example.discord://1")
    code, actions = await kit.run(roster_apply, cfg, roster)
    assert actions[room]["action"] == "leave" and actions[room]["refusal"] == "bridged"
    assert await reader.joined_rooms() == []
    code, actions = await kit.run(roster_apply, cfg, roster)
    assert (code, actions[room]["action"]) == (0, "refuse")


async def test_roster_apply_joins_and_keeps_the_command_room(kit: Kit, alice: MatrixUser) -> None:
    """The configured command room is joined though the roster omits it, and never left."""
    reader = kit.reader
    command, command_alias = await alias_room(alice, "commands")
    cfg = kit.config(command_room=command_alias)
    roster = kit.roster()
    _, actions = await kit.run(roster_apply, cfg, roster)
    assert actions[command]["action"] == "join" and "command_room" in actions[command]["note"]
    _, actions = await kit.run(roster_apply, cfg, roster)
    assert actions[command]["action"] == "keep"
    assert await reader.joined_rooms() == [command]


async def test_roster_apply_failed_join_exits_non_zero_naming_the_room(
    kit: Kit, alice: MatrixUser
) -> None:
    """An invite-only room the reader was not invited to fails to join: exit 1, stderr says so;
    a room id no room has says so;
    the plan said so beforehand, the summary counts it failed, not joined, and the line says
    whom to invite (regression: "2 joined" of which one failed, a raw 403); an alias its
    server cannot resolve is `?` while the rest is planned (regression: the plan aborted)."""
    reader = kit.reader
    private = await alice.create_room(preset="private_chat")
    public = await alice.create_room()
    remote = "#somewhere:unreachable.invalid"
    missing = f"!nosuchroomatall:{kit.synapse.server_name}"
    cfg = kit.config()
    roster = kit.roster(private, public, remote, missing)
    code, planned = await kit.run(roster_plan, cfg, roster)
    assert code == 0
    assert (
        f"invite-only, the reader not invited: invite {reader.user_id} first"
        in (planned[private]["reason"])
    )
    assert "invite" not in planned[public]["reason"]
    assert planned[remote]["action"] == "unresolved"
    assert "could not be resolved" in planned[remote]["reason"]
    code = await roster_apply(cfg, roster, as_json=False)
    out, err = kit.capsys.readouterr()
    assert code == 1
    assert f"join {private}: " in err and "M_FORBIDDEN" in err
    assert out.splitlines()[0] == ("1 joined, 0 left, 0 refused, 0 kept, 1 unresolved, 2 FAILED")
    assert f"invite {reader.user_id} to the room first" in out and "FAILED" in out
    # a room id no room has: said so, not a raw 404 M_UNKNOWN (issue 36)
    assert f"the homeserver knows no room {missing} (check the id" in out
    assert f"unresolved {remote}: the alias could not be resolved" in err
    assert await reader.joined_rooms() == [public]


async def test_cli_roster_plan_into_a_closed_pipe_ends_quietly(
    synapse: SynapseServer, hs: Homeserver, tmp_path: Path
) -> None:
    """`muninn roster plan | head` whose reader is gone ends without a traceback
    (regression: a BrokenPipeError traceback)."""
    reader = await hs.register()
    config = write_config(
        tmp_path / "config.yaml",
        {
            "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
            "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
        },
    )
    roster = write_roster(tmp_path, *(f"#r{n}-{unique_localpart('x')}:{SERVER}" for n in range(3)))
    read, write = os.pipe()
    os.close(read)  # `head` has already gone: every write to the pipe fails
    try:
        proc = await spawn_muninn(
            config, "roster", "plan", "--roster", str(roster), stdout=write, stderr=PIPE
        )
    finally:
        os.close(write)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
    assert proc.returncode == 141


async def test_cli_roster_reads_the_configs_roster_when_none_is_named(
    synapse: SynapseServer, hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Regression (issue 46 follow-up): `muninn roster plan|apply` without `--roster` reads the
    file `bot.roster` names (the one `muninn run` reads on an invite: an operator no longer
    names it twice); with neither it says how to give one, and exits 1."""
    reader = await hs.register()
    wanted = await alice.create_room()
    write_roster(tmp_path, wanted, name="rooms.yaml")
    doc: dict[str, Any] = {
        "homeserver": {"url": synapse.base_url, "server_name": synapse.server_name},
        "reader": {"user_id": reader.user_id, "access_token": reader.access_token},
    }
    bare = write_config(tmp_path / "bare.yaml", doc)
    named = write_config(tmp_path / "named.yaml", {**doc, "bot": {"roster": "rooms.yaml"}})
    proc = await spawn_muninn(named, "roster", "plan", "--json", stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    [action] = json.loads(out)["actions"]
    assert action["room_id"] == wanted and action["action"] == "join"
    proc = await spawn_muninn(bare, "roster", "plan", stdout=PIPE, stderr=PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert "--roster FILE" in err.decode() and "bot.roster" in err.decode()
