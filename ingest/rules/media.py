"""What a media message says: its filename and caption (docs/ARCHITECTURE.md §3 rule 5).

Pure. A file, an image, a video or an audio clip is indexed by the words it carries, never by
its content: the `url` / `file` fields (an `mxc://` address, or an encrypted file's keys) are
never read here, so nothing downstream can store, show or fetch them.

MSC2530 (Matrix 1.10, "media captions"): where `filename` is present and differs from `body`,
`body` is the caption; otherwise `body` is the filename. The text a media message is indexed,
searched and shown by is the filename, then the caption after an em dash:

=====================================================  =========================================
content                                                text
=====================================================  =========================================
`body: "budget.xlsx"`                                  `budget.xlsx`
`body: "budget.xlsx", filename: "budget.xlsx"`         `budget.xlsx`
`body: "the numbers", filename: "budget.xlsx"`         `budget.xlsx — the numbers`
=====================================================  =========================================

A caption that answers a message (`m.in_reply_to`) loses its reply fallback as a text body
does (`ingest.rules.events.typed_text`, applied by the caller).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mautrix.types import MessageType

__all__ = [
    "CAPTION_SEPARATOR",
    "MEDIA_KINDS",
    "MEDIA_MSGTYPES",
    "is_media",
    "media_parts",
    "media_text",
]

# `has:KIND` → the msgtype it keeps; the media msgtypes Muninn indexes by filename and caption.
MEDIA_KINDS: Mapping[str, str] = {
    "file": MessageType.FILE.value,
    "image": MessageType.IMAGE.value,
    "video": MessageType.VIDEO.value,
    "audio": MessageType.AUDIO.value,
}
MEDIA_MSGTYPES = frozenset(MEDIA_KINDS.values())
CAPTION_SEPARATOR = " — "


def is_media(msgtype: object) -> bool:
    """Whether a message of this msgtype is a file, image, video or audio clip."""
    return msgtype in MEDIA_MSGTYPES


def media_parts(content: Mapping[str, Any]) -> tuple[str, str] | None:
    """`(filename, caption)` of a media content by MSC2530 (caption '' when it has none), or
    None when `body` is missing or not a string. The caption is as sent: a reply's fallback is
    still in it."""
    body = content.get("body")
    if not isinstance(body, str):
        return None
    filename = content.get("filename")
    if isinstance(filename, str) and filename.strip() and filename != body:
        return filename, body
    return body, ""


def media_text(filename: str, caption: str) -> str:
    """The one text of a media message: `filename — caption`, or the filename alone."""
    name, said = " ".join(filename.split()), caption.strip()
    if not said:
        return name
    return f"{name}{CAPTION_SEPARATOR}{said}" if name else said
