"""ingest.credentials: a secret given inline, in a file or in systemd's credentials directory,
and a placeholder refused by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

# The operator's file is `ingest`'s sections and the bot's: its contract is read through the
# service's loader, which validates with `ingest.config`'s checks and words.
from bot.config import parse_config
from ingest.credentials import is_placeholder
from tests.ingest.configkit import TOKEN, clean_env, problems, raw


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


# ---------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    "value", ["", "...", "CHANGE_ME", "changeme", "<as_token>", "xxxx", "TODO", "replace-me"]
)
def test_parse_config_placeholder_secret(value: str) -> None:
    """An unfilled example secret is refused, naming the key."""
    found = problems(raw(reader={"user_id": "@muninn:example.org", "access_token": value}))
    assert found == [
        f"reader.access_token: is a placeholder ({value!r}); put the real secret here"
    ]


@pytest.mark.parametrize("value", [TOKEN, "secret-but-real-0123", "changeme2"])
def test_is_placeholder_real_values(value: str) -> None:
    """Real-looking values are not placeholders."""
    assert not is_placeholder(value)


def test_parse_config_secret_file_relative_to_base_dir(tmp_path: Path) -> None:
    """`access_token_file` is read (stripped) relative to the config's folder."""
    (tmp_path / "token").write_text(f"{TOKEN}\n", encoding="utf-8")
    data = raw(reader={"user_id": "@muninn:example.org", "access_token_file": "token"})
    cfg = parse_config(data, tmp_path)
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN


def test_parse_config_secret_file_absolute(tmp_path: Path) -> None:
    """An absolute `*_file` path is read as is."""
    path = tmp_path / "api_key"
    path.write_text("k3y-0123", encoding="utf-8")
    store = {"url": "http://qdrant:6333", "api_key_file": str(path)}
    cfg = parse_config(raw(index={"store": store}), Path("/nonexistent"))
    assert cfg.index.store.api_key == "k3y-0123"


def test_parse_config_secret_file_missing(tmp_path: Path) -> None:
    """A missing secret file is named by its `_file` key and the paths tried."""
    data = raw(reader={"user_id": "@muninn:example.org", "access_token_file": "nope"})
    found = problems(data, tmp_path)
    assert len(found) == 1
    assert found[0].startswith("reader.access_token_file: no such file:")
    assert str(tmp_path / "nope") in found[0]


def test_parse_config_secret_file_unreadable(tmp_path: Path) -> None:
    """A `_file` that cannot be decoded is a named problem, not a traceback (regression)."""
    (tmp_path / "token").write_bytes(b"\xff\xfe\x00binary")
    data = raw(reader={"user_id": "@muninn:example.org", "access_token_file": "token"})
    found = problems(data, tmp_path)
    assert len(found) == 1 and found[0].startswith("reader.access_token_file: cannot read")


def test_parse_config_empty_secret_file_is_placeholder(tmp_path: Path) -> None:
    """An empty secret file is as unfilled as an empty value."""
    (tmp_path / "token").write_text("\n", encoding="utf-8")
    data = raw(reader={"user_id": "@muninn:example.org", "access_token_file": "token"})
    assert problems(data, tmp_path) == [
        "reader.access_token: is a placeholder (''); put the real secret here"
    ]


def test_parse_config_secret_and_file_both(tmp_path: Path) -> None:
    """A secret given inline and as a file is one problem (regression: not also 'unknown key')."""
    data = raw(
        reader={"user_id": "@muninn:example.org", "access_token": TOKEN, "access_token_file": "t"}
    )
    assert problems(data, tmp_path) == [
        "reader.access_token: give access_token or access_token_file, not both"
    ]


def test_parse_config_credentials_directory_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative `_file` is looked up in $CREDENTIALS_DIRECTORY before the config folder."""
    creds, base = tmp_path / "creds", tmp_path / "etc"
    creds.mkdir()
    base.mkdir()
    (creds / "muninn-token").write_text(TOKEN, encoding="utf-8")
    (base / "muninn-token").write_text("the-wrong-one-0123", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    data = raw(reader={"user_id": "@muninn:example.org", "access_token_file": "muninn-token"})
    cfg = parse_config(data, base)
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN


def test_parse_config_credentials_directory_by_key_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With systemd LoadCredential=access_token:…, the key may be left out of the file."""
    (tmp_path / "access_token").write_text(TOKEN, encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    cfg = parse_config(raw(reader={"user_id": "@muninn:example.org"}))
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN


def test_parse_config_inline_secret_wins_over_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inline value is used as given even when a credential of that name exists."""
    (tmp_path / "access_token").write_text("from-credentials-0123", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    cfg = parse_config(raw())
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN
