"""ingest.config: the config is validated once, and every problem is named by its key (§7)
(secrets and their files: test_credentials.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

# The operator's file is `ingest`'s sections and the bot's: its contract is read through the
# service's loader, which validates with `ingest.config`'s checks and words.
from bot.config import ServiceConfig, load_config, parse_config
from ingest import config as ingest_config
from ingest.config import CONFIG_ENV, config_path
from ingest.errors import ConfigError
from tests.ingest.configkit import MINIMAL, TOKEN, clean_env, problems, raw


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


# ---------------------------------------------------------------- valid configs


def test_parse_config_minimal_defaults() -> None:
    """A minimal client-mode config gets the documented defaults."""
    cfg = parse_config(raw())
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN
    assert cfg.appservice is None
    assert cfg.scope.exclude_aliases == ("#users", "#members", "#patrons")
    assert cfg.scope.bridge_puppet_patterns == ("@_discord_.*", "@discord_.*")
    assert cfg.index.store.embedded and cfg.index.store.path == Path("./data/qdrant")
    assert cfg.index.collection == "muninn_chat"
    assert (cfg.chunker.gap_seconds, cfg.chunker.max_bytes) == (1800, 350)
    assert cfg.bot.prefix == "!"
    assert cfg.embedder.kind == "local"


@pytest.mark.parametrize(
    ("bot", "unindexed"),
    [
        ({}, None),
        ({"command_room": "#muninn"}, "#muninn"),
        ({"command_room": "#muninn", "index_command_room": True}, None),
    ],
)
def test_parse_config_the_command_room_is_left_out_of_the_index_by_default(
    bot: dict[str, object], unindexed: str | None
) -> None:
    """Issue 44: `bot.index_command_room` (false by default) leaves `bot.command_room` out of
    the index (`BotConfig.unindexed_room`, what the scope rules refuse); true indexes it."""
    assert parse_config(raw(bot=bot)).bot.unindexed_room == unindexed


def test_parse_config_appservice_mode() -> None:
    """An appservice section alone is the other valid mode."""
    cfg = parse_config(raw(reader=None, appservice={"registration": "reg.yaml", "port": 29334}))
    assert cfg.reader is None
    assert cfg.appservice is not None and cfg.appservice.port == 29334


def test_parse_config_store_url() -> None:
    """A store url selects the Qdrant server, with its api key."""
    cfg = parse_config(raw(index={"store": {"url": "http://qdrant:6333", "api_key": "k3y-0123"}}))
    assert not cfg.index.store.embedded
    assert cfg.index.store.api_key == "k3y-0123"


def test_parse_config_strips_homeserver_url_slash() -> None:
    """A trailing slash on the homeserver url is dropped."""
    hs = {"url": "https://matrix.example.org/", "server_name": "example.org"}
    assert parse_config(raw(homeserver=hs)).homeserver.url == "https://matrix.example.org"


def test_parse_config_homeserver_url_with_the_api_prefix_says_drop_it() -> None:
    """A URL ending in /_matrix/client is refused naming the base URL (regression: every
    request then got a 404 on a doubled prefix that did not say why)."""
    hs = {"url": "https://matrix.example.org/_matrix/client/", "server_name": "example.org"}
    found = problems(raw(homeserver=hs))
    assert any(
        p.startswith("homeserver.url") and "drop the suffix" in p and "matrix.example.org)" in p
        for p in found
    ), found


def test_parse_config_does_not_mutate_input() -> None:
    """Validation (including *_file resolution) leaves the caller's dict as it was."""
    data = raw()
    before = copy.deepcopy(data)
    parse_config(data)
    assert data == before


# ---------------------------------------------------------------- each problem named by key


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"homeserver": None}, "homeserver: is required"),
        ({"homeserver": {"url": "http://x"}}, "homeserver.server_name: is required"),
        ({"homeserver": {"server_name": "x", "url": "ftp://x"}}, "homeserver.url"),
        ({"reader": {"user_id": "muninn", "access_token": TOKEN}}, "reader.user_id"),
        ({"reader": {"user_id": "@m:example.org"}}, "reader.access_token: is required"),
        ({"appservice": {"port": 70000}}, "appservice.port"),
        ({"index": {"collection": "bad name!"}}, "index.collection"),
        ({"embedder": {"kind": "openai"}}, "embedder.kind"),
        ({"chunker": {"gap_seconds": 0}}, "chunker.gap_seconds"),
        ({"chunker": {"max_bytes": 10}}, "chunker.max_bytes"),
        ({"refresh": {"page_size": 5000}}, "refresh.page_size"),
        ({"bot": {"transcript_limit": 0}}, "bot.transcript_limit"),
        ({"metrics": {"port": 0}}, "metrics.port"),
        ({"scope": {"exclude_aliases": ["members"]}}, "scope.exclude_aliases"),
        ({"scope": {"exclude_room_ids": ["general"]}}, "scope.exclude_room_ids"),
        ({"scope": {"bridge_puppet_patterns": ["@_discord_(.*"]}}, "scope.bridge_puppet_patterns"),
        ({"bot": {"command_room_askers": ["*persona"]}}, "bot.command_room_askers"),
        ({"reader": "@muninn:example.org"}, "reader"),
    ],
)
def test_parse_config_problem_named_by_key(sections: dict[str, Any], named: str) -> None:
    """A bad value is reported with its dotted key."""
    found = problems(raw(**sections))
    assert any(p.startswith(named) for p in found), found


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"colour": "blue"}, "colour: is not a known key"),
        (
            {"homeserver": {"server_name": "x", "port": 8008}},
            "homeserver.port: is not a known key",
        ),
        ({"scope": {"exclude_alias": ["#x"]}}, "scope.exclude_alias: is not a known key"),
        ({"index": {"store": {"pth": "./q"}}}, "index.store.pth: is not a known key"),
    ],
)
def test_parse_config_unknown_keys(sections: dict[str, Any], named: str) -> None:
    """A misspelt key is an error naming it, never silently ignored."""
    found = problems(raw(**sections))
    assert any(p.startswith(named) for p in found), found


@pytest.mark.parametrize(
    "regex",
    ["([", "*", "@_discord_(", "(?P<x>a)(?P<x>b)"],
)
def test_parse_config_bad_regex_named(regex: str) -> None:
    """A pattern that does not compile is named with the regex error."""
    found = problems(raw(scope={"bridge_puppet_patterns": [regex]}))
    assert len(found) == 1
    assert "not a regular expression" in found[0] and regex in found[0]


def test_parse_config_bad_asker_regex_named() -> None:
    """The command room's askers are regexes too: one that does not compile is named alike."""
    found = problems(raw(bot={"command_room_askers": ["@ok:.*", "@bad:("]}))
    assert len(found) == 1
    assert "not a regular expression" in found[0] and "@bad:(" in found[0]


def test_parse_config_all_problems_at_once() -> None:
    """Every problem is reported in one error, not the first one only."""
    data = raw(
        homeserver={"server_name": "example.org", "url": "gopher://x"},
        reader={"user_id": "nobody", "access_token": "CHANGE_ME"},
        scope={"exclude_aliases": ["users"], "bridge_puppet_patterns": ["(["]},
        chunker={"gap_seconds": -1},
        colour="blue",
    )
    found = problems(data)
    keys = [p.split(":")[0] for p in found]
    assert set(keys) >= {
        "homeserver.url",
        "reader.user_id",
        "reader.access_token",
        "scope.exclude_aliases",
        "scope.bridge_puppet_patterns",
        "chunker.gap_seconds",
        "colour",
    }


def test_config_error_message_lists_problems() -> None:
    """The error's text names the source and lists each problem on its own line."""
    with pytest.raises(ConfigError) as info:
        parse_config(raw(colour="blue", homeserver=None), source="/etc/muninn/config.yaml")
    text = str(info.value)
    assert text.startswith("/etc/muninn/config.yaml: 2 problem(s):")
    assert "\n  - colour: is not a known key" in text
    assert "\n  - homeserver: is required" in text


@pytest.mark.parametrize("document", [None, [], "homeserver: x", 42])
def test_parse_config_not_a_mapping(document: Any) -> None:
    """An empty file or a non-mapping document is one clear problem."""
    assert problems(document) == ["the file must be a YAML mapping of sections"]


# ---------------------------------------------------------------- reader vs appservice


def test_parse_config_neither_reader_nor_appservice() -> None:
    """Without reader or appservice the config names both options."""
    assert problems(raw(reader=None)) == [
        "config: give reader (client mode) or appservice (appservice mode)"
    ]


def test_parse_config_both_reader_and_appservice() -> None:
    """Reader and appservice together are refused."""
    assert problems(raw(appservice={})) == ["config: give reader or appservice, not both"]


# ---------------------------------------------------------------- store path vs url


def test_parse_config_store_path_and_url() -> None:
    """An embedded path and a server url together are refused, naming index.store."""
    found = problems(raw(index={"store": {"path": "./q", "url": "http://qdrant:6333"}}))
    assert found == ["index.store: give either path (embedded) or url (server), not both"]


def test_parse_config_store_api_key_placeholder() -> None:
    """The store api key is a secret too: a placeholder is named."""
    found = problems(raw(index={"store": {"url": "http://qdrant:6333", "api_key": "<api key>"}}))
    assert found == [
        "index.store.api_key: is a placeholder ('<api key>'); put the real secret here"
    ]


# ---------------------------------------------------------------- loading a file


def write_config(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_load_config_explicit_path(tmp_path: Path) -> None:
    """An explicit path is read, and its folder becomes base_dir."""
    path = write_config(tmp_path / "muninn.yaml", raw())
    cfg = load_config(path)
    assert isinstance(cfg, ServiceConfig)
    assert cfg.base_dir == tmp_path.resolve()


def test_load_config_env_when_no_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$MUNINN_CONFIG is used when no path is given."""
    path = write_config(tmp_path / "from-env.yaml", raw())
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert load_config().base_dir == tmp_path.resolve()
    assert config_path() == path


def test_load_config_explicit_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--config wins over $MUNINN_CONFIG."""
    good = write_config(tmp_path / "good.yaml", raw())
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.yaml"))
    assert load_config(good).reader is not None
    assert config_path(good) == good


def test_config_path_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --config or $MUNINN_CONFIG the path is ./config.yaml."""
    assert config_path() == Path("config.yaml")


def test_load_config_missing_file(tmp_path: Path) -> None:
    """A missing file names the path and how to choose another."""
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    (problem,) = info.value.problems
    assert str(tmp_path / "nope.yaml") in problem and "MUNINN_CONFIG" in problem


def test_load_config_directory_is_config_error(tmp_path: Path) -> None:
    """A directory given as the config is a ConfigError, not a traceback (regression)."""
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(tmp_path) in info.value.problems[0]


def test_load_config_invalid_yaml(tmp_path: Path) -> None:
    """Broken YAML is one problem naming the file."""
    path = tmp_path / "bad.yaml"
    path.write_text("homeserver: {url: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.source == str(path)
    assert info.value.problems[0].startswith("not valid YAML")
    # The file is the source; the problem says where in it (regression: `in "<unicode string>"`).
    assert "unicode string" not in str(info.value) and "(line 2, column 1)" in str(info.value)


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        (
            {"bot": {"comand_room": "#x"}},
            "bot.comand_room: is not a known key; did you mean `command_room`?",
        ),
        (
            {"homeserver": {**MINIMAL["homeserver"], "ulr": "x"}},
            "homeserver.ulr: is not a known key; did you mean `url`?",
        ),
        ({"indx": {}}, "indx: is not a known key; did you mean `index`?"),
        (
            {"index": {"store": {"pth": "./q"}}},
            "index.store.pth: is not a known key; did you mean `path`?",
        ),
        ({"colour": "blue"}, "colour: is not a known key"),
    ],
)
def test_parse_config_misspelt_key_says_did_you_mean(sections: dict[str, Any], named: str) -> None:
    """A misspelt key names the key it is likely a typo of; a stranger gets no guess."""
    found = problems(raw(**sections))
    assert named in found, found


def test_load_config_source_is_the_path(tmp_path: Path) -> None:
    """Validation problems of a file carry the file's path as the source."""
    path = write_config(tmp_path / "c.yaml", raw(colour="blue"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}: 1 problem(s)")


def test_load_config_secret_file_next_to_config(tmp_path: Path) -> None:
    """A relative `_file` in a loaded config is found next to the config file."""
    (tmp_path / "token").write_text(TOKEN, encoding="utf-8")
    path = write_config(
        tmp_path / "config.yaml",
        raw(reader={"user_id": "@muninn:example.org", "access_token_file": "token"}),
    )
    cfg = load_config(path)
    assert cfg.reader is not None and cfg.reader.access_token == TOKEN


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"chunker": {"gap_seconds": "half an hour"}}, "chunker.gap_seconds: must be a whole"),
        ({"reader": "@muninn:example.org"}, "reader: must be a mapping of keys"),
        ({"scope": {"exclude_aliases": "#members"}}, "scope.exclude_aliases: must be a list"),
        ({"embedder": {"kind": "openai"}}, "embedder.kind: must be "),
        ({"chunker": {"gap_seconds": 0}}, "chunker.gap_seconds: must be greater than"),
    ],
)
def test_parse_config_problems_are_worded_for_an_operator(
    sections: dict[str, Any], expected: str
) -> None:
    """A wrong value says what is wrong, the right form and what was given, never the
    validator's own vocabulary ("Input should be a valid dictionary or instance of …")."""
    found = problems(raw(**sections))
    assert any(p.startswith(expected) and "got " in p for p in found), found
    assert not any("Input should" in p or "instance of" in p for p in found), found


def test_ingest_config_reads_its_own_sections_only() -> None:
    """`ingest` names no bot concept: its own model reads the file's other sections, and the
    bot's (`bot`, `metrics`) come from the service's extension, with the same errors."""
    cfg = ingest_config.parse_config(MINIMAL)
    assert cfg.homeserver.server_name == "example.org" and not hasattr(cfg, "bot")
    with pytest.raises(ConfigError, match="bot: is not a known key"):
        ingest_config.parse_config({**MINIMAL, "bot": {"prefix": "?"}})
    assert parse_config({**MINIMAL, "bot": {"prefix": "?"}}).bot.prefix == "?"


def test_load_config_a_prefix_swallowed_by_an_open_quote_is_refused(tmp_path: Path) -> None:
    """Issue 36 item 2: `prefix: "!` with its closing quote missing reads the next lines into
    the prefix and drops `command_room`; the load refuses it, naming the key and the cause,
    instead of a service that answers no command."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "homeserver: {server_name: example.org}\n"
        "reader: {user_id: '@muninn:example.org', access_token: syt_real_token}\n"
        "bot:\n"
        '  prefix: "!\n'
        "  # Cross-room search only here.\n"
        '  command_room: "#muninn:example.org"\n'
    )
    with pytest.raises(ConfigError, match=r"bot\.prefix: .*quote") as e:
        load_config(path)
    assert "command_room" not in str(e.value).split("got")[0]


@pytest.mark.parametrize("prefix", ["!", "?", "!!", "mu!", "$"])
def test_parse_config_accepts_a_short_prefix(prefix: str) -> None:
    """A prefix is a few characters without spaces, as `!help` documents it."""
    assert parse_config({**MINIMAL, "bot": {"prefix": prefix}}).bot.prefix == prefix


@pytest.mark.parametrize("prefix", ["", "! ", "a b", "!!!!!!!!!", "\t!"])
def test_parse_config_refuses_a_prefix_no_command_could_start_with(prefix: str) -> None:
    """An empty prefix, one with whitespace or a long one is a config error naming the key."""
    with pytest.raises(ConfigError, match=r"bot\.prefix: must be 1 to 8 characters"):
        parse_config({**MINIMAL, "bot": {"prefix": prefix}})
