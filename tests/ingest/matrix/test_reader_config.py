"""ingest.matrix's reader without a homeserver: built from the config in either mode, its retry
bound, a short alias on its homeserver, and a wrong scheme named."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.demo.synapse import SynapseServer
from bot.operations.common import CLI_RETRY
from ingest.config import parse_config
from ingest.errors import (
    ConfigError,
    MatrixUnavailable,
)
from ingest.matrix import MatrixReader, ReaderMode, Retry
from tests.homeserver import Homeserver

# ---------------------------------------------------------------- from_config and policy


def test_retry_refuses_an_empty_bound() -> None:
    """Fewer than one attempt, or a negative delay, is refused when the policy is made."""
    with pytest.raises(ValueError, match="attempts"):
        Retry(attempts=0)
    with pytest.raises(ValueError, match="negative"):
        Retry(backoff=-1)


def test_reader_from_config_client_mode() -> None:
    """Client mode takes the homeserver URL, user id and access token from the config."""
    cfg = parse_config(
        {
            "homeserver": {"url": "http://hs.test:8008/", "server_name": "hs.test"},
            "reader": {"user_id": "@r:hs.test", "access_token": "syt_abc"},
        }
    )
    reader = MatrixReader.from_config(cfg)
    assert (reader.homeserver, reader.user_id, reader.mode) == (
        "http://hs.test:8008",
        "@r:hs.test",
        ReaderMode.CLIENT,
    )
    assert reader.token_name == "reader.access_token"


def test_reader_from_config_appservice_mode_reads_registration(tmp_path: Path) -> None:
    """Appservice mode reads as_token and sender_localpart from the registration file."""
    (tmp_path / "registration.yaml").write_text(
        yaml.safe_dump(
            {
                "as_token": "as-secret-123",
                "hs_token": "hs-secret-456",
                "sender_localpart": "muninn",
            }
        )
    )
    raw = {
        "homeserver": {"url": "http://hs.test", "server_name": "hs.test"},
        "appservice": {"registration": "registration.yaml"},
    }
    reader = MatrixReader.from_config(parse_config(raw, base_dir=tmp_path))
    assert (reader.user_id, reader.mode) == ("@muninn:hs.test", ReaderMode.APPSERVICE)
    assert reader.token_name == f"as_token in {tmp_path / 'registration.yaml'}"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "appservice.registration: no file at"),
        ({"hs_token": "hs-secret-456", "sender_localpart": "muninn"}, "as_token: is missing"),
        (
            {"as_token": "CHANGE_ME", "hs_token": "hs-secret-456", "sender_localpart": "muninn"},
            "as_token: is missing or a placeholder ('CHANGE_ME')",
        ),
        ({"as_token": "as-secret-123", "sender_localpart": "muninn"}, "hs_token: is missing"),
        (
            {"as_token": "as-secret-123", "hs_token": "hs-secret-456"},
            "sender_localpart: is missing",
        ),
    ],
)
def test_reader_from_config_bad_registration_is_a_config_error(
    tmp_path: Path, content: dict[str, Any] | None, problem: str
) -> None:
    """The reader refuses a registration as the start check does: missing, or a token or sender
    missing or a placeholder, names the problem (one parser, `load_registration`)."""
    if content is not None:
        (tmp_path / "registration.yaml").write_text(yaml.safe_dump(content))
    raw = {
        "homeserver": {"url": "http://hs.test", "server_name": "hs.test"},
        "appservice": {"registration": "registration.yaml"},
    }
    with pytest.raises(ConfigError) as err:
        MatrixReader.from_config(parse_config(raw, base_dir=tmp_path))
    assert problem in str(err.value)


@pytest.mark.parametrize(
    ("given", "full"),
    [
        ("#dev", "#dev:example.org"),
        ("#dev:example.org", "#dev:example.org"),
        ("#dev:other.org", "#dev:other.org"),
    ],
)
def test_reader_full_alias_puts_a_short_alias_on_its_homeserver(given: str, full: str) -> None:
    """The one alias rule: `#dev` is `#dev:<server_name>`; a server part is kept."""
    reader = MatrixReader("http://127.0.0.1:1", "token", "@muninn:example.org")
    assert reader.full_alias(given) == full


async def test_reader_https_to_a_plain_http_port_fails_naming_the_cause(
    synapse: SynapseServer, hs: Homeserver
) -> None:
    """`https://` to Synapse's plain-HTTP port fails within the connect bound (TCP and TLS
    handshake), after the CLI's two tries, saying "TLS to a port that speaks plain HTTP?" and
    the URL to use (regression: every try hung ~60 s, then said "ssl:default [None]")."""
    user = await hs.register()
    tls = synapse.base_url.replace("http://", "https://")
    reader = MatrixReader(tls, user.access_token, user.user_id, retry=CLI_RETRY)
    reader.connect_timeout = 0.5  # the product's is CONNECT_TIMEOUT; the rule is the same
    try:
        with pytest.raises(MatrixUnavailable) as caught:
            await asyncio.wait_for(reader.whoami(), 30)
    finally:
        await reader.close()
    message = str(caught.value)
    assert "failed 2 time(s)" in message and "no connection within 0.5 s" in message
    assert "TLS to a port that speaks plain HTTP?" in message
    assert f"homeserver.url: {synapse.base_url}" in message
