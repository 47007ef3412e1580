"""`muninn [--config FILE] COMMAND`: the one entry point (docs/ARCHITECTURE.md §4.1).

Every read command takes `--json` and then prints one JSON document on stdout. Errors go to
stderr with a non-zero exit and a message that names the cause.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bot import operations
from bot.chat.commands.arguments import ArgumentError
from bot.chat.commands.dates import TIME_HELP, instant
from bot.cli.pages import add_pages
from bot.cli.roster.cli import roster_apply, roster_plan
from bot.config import ServiceConfig, load_config
from bot.logs import setup_logging
from bot.operations.search import search_filter_args, search_filter_flags
from bot.service.registration import check_registration, generate_registration
from ingest.config import config_path
from ingest.errors import MuninnError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell tool killed by it reports
EXIT_INTERRUPTED = 130  # 128 + SIGINT

# What a Ctrl-C left behind, and how to go on (issue 36: it said nothing).
_WRITER_STOPPED = (
    "Nothing is lost: each room's cursor moves only after its page is written, so the "
    "rooms done so far stay done"
)
INTERRUPTED = {
    "refresh": f"{_WRITER_STOPPED}; `muninn refresh` (or `muninn run`) goes on from there.",
    "import": f"{_WRITER_STOPPED}; run the same `muninn import` again to finish it.",
    "purge": "If the tombstone line was not printed, no purge was recorded.",
}


def parse_time(text: str) -> int:
    """A CLI time T in ms: the chat's date grammar (`bot.chat.commands.dates.TIME_HELP`), ms or
    ISO."""
    try:
        return instant(text, int(time.time() * 1000))
    except ArgumentError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="muninn", description="Search and pinboards for a Matrix community."
    )
    p.add_argument("--config", help="config file (default $MUNINN_CONFIG or ./config.yaml)")
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="json: one JSON object a line, for a journal or log shipper",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("run", help="the service: live stream, refresh loop, command handling")

    r = sub.add_parser("refresh", help="one writer pass over the joined rooms")
    r.add_argument(
        "--room",
        action="append",
        help="only this room (id or alias; #dev is this server's); repeatable",
    )
    r.add_argument("--json", action="store_true", help="print the per-room report as JSON")

    s = sub.add_parser("search", help="search the index (the one read path)", epilog=TIME_HELP)
    s.add_argument(
        "texts", nargs="*", metavar="TEXT", help="1 to 8 query texts, fused (or --reply-to)"
    )
    s.add_argument("--room", action="append", help="only this room (id or alias)")
    s.add_argument(
        "--sender",
        action="append",
        help="only windows with this sender: @bob:server, or @bob / bob on this homeserver",
    )
    s.add_argument(
        "--after", type=parse_time, metavar="T", help="only windows at or after T (7d, 2026-11-01)"
    )
    s.add_argument(
        "--before", type=parse_time, metavar="T", help="only windows at or before T (yesterday)"
    )
    s.add_argument("--limit", type=int, default=5, help="hits to return (default 5, max 50)")
    search_filter_flags(s)
    s.add_argument(
        "--json", action="store_true", help="print one JSON document (docs/ARCHITECTURE.md §4.3)"
    )

    pn = sub.add_parser("pins", help="a room's pinboard, as the bot folds it")
    pn.add_argument("room", metavar="ROOM", help="room id or alias (#dev is #dev:<server_name>)")
    pn.add_argument("--json", action="store_true", help="print the board as one JSON document")

    sub.add_parser(
        "mcp",
        help="the read commands as MCP tools on stdio (search, context, pins, rooms), for agents",
    )

    st = sub.add_parser(
        "status", help="rooms, their verdicts and points (--json adds cursors and versions)"
    )
    st.add_argument(
        "--json", action="store_true", help="print one JSON document (docs/ARCHITECTURE.md §4.1)"
    )

    pu = sub.add_parser(
        "purge", help="write a purge tombstone the next refresh applies", epilog=TIME_HELP
    )
    pu.add_argument("--room", required=True, help="room id or alias (#dev is #dev:<server_name>)")
    for flag, edge in (("--from", "first"), ("--to", "last")):
        dest, what = f"{flag[2:]}_ts", f"the range's {edge} instant (below)"
        pu.add_argument(flag, dest=dest, required=True, type=parse_time, metavar="T", help=what)
    flags = {
        "--dry-run": "count the messages the range covers and write nothing",
        "--yes": "on a terminal, purge without asking first",
        "--json": "print the tombstone (or the dry run's count) as JSON",
    }
    for flag, what in flags.items():
        pu.add_argument(flag, action="store_true", help=what)

    im = sub.add_parser("import", help="index a room export (Element JSON or JSONL of events)")
    im.add_argument("file", type=Path, help="the export file")
    im.add_argument("--json", action="store_true", help="print the report as JSON")

    ro = sub.add_parser("roster", help="diff (plan) or apply the reader's rooms against a roster")
    rs = ro.add_subparsers(dest="roster_command", required=True, metavar="plan|apply")
    for name, what in (("plan", "print the diff"), ("apply", "join and leave accordingly")):
        x = rs.add_parser(name, help=what)
        x.add_argument(
            "--roster",
            type=Path,
            help="roster YAML: rooms: [{room, note}] (default: the config's bot.roster)",
        )
        x.add_argument("--json", action="store_true", help="print the actions as JSON")

    g = sub.add_parser(
        "generate-registration", help="write registration.yaml, point the config at it"
    )
    g.add_argument(
        "--out", type=Path, help="default: appservice.registration, else beside the config"
    )
    g.add_argument("--force", action="store_true", help="replace an existing registration")
    g.add_argument("--url", help="where Synapse pushes (default http://appservice.host:port)")
    g.add_argument(
        "--localpart", help="bot sender_localpart (default: the old file's, else muninn)"
    )

    d = sub.add_parser(
        "demo", help="a private Synapse, a demo community and Muninn; needs no config"
    )
    d.add_argument(
        "--data-dir",
        type=Path,
        default=Path("muninn-demo"),
        help="where Synapse and the index live (default ./muninn-demo; emptied on every run)",
    )
    d.add_argument("--once", action="store_true", help="play the script, then stop (exit 0)")
    d.add_argument("--port", type=int, help="Synapse's port on 127.0.0.1 (default: a free one)")
    add_pages(p)
    return p


async def _dispatch(args: argparse.Namespace, cfg: ServiceConfig) -> int:
    if args.command == "run":
        from bot.service.run import run

        return await run(cfg)
    if args.command == "refresh":
        return await operations.refresh(cfg, rooms=args.room, as_json=args.json)
    if args.command == "search":
        return await operations.search(
            cfg,
            texts=args.texts,
            rooms=args.room,
            after=args.after,
            before=args.before,
            limit=args.limit,
            as_json=args.json,
            **search_filter_args(args, cfg.homeserver.server_name),
        )
    if args.command == "pins":
        return await operations.pins(cfg, room=args.room, as_json=args.json)
    if args.command == "status":
        return await operations.status(cfg, as_json=args.json)
    if args.command == "mcp":
        from bot.mcp.server import serve

        return await serve(cfg)
    if args.command == "purge":
        span = {"room": args.room, "from_ts": args.from_ts, "to_ts": args.to_ts}
        asked = {"dry_run": args.dry_run, "confirm": not args.yes}
        return await operations.purge(cfg, **span, as_json=args.json, **asked)
    if args.command == "import":
        return await operations.import_export(cfg, path=args.file, as_json=args.json)
    if args.command == "roster":
        # The file `muninn run` reads on an invite is the one to apply, unless another is named.
        roster = args.roster or (cfg.resolve(cfg.bot.roster) if cfg.bot.roster else None)
        if roster is None:
            raise MuninnError(
                "no roster to read: give --roster FILE, or set bot.roster in the config (the "
                "file `muninn run` also reads when the reader is invited)"
            )
        if args.roster_command == "plan":
            return await roster_plan(cfg, roster, as_json=args.json)
        return await roster_apply(cfg, roster, as_json=args.json)
    raise AssertionError(args.command)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "search" and not args.texts and args.reply_to is None:
        parser.error("search: give 1 to 8 TEXTs to search for (or --reply-to EVENT)")
    setup_logging(verbose=args.verbose, fmt=args.log_format)
    try:
        if args.command == "generate-registration":
            # Before load_config: the config may not validate until the registration exists.
            return generate_registration(
                config_path(args.config),
                out=args.out,
                force=args.force,
                url=args.url,
                sender_localpart=args.localpart,
            )
        if args.command == "demo":
            # Before load_config: the demo brings its own homeserver and config.
            from bot.demo.run import run_demo

            return run_demo(args.data_dir, once=args.once, port=args.port, verbose=args.verbose)
        cfg = load_config(args.config)
        check_registration(cfg)
        return asyncio.run(_dispatch(args, cfg))
    except MuninnError as e:
        print(f"muninn: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(
            f"muninn: interrupted. {INTERRUPTED.get(args.command, '')}".rstrip(), file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `muninn roster plan | head`: the reader left; end quietly, as shell tools do. The
        # interpreter's last flush of stdout would fail again: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
