"""`muninn search` when it cannot search (issue 44): an empty store, or a token the homeserver
refuses, is an error naming the cause and the fix (exit 1), never "no hits" with exit 0.
The real CLI against the real Synapse, in this process (`tests.inprocess`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, reader_config, reader_config_doc, write_config
from tests.inprocess import muninn_here

REFUSED = "syt_bm90IGEgdG9rZW4_not-a-token_0000"


async def test_cli_search_of_an_empty_store_says_nothing_is_indexed_and_how_to_index(
    hs: Homeserver, tmp_path: Path
) -> None:
    """Issue 44: a search of a store nothing was indexed into exits 1 saying so and naming
    `muninn refresh` and `muninn import` (regression: exit 0, "no hits", a warning); `--json`
    keeps its document, the empty store in `warnings`
    (`tests/bot/operations/test_search.py::test_cli_search_empty_store_warns`)."""
    reader = await hs.register()
    config = write_config(tmp_path / "config.yaml", reader_config_doc(hs, reader, tmp_path))
    run = await muninn_here(config, "search", "heron")
    assert run.rc == 1 and run.out == ""
    assert run.err.startswith("muninn: nothing is indexed yet")
    assert "`muninn refresh`" in run.err and "`muninn import FILE`" in run.err
    assert str(tmp_path / "qdrant") in run.err
    assert "no hits" not in run.out + run.err and "Traceback" not in run.err


@pytest.mark.parametrize("indexed", [False, True], ids=["empty-store", "indexed-store"])
async def test_cli_search_with_a_refused_token_names_it_and_the_fix(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path, indexed: bool
) -> None:
    """Issue 44: in client mode a token the homeserver refuses (401 M_UNKNOWN_TOKEN) is named
    with what to do about it, whether or not anything is indexed yet (regression: on an empty
    store, exit 0 and "no hits")."""
    reader = await hs.register()
    if indexed:
        room = await hs.fresh_room(alice)
        await admit(alice, room, reader)
        await alice.send_text(room, "the heron nests above the boathouse")
        async with Indexer(reader_config(hs, reader, tmp_path)) as ix:
            await ix.refresh()
    doc = reader_config_doc(hs, reader, tmp_path)
    doc["reader"]["access_token"] = REFUSED
    config = write_config(tmp_path / "refused.yaml", doc)
    run = await muninn_here(config, "search", "heron")
    assert run.rc == 1 and run.out == ""
    assert run.err.startswith(f"muninn: the homeserver {hs.base_url} refused reader.access_token")
    assert "401 M_UNKNOWN_TOKEN" in run.err
    assert f"Log in as {reader.user_id} again" in run.err and "reader.access_token" in run.err
    assert REFUSED not in run.err and "Traceback" not in run.err
