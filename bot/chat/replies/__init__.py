"""What the bot says: `m.notice` contents, plain `body` and HTML `formatted_body` (rule 16).

Pure: records in, event content out. Every piece of user text (bodies, notes, labels, display
names, room names, the asker's own query) goes through `bot.chat.html` (`safe_plain`, `safe_html`,
`excerpt`), so quoted text can neither inject HTML nor ping; every content carries an empty
`m.mentions`. A reply is threaded under the command when the command came from a thread
(`rel_type: m.thread`, `is_falling_back: true`), and a rich reply to it otherwise.

By job: `budget` (the notice, its relation, `fit_reply` and the budget), `search` (`!search`),
`pins` (`!pins`).
"""

from bot.chat.replies.budget import (
    NOTE_WIDTH,
    REPLY_BUDGET,
    Part,
    ReplyContent,
    ReplyTo,
    content_size,
    fit_reply,
    matrix_json,
    notice,
    scan_sentence,
    shorten,
    text_reply,
)
from bot.chat.replies.pins import PinsView, pins_reply
from bot.chat.replies.search import SearchView, search_reply

__all__ = [
    "NOTE_WIDTH",
    "REPLY_BUDGET",
    "Part",
    "PinsView",
    "ReplyContent",
    "ReplyTo",
    "SearchView",
    "content_size",
    "fit_reply",
    "matrix_json",
    "notice",
    "pins_reply",
    "scan_sentence",
    "search_reply",
    "shorten",
    "text_reply",
]
