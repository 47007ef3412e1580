"""Secrets in the config: inline, as `<key>_file`, or in `$CREDENTIALS_DIRECTORY` (§4.2).

A relative `<key>_file` is looked up in `$CREDENTIALS_DIRECTORY` first (systemd's
`LoadCredential=`), then beside the config file; a key given nowhere else is read from a file
named `<key>` there. A missing or placeholder secret is a problem naming the key
(`ingest.config.parse_as` lists it with the others).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

__all__ = ["credentials_dir", "inline_secrets", "is_placeholder", "read_secret_file"]

# Values that mean "nobody filled this in yet" (examples ship with these).
_PLACEHOLDER = re.compile(
    r"^(|\.\.\.|changeme|change_me|change-me|placeholder|secret|token|xxx+|<[^>]*>|"
    r"generate[-_ ]?me|replace[-_ ]?me|todo)$",
    re.IGNORECASE,
)


def is_placeholder(value: str) -> bool:
    """True for an unfilled example value such as `CHANGE_ME` or `<as_token>`."""
    return bool(_PLACEHOLDER.match(value.strip()))


_SECRET_KEYS = {("reader", "access_token"), ("index", "store", "api_key")}


def credentials_dir() -> Path | None:
    d = os.environ.get("CREDENTIALS_DIRECTORY")
    return Path(d) if d else None


def read_secret_file(path: str | Path, base_dir: Path) -> str:
    """Read a secret from a file; a relative path tries $CREDENTIALS_DIRECTORY, then base_dir."""
    p = Path(path)
    candidates = [p] if p.is_absolute() else []
    creds = credentials_dir()
    if not p.is_absolute():
        if creds is not None:
            candidates.append(creds / p)
        candidates.append(base_dir / p)
    for c in candidates:
        if c.is_file():
            return c.read_text(encoding="utf-8").strip()
    raise FileNotFoundError(" or ".join(str(c) for c in candidates))


def inline_secrets(raw: dict[str, Any], base_dir: Path, problems: list[str]) -> None:
    """Replace `<key>_file` and $CREDENTIALS_DIRECTORY/<key> with the secret's value, in place."""
    for path in _SECRET_KEYS:
        *parents, key = path
        node: Any = raw
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        dotted = ".".join(path)
        file_key = f"{key}_file"
        if file_key in node:
            if key in node:
                problems.append(f"{dotted}: give {key} or {file_key}, not both")
                node.pop(file_key)  # reported once here, not again as an unknown key
                continue
            try:
                node[key] = read_secret_file(str(node.pop(file_key)), base_dir)
            except FileNotFoundError as e:
                problems.append(f"{dotted}_file: no such file: {e}")
                node[key] = ""  # reported here; keeps pydantic from adding "is required"
                continue
            except (OSError, UnicodeDecodeError) as e:
                problems.append(f"{dotted}_file: cannot read: {e}")
                node[key] = ""
                continue
        elif key not in node and (creds := credentials_dir()) and (creds / key).is_file():
            node[key] = (creds / key).read_text(encoding="utf-8").strip()
        value = node.get(key)
        if isinstance(value, str) and is_placeholder(value):
            problems.append(f"{dotted}: is a placeholder ({value!r}); put the real secret here")
