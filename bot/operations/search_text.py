"""`muninn search`'s text (without `--json`): a person's view of the §4.3 document."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ingest.rules.media import is_media
from ingest.rules.stamps import utc_minute
from ingest.search.hits import SearchResult
from ingest.search.matches import in_order
from ingest.search.permalink import permalink

__all__ = ["indexing_lines", "result_text"]

EXCERPT = 100  # characters of a message's text on its line


def _excerpt(message: Mapping[str, Any]) -> str:
    """A message's text on one line, cut to `EXCERPT` (a media message's: `📎 filename —
    caption`)."""
    body = " ".join(str(message["body"]).split())
    excerpt = body if len(body) <= EXCERPT else body[: EXCERPT - 1] + "…"
    return f"📎 {excerpt}" if is_media(message.get("msgtype")) else excerpt


def _beside(messages: Iterable[Mapping[str, Any]]) -> str:
    """The lines of a result's context (`--context N`), each its time, sender and text."""
    return "".join(
        f"    · {utc_minute(m['ts'])}  {m['sender']}: {_excerpt(m)}\n" for m in messages
    )


def result_text(result: SearchResult, server_name: str) -> str:
    """`muninn search`'s text: a result is a message (rule 22b), each one the page matched with
    its room, time, sender, excerpt and link; asked with `--context N`, the messages before and
    after it around its excerpt."""
    if not result.hits:
        return "no hits\n"
    out = ["nothing matched closely; the nearest:\n"] if result.nothing_close else []
    if result.weaker and not result.nothing_close:  # the close ones were on earlier pages
        out = ["weaker matches (none of these matched closely):\n"]
    for hit, message in in_order(result):
        link = permalink(hit.room_id, str(message["event_id"]), server_name)
        around = message.get("context")
        before, after = (around["before"], around["after"]) if around else ([], [])
        out.append(
            f"{hit.room_alias or hit.room_id}  {utc_minute(message['ts'])}  {message['sender']}\n"
            f"{_beside(before)}  {_excerpt(message)}\n{_beside(after)}  {link}\n"
        )
    return "".join(out)


def indexing_lines(rooms: Iterable[Mapping[str, Any]]) -> list[str]:
    """The searched rooms the index has not caught up with (`indexing`), a line each."""
    out = []
    for room in rooms:
        name = room.get("room_alias") or room["room_id"]
        if room["reason"] == "not_read":
            out.append(f"{name} is not indexed yet: nothing said there is searched")
        else:
            lag = room.get("lag_seconds")
            since = f" (last read {_ago(lag)} ago)" if isinstance(lag, int | float) else ""
            out.append(
                f"the index is behind in {name}{since}: its newest messages are not searched"
            )
    return out


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{round(seconds)} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"
