"""A reply's notice, its relation and the budget every reply fits, and canonical JSON."""

from __future__ import annotations

import pytest

from bot.chat.content import ReplyTo, content_size, matrix_json
from bot.chat.replies import REPLY_BUDGET, Part, fit_reply, text_reply


def test_text_reply_is_a_plain_reply() -> None:
    content = text_reply(ReplyTo("!r", "$cmd"), "usage: <x>")
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": "$cmd"}}
    assert content["msgtype"] == "m.notice" and "&lt;x&gt;" in content["formatted_body"]


@pytest.mark.parametrize("size", [70_000, 10_000_000])
def test_every_reply_fits_the_budget(size: int) -> None:
    """Any reply — a long refusal, a notice whose head alone is too large — stays within the
    budget; one that cannot fit says so instead of failing to send."""
    reply_to = ReplyTo("!r", "$cmd")
    text = text_reply(reply_to, "x" * size, results_kind="error")
    assert content_size(text) <= REPLY_BUDGET
    assert text["org.muninn.results"] == {"error": text["body"]}
    content = fit_reply(reply_to, Part("y" * size, "y" * size), results={"error": "y"})
    assert content_size(content) <= REPLY_BUDGET
    assert "too large to send" in content["body"]
    assert content["org.muninn.results"]["error"] == content["body"]


def test_matrix_json_has_no_floats() -> None:
    """Canonical JSON forbids floats: scores travel as decimal strings."""
    assert matrix_json({"score": 0.5, "n": [1, 0.25]}) == {"score": "0.5", "n": [1, "0.25"]}
