"""What an agent host adds to start `muninn mcp`: the `mcpServers` JSON most hosts read."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

__all__ = ["host_config"]


def host_config(config: Path) -> str:
    """`{"mcpServers": {"muninn": {"command", "args"}}}` for `config`, with absolute paths: a
    host starts the server without this shell's PATH or working directory."""
    beside = Path(sys.executable).parent / "muninn"  # the venv's entry point
    command = str(beside) if beside.is_file() else shutil.which("muninn") or "muninn"
    server = {"command": command, "args": ["--config", str(config.resolve()), "mcp"]}
    return json.dumps({"mcpServers": {"muninn": server}})
