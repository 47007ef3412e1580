"""The one wiring of the writer and the searcher from the config, for `muninn run` and the CLI.

`bot.service.compose.build` (the service), `bot.operations` (`muninn refresh`, `purge`,
`import`, `search`, `pins`) and through them `muninn mcp` all build their `Writer` and
`Searcher` here, so that what one honours the others do too: the purge file beside the store
(`index.purges`, read by every reply and hit, copied into a store rebuilt from nothing), the
bot's command prefix, whose commands are never indexed (rule 9), and the command room, which
is not indexed unless the operator opts in (`room_scope`, rule 2).
`tests/bot/service/test_wiring.py` checks that nothing in `bot/` builds either elsewhere.
"""

from __future__ import annotations

from bot.config import ServiceConfig
from ingest.config import Config
from ingest.embed import Embedder
from ingest.index.refresh import RoomSource, Writer
from ingest.matrix.rooms import AliasSource, with_command_room
from ingest.rules.scope import RoomScope
from ingest.search import Searcher
from ingest.search.revalidate import LiveCheck
from ingest.search.searcher import WindowCheck
from ingest.store import Store
from ingest.store.purges import PurgeLog, purge_log_path

__all__ = ["purge_log", "room_scope", "room_scope_now", "searcher", "writer"]


def purge_log(cfg: Config) -> PurgeLog:
    """The operator's purges, where every reader finds them without the store."""
    return PurgeLog(purge_log_path(cfg.index, cfg.base_dir))


def writer(cfg: ServiceConfig, source: RoomSource, store: Store, embedder: Embedder) -> Writer:
    """The one writer over `source` (the homeserver, or a room export for `muninn import`)."""
    return Writer(
        cfg,
        source,
        store,
        embedder,
        purges=purge_log(cfg),
        command_prefix=cfg.bot.prefix,
        command_room=cfg.bot.unindexed_room,
    )


def room_scope(cfg: ServiceConfig) -> RoomScope:
    """The scope rules as the writer keeps them (rules 1–5): the operator's exclusions and
    the command room (`bot.command_room`, unless `bot.index_command_room`) left out of the
    index, known by its id and the aliases its state lists (`room_scope_now` asks its alias
    too; `with_command_room_id` adds an id already resolved)."""
    server = cfg.homeserver.server_name
    return RoomScope.from_config(cfg.scope, server, command_room=cfg.bot.unindexed_room)


async def room_scope_now(cfg: ServiceConfig, source: AliasSource) -> RoomScope:
    """`room_scope`, the command room also known by the id its alias names now (one request
    to `source`, the homeserver, when `bot.command_room` is an alias left out of the index)."""
    return await with_command_room(room_scope(cfg), source, cfg.bot.unindexed_room)


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
