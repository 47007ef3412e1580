"""`muninn generate-registration`: the appservice registration, and the check on it at start.

The registration is what Synapse and Muninn share: `as_token` (Muninn → Synapse), `hs_token`
(Synapse → Muninn), the bot's `sender_localpart` and its exclusive user namespace. Like mautrix
bridges, generating it also points the config at it (`appservice.registration`), editing the
config file as text so the operator's comments survive: the edit inserts one line, and is
checked by re-parsing to change nothing else, or it is not written at all.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bot.config import ServiceConfig, parse_config
from ingest.config import registration_path
from ingest.config_errors import yaml_problem
from ingest.errors import ConfigError
from ingest.matrix import USER_LOCALPART, load_registration, read_registration

__all__ = [
    "DEFAULT_LOCALPART",
    "check_registration",
    "config_with_registration",
    "generate_registration",
    "new_registration",
    "registration_path",
]

DEFAULT_LOCALPART = "muninn"
APPSERVICE_ID = "muninn"
_WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]", ""}
_PLAIN_SCALAR = re.compile(r"^[A-Za-z0-9_./\-]+$")


# ---------------------------------------------------------------- the check at start


def check_registration(cfg: ServiceConfig) -> None:
    """Refuse to start on a registration with missing, placeholder or shared tokens.

    Client mode (no `appservice`) has nothing to check; the checks are `load_registration`'s,
    the same the reader applies when it takes the as_token.
    """
    if cfg.appservice is not None:
        load_registration(registration_path(cfg))


# ---------------------------------------------------------------- the registration itself


def _user_namespace(localpart: str, server_name: str) -> str:
    # Anchored and escaped: exactly the bot user, not every user whose id starts like it.
    return f"^{re.escape('@' + localpart + ':' + server_name)}$"


def new_registration(*, url: str, server_name: str, localpart: str) -> dict[str, Any]:
    """A registration with fresh, distinct tokens and an exclusive namespace for the bot only."""
    if not USER_LOCALPART.match(localpart):
        raise ConfigError([f"sender_localpart: not a user localpart: {localpart!r}"])
    as_token, hs_token = secrets.token_urlsafe(48), secrets.token_urlsafe(48)
    return {
        "id": APPSERVICE_ID,
        "url": url,
        "as_token": as_token,
        "hs_token": hs_token,
        "sender_localpart": localpart,
        # Muninn reads and replies; Synapse's rate limits would only drop replies.
        "rate_limited": False,
        "namespaces": {
            "users": [{"exclusive": True, "regex": _user_namespace(localpart, server_name)}],
            "aliases": [],
            "rooms": [],
        },
    }


def _registration_text(reg: dict[str, Any], path: Path) -> str:
    header = (
        "# Muninn's appservice registration, written by `muninn generate-registration`.\n"
        "# Give it to Synapse in homeserver.yaml and restart Synapse (it reads the list at\n"
        "# start only):\n"
        f"#   app_service_config_files: [{path}]\n"
        "# Keep it secret: as_token acts as the bot, hs_token authenticates Synapse to Muninn.\n"
    )
    return header + yaml.safe_dump(reg, sort_keys=False, default_flow_style=False)


def _appservice_url(cfg: ServiceConfig) -> str:
    assert cfg.appservice is not None
    host = cfg.appservice.host
    if host in _WILDCARD_HOSTS:
        raise ConfigError(
            [
                f"appservice.host is {host!r}, a bind address Synapse cannot push to; "
                "pass --url with the address Synapse reaches Muninn at (e.g. http://muninn:29333)"
            ]
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{cfg.appservice.port}"


def _previous_localpart(path: Path) -> str | None:
    """The sender_localpart of the registration being replaced, so --force keeps the bot."""
    try:
        value = read_registration(path).get("sender_localpart")
    except ConfigError:
        return None
    return value if isinstance(value, str) and USER_LOCALPART.match(value) else None


# ---------------------------------------------------------------- editing the config as text


def _scalar(value: str) -> str:
    return value if _PLAIN_SCALAR.match(value) else json.dumps(value)


def _child_indent(lines: list[str], after: int) -> str:
    for line in lines[after + 1 :]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = line[: len(line) - len(line.lstrip())]
        return indent if indent else "  "
    return "  "


def _edit(text: str, value: str) -> str | None:
    lines = text.splitlines(keepends=True)
    entry = f"registration: {_scalar(value)}"
    for i, line in enumerate(lines):
        match = re.match(r"^appservice\s*:[ \t]*(?P<rest>[^#\n]*?)[ \t]*(?P<comment>#.*)?$", line)
        if match is None:
            continue
        rest, eol = match["rest"], "\n" if line.endswith("\n") else ""
        if rest in ("", "null", "~"):
            head = f"appservice:{' ' + match['comment'] if match['comment'] else ''}\n"
            child = f"{_child_indent(lines, i) if rest == '' else '  '}{entry}{eol or chr(10)}"
            return "".join([*lines[:i], head, child, *lines[i + 1 :]])
        if rest.startswith("{") and rest.endswith("}"):
            inner = rest[1:-1].strip()
            flow = "{" + entry + (", " + inner if inner else "") + "}"
            new = line.replace(rest, flow, 1)
            return "".join([*lines[:i], new, *lines[i + 1 :]])
        return None
    sep = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{sep}appservice:\n  {entry}\n"


def config_with_registration(text: str, value: str) -> str | None:
    """The config text with `appservice.registration: value` added, or None if unsafe.

    The edit is accepted only if the result parses to exactly the original document plus that
    one key, so a layout this does not understand is left alone rather than damaged.
    """
    try:
        before = yaml.safe_load(text) or {}
        edited = _edit(text, value)
        after = yaml.safe_load(edited) if edited is not None else None
    except yaml.YAMLError:
        return None
    if not isinstance(before, dict) or edited is None:
        return None
    expected = copy.deepcopy(before)
    section = expected.get("appservice")
    expected["appservice"] = {
        **(section if isinstance(section, dict) else {}),
        "registration": value,
    }
    return edited if after == expected else None


# ---------------------------------------------------------------- the command


def _write_atomically(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_raw(cfg_path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = cfg_path.read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except FileNotFoundError:
        raise ConfigError([f"no config file at {cfg_path}"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"cannot read the config: {e}"], str(cfg_path)) from None
    except yaml.YAMLError as e:
        raise ConfigError([yaml_problem(e)], str(cfg_path)) from None
    if not isinstance(raw, dict):
        raise ConfigError(["the file must be a YAML mapping of sections"], str(cfg_path))
    if "reader" in raw:
        raise ConfigError(
            [
                "reader: is set (client mode); a registration is for appservice mode: "
                "remove the reader section, then run generate-registration again"
            ],
            str(cfg_path),
        )
    section = raw.get("appservice")
    if section is not None and not isinstance(section, dict):
        raise ConfigError(["appservice: must be a mapping"], str(cfg_path))
    return text, raw


def _config_value(target: Path, config_dir: Path) -> str:
    """How the config names the registration: relative to the config's folder when inside it."""
    try:
        return str(target.resolve().relative_to(config_dir.resolve()))
    except ValueError:
        return str(target.resolve())


def _target(cfg: ServiceConfig, cfg_path: Path, configured: Any, out: Path | None) -> Path:
    """`--out`, else the configured path, else registration.yaml beside the config."""
    if configured is None:
        return out or cfg.base_dir / "registration.yaml"
    named = cfg.resolve(Path(str(configured)))
    if out is not None and named.resolve() != out.resolve():
        raise ConfigError(
            [f"appservice.registration is {configured}, not {out}: edit the config or drop --out"],
            str(cfg_path),
        )
    return named


def generate_registration(
    cfg_path: Path,
    *,
    out: Path | None = None,
    force: bool = False,
    url: str | None = None,
    sender_localpart: str | None = None,
) -> int:
    """Write a fresh registration and point the config at it; print what to do next.

    `out` defaults to the config's `appservice.registration`, else `registration.yaml` beside
    the config. An existing file is replaced only with `force` (its tokens stop working).
    """
    text, raw = _load_raw(cfg_path)
    section = dict(raw.get("appservice") or {})
    config_dir = cfg_path.resolve().parent
    cfg = parse_config({**raw, "appservice": section}, config_dir, str(cfg_path))
    configured = section.get("registration")
    target = _target(cfg, cfg_path, configured, out)
    if target.is_dir():
        raise ConfigError(
            [
                f"{target} is a directory, not a registration file: Docker creates a missing "
                "bind-mount source as a directory when a container that mounts it starts "
                "first. Stop it (docker compose down), remove the directory (rmdir "
                f"{target}), run generate-registration again, and only then start Synapse "
                "(deploy/README.md, Docker Compose)"
            ]
        )
    replaced = target.exists()
    if replaced and not force:
        raise ConfigError(
            [
                f"{target} exists; pass --force to replace it (its tokens stop working, "
                "so Synapse must be given the new file and restarted)"
            ]
        )
    localpart = sender_localpart or _previous_localpart(target) or DEFAULT_LOCALPART
    reg = new_registration(
        url=url or _appservice_url(cfg),
        server_name=cfg.homeserver.server_name,
        localpart=localpart,
    )
    new_config = None
    if not configured:
        new_config = config_with_registration(text, _config_value(target, config_dir))
        if new_config is None:
            raise ConfigError(
                [
                    f"cannot add appservice.registration safely; add `registration: {target}` "
                    "under `appservice:` yourself, then run this again"
                ],
                str(cfg_path),
            )
    _write_atomically(target, _registration_text(reg, target.resolve()), 0o600)
    if new_config is not None:
        _write_atomically(cfg_path, new_config, cfg_path.stat().st_mode & 0o777)
    _report(target, cfg_path, reg, config_changed=new_config is not None, replaced=replaced)
    return 0


def _report(
    target: Path, cfg_path: Path, reg: dict[str, Any], *, config_changed: bool, replaced: bool
) -> None:
    where = f"set appservice.registration in {cfg_path}" if config_changed else "config unchanged"
    if replaced:
        # The old tokens are void from now on: Synapse keeps pushing with the old hs_token
        # (refused) and refuses the old as_token until it reads the new file.
        nxt = (
            "The old tokens no longer work: restart Synapse now so it reads the new file "
            "(it reads app_service_config_files only at start), then restart muninn."
        )
    else:
        nxt = (
            "Next: add it to Synapse's homeserver.yaml\n"
            f"  app_service_config_files: [{target.resolve()}]\n"
            "and restart Synapse (it reads that list only at start)."
        )
    print(
        f"wrote {target} (fresh as_token and hs_token; bot @{reg['sender_localpart']}; "
        f"Synapse pushes to {reg['url']}); {where}.\n{nxt}",
        file=sys.stdout,
    )
