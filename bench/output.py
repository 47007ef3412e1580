"""How a benchmark reports: one JSON document on stdout, and the same in `--out` if given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(results: Any, out: Path | None) -> None:
    print(json.dumps(results, indent=2))
    save(results, out)


def save(results: Any, out: Path | None) -> None:
    """The JSON document in `out` only (a benchmark that prints tables instead)."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
