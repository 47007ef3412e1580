"""The shape of a reply's content: what the bot sends, not how it is worded (rule 16).

`ReplyTo` (the command a reply answers), `ReplyContent` (an `m.notice` with a plain `body`, an
HTML `formatted_body`, its relation to the command and an empty `m.mentions`; the command
room's `org.muninn.results`), `relation` (a thread's `m.thread` with the rich-reply fallback, or
a plain reply's `m.in_reply_to`) and `notice_content`, the one builder of that dict. Everything
that receives, holds or sends a reply (`bot.chat.commands.incoming`, `bot.chat.outbox`,
`bot.chat.sender`) reads this shape here, and it imports no other part of the bot; the wording
and the budget are the formatting desk's (`bot.chat.replies`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from mautrix.types import MessageType, RelationType

__all__ = [
    "RESULTS_KEY",
    "Mentions",
    "NoMentions",
    "Relation",
    "ReplyContent",
    "ReplyTo",
    "content_size",
    "matrix_json",
    "no_mentions",
    "notice_content",
    "relation",
]

RESULTS_KEY: Final = "org.muninn.results"


# `m.mentions` (MSC3952): whom an event mentions; an empty one mentions nobody.
class Mentions(TypedDict, total=False):
    user_ids: list[str]
    room: bool


NoMentions = TypedDict("NoMentions", {"m.mentions": Mentions})


def no_mentions() -> NoMentions:
    """Content fragment for every reply: an empty `m.mentions` mentions nobody.

    With `m.mentions` present, homeservers skip the legacy body-matching push rules (display
    name, user name, `@room`; MSC3952), which is the only defence against display-name pings.
    """
    return {"m.mentions": {}}


@dataclass(frozen=True)
class ReplyTo:
    """The command being answered."""

    room_id: str
    event_id: str
    thread_root: str | None = None


class InReplyTo(TypedDict):
    event_id: str


# `m.relates_to` of a reply: a thread's (`m.thread`, with the rich-reply fallback) or a plain
# reply's `m.in_reply_to` alone.
Relation = TypedDict(
    "Relation",
    {
        "rel_type": NotRequired[str],
        "event_id": NotRequired[str],
        "is_falling_back": NotRequired[bool],
        "m.in_reply_to": InReplyTo,
    },
)
# The content of every reply the bot sends (an `m.notice`); `org.muninn.results` only in the
# command room.
ReplyContent = TypedDict(
    "ReplyContent",
    {
        "msgtype": str,
        "body": str,
        "format": str,
        "formatted_body": str,
        "m.relates_to": Relation,
        "m.mentions": Mentions,
        "org.muninn.results": NotRequired[object],
    },
)


def relation(reply_to: ReplyTo) -> Relation:
    if reply_to.thread_root is not None:
        return {
            "rel_type": RelationType.THREAD.value,
            "event_id": reply_to.thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to.event_id},
        }
    return {"m.in_reply_to": {"event_id": reply_to.event_id}}


def notice_content(
    reply_to: ReplyTo, plain: str, html: str, results: Mapping[str, Any] | None
) -> ReplyContent:
    """The `m.notice` answering `reply_to`; `plain` and `html` already safe, `results` the
    command room's JSON (None elsewhere). Not sized: every reply goes through
    `bot.chat.replies.fit_reply`, which builds it with this."""
    content: ReplyContent = {
        "msgtype": MessageType.NOTICE.value,
        "body": plain,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.relates_to": relation(reply_to),
        "m.mentions": no_mentions()["m.mentions"],
    }
    if results is not None:
        content[RESULTS_KEY] = matrix_json(results)
    return content


def content_size(content: ReplyContent) -> int:
    """Bytes of the content as the homeserver measures it (canonical JSON, UTF-8)."""
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode())


def matrix_json(value: Any) -> Any:
    """Event content is canonical JSON, which has no floats (Synapse answers M_BAD_JSON): a
    float (a hit's `score`) is carried as its decimal string, e.g. `"0.0327869"`."""
    if isinstance(value, float):
        return format(value, ".6g")
    if isinstance(value, Mapping):
        return {str(k): matrix_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [matrix_json(v) for v in value]
    return value
