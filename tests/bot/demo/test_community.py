"""The demo's community (`bot.demo.community`): the shipped script resolves, a broken one is
refused with the reason."""

from __future__ import annotations

import re

import pytest

from bot.demo.community import load
from ingest.errors import ConfigError


def test_demo_community_script_references_resolve() -> None:
    """The shipped community loads: every sender, room and message key the script uses exists."""
    community = load()
    assert {r.key for r in community.rooms} >= {"general", "ops", "workshop", "members"}
    assert any(r.dm for r in community.rooms) and any(r.bridged for r in community.rooms)
    assert {s.kind for s in community.script} == {"say", "edit", "redact"}


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ("script:\n  - {as: zoe, in: general, say: hi}\n", "unknown person 'zoe'"),
        ("script:\n  - {as: alice, in: nowhere, say: hi}\n", "unknown room 'nowhere'"),
        ("script:\n  - {as: alice, in: general, redact: nokey}\n", "no message has the key"),
        ("script:\n  - {as: alice, in: general, edit: k}\n", "edit needs text"),
    ],
)
def test_demo_community_broken_script_is_a_config_error(edit: str, problem: str) -> None:
    """A script naming what does not exist is refused with the reason."""
    base = (
        "name: t\nowner: alice\npeople: {alice: Alice}\n"
        "rooms:\n  - alias: general\n    messages: [[alice, 1, hello, k]]\n"
    )
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load(base + edit)
