"""`ingest.search`: the whole read path (docs/ARCHITECTURE.md §2).

A search request and its limits (`query`, `filters`), the retrievers — dense and lexical over the
index (`retrieve`), the room logs a command has just read (`logs/`: their read, fusion and
fold) — fusion and the second stage and its floor (`second`, over `ranking/`: RRF, the ranker's
features, the close judgment and the trained models, pure), revalidation against the homeserver
(`revalidate`) and the records a reply cites (`hits`, `permalink`). One call, `Searcher.search`
(`searcher`), serves every caller; the rest of `ingest` imports nothing from here.
"""

from ingest.search.filters import NO_FILTER, MessageFilter
from ingest.search.hits import CitedMessage, Hit, SearchResult
from ingest.search.logs.request import RoomLogs
from ingest.search.query import SearchQuery
from ingest.search.searcher import Searcher, SearchSettings

__all__ = [
    "NO_FILTER",
    "CitedMessage",
    "Hit",
    "MessageFilter",
    "RoomLogs",
    "SearchQuery",
    "SearchResult",
    "SearchSettings",
    "Searcher",
]
