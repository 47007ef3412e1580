"""`bot.mcp.service`: `muninn mcp` holds the listener's read token and cannot take up the other
(issue 46); what it may do with the read token is proven on the listener
(`tests/bot/service/http_api/test_read_token.py`) and through the tools
(`tests/bot/mcp/test_server.py::test_mcp_asks_the_running_service_while_it_holds_the_store`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.indexing import PROJECT, write_config


def test_mcp_cannot_open_the_listeners_write_token(tmp_path: Path) -> None:
    """Once `muninn mcp`'s guard is on, opening `<store>/LISTENER_TOKEN` by any path or call
    (`open`, `pathlib`, `os.open`) is refused; the read token beside it opens."""
    store = tmp_path / "qdrant"
    store.mkdir()
    (store / "LISTENER_TOKEN").write_text("write\n")
    (store / "LISTENER_READ_TOKEN").write_text("read\n")
    doc = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "hs"},
        "reader": {"user_id": "@reader:hs", "access_token": "syt_not_a_real_one"},
        "index": {"store": {"path": str(store)}},
    }
    config = write_config(tmp_path / "config.yaml", doc)
    code = f"""
        import os
        from pathlib import Path
        from bot.config import load_config
        from bot.mcp.service import refuse_the_write_token
        refuse_the_write_token(load_config(Path({str(config)!r})))
        store = Path({str(store)!r})
        attempts = [
            lambda: open(store / "LISTENER_TOKEN").read(),
            lambda: (store / "." / "LISTENER_TOKEN").read_text(),
            lambda: os.open(os.path.relpath(store / "LISTENER_TOKEN"), os.O_RDONLY),
        ]
        for attempt in attempts:
            try:
                attempt()
                print("opened")
            except PermissionError as e:
                print("refused:", e)
        print("read token:", (store / "LISTENER_READ_TOKEN").read_text().strip())
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["refused"] * 3 + ["read token"], out.stderr
    assert lines[-1] == "read token: read"
