"""The one wiring of the writer and the searcher from the config, for `muninn run` and the CLI.

`bot.service.compose.build` (the service), `bot.operations` (`muninn refresh`, `purge`,
`import`, `search`, `pins`) and through them `muninn mcp` all build their `Writer` and
`Searcher` here, so that what one honours the others do too: the purge file beside the store
(`index.purges`, read by every reply and hit, copied into a store rebuilt from nothing) and
the bot's command prefix, whose commands are never indexed (rule 9).
`tests/bot/service/test_wiring.py` checks that nothing in `bot/` builds either elsewhere.
"""

from __future__ import annotations

from bot.config import ServiceConfig
from ingest.config import Config
from ingest.embed import Embedder
from ingest.index.refresh import RoomSource, Writer
from ingest.search import Searcher
from ingest.search.revalidate import LiveCheck
from ingest.search.searcher import WindowCheck
from ingest.store import Store
from ingest.store.purges import PurgeLog, purge_log_path

__all__ = ["purge_log", "searcher", "writer"]


def purge_log(cfg: Config) -> PurgeLog:
    """The operator's purges, where every reader finds them without the store."""
    return PurgeLog(purge_log_path(cfg.index, cfg.base_dir))


def writer(cfg: ServiceConfig, source: RoomSource, store: Store, embedder: Embedder) -> Writer:
    """The one writer over `source` (the homeserver, or a room export for `muninn import`)."""
    return Writer(
        cfg, source, store, embedder, purges=purge_log(cfg), command_prefix=cfg.bot.prefix
    )


def searcher(
    cfg: Config,
    store: Store,
    embedder: Embedder | None,
    *,
    live_check: LiveCheck | WindowCheck | None,
) -> Searcher:
    """The one read path; `live_check` confirms every hit shown against where it was built
    from (the service's room verdicts, or the CLI's homeserver-or-export check)."""
    return Searcher(
        store,
        embedder,
        server_name=cfg.homeserver.server_name,
        live_check=live_check,
        purges=purge_log(cfg),
    )
