"""`muninn COMMAND --help`: every subcommand says what it does and shows an example."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bot.cli.main import _parser
from bot.cli.pages import PAGES


def _subparsers(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub
                found.update(_subparsers(sub, f"{prefix}{name} "))
    return found


@pytest.mark.parametrize("command", sorted(_subparsers(_parser())))
def test_every_subcommand_help_has_a_description_and_an_example(command: str) -> None:
    """Regression: the subcommand pages listed flags only."""
    page = _subparsers(_parser())[command].format_help()
    description, examples = PAGES[command]
    assert " ".join(description.split()) in " ".join(page.split())
    assert "examples:\n" in page and f"  {examples.splitlines()[0]}" in page


@pytest.mark.parametrize("command", sorted(_subparsers(_parser())))
def test_every_flag_says_what_it_does(command: str) -> None:
    """Issue 36: `status --json`, `purge --json` and `roster … --json` had no help text."""
    for action in _subparsers(_parser())[command]._actions:
        if action.option_strings and action.help != argparse.SUPPRESS:
            assert action.help, f"{command} {action.option_strings[0]} has no help"


README = Path(__file__).resolve().parents[3] / "README.md"


def test_status_is_promised_cursors_and_versions_only_in_its_json() -> None:
    """Issue 44: the README's `muninn status` row and `muninn --help` promised cursors and
    versions that only `--json` prints: each names them after "--json" only."""
    row = next(
        line
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `muninn status")
    )
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    help_line = next(str(a.help) for a in commands._choices_actions if a.dest == "status")
    for promise in (row, help_line, PAGES["status"][0]):
        text_part = promise.split("--json", 1)[0].replace("[", "").replace("`", "")
        assert "cursor" not in text_part and "version" not in text_part, promise
        assert "cursor" in promise and "version" in promise, promise
