"""The files a private Synapse starts from: its homeserver.yaml, its appservice registration
and its signing key (written by `bot.demo.synapse.start_synapse`).

Loopback only, no outbound traffic of any kind, every client-facing rate limit wide open, and
one appservice whose exclusive namespaces are the bot's and the `@seed-*` users'.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "APPSERVICE_ID",
    "BOT_LOCALPART",
    "JSON",
    "SEED_PREFIX",
    "SERVER_NAME",
    "homeserver_config",
    "rate_limits",
    "registration_document",
    "write_signing_key",
]

SERVER_NAME = "muninn.test"
APPSERVICE_ID = "muninn"
BOT_LOCALPART = "muninn"
SEED_PREFIX = "seed-"

JSON = dict[str, Any]


def relaxed(per_second: float = 1000.0, burst: int = 10000) -> dict[str, float]:
    return {"per_second": per_second, "burst_count": burst}


def rate_limits() -> JSON:
    """Every client-facing limiter wide open: the defaults 429 after ~9 messages."""
    rl = relaxed()
    simple = [
        "rc_message",
        "rc_registration",
        "rc_registration_token_validity",
        "rc_room_creation",
        "rc_joins_per_room",
        "rc_3pid_validation",
        "rc_admin_redaction",
        "rc_key_requests",
        "rc_third_party_invite",
        "rc_media_create",
        "rc_delayed_event_mgmt",
        "rc_reports",
        "rc_user_directory",
        "rc_profile",
    ]
    limits: JSON = {name: rl for name in simple}
    limits["rc_login"] = {"address": rl, "account": rl, "failed_attempts": rl}
    limits["rc_joins"] = {"local": rl, "remote": rl}
    limits["rc_invites"] = {"per_room": rl, "per_user": rl, "per_issuer": rl}
    limits["rc_presence"] = {"per_user": rl}
    return limits


def registration_document(
    as_token: str,
    hs_token: str,
    as_port: int,
    server_name: str,
    extra_users: Sequence[JSON] = (),
) -> JSON:
    """The bot's and the `@seed-*` namespaces (exclusive), plus any the caller adds."""
    domain = server_name.replace(".", r"\.")
    return {
        "id": APPSERVICE_ID,
        "url": f"http://127.0.0.1:{as_port}",
        "as_token": as_token,
        "hs_token": hs_token,
        "sender_localpart": BOT_LOCALPART,
        "rate_limited": False,
        "namespaces": {
            "users": [
                {"exclusive": True, "regex": f"@{BOT_LOCALPART}.*:{domain}"},
                {"exclusive": True, "regex": f"@{SEED_PREFIX}.*:{domain}"},
                *extra_users,
            ],
            "aliases": [],
            "rooms": [],
        },
    }


def homeserver_config(
    workdir: Path,
    port: int,
    shared_secret: str,
    registration: Path,
    database: JSON,
    server_name: str,
) -> JSON:
    data = workdir / "data"
    return {
        "server_name": server_name,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(workdir / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": database,
        "media_store_path": str(data / "media_store"),
        "signing_key_path": str(workdir / f"{server_name}.signing.key"),
        "registration_shared_secret": shared_secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "enable_registration": False,
        "bcrypt_rounds": 4,
        "report_stats": False,
        "enable_metrics": False,
        # No outbound traffic of any kind.
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "url_preview_enabled": False,
        "presence": {"enabled": False},
        "app_service_config_files": [str(registration)],
        **rate_limits(),
    }


def write_signing_key(path: Path) -> None:
    # What `--generate-keys` does, without paying for a second interpreter start-up.
    from signedjson.key import generate_signing_key, write_signing_keys

    with path.open("w", encoding="utf-8") as f:
        write_signing_keys(f, [generate_signing_key("a_" + secrets.token_hex(2))])
