"""The typed values of command arguments: users, rooms, limits, labels, ^N offsets, /regex/.

Each is a pure function from the argument's text to its value; a bad value raises
`ArgumentError` with a short problem, to which `bot.chat.commands.parse` adds the command's usage.
Dates are `bot.chat.commands.dates`.
"""

from __future__ import annotations

import re
import unicodedata

from bot.chat.commands.patterns import pattern_problem
from bot.chat.html import quoted
from ingest.search.query import MAX_LIMIT

__all__ = [
    "MAX_OFFSET",
    "ArgumentError",
    "echo",
    "label",
    "limit",
    "offset",
    "pattern",
    "room",
    "user",
    "visible",
]

MAX_OFFSET = 50  # ^N reaches at most this far up


class ArgumentError(ValueError):
    """A malformed argument; `parse` turns it into a `UsageError` with the usage line."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def echo(text: str) -> str:
    """User text echoed in an error: short and unable to ping (the reply layer escapes HTML)."""
    return quoted(text, 40)


_USER = re.compile(r"@?([^\s:@]+)(?::([A-Za-z0-9.\-]+(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d+)?))?")
_ROOM = re.compile(r"([#!])([^\s:]+)(?::(\S+))?")


def visible(value: str) -> str:
    """`value` without invisible format characters (U+2060 word joiner, zero-width spaces,
    direction marks): `from:@\u2060alice` copied out of a reply is `from:@alice`."""
    return "".join(c for c in value if unicodedata.category(c) != "Cf")


def user(value: str, server_name: str | None, key: str = "from") -> str:
    """`@alice:example.org`, or `@alice` / `alice` on this homeserver."""
    value = visible(value)
    match = _USER.fullmatch(value)
    if match is None:
        raise ArgumentError(f"{key}: takes @user:server or @user, not {echo(value)}")
    localpart, server = match.group(1), match.group(2) or server_name
    return f"@{localpart}:{server}" if server else f"@{localpart}"


def room(value: str, server_name: str | None, *, in_command_room: bool) -> str:
    """`#alias:server`, `#alias` (this homeserver), `!id:server` or a v12 `!id`."""
    if not in_command_room:
        raise ArgumentError("cross-room search (in:) is only available in the command room")
    match = _ROOM.fullmatch(visible(value))
    if match is None:
        raise ArgumentError(f"in: takes #alias or !roomid, not {echo(value)}")
    sigil, local, server = match.groups()
    if sigil == "#" and server is None and server_name:
        server = server_name
    return f"{sigil}{local}:{server}" if server else f"{sigil}{local}"


def _bounded(digits: str, high: int) -> int | None:
    """`digits` as a number from 1 to `high`, else None. ASCII digits only: `str.isdigit`
    takes `²`, which `int` refuses; and no longer than `high` (leading zeros aside), so a
    5,000-digit number never reaches `int`'s own limit."""
    if not digits.isascii() or not digits.isdigit():
        return None
    if len(digits.lstrip("0")) > len(str(high)):
        return None
    number = int(digits)
    return number if 1 <= number <= high else None


def limit(value: str) -> int:
    number = _bounded(value, MAX_LIMIT)
    if number is None:
        raise ArgumentError(f"limit: takes a number from 1 to {MAX_LIMIT}, not {echo(value)}")
    return number


_LABEL = re.compile(r"#([\w-]{1,32})")


def label(word: str) -> str:
    match = _LABEL.fullmatch(word)
    if match is None:
        raise ArgumentError(
            f"a label is #word (letters, digits, _ or -, at most 32), not {echo(word)}"
        )
    return match.group(1).casefold()


def offset(word: str) -> int:
    number = _bounded(word[1:] or "1", MAX_OFFSET)  # a bare ^ is the message just above
    if number is None:
        raise ArgumentError(f"^N counts messages up, N from 1 to {MAX_OFFSET}, not {echo(word)}")
    return number


def pattern(text: str, flags: str) -> str:
    """Check a /regex/'s flags and size bounds; it is compiled only when the search runs
    (`compile_pattern`), so parsing a poison pattern costs nothing."""
    if not text:
        raise ArgumentError("empty /regex/")
    if set(flags) - {"i"}:
        raise ArgumentError(f"unknown /regex/ flag {echo(flags)} (only i is supported)")
    full = "(?i)" + text if "i" in flags else text
    problem = pattern_problem(full)  # what `compile_pattern` will check again
    if problem is not None:
        raise ArgumentError(problem)
    return full
