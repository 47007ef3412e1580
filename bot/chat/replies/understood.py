"""What a search was understood to ask, said back when it found nothing (issue 24 item 6).

Pure: a parsed `SearchCommand` in, sentences out. The asker's words are scrubbed like any
echoed text (a pasted token stays out of the room); the reply layer escapes them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.chat.commands.records import SearchCommand
from ingest.rules.scrub import scrub
from ingest.search.filters import HAS_KINDS
from ingest.search.query import prefixes

__all__ = ["day_or_time", "filters_said", "understood"]

_KIND_WORDS = {
    "link": "messages with a link",
    "file": "files",
    "image": "images",
    "video": "videos",
    "audio": "audio clips",
}


def day_or_time(ms: int) -> str:
    """`2 November 2026`, or with its minute and zone when it is not midnight UTC."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    day = f"{moment.day} {moment:%B %Y}"
    return day if (moment.hour, moment.minute) == (0, 0) else f"{day}, {moment:%H:%M} UTC"


def _quoted(words: tuple[str, ...]) -> str:
    return ", ".join(f"“{scrub(w)}”" for w in words)


def _dates(command: SearchCommand) -> str | None:
    after, before = command.after_ms, command.before_ms
    if after is not None and before is not None:
        return f"from {day_or_time(after)} until before {day_or_time(before)}"
    if after is not None:
        return f"from {day_or_time(after)} on"
    if before is not None:
        return f"before {day_or_time(before)}"
    return None


def filters_said(command: SearchCommand) -> list[str]:
    """The search's operators and dates as read, in words (`only from @bob:example.org`)."""
    flt = command.filter
    said: list[str] = []
    if command.sender:
        said.append(f"only from {command.sender}")
    if flt.exclude_words:
        said.append(f"leaving out messages with {_quoted(flt.exclude_words)}")
    if flt.exclude_senders:
        said.append(f"leaving out {', '.join(flt.exclude_senders)}")
    if kinds := [_KIND_WORDS[k] for k in HAS_KINDS if k in flt.kinds]:
        said.append(f"only {' or '.join(kinds)}")
    if flt.in_thread is not None:
        said.append("only in threads" if flt.in_thread else "only outside threads")
    if flt.mentions:
        said.append(f"only messages mentioning {', '.join(flt.mentions)}")
    if (dates := _dates(command)) is not None:
        said.append(dates)
    return said


def understood(command: SearchCommand) -> list[str]:
    """Sentences: how the search was read past its words (which the reply's first line
    already quotes: a room's later lines never repeat them), and what to try."""
    said: list[str] = []
    if command.regex is not None:
        said.append("only the latest messages (a /regex/ reads no index)")
    elif not command.texts:
        said.append("only the latest messages (a search without words reads no index)")
    stems = [s for t in command.texts for s in prefixes(t)]
    if stems:
        said.append(f"words starting with {_quoted(tuple(stems))}")
    said.extend(filters_said(command))
    lines = [f"Searched: {'; '.join(said)}."] if said else []
    tips = ["fewer or other words", "word* to match the words starting with it"]
    if command.regex is None and not command.texts:
        tips = ["words to find, which searches the whole history"]
    if filters_said(command):
        tips.insert(0, "fewer filters or a wider time range")
    lines.append("Try " + ", or ".join(tips) + ".")
    return lines
