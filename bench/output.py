"""How a benchmark reports: one JSON document on stdout, and the same in `--out` if given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(results: Any, out: Path | None) -> None:
    doc = json.dumps(results, indent=2)
    print(doc)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(doc + "\n")
