"""`muninn` run in the test's own process: the same `bot.cli.main.main` a child runs, without the
~1 s of CPU a child spends starting Python and importing the project (on CI's two cores,
shared by the workers, that was most of what a CLI test cost).

For tests about what a command answers. Tests about the process itself (its exit on a signal,
the entry point, a store held by another process) keep `tests.indexing.muninn`, and every
subcommand keeps at least one test that runs it as a child.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import threading
import traceback
from pathlib import Path

from bot.cli.main import main
from tests.indexing import Run

# `main` points the root logger and the process's stdout/stderr at this run: one at a time.
_ONE_AT_A_TIME = threading.Lock()


def _run(argv: list[str]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    config_env = os.environ.pop("MUNINN_CONFIG", None)  # as the child's environment has it
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse's usage errors, as the interpreter exits
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # what the interpreter would print on an uncaught exception
                traceback.print_exc()
                rc = 1
    finally:
        root.handlers[:] = handlers  # setup_logging replaced them with one on `err`
        root.setLevel(level)
        if config_env is not None:
            os.environ["MUNINN_CONFIG"] = config_env
    return Run(rc, out.getvalue(), err.getvalue())


def _locked(argv: list[str]) -> Run:
    with _ONE_AT_A_TIME:
        return _run(argv)


async def muninn_here(config: Path, *args: str) -> Run:
    """`muninn --config FILE ARGS…` in this process (on a thread: `main` runs its own loop)."""
    argv = ["--config", str(config), *args]
    return await asyncio.wait_for(asyncio.to_thread(_locked, argv), timeout=120)
