"""The in-room command grammar (docs/ARCHITECTURE.md §4.6), declared once; usage and help are
generated from it.

`parse` is pure: a message body in, a typed command (or None, or a typed `UsageError`) out. What a
command may *do* (visibility, allow-lists, the reply relation of `!pin`) is the handler's policy.

By job: `records` (the typed commands and usage errors), `spec` (a command's declaration),
`tokens` (arguments as tokens), `builders` (tokens into commands), `grammar` (`COMMANDS` and
the entry points).
"""

from bot.commands.grammar import COMMANDS, command_name, help_text, parse
from bot.commands.records import (
    MAX_ROOMS,
    Command,
    HelpCommand,
    PinCommand,
    PinsCommand,
    SearchCommand,
    UnknownCommand,
    UnpinCommand,
    UsageError,
)
from bot.commands.spec import ArgSpec, CommandSpec

__all__ = [
    "COMMANDS",
    "MAX_ROOMS",
    "ArgSpec",
    "Command",
    "CommandSpec",
    "HelpCommand",
    "PinCommand",
    "PinsCommand",
    "SearchCommand",
    "UnknownCommand",
    "UnpinCommand",
    "UsageError",
    "command_name",
    "help_text",
    "parse",
]
