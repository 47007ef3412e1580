"""bot.service.registration: a registration Synapse accepts, the config pointed at it, the start
check."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
import yaml
from synapse.config.appservice import load_appservices

from bot.cli.main import main
from bot.config import load_config, parse_config
from bot.service.registration import (
    check_registration,
    config_with_registration,
    generate_registration,
    registration_path,
)
from ingest.errors import ConfigError

SERVER = "chat.example.org"
CONFIG = f"""\
# Muninn on {SERVER}
homeserver:
  url: http://127.0.0.1:8008   # the client-server API
  server_name: {SERVER}
appservice:
  # where Synapse pushes transactions
  host: 127.0.0.1
  port: 29333
index:
  collection: muninn_chat      # keep this comment
"""


def write_config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def read_yaml(path: Path) -> dict[str, object]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_generate_registration_writes_valid_yaml_with_fresh_distinct_tokens(
    tmp_path: Path,
) -> None:
    """The file parses, carries the config's URL, and its two tokens are new and different."""
    cfg_path = write_config(tmp_path)
    assert generate_registration(cfg_path, out=None, force=False) == 0
    reg = read_yaml(tmp_path / "registration.yaml")
    assert reg["id"] == "muninn"
    assert reg["url"] == "http://127.0.0.1:29333"
    assert reg["sender_localpart"] == "muninn"
    assert reg["rate_limited"] is False
    as_token, hs_token = reg["as_token"], reg["hs_token"]
    assert isinstance(as_token, str) and isinstance(hs_token, str)
    assert as_token != hs_token and len(as_token) >= 40 and len(hs_token) >= 40
    assert "CHANGE_ME" not in (tmp_path / "registration.yaml").read_text()
    generate_registration(cfg_path, out=None, force=True)
    again = read_yaml(tmp_path / "registration.yaml")
    assert {again["as_token"], again["hs_token"]}.isdisjoint({as_token, hs_token})


def test_generate_registration_is_readable_only_by_its_owner(tmp_path: Path) -> None:
    """The registration holds secrets, so it is written mode 0600."""
    generate_registration(write_config(tmp_path), out=None, force=False)
    mode = stat.S_IMODE((tmp_path / "registration.yaml").stat().st_mode)
    assert mode == 0o600


def test_generate_registration_namespace_is_exclusive_for_exactly_the_bot(tmp_path: Path) -> None:
    """Synapse's own loader accepts it; the exclusive namespace is the bot user and no other."""
    generate_registration(write_config(tmp_path), out=None, force=False)
    reg = read_yaml(tmp_path / "registration.yaml")
    namespaces = reg["namespaces"]
    assert isinstance(namespaces, dict)
    assert namespaces["users"] == [{"exclusive": True, "regex": r"^@muninn:chat\.example\.org$"}]
    (service,) = load_appservices(SERVER, [str(tmp_path / "registration.yaml")])
    assert service.is_exclusive_user(f"@muninn:{SERVER}")
    for other in (f"@muninnx:{SERVER}", "@muninn:chatXexample.org", f"@alice:{SERVER}"):
        assert not service.is_exclusive_user(other), other


def test_generate_registration_points_config_at_it_keeping_comments(tmp_path: Path) -> None:
    """The config gains appservice.registration; every other line, comments too, stays."""
    cfg_path = write_config(tmp_path)
    generate_registration(cfg_path, out=None, force=False)
    text = cfg_path.read_text(encoding="utf-8")
    assert set(CONFIG.splitlines()) <= set(text.splitlines())
    assert len(text.splitlines()) == len(CONFIG.splitlines()) + 1
    cfg = load_config(cfg_path)
    assert cfg.appservice is not None
    assert registration_path(cfg) == tmp_path / "registration.yaml"
    check_registration(cfg)  # the generated file passes the start check


def test_generate_registration_leaves_a_config_that_points_at_it_untouched(
    tmp_path: Path,
) -> None:
    """A config already naming the registration is not rewritten (byte for byte)."""
    text = CONFIG.replace(
        "  host: 127.0.0.1\n", "  registration: as/reg.yaml\n  host: 127.0.0.1\n"
    )
    cfg_path = write_config(tmp_path, text)
    generate_registration(cfg_path, out=None, force=False)
    assert cfg_path.read_text(encoding="utf-8") == text
    assert read_yaml(tmp_path / "as" / "reg.yaml")["sender_localpart"] == "muninn"


def test_generate_registration_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    """An existing registration stays as it was unless --force is given."""
    cfg_path = write_config(tmp_path)
    generate_registration(cfg_path, out=None, force=False)
    before = (tmp_path / "registration.yaml").read_text()
    with pytest.raises(ConfigError, match="--force"):
        generate_registration(cfg_path, out=None, force=False)
    assert (tmp_path / "registration.yaml").read_text() == before


def test_generate_registration_refuses_a_directory_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registration path Docker made a directory (a bind mount started first) is refused
    with the way out, even with --force (regression: an IsADirectoryError traceback)."""
    cfg_path = write_config(tmp_path)
    (tmp_path / "registration.yaml").mkdir()
    code = main(["--config", str(cfg_path), "generate-registration", "--force"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert f"{tmp_path / 'registration.yaml'} is a directory" in err
    assert "rmdir" in err and "docker compose down" in err


def test_generate_registration_force_says_to_restart_synapse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replacing a registration voids its tokens: the output says to restart Synapse now."""
    cfg_path = write_config(tmp_path)
    generate_registration(cfg_path, out=None, force=False)
    assert "app_service_config_files" in capsys.readouterr().out
    generate_registration(cfg_path, out=None, force=True)
    out = capsys.readouterr().out
    assert "The old tokens no longer work: restart Synapse now" in out


def test_generate_registration_force_keeps_the_localpart_of_a_placeholder_file(
    tmp_path: Path,
) -> None:
    """A registration the start check refuses (CHANGE_ME tokens) still gives up its localpart."""
    example = Path(__file__).resolve().parents[3] / "registration.example.yaml"
    text = example.read_text(encoding="utf-8").replace(
        "sender_localpart: muninn", "sender_localpart: raven"
    )
    (tmp_path / "registration.yaml").write_text(text)
    generate_registration(write_config(tmp_path), out=None, force=True)
    assert read_yaml(tmp_path / "registration.yaml")["sender_localpart"] == "raven"


def test_generate_registration_force_keeps_the_bot_localpart(tmp_path: Path) -> None:
    """Replacing a registration keeps its sender_localpart: the bot user does not change."""
    cfg_path = write_config(tmp_path)
    generate_registration(cfg_path, out=None, force=False, sender_localpart="raven")
    generate_registration(cfg_path, out=None, force=True)
    reg = read_yaml(tmp_path / "registration.yaml")
    assert reg["sender_localpart"] == "raven"
    assert reg["namespaces"] == {
        "users": [{"exclusive": True, "regex": r"^@raven:chat\.example\.org$"}],
        "aliases": [],
        "rooms": [],
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CONFIG + "reader: {user_id: '@m:x', access_token: t1}\n", "client mode"),
        (CONFIG.replace("127.0.0.1\n  port", "0.0.0.0\n  port"), "--url"),
    ],
    ids=["client-mode", "wildcard-host"],
)
def test_generate_registration_refuses_configs_it_cannot_serve(
    tmp_path: Path, text: str, problem: str
) -> None:
    """A client-mode config, or a bind-all host without --url, is an error and writes nothing."""
    cfg_path = write_config(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(problem)):
        generate_registration(cfg_path, out=None, force=False)
    assert not (tmp_path / "registration.yaml").exists()
    assert cfg_path.read_text(encoding="utf-8") == text


def test_generate_registration_url_override_for_a_bind_all_host(tmp_path: Path) -> None:
    """With --url, a 0.0.0.0 host is fine: the URL is what Synapse pushes to."""
    cfg_path = write_config(tmp_path, CONFIG.replace("127.0.0.1\n  port", "0.0.0.0\n  port"))
    generate_registration(cfg_path, out=None, force=False, url="http://muninn:29333")
    assert read_yaml(tmp_path / "registration.yaml")["url"] == "http://muninn:29333"


@pytest.mark.parametrize(
    ("text", "expected_line"),
    [
        ("homeserver: {server_name: x}\n", "  registration: registration.yaml"),
        ("homeserver: {server_name: x}\nappservice:\n", "  registration: registration.yaml"),
        (
            "homeserver: {server_name: x}\nappservice: {}\n",
            "appservice: {registration: registration.yaml}",
        ),
        (
            "homeserver: {server_name: x}\nappservice: {port: 1}  # push port\n",
            "appservice: {registration: registration.yaml, port: 1}  # push port",
        ),
        (
            "homeserver: {server_name: x}\nappservice:\n    port: 1\n",
            "    registration: registration.yaml",
        ),
    ],
    ids=["no-section", "empty-section", "empty-flow", "flow", "deep-indent"],
)
def test_config_with_registration_inserts_one_key(text: str, expected_line: str) -> None:
    """Each layout gains exactly the registration key and parses to the same document plus it."""
    edited = config_with_registration(text, "registration.yaml")
    assert edited is not None
    assert expected_line in edited.splitlines()
    doc = yaml.safe_load(edited)
    assert doc["appservice"]["registration"] == "registration.yaml"


def test_config_with_registration_refuses_a_layout_it_cannot_edit_safely() -> None:
    """An anchor or multi-line flow mapping is left alone (None), never half-edited."""
    text = "base: &as {port: 1}\nhomeserver: {server_name: x}\nappservice: *as\n"
    assert config_with_registration(text, "registration.yaml") is None


def appservice_config(tmp_path: Path, registration: dict[str, object] | None) -> Path:
    if registration is not None:
        (tmp_path / "registration.yaml").write_text(yaml.safe_dump(registration))
    return tmp_path


@pytest.mark.parametrize(
    ("registration", "problem"),
    [
        (None, "no file at"),
        (
            {"as_token": "CHANGE_ME", "hs_token": "CHANGE_ME", "sender_localpart": "muninn"},
            "as_token",
        ),
        (
            {"as_token": "real-token-1", "hs_token": "<hs_token>", "sender_localpart": "muninn"},
            "hs_token",
        ),
        (
            {"as_token": "same-token", "hs_token": "same-token", "sender_localpart": "muninn"},
            "same",
        ),
        ({"as_token": "real-token-1", "hs_token": "real-token-2"}, "sender_localpart"),
    ],
    ids=["missing", "placeholder-as", "placeholder-hs", "shared", "no-localpart"],
)
def test_check_registration_refuses_placeholders_with_the_fix(
    tmp_path: Path, registration: dict[str, object] | None, problem: str
) -> None:
    """A missing, placeholder or shared-token registration refuses to start, saying what to run."""
    appservice_config(tmp_path, registration)
    cfg = parse_config(
        {
            "homeserver": {"server_name": SERVER},
            "appservice": {"registration": "registration.yaml"},
        },
        base_dir=tmp_path,
    )
    with pytest.raises(ConfigError, match=r"run `muninn generate-registration( --force)?`") as err:
        check_registration(cfg)
    assert problem in str(err.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("as_token: [\n", "not valid YAML"), ("- as_token\n", "must be a YAML mapping")],
    ids=["not-yaml", "not-a-mapping"],
)
def test_check_registration_names_the_broken_file(tmp_path: Path, text: str, problem: str) -> None:
    """A registration that is not a YAML mapping is refused naming the file, the cause, the fix."""
    (tmp_path / "registration.yaml").write_text(text)
    cfg = parse_config(
        {"homeserver": {"server_name": SERVER}, "appservice": {}}, base_dir=tmp_path
    )
    with pytest.raises(ConfigError) as err:
        check_registration(cfg)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'registration.yaml'}: 1 problem(s)")
    assert problem in message and "run `muninn generate-registration --force`" in message


def test_check_registration_refuses_the_shipped_example(tmp_path: Path) -> None:
    """registration.example.yaml as shipped (CHANGE_ME tokens) never starts."""
    example = Path(__file__).resolve().parents[3] / "registration.example.yaml"
    (tmp_path / "registration.yaml").write_text(example.read_text(encoding="utf-8"))
    cfg = parse_config(
        {"homeserver": {"server_name": SERVER}, "appservice": {}}, base_dir=tmp_path
    )
    with pytest.raises(ConfigError, match="generate-registration"):
        check_registration(cfg)


def test_check_registration_client_mode_has_nothing_to_check() -> None:
    """Without an appservice section there is no registration to refuse."""
    cfg = parse_config(
        {"homeserver": {"server_name": SERVER}, "reader": {"user_id": "@m:x", "access_token": "t"}}
    )
    check_registration(cfg)


def test_registration_path_prefers_the_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative registration is read from $CREDENTIALS_DIRECTORY first (LoadCredential=)."""
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "registration.yaml").write_text("as_token: x\n")
    cfg = parse_config(
        {"homeserver": {"server_name": SERVER}, "appservice": {}}, base_dir=tmp_path
    )
    assert registration_path(cfg) == tmp_path / "registration.yaml"
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert registration_path(cfg) == creds / "registration.yaml"
