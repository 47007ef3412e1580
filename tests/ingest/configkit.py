"""What the config's tests share: a minimal valid config, its variants, the problems named."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

# The operator's file is `ingest`'s sections and the bot's: its contract is read through the
# service's loader, which validates with `ingest.config`'s checks and words.
from bot.config import parse_config
from ingest.config import CONFIG_ENV
from ingest.errors import ConfigError


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the caller's MUNINN_CONFIG or systemd credentials."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


TOKEN = "syt_bXVuaW5u_AbCdEfGhIjKlMnOpQrSt_1a2B3c"
MINIMAL: dict[str, Any] = {
    "homeserver": {"url": "http://127.0.0.1:8008", "server_name": "example.org"},
    "reader": {"user_id": "@muninn:example.org", "access_token": TOKEN},
}


def raw(**sections: Any) -> dict[str, Any]:
    """A copy of the minimal config with sections replaced (None removes a section)."""
    data = copy.deepcopy(MINIMAL)
    for key, value in sections.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def problems(data: Any, base_dir: Path = Path(".")) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, base_dir)
    return info.value.problems
