"""Turn one raw client-format event into what the writer acts on (docs/ARCHITECTURE.md §3 rules
5–9).

Pure and total: `normalize` never raises, whatever JSON it is given; anything it cannot read is a
`Skip(MALFORMED)` with a detail. The checks run in the order of the table, first row that applies
wins:

=============================================================  =================================
event                                                          becomes
=============================================================  =================================
not a mapping, or `type` missing / not a string                Skip(MALFORMED)
`m.room.encrypted` (any content, ciphertext is never kept)     Skip(ENCRYPTED)
has a `state_key` (state events, whatever their type)          Skip(STATE)
`event_id` / `sender` / `origin_server_ts` / `room_id` bad     Skip(MALFORMED)
`m.room.redaction` with `redacts` (top level v1–10,            Redaction (even if itself
content v11+)                                                  redacted: a redaction sticks)
`m.room.redaction` without a string `redacts`                  Skip(MALFORMED)
`m.sticker`                                                    Skip(MEDIA)
any other type but `m.room.message` (reactions, receipts, …)   Skip(OTHER)
`content` not a mapping                                        Skip(MALFORMED)
`unsigned.redacted_because`, or `m.room.message` with `{}`     Skip(REDACTED)
sender in `own_user_ids`                                       Skip(OWN)
`m.replace` whose `m.new_content` has a string body, m.text    Edit (new body, fallback-free;
or m.emote, or media                                           the `* …` body is never read)
`m.replace`: new content is a notice / location / `!command`   Edit with an empty body (the
/ another msgtype                                              old text is withdrawn)
`m.replace`: no `m.new_content`, no string body, no target     Skip(INVALID_EDIT)
msgtype `m.notice` or `m.server_notice`                        Skip(NOTICE)
msgtype `m.location` (and `m.sticker` as a msgtype)            Skip(MEDIA)
msgtype missing or not a string; body missing / not a string   Skip(MALFORMED)
any other msgtype (`m.key.verification.request`, custom)       Skip(OTHER)
text body starts with the command prefix and a letter          Skip(COMMAND)
body empty once the reply fallback is stripped                 Skip(OTHER)
`m.text` / `m.emote` (thread reply: `thread_root` is set)      Message
`m.file` `m.image` `m.video` `m.audio`                         Message: filename and caption
=============================================================  =================================

An edit whose new content is no longer indexable text (a notice, an image, a `!command`) still
replaces: the message no longer says what it said, so its old words must stop being findable
(rule 6). It becomes an edit to the empty body rather than a skip that would leave them indexed.

A file, image, video or audio message is indexed by its filename and caption, never its content
(`ingest.rules.media`: MSC2530's reading, `budget.xlsx — the numbers`); its `msgtype` stays on the
`Message`. Media is never a command (the bot reads commands from `m.text` alone), and its
`url`/`file` fields are never read. Every msgtype Muninn indexes is named here, `INDEXED_MSGTYPES`.

An emote keeps its body as sent (no `* ` prefix): `Message.msgtype` says it is an emote, so the
chunker can render `* alice waves` itself, and a `* ` in the body would look like an edit
fallback and put a token into the indexed text that nobody typed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mautrix.types import EventType, MessageType, RelationType

from ingest.event import SERVER_NOTICE, ClientEvent, Relation, content_of, relation_of
from ingest.rules.media import MEDIA_MSGTYPES, is_media, media_parts, media_text
from ingest.rules.stamps import event_ts
from ingest.types import (
    Edit,
    EventID,
    Message,
    Normalized,
    Redaction,
    RoomID,
    Skip,
    SkipReason,
    UserID,
)

__all__ = [
    "is_command",
    "is_edit",
    "normalize",
    "reply_target",
    "strip_mx_reply",
    "strip_reply_fallback",
    "thread_root",
    "typed_text",
]

TEXT_MSGTYPES = frozenset({MessageType.TEXT.value, MessageType.EMOTE.value})
# Every msgtype indexed: text as typed, media by filename and caption (`ingest.rules.media`).
INDEXED_MSGTYPES = TEXT_MSGTYPES | MEDIA_MSGTYPES
NOTICE_MSGTYPES = frozenset({MessageType.NOTICE.value, SERVER_NOTICE})
# Media with no filename or caption to index: skipped and counted as media.
UNINDEXED_MEDIA = frozenset({MessageType.LOCATION.value, MessageType.STICKER.value})
_THREAD, _REPLACE = RelationType.THREAD.value, RelationType.REPLACE.value

_MX_REPLY = re.compile(r"^\s*<mx-reply>.*?</mx-reply>", re.IGNORECASE | re.DOTALL)
# The spec's fallback header, `> <@alice:example.org> text` (`> * <@alice…>` for emotes).
_FALLBACK_HEADER = re.compile(r"^> (?:\* )?<@[^\s>:]+:[^\s>]+> ")


def strip_reply_fallback(body: str) -> str:
    """Remove a leading reply-fallback quote block (`> ` lines) and the blank line after it.

    The spec's rule (client-server API, "Fallbacks for rich replies"; deprecated in v1.13 but
    still sent): the fallback is the leading lines starting with `> `, up to the first line
    without it. A bare `>` counts too, since some clients trim the trailing space of an empty
    quoted line. Only a reply carries one: callers go through `typed_text`, which applies it to
    replies alone, since a `> ` in an ordinary message is the user's own quote.
    """
    lines = body.split("\n")
    i = 0
    while i < len(lines) and (lines[i].startswith("> ") or lines[i] == ">"):
        i += 1
    if i == 0:
        return body
    if i < len(lines) and lines[i] == "":
        i += 1
    return "\n".join(lines[i:])


def typed_text(body: str, content: Mapping[str, Any]) -> str:
    """What the sender typed: `body` without its reply fallback when `content` is a reply, as it
    is (a leading `> ` quote included) otherwise. The text every command and search rule reads.
    """
    return strip_reply_fallback(body) if reply_target(content) is not None else body


def strip_mx_reply(formatted_body: str) -> str:
    """Remove a leading `<mx-reply>…</mx-reply>` element from an HTML `formatted_body`."""
    return _MX_REPLY.sub("", formatted_body, count=1)


def _skip(event_id: EventID | None, reason: SkipReason, detail: str = "") -> Skip:
    return Skip(event_id, reason, detail)


def reply_target(content: Mapping[str, Any]) -> EventID | None:
    """The event a rich reply answers (`m.in_reply_to`), or None when `content` is no reply.

    A thread event's `m.in_reply_to` with `is_falling_back: true` is only the fallback for
    clients without threads, so no reply; `is_falling_back` defaults to false, so a thread event
    without it is a reply in the thread.
    """
    rel = relation_of(content)
    reply = rel.get("m.in_reply_to")
    if not isinstance(reply, Mapping):
        return None
    if rel.get("rel_type") == _THREAD and rel.get("is_falling_back") is True:
        return None
    target = reply.get("event_id")
    return EventID(target) if isinstance(target, str) and target else None


def thread_root(content: Mapping[str, Any]) -> EventID | None:
    """The root of the thread `content` belongs to (`rel_type: m.thread`), or None."""
    rel = relation_of(content)
    root = rel.get("event_id")
    if rel.get("rel_type") == _THREAD and isinstance(root, str) and root:
        return EventID(root)
    return None


def is_edit(rel: Relation) -> bool:
    """Whether a message's relation makes it an edit (`m.replace`): `normalize` reads it as one."""
    return bool(rel.get("rel_type") == _REPLACE)


def is_command(body: str, prefix: str) -> bool:
    """The body is shaped like any bot's command: the prefix, then a letter (`!search`, `!foo`),
    after leading whitespace. Call it on a body whose reply fallback is already stripped."""
    text = body.lstrip()
    return (
        bool(prefix)
        and text.startswith(prefix)
        and len(text) > len(prefix)
        and text[len(prefix)].isalpha()
    )


@dataclass(frozen=True, slots=True)
class _Envelope:
    """The fields every indexed record needs, read and type-checked once."""

    event_id: EventID
    room_id: RoomID
    sender: UserID
    ts: int


def _fields(env: _Envelope) -> dict[str, Any]:
    return {"event_id": env.event_id, "room_id": env.room_id, "sender": env.sender, "ts": env.ts}


def _envelope(event: ClientEvent, room_id: RoomID | None) -> _Envelope | str:
    """The envelope, or a detail naming the first bad field."""
    event_id, sender = event.get("event_id"), event.get("sender")
    ts, rid = event_ts(event.get("origin_server_ts")), event.get("room_id", room_id)
    if not isinstance(event_id, str) or not event_id:
        return "event_id is missing or not a string"
    if not isinstance(sender, str) or not sender:
        return "sender is missing or not a string"
    # bool is an int in Python; a JSON `true` is not a timestamp. Past canonical JSON's 2^53
    # no homeserver can have sent it, and the store's integers end at 2^63.
    if ts is None:
        return "origin_server_ts is missing or not an integer in [0, 2^53)"
    if not isinstance(rid, str) or not rid:
        return "room_id is missing or not a string"
    return _Envelope(EventID(event_id), RoomID(rid), UserID(sender), ts)


def normalize(
    event: ClientEvent,
    *,
    own_user_ids: frozenset[str],
    command_prefix: str = "!",
    room_id: RoomID | None = None,
) -> Normalized:
    """Classify one client-format event; see the module table. Never raises.

    Args:
        event: the event as `/messages` or a transaction delivers it, its values unchecked
            (a malformed one is a `Skip`).
        own_user_ids: Muninn's own users (reader, bot); their events are never indexed.
        command_prefix: the bot's prefix; `!search`-style messages are not indexed.
        room_id: used when the event has no `room_id` (the `/sync` timeline format omits it).
    """
    if not isinstance(event, Mapping):
        return _skip(None, SkipReason.MALFORMED, "the event is not a JSON object")
    raw_id = event.get("event_id")
    event_id = EventID(raw_id) if isinstance(raw_id, str) and raw_id else None
    etype = event.get("type")
    if not isinstance(etype, str):
        return _skip(event_id, SkipReason.MALFORMED, "type is missing or not a string")
    if etype == EventType.ROOM_ENCRYPTED.t:
        return _skip(event_id, SkipReason.ENCRYPTED, "end-to-end encrypted event")
    if "state_key" in event:
        return _skip(event_id, SkipReason.STATE, f"state event {etype}")
    env = _envelope(event, room_id)
    if isinstance(env, str):
        return _skip(event_id, SkipReason.MALFORMED, env)
    if etype == EventType.ROOM_REDACTION.t:
        return _redaction(event, env)
    if etype == EventType.STICKER.t:
        return _skip(event_id, SkipReason.MEDIA, etype)
    if etype != EventType.ROOM_MESSAGE.t:
        return _skip(event_id, SkipReason.OTHER, f"event type {etype}")
    content = event.get("content")
    if not isinstance(content, Mapping):
        return _skip(event_id, SkipReason.MALFORMED, "content is missing or not an object")
    unsigned = event.get("unsigned")
    if (
        isinstance(unsigned, Mapping) and unsigned.get("redacted_because") is not None
    ) or not content:
        return _skip(event_id, SkipReason.REDACTED, "the event was redacted")
    if env.sender in own_user_ids:
        return _skip(event_id, SkipReason.OWN, f"sent by Muninn's own user {env.sender}")
    rel = relation_of(content)
    if is_edit(rel):
        return _edit(etype, content, rel, env, command_prefix)
    return _message(content, rel, env, command_prefix)


def _redaction(event: ClientEvent, env: _Envelope) -> Normalized:
    # Room v11 moved `redacts` into content; servers still copy it to the top level for old
    # clients, so read content first and fall back to the top level (rooms v1–10).
    redacts: object = content_of(event).get("redacts")
    if not isinstance(redacts, str) or not redacts:
        redacts = event.get("redacts")
    if not isinstance(redacts, str) or not redacts:
        return _skip(env.event_id, SkipReason.MALFORMED, "redaction without a string redacts")
    return Redaction(**_fields(env), redacts=EventID(redacts))


def _read_text(
    content: Mapping[str, Any], msgtype: object, event_id: EventID, prefix: str, bad: SkipReason
) -> Skip | tuple[str, str]:
    """`(msgtype, body)` of indexable text, or the skip; `bad` is the reason for wrong types.
    A media body is its text already (`_media_text`); a text body still holds its fallback."""
    if isinstance(msgtype, str) and msgtype in NOTICE_MSGTYPES:
        return _skip(event_id, SkipReason.NOTICE, msgtype)
    if isinstance(msgtype, str) and msgtype in UNINDEXED_MEDIA:
        return _skip(event_id, SkipReason.MEDIA, msgtype)
    if not isinstance(msgtype, str):
        return _skip(event_id, bad, "msgtype is missing or not a string")
    if msgtype not in INDEXED_MSGTYPES:
        return _skip(event_id, SkipReason.OTHER, f"msgtype {msgtype}")
    body = content.get("body")
    if not isinstance(body, str):
        return _skip(event_id, bad, "body is missing or not a string")
    if is_media(msgtype):
        return msgtype, _media_text(content)
    if is_command(body, prefix):
        return _skip(event_id, SkipReason.COMMAND, "a bot command")
    return msgtype, body


def _media_text(content: Mapping[str, Any]) -> str:
    """A media message's filename and caption, the reply fallback out of what `body` held."""
    parts = media_parts(content)
    if parts is None:
        return ""
    filename, caption = parts
    if caption:
        return media_text(filename, typed_text(caption, content))
    return media_text(typed_text(filename, content), "")


def _message(content: Mapping[str, Any], rel: Relation, env: _Envelope, prefix: str) -> Normalized:
    text = _read_text(content, content.get("msgtype"), env.event_id, prefix, SkipReason.MALFORMED)
    if isinstance(text, Skip):
        return text
    msgtype, raw = text
    root = thread_root(content)
    if rel.get("rel_type") == _THREAD and root is None:
        return _skip(env.event_id, SkipReason.MALFORMED, "m.thread without an event_id")
    body = raw if is_media(msgtype) else typed_text(raw, content)
    # A command sent as a reply (`!pin` answering a message) starts with the quote.
    if not is_media(msgtype) and is_command(body, prefix):
        return _skip(env.event_id, SkipReason.COMMAND, "a bot command (in a reply)")
    if not body.strip():
        return _skip(env.event_id, SkipReason.OTHER, "empty body")
    return Message(
        **_fields(env), body=body, thread_root=root, msgtype=msgtype, mentions=mentions(content)
    )


def mentions(content: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The user ids of a message's `m.mentions`, or None when its client set none (then the
    text is all there is: `ingest.search.filters.mentioned`)."""
    block = content.get("m.mentions")
    if not isinstance(block, dict):
        return None
    ids = block.get("user_ids")
    return tuple(u for u in ids if isinstance(u, str)) if isinstance(ids, list) else ()


def _edit_has_fallback(new: Mapping[str, Any]) -> bool:
    """Whether an edit's new content carries a reply fallback.

    The edit relates to its target, not to the replied-to event, so `m.in_reply_to` is usually
    absent (the spec forbids it since v1.13). Older clients still copied the fallback into
    `m.new_content`; trust the signals that only a generated fallback produces.
    """
    if reply_target(new) is not None:
        return True
    formatted = new.get("formatted_body")
    if isinstance(formatted, str) and _MX_REPLY.match(formatted):
        return True
    body = new.get("body")
    return isinstance(body, str) and bool(_FALLBACK_HEADER.match(body))


def _edit(
    etype: str,
    content: Mapping[str, Any],
    rel: Relation,
    env: _Envelope,
    prefix: str,
) -> Normalized:
    target = rel.get("event_id")
    if not isinstance(target, str) or not target:
        return _skip(env.event_id, SkipReason.INVALID_EDIT, "m.replace without a target event_id")
    new = content.get("m.new_content")
    if not isinstance(new, Mapping):
        return _skip(env.event_id, SkipReason.INVALID_EDIT, "m.replace without m.new_content")
    # The top-level `* …` body is a fallback for old clients and is never read.
    msgtype = new.get("msgtype", content.get("msgtype"))
    text = _read_text(new, msgtype, env.event_id, prefix, SkipReason.INVALID_EDIT)
    if isinstance(text, Skip) and text.reason is SkipReason.INVALID_EDIT:
        return text
    withdrawn = text.reason if isinstance(text, Skip) else None
    kind, body = (MessageType.TEXT.value, "") if isinstance(text, Skip) else text
    if not is_media(kind) and _edit_has_fallback(new):
        body = strip_reply_fallback(body)
        if is_command(body, prefix):
            body, withdrawn = "", SkipReason.COMMAND
    # An edit to an empty body (or to what is not indexed text) still replaces: the old words
    # must stop being findable.
    return Edit(
        **_fields(env),
        target=EventID(target),
        new_body=body,
        event_type=etype,
        withdrawn=withdrawn,
        msgtype=kind,
    )
