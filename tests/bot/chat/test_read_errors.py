"""A homeserver read that fails while a command is answered is said to the asker (issue 37
item 6), against the real Synapse with the fault in the service's transport (tests/transport.py
`Recorder.fault`): a 500 on `/messages`, a proxy's 502 HTML page on `/state`."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import pytest

from bot.chat.handlers import HOMESERVER_FAILED
from ingest.matrix import Request, Retry
from tests.bot.botenv import Env, body_of
from tests.botkit import ask
from tests.homeserver import MatrixUser
from tests.transport import Outcome, answer


@pytest.fixture
def faults(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Outcome]]:
    """Requests of a room's endpoint (`"<room id>/<endpoint>"`) answered with the outcome.

    The service's client keeps its five tries but waits 10 ms between them, not 0.5 s doubling
    (7.5 s of waiting a failed read): what is tested is what the asker is told after them."""
    monkeypatch.setattr(env.service.client, "retry", Retry(backoff=0.01, max_backoff=0.01))
    by_path: dict[str, Outcome] = {}

    def fault(request: Request) -> Outcome | None:
        path = unquote(request.path)
        return next((o for key, o in by_path.items() if key in path), None)

    env.requests.fault = fault
    yield by_path
    env.requests.fault = None


@pytest.mark.parametrize(
    ("endpoint", "outcome", "why"),
    [
        ("messages", answer(500, {"errcode": "M_UNKNOWN", "error": "boom"}), "M_UNKNOWN"),
        ("state", answer(502, body="<html><h1>502 Bad Gateway</h1></html>"), "HTTP 502"),
    ],
    ids=["messages_500", "state_502_html"],
)
async def test_bot_read_error_is_answered_not_dropped(
    env: Env,
    alice: MatrixUser,
    faults: dict[str, Outcome],
    endpoint: str,
    outcome: Outcome,
    why: str,
) -> None:
    """Regression (issue 37 item 6): a read that fails past the request layer's retries (a
    500 on `/messages`, a 502 HTML page on `/state`) once the command is admitted gets a short
    reply naming the failure; before, five tries, a log line and no reply ever."""
    room = await env.room(alice)
    await alice.send_text(room, "the wombat census is on friday")
    await ask(alice, room, "!help", env.bot_id)  # admitted: the room's verdict is kept
    faults[f"/rooms/{room}/{endpoint}"] = outcome
    _, reply = await ask(alice, room, "!search wombat census", env.bot_id)
    assert body_of(reply) == HOMESERVER_FAILED.format(why=why)
    faults.clear()
    _, reply = await ask(alice, room, "!search wombat census", env.bot_id)
    assert "wombat census" in body_of(reply)
