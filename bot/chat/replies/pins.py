"""The reply to `!pins` (and `muninn pins`): the board, each pin with its message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.chat.content import ReplyContent, ReplyTo
from bot.chat.html import escape, excerpt, safe_html, safe_plain
from bot.chat.pinboard import Pin
from bot.chat.replies.budget import Part, fit_reply, shorten
from bot.chat.replies.names import sender_label
from bot.chat.replies.words import plural, scan_sentence, when
from ingest.search.logs.roomlog import ScanInfo
from ingest.types import UserID

__all__ = ["NOTE_WIDTH", "PinsView", "pins_reply", "pins_text"]

NOTE_WIDTH = 300  # characters of a pin's note shown on the board or in a confirmation


@dataclass(frozen=True)
class PinsView:
    room_id: str
    room_label: str
    pins: Sequence[Pin]
    bodies: Mapping[str, str]  # target event id → body
    senders: Mapping[str, str]  # target event id → sender
    names: Mapping[str, str]  # user → display name
    permalinks: Mapping[str, str]  # target event id → permalink
    scan: ScanInfo
    board_size: int
    results_json: bool = False
    times: Mapping[str, int] = field(default_factory=dict)  # target event id → its ts (ms)

    def as_json(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_label": self.room_label,
            "board_size": self.board_size,
            "scanned": self.scan.scanned,
            "bound": self.scan.bound,
            "pins": [
                {
                    "target": p.target,
                    "label": p.label,
                    "note": p.note,
                    "pinned_by": p.pinned_by,
                    "pinned_ts": p.pinned_ts,
                    "marker_id": p.marker_id,
                    "sender": self.senders.get(p.target),
                    "ts": self.times.get(p.target),
                    "body": self.bodies.get(p.target),
                    "permalink": self.permalinks.get(p.target),
                }
                for p in self.pins
            ],
        }


def _pin_lines(view: PinsView, index: int, pin: Pin) -> tuple[str, str]:
    body = view.bodies.get(pin.target, "")
    sender = view.senders.get(pin.target)
    cut = excerpt(body, (), 120) if body else None
    label = f"#{pin.label} " if pin.label else ""
    by = sender_label(UserID(sender), view.names) if sender else "?"
    link = view.permalinks.get(pin.target, "")
    note = f" — {shorten(pin.note, NOTE_WIDTH)}" if pin.note else ""
    text_plain = cut.plain if cut else "(message not in view)"
    text_html = cut.html if cut else "<i>(message not in view)</i>"
    # When the message was written (issue 36: not when it was pinned); a message outside the
    # scan or hidden has no time in view, and then the pin's own time says so.
    written = view.times.get(pin.target)
    stamp = when(written) if written is not None else f"pinned {when(pin.pinned_ts)}"
    plain = (
        f"{index}. {safe_plain(label)}{stamp} · {safe_plain(by)}: {text_plain}"
        f"{safe_plain(note)}\n   {link}"
    )
    html = (
        f'<li>{safe_html(label)}<a href="{escape(link)}">{stamp}</a> · '
        f"<b>{safe_html(by)}</b>: {text_html}{safe_html(note)}</li>"
    )
    return plain, html


def _board(view: PinsView, filtered: bool) -> tuple[Part, list[Part], Part]:
    """The board's head, one item a pin and its foot, each as plain text and HTML."""
    room = view.room_label
    if view.pins:
        head = f"Pinboard of {room}: {plural(len(view.pins), 'pin')}"
        if filtered:
            head += f" matching (of {view.board_size})"
    else:
        head = f"Pinboard of {room}: nothing pinned" + (" matches" if filtered else "")
    items = [Part(*_pin_lines(view, i, pin)) for i, pin in enumerate(view.pins, start=1)]
    foot = scan_sentence(view.scan)
    return (
        Part(safe_plain(head), f"<p>{safe_html(head)}</p>"),
        items,
        Part(foot, f"<p><small>{safe_html(foot)}</small></p>"),
    )


def pins_reply(reply_to: ReplyTo, view: PinsView, filtered: bool) -> ReplyContent:
    """`!pins`' reply: the board within the reply budget (`fit_reply`)."""
    head, items, foot = _board(view, filtered)
    return fit_reply(
        reply_to,
        head,
        items,
        foot,
        results=view.as_json() if view.results_json else None,
        results_items="pins",
    )


def pins_text(view: PinsView) -> str:
    """`muninn pins`' text: the whole board as a reply's `body` words it, one line apiece,
    printed from the values (no reply is built, so no reply budget cuts it)."""
    head, items, foot = _board(view, filtered=False)
    return "\n".join(p.plain for p in (head, *items, foot) if p.plain)
