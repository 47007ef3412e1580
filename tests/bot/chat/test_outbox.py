"""`bot.chat.outbox`: a reply whose `PUT` met a homeserver outage is sent again under the same
transaction id until it goes through, or given up (counted) once the command is too old.

An outage of minutes is a fault a real Synapse cannot produce on demand: the client's
transport answers it (`tests.transport`: a script, or the service's own transport refusing
the reply's `PUT` before the real Synapse takes the rest); the client and its request layer
are the real ones.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence

import pytest

from bot.chat.commands.incoming import MAX_COMMAND_AGE_MS
from bot.chat.outbox import Outbox, Pending
from bot.chat.sender import BotClient, txn_id_for
from bot.service.metrics import ServiceMetrics
from ingest.errors import MatrixError, MatrixUnavailable
from ingest.matrix import Request, Response
from ingest.matrix.http import Retry
from tests.bot.botenv import Env
from tests.bot.service.test_metrics import parse_exposition, value
from tests.botkit import ask, replies
from tests.homeserver import MatrixUser
from tests.transport import Scripted, answer

HS = "http://hs.invalid"
ROOM = "!room:hs.invalid"
SEND = re.compile(r"^/_matrix/client/v3/rooms/.+/send/m\.room\.message/(muninn\..+)$")
REPLY = {"msgtype": "m.notice", "body": "1 result for otters"}
DOWN = answer(503, {"errcode": "M_UNKNOWN"})


def client(transport: Scripted) -> BotClient:
    """The bot's real client; one attempt a request (the request layer's own ~8 s of retries
    is what an outage outlasts)."""
    return BotClient(
        HS, "token", "@muninn:hs.invalid", retry=Retry(attempts=1), transport=transport
    )


def sent_txns(requests: Sequence[Request]) -> list[str]:
    return [m.group(1) for r in requests if r.method == "PUT" and (m := SEND.match(r.path))]


async def test_outbox_sends_a_reply_after_an_outage_once_under_its_txn_id() -> None:
    """Regression (issue 21 item 5): the reply's PUT fails 4 times (503), then the homeserver
    is back: it is sent again under the same transaction id and arrives once."""
    script = Scripted(DOWN, DOWN, DOWN, DOWN, answer(200, {"event_id": "$reply"}))
    bot = client(script)
    sent: list[Pending] = []
    outbox = Outbox(bot.send_message, on_sent=sent.append, first_delay=0.01, max_delay=0.02)
    txn = txn_id_for(ROOM, "$command")
    now = int(time.time() * 1000)
    with pytest.raises(MatrixUnavailable):  # what the handler met; it holds the reply
        await bot.send_message(ROOM, REPLY, txn)
    outbox.hold(Pending(ROOM, REPLY, txn, command_ts=now))
    outbox.hold(Pending(ROOM, REPLY, txn, command_ts=now))  # held twice: one reply
    await outbox.join()
    assert sent_txns(script.requests) == [txn] * 5
    assert [p.txn_id for p in sent] == [txn]
    await bot.close()


async def test_outbox_gives_up_a_reply_once_its_command_is_too_old(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A command older than `MAX_COMMAND_AGE_MS` is not answered late: its reply is given up,
    logged and counted in `muninn_replies_given_up_total`; a full outbox gives up at once."""
    caplog.set_level(logging.WARNING, "muninn.chat")
    metrics = ServiceMetrics()
    now = [10 * MAX_COMMAND_AGE_MS]
    bot = client(Scripted(DOWN, repeat=True))
    outbox = Outbox(
        bot.send_message,
        on_given_up=lambda p, why: metrics.replies_given_up.inc(),
        clock_ms=lambda: now[0],
        first_delay=0.01,
        max_waiting=1,
    )
    outbox.hold(Pending(ROOM, REPLY, "muninn.a", command_ts=now[0] - 1000))
    outbox.hold(Pending(ROOM, REPLY, "muninn.b", command_ts=now[0]))  # over the cap
    assert len(outbox) == 1
    await asyncio.sleep(0.05)
    now[0] += MAX_COMMAND_AGE_MS
    await outbox.join()
    fams = parse_exposition(metrics.render().decode())
    assert value(fams, "muninn_replies_given_up_total") == 2
    assert "too old" in caplog.text and "already waiting" in caplog.text
    await bot.close()


async def test_outbox_drain_tries_once_more_then_gives_up() -> None:
    """On stop, a waiting reply is tried at once (not after its back-off), and one the
    homeserver still refuses is given up within the budget."""
    script = Scripted(DOWN, repeat=True)
    bot = client(script)
    given_up: list[str] = []
    outbox = Outbox(bot.send_message, on_given_up=lambda p, why: given_up.append(why))
    outbox.hold(Pending(ROOM, REPLY, "muninn.c", command_ts=int(time.time() * 1000)))
    await outbox.drain(5.0)  # the first repeat was 2 s away
    assert sent_txns(script.requests) == ["muninn.c"]
    assert len(outbox) == 0 and len(given_up) == 1 and "stopping" in given_up[0]
    await bot.close()


async def test_bot_answers_a_command_whose_reply_met_an_outage(
    env: Env, alice: MatrixUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 21 item 5): the service's reply PUT fails 3 times past its request
    layer's retries (the homeserver down for longer than they last), then Synapse is back:
    the command is answered, once, under the one transaction id of its first try."""
    handler = env.service.handler
    monkeypatch.setattr(env.service.client, "retry", Retry(attempts=1))
    monkeypatch.setattr(handler.outbox, "_first", 0.01)
    room = await env.room(alice)
    refused: list[Request] = []

    def outage(request: Request) -> Response | None:  # the reply's first 3 PUTs
        if request.method != "PUT" or not SEND.match(request.path) or len(refused) == 3:
            return None
        refused.append(request)
        return DOWN

    monkeypatch.setattr(env.requests, "fault", outage)
    mark = len(env.requests.requests)
    command, reply = await ask(alice, room, "!help", env.bot_id)
    tries = sent_txns(env.sent_since(mark))
    assert tries == [txn_id_for(room, command)] * 4  # 3 refused, the 4th posted
    assert len(await replies(alice, room, command, env.bot_id)) == 1
    assert reply["content"]["msgtype"] == "m.notice"


async def test_outbox_is_bounded_and_does_not_repeat_a_refused_reply() -> None:
    """At most `max_waiting` replies wait (one more is given up at once, counted); a reply
    the homeserver refuses for good (413) is not sent again."""
    given_up: list[str] = []
    tries: list[str] = []

    async def down(room_id: str, content: object, txn_id: str) -> object:
        tries.append(txn_id)
        raise MatrixUnavailable("PUT failed 5 time(s): 502")

    now = int(time.time() * 1000)
    box = Outbox(down, on_given_up=lambda p, why: given_up.append(p.txn_id), max_waiting=2)
    for i in range(3):
        box.hold(Pending(ROOM, REPLY, f"muninn.{i}", command_ts=now))
    assert len(box) == 2 and given_up == ["muninn.2"]
    await box.drain(1.0)
    assert len(box) == 0 and sorted(given_up) == ["muninn.0", "muninn.1", "muninn.2"]

    refused: list[str] = []

    async def too_large(room_id: str, content: object, txn_id: str) -> object:
        refused.append(txn_id)
        raise MatrixError("413 M_TOO_LARGE", status=413, errcode="M_TOO_LARGE")

    once = Outbox(too_large, on_given_up=lambda p, why: given_up.append(why), first_delay=0.01)
    once.hold(Pending(ROOM, REPLY, "muninn.big", command_ts=now))
    await once.join()
    assert refused == ["muninn.big"] and "refused" in given_up[-1]


async def test_outbox_checks_a_held_reply_before_each_repeat() -> None:
    """Regression (issue 46, high): a reply that quotes the log is checked (rule 14) before
    every repeat, not once before its first try: the check holds at the first repeat, the
    audience changes, and the second repeat sends the check's notice instead, under the same
    transaction id."""
    script = Scripted(DOWN, answer(200, {"event_id": "$notice"}))
    bot = client(script)
    notice = {"msgtype": "m.notice", "body": "ask again"}
    checks: list[bool] = []

    async def instead() -> dict[str, str] | None:
        checks.append(True)
        return None if len(checks) == 1 else notice

    outbox = Outbox(bot.send_message, first_delay=0.01, max_delay=0.02)
    now = int(time.time() * 1000)
    outbox.hold(Pending(ROOM, REPLY, "muninn.d", command_ts=now, instead=instead))
    await outbox.join()
    bodies = [r.body for r in script.requests if r.method == "PUT"]
    assert len(checks) == 2 and sent_txns(script.requests) == ["muninn.d"] * 2
    assert bodies == [REPLY, notice]
    await bot.close()
