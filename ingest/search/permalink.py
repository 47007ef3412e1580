"""matrix.to permalinks: how every citation points at a message (docs/ARCHITECTURE.md §4.3)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote, unquote

__all__ = ["MATRIX_TO", "cited_events", "permalink"]

MATRIX_TO = "https://matrix.to/#/"


def _quote_id(identifier: str) -> str:
    # RFC 3986 percent-encoding as the spec's examples do it: `!` stays (it is legal in a
    # fragment), while `$`, `:`, `#`, `@`, `/` and `+` (v3 event ids are standard base64) are
    # encoded, so an id with slashes cannot be misread as more path segments.
    return quote(identifier, safe="!")


def permalink(room_id: str, event_id: str | None, via: str | Sequence[str] = ()) -> str:
    """`https://matrix.to/#/<room>/<event>?via=<server>` for a room id (v1–v11 or v12) or alias.

    Room ids are not routable (v12 ids carry no server at all), so they get `via=` servers; an
    alias names its server already and gets none.
    """
    servers = [s for s in ([via] if isinstance(via, str) else via) if s]
    link = MATRIX_TO + _quote_id(room_id)
    if event_id:
        link += "/" + _quote_id(event_id)
    if room_id.startswith("!") and servers:
        link += "?" + "&".join("via=" + quote(server, safe="") for server in servers)
    return link


_LINK = re.compile(re.escape(MATRIX_TO) + r"([^/?\s\"'<>]+)/([^/?\s\"'<>]+)")


def cited_events(text: str) -> list[str]:
    """The event ids `text` links to with `permalink`, in order, once each."""
    found: list[str] = []
    for _room, event in _LINK.findall(text):
        event_id = unquote(event)
        if event_id.startswith("$") and event_id not in found:
            found.append(event_id)
    return found
