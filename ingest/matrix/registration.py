"""The appservice registration file as Muninn reads it (Synapse reads the rest)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ingest.config_errors import yaml_problem
from ingest.credentials import is_placeholder
from ingest.errors import ConfigError

__all__ = ["USER_LOCALPART", "Registration", "load_registration", "read_registration"]

USER_LOCALPART = re.compile(r"^[a-z0-9._=\-/+]+$")  # the spec's user id localpart grammar
_HINT = "run `muninn generate-registration`"
_HINT_FORCE = "run `muninn generate-registration --force`"


@dataclass(frozen=True)
class Registration:
    """What Muninn takes from its appservice registration; Synapse reads the rest."""

    as_token: str  # Muninn → Synapse: acts as the bot user
    hs_token: str  # Synapse → Muninn: authenticates the transactions Synapse pushes
    sender_localpart: str  # the bot user is @<sender_localpart>:<server_name>


def read_registration(path: Path) -> dict[str, Any]:
    """The registration file as a YAML mapping, its fields unchecked.

    The one reader of the file. A `ConfigError` names the file and the cause: no file,
    unreadable, not YAML, or not a mapping.
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([f"appservice.registration: no file at {path}; {_HINT}"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"appservice.registration: cannot read {path}: {e}"]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"{yaml_problem(e)}; {_HINT_FORCE}"], str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"the registration must be a YAML mapping; {_HINT_FORCE}"], str(path))
    return raw


def load_registration(path: Path) -> Registration:
    """The registration at `path`, refused if a token is missing, a placeholder or shared.

    A placeholder `hs_token` matters as much as `as_token`: it is the only thing that
    authenticates Synapse's pushes to Muninn. Every problem is listed, each with its fix.
    """
    raw = read_registration(path)
    problems = []
    for key in ("as_token", "hs_token"):
        value = raw.get(key)
        if not isinstance(value, str) or is_placeholder(value):
            shown = f" ({value!r})" if isinstance(value, str) else ""
            problems.append(f"{key}: is missing or a placeholder{shown}; {_HINT_FORCE}")
    as_token, hs_token = raw.get("as_token"), raw.get("hs_token")
    if isinstance(as_token, str) and as_token == hs_token:
        problems.append(f"as_token and hs_token are the same; {_HINT_FORCE}")
    localpart = raw.get("sender_localpart")
    if not isinstance(localpart, str) or not USER_LOCALPART.match(localpart):
        problems.append(f"sender_localpart: is missing or not a user localpart; {_HINT}")
    if problems:
        raise ConfigError(problems, str(path))
    return Registration(str(as_token), str(hs_token), str(localpart))
