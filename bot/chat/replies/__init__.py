"""The formatting desk: what the bot says, worded and within the reply budget (rule 16).

Pure: records in, event content out (the content's shape, `ReplyTo` and `ReplyContent`, is
`bot.chat.content`'s). Every piece of user text (bodies, notes, labels, display names, room
names, the asker's own query) goes through `bot.chat.html` (`safe_plain`, `safe_html`,
`excerpt`), so quoted text can neither inject HTML nor ping; every content carries an empty
`m.mentions`. A reply is threaded under the command when the command came from a thread
(`rel_type: m.thread`, `is_falling_back: true`), and a rich reply to it otherwise.

By job: `budget` (`fit_reply`, the one owner of a reply's size, and the short replies built
through it), `search` (`!search`, `!more`), `pins` (`!pins`, and `muninn pins`' text),
`understood` (how a search says what it understood), `names` (a sender as a reply names them),
`words` (a time, a count, how far a read looked).
"""

from bot.chat.replies.budget import REPLY_BUDGET, Part, fit_reply, notice, shorten, text_reply
from bot.chat.replies.pins import NOTE_WIDTH, PinsView, pins_reply, pins_text
from bot.chat.replies.search import SearchView, search_reply
from bot.chat.replies.words import plural, scan_sentence, when

__all__ = [
    "NOTE_WIDTH",
    "REPLY_BUDGET",
    "Part",
    "PinsView",
    "SearchView",
    "fit_reply",
    "notice",
    "pins_reply",
    "pins_text",
    "plural",
    "scan_sentence",
    "search_reply",
    "shorten",
    "text_reply",
    "when",
]
