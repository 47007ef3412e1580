"""What the event rules' tests share: the fixture events (tests/fixtures/events), `normalize` as
the writer calls it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ingest.rules.events import normalize

FIXTURES = Path(__file__).parents[2] / "fixtures" / "events"
OWN = frozenset({"@muninn:example.org", "@muninn-bot:example.org"})
ROOM = "!jEsUZKDJdhlrceRyVU:example.org"


def load(name: str) -> dict[str, Any]:
    """A fresh copy of a fixture event, safe to modify."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def norm(event: Any) -> Any:
    return normalize(event, own_user_ids=OWN)
