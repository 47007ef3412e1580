"""How a command is declared once (name, aliases, arguments, help, builder), and the context
its builder reads. A declaration is typed by the command record its builder returns
(`CommandSpec[SearchCommand]`), so the handler bound to it (`bot.chat.handlers`) is checked to
take that record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bot.chat.commands.records import Command, UsageError

__all__ = ["ArgSpec", "CommandSpec", "Context"]

C = TypeVar("C", bound=Command)  # the record a declaration's builder returns


@dataclass(frozen=True)
class ArgSpec:
    syntax: str
    help: str
    command_room_only: bool = False


@dataclass(frozen=True)
class Context:
    prefix: str
    now_ms: int
    in_command_room: bool
    server_name: str | None
    spec: CommandSpec[Any]

    def error(self, problem: str) -> UsageError:
        usage = self.spec.usage(self.prefix, self.in_command_room)
        return UsageError(problem, usage, self.spec.name)


@dataclass(frozen=True)
class CommandSpec(Generic[C]):
    """One command, declared once: name, aliases, arguments, help, and how to build it."""

    name: str
    summary: str
    args: tuple[ArgSpec, ...]
    build: Callable[[Context, str], C] = field(repr=False)
    aliases: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()  # argument strings, shown by `!help <command>`
    more: tuple[str, ...] = ()  # sentences `!help <command>` ends with, after a blank line

    def usage(self, prefix: str = "!", in_command_room: bool = True) -> str:
        shown = [a.syntax for a in self.args if in_command_room or not a.command_room_only]
        return " ".join([prefix + self.name, *shown])

    def help(self, prefix: str = "!", in_command_room: bool = True) -> str:
        lines = [f"{self.usage(prefix, in_command_room)} — {self.summary}"]
        if self.aliases:
            lines.append("  also: " + ", ".join(prefix + a for a in self.aliases))
        for arg in self.args:
            if in_command_room or not arg.command_room_only:
                room_only = " (command room only)" if arg.command_room_only else ""
                lines.append(f"  {arg.syntax}: {arg.help}{room_only}")
        if self.examples:
            shown = " · ".join(f"{prefix}{self.name} {e}" for e in self.examples)
            lines.append(f"  e.g. {shown}")
        if self.more:  # prose, after a blank line: no argument (`html.help_html`)
            lines.extend(["", *self.more])
        return "\n".join(lines)
