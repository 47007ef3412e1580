"""A command's arguments as tokens: words, "quoted phrases", `|` and `/regex/flags`."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bot.chat.commands.arguments import echo
from bot.chat.commands.spec import Context

__all__ = ["Kind", "Token", "key_value", "tokenize"]


class Kind(enum.Enum):
    WORD = "word"
    PHRASE = "phrase"
    PIPE = "pipe"
    REGEX = "regex"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    flags: str = ""


OPEN_QUOTES = '"“„'  # phone keyboards type curly quotes
CLOSE_QUOTES = '"”“'


def scan_regex(args: str, i: int, ctx: Context) -> tuple[Token, int]:
    """`/pattern/flags` starting at args[i] == "/"; `\\/` is a slash inside the pattern."""
    j = i + 1
    while j < len(args) and args[j] != "/":
        j += 2 if args[j] == "\\" else 1
    if j >= len(args):
        raise ctx.error(
            'unterminated /regex/ (to search for text starting with /, quote it: "/…")'
        )
    k = j + 1
    while k < len(args) and args[k].isalpha():
        k += 1
    if k < len(args) and not (args[k].isspace() or args[k] == "|"):
        raise ctx.error(f"unexpected {echo(args[j + 1 : k + 1])} after /regex/")
    return Token(Kind.REGEX, args[i + 1 : j], args[j + 1 : k]), k


def tokenize(args: str, ctx: Context, *, regexes: bool) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    while i < len(args):
        ch = args[i]
        if ch.isspace():
            i += 1
        elif ch == "|":
            tokens.append(Token(Kind.PIPE, "|"))
            i += 1
        elif ch in OPEN_QUOTES or (ch == "-" and args[i + 1 : i + 2] in tuple(OPEN_QUOTES)):
            # `-"two words"`: a phrase to leave out, its `-` kept as the token's flag.
            negated = ch == "-"
            start = i + 1 + negated
            end = next((j for j in range(start, len(args)) if args[j] in CLOSE_QUOTES), -1)
            if end < 0:
                raise ctx.error("unterminated quote")
            tokens.append(Token(Kind.PHRASE, args[start:end], "-" if negated else ""))
            i = end + 1
        elif ch == "/" and regexes:
            token, i = scan_regex(args, i, ctx)
            tokens.append(token)
        else:
            j = i
            while j < len(args) and not args[j].isspace() and args[j] != "|":
                j += 1
            tokens.append(Token(Kind.WORD, args[i:j]))
            i = j
    return tokens


def key_value(token: Token, keys: frozenset[str]) -> tuple[str, str] | None:
    """`key:value` for a known key (case-insensitive); anything else is text (URLs, 10:30…)."""
    if token.kind is not Kind.WORD:
        return None
    key, sep, value = token.text.partition(":")
    key = key.casefold()
    return (key, value) if sep and key in keys else None
