"""What the roster's tests share: the server name, a roster file."""

from __future__ import annotations

from pathlib import Path

import yaml

SERVER = "muninn.test"


def write_roster(tmp_path: Path, *rooms: str, name: str = "roster.yaml") -> Path:
    path = tmp_path / name
    entries = [{"room": r, "note": f"note for {r}"} for r in rooms]
    path.write_text(yaml.safe_dump({"rooms": entries}), encoding="utf-8")
    return path
