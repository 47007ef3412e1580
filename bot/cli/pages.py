"""What `muninn COMMAND --help` says beyond its flags: what the command does, and examples.

Kept apart from the flags (`bot.cli.main`) so that a page reads as one text; `add_pages` hangs each
on its subcommand's parser once they are all declared.
"""

from __future__ import annotations

import argparse
import textwrap

__all__ = ["PAGES", "add_pages"]

# command (or "roster plan") → (description, examples)
PAGES: dict[str, tuple[str, str]] = {
    "run": (
        "The service: the live stream (appservice pushes, or /sync in client mode), the refresh "
        "loop, the chat commands and the loopback listener (metrics.port). Stops cleanly on "
        "SIGTERM or Ctrl-C, within seconds.",
        "muninn --config /etc/muninn/config.yaml run\nmuninn --log-format json run   # a journal",
    ),
    "refresh": (
        "One writer pass: read every joined room (or only --room) from its cursor, index what "
        "is new, apply edits, redactions and purges; refused rooms are purged from the index. "
        "Each room's line says the points it holds now, as `muninn status` counts them. On a "
        "terminal a line names the room being read; Ctrl-C says how far the pass got. With "
        "`muninn run` holding the embedded store, the service's own loop does this.",
        "muninn refresh\nmuninn refresh --room '#dev' --json",
    ),
    "search": (
        "The read path: dense and lexical retrieval, fused, every hit revalidated against the "
        "homeserver (or the export it was imported from) before it is shown. While `muninn run` "
        "holds the embedded store, it asks the service over its loopback listener. --match "
        "words answers from the words alone; --has keeps links, files, images, videos or audio; "
        "--context N shows each result's conversation; --reply-to lists the replies to one "
        "message and its thread, read from the homeserver. A room the index has not read yet, "
        "or is behind in, is named (stderr; --json: indexing).",
        "muninn search 'why did the deploy fail' --room '#ops' --after 7d\n"
        "muninn search 'login 500' 'sessions table' --json\n"
        "muninn search 'ERR_7731X' --match words --context 2\n"
        "muninn search 'budget' --has file --has image\n"
        "muninn search --reply-to 'https://matrix.to/#/!abc:example.org/$q1' --json",
    ),
    "pins": (
        "A room's pinboard as the bot folds it from the room's `!pin` events (edits applied, "
        "secrets scrubbed, purged messages hidden). Needs no store: runs beside the service.",
        "muninn pins '#dev'\nmuninn pins '!abc:example.org' --json",
    ),
    "mcp": (
        "A Model Context Protocol server on stdin/stdout for an agent host: the tools search, "
        "context, pins and rooms answer as `muninn search --json` and `muninn pins --json` do, "
        "with the same revalidation and privacy rules, through the running service while it "
        "holds the store. `mcp.rooms` in the config narrows the rooms it serves.",
        '{"mcpServers": {"muninn": {"command": "muninn", '
        '"args": ["--config", "/etc/muninn/config.yaml", "mcp"]}}}',
    ),
    "status": (
        "The reader, the active generation, every joined room with its verdict, points and "
        "failing passes (--json adds each cursor and its lag, and the index's versions), the "
        "rooms imported from exports, and whether the command room is served; an archive store "
        "(built by `muninn import` alone) shows its imports only. With the homeserver down, "
        "what the store knows (rooms by their stored alias) and the rest as unknown, exit 1. "
        "Runs beside `muninn run` (the store's half from its listener).",
        "muninn status\nmuninn status --json | jq '.rooms[] | select(.error)'",
    ),
    "purge": (
        "Record a purge tombstone: the next refresh deletes the room's messages in [from, to] "
        "from the index for good, and replies hide them at once. Goes through the running "
        "service when it holds the store. --dry-run counts the messages the range covers (as "
        "the index holds them: not commands or Muninn's replies) and writes nothing; at a "
        "terminal the purge shows that count and asks first. A range without one writes "
        "nothing; a --to in the future ends now.",
        "muninn purge --room '#dev' --from 2026-11-01 --to 2026-11-02 --dry-run\n"
        "muninn purge --room '#dev' --from yesterday --to now --yes",
    ),
    "import": (
        "Index one room's export (Element's JSON export, or JSONL of raw events) by the same "
        "rules as a refresh; its hits are then revalidated against the file. Refused for a room "
        "the reader has not joined into a store homeserver passes write: use an archive store "
        "(deploy/README.md, 'Import an old room').",
        "muninn --config archive.yaml import old-room.json",
    ),
    "roster": (
        "Bring the reader's rooms to the roster: `plan` prints the diff, `apply` joins and "
        "leaves. Nothing else in Muninn joins rooms.",
        "muninn roster plan --roster roster.yaml\nmuninn roster apply --roster roster.yaml",
    ),
    "roster plan": (
        "Print what `apply` would do, room by room, with the reason; joins and leaves nothing.",
        "muninn roster plan --roster roster.yaml | less",
    ),
    "roster apply": (
        "Join and leave until the reader's rooms match the roster; exits 1 naming each room "
        "whose join or leave failed. Idempotent.",
        "muninn roster apply --roster roster.yaml --json",
    ),
    "generate-registration": (
        "Write the appservice registration (fresh tokens, mode 0600) and point the config at "
        "it. Then add it to Synapse's app_service_config_files and restart Synapse.",
        "muninn --config /etc/muninn/config.yaml generate-registration\n"
        "muninn generate-registration --force   # new tokens: restart Synapse after",
    ),
    "demo": (
        "A private Synapse on loopback, a small community and Muninn: try the chat commands "
        "from a client, or `muninn search` with the config it writes. Needs no config.",
        "muninn demo\nmuninn demo --once",
    ),
}


def add_pages(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """Give every subcommand under `parser` its description and examples (`PAGES`)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            key = f"{prefix}{name}"
            if key in PAGES:
                description, examples = PAGES[key]
                # Raw: the examples keep their lines; the prose is wrapped here instead.
                sub.description = textwrap.fill(description, 79)
                shown = "examples:\n" + "\n".join(f"  {e}" for e in examples.splitlines())
                prose = textwrap.fill(sub.epilog, 79) if sub.epilog else ""
                sub.epilog = f"{prose}\n\n{shown}" if prose else shown
                sub.formatter_class = argparse.RawDescriptionHelpFormatter
            add_pages(sub, f"{key} ")
