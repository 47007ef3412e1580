"""ingest.matrix.http: the request layer's retry and error policy, faulted through its transport.

A real homeserver cannot be made to answer 429, 502 or drop a connection on demand, so these
pass `MatrixHTTP` a `Scripted` transport (tests/transport.py) and no server runs at all; the
last tests are the product's `AiohttpTransport`, whose mapping of aiohttp's own exceptions
only aiohttp can fault (aioresponses). The reader against the real Synapse:
tests/ingest/matrix/test_reader.py.
"""

from __future__ import annotations

import re
import time

import aiohttp
import pytest

from ingest.errors import (
    MatrixAuthError,
    MatrixError,
    MatrixForbidden,
    MatrixNotFound,
    MatrixUnavailable,
)
from ingest.matrix import MatrixReader, ReaderMode, Retry
from ingest.matrix.transport import ConnectFailed, ConnectionLost, TLSFailed
from tests.transport import MockedTransport, Scripted, answer, calls

FAST = Retry(attempts=3, backoff=0.01, max_backoff=0.05)
HS = "http://hs.test"
WHOAMI = re.compile(r"^http://hs\.test/_matrix/client/v3/account/whoami(\?.*)?$")
OK = {"user_id": "@r:hs.test"}


def fake_reader(
    transport: Scripted | None = None,
    mode: ReaderMode = ReaderMode.CLIENT,
    retry: Retry = FAST,
    homeserver: str = HS,
) -> MatrixReader:
    name = "as_token in /etc/muninn/registration.yaml" if mode is ReaderMode.APPSERVICE else None
    return MatrixReader(
        homeserver, "tok", "@r:hs.test", mode, token_name=name, retry=retry, transport=transport
    )


async def test_request_429_waits_retry_after_ms_and_retries() -> None:
    """A 429 with retry_after_ms is waited for, then the request is sent again."""
    limited = {"errcode": "M_LIMIT_EXCEEDED", "error": "Too many", "retry_after_ms": 150}
    script = Scripted(answer(429, limited), answer(200, OK))
    async with fake_reader(script) as reader:
        started = time.monotonic()
        assert await reader.whoami() == "@r:hs.test"
        assert time.monotonic() - started >= 0.14  # asyncio may wake a tick early
        assert len(script.requests) == 2
    assert script.closed  # the reader closes the transport it was given


async def test_request_429_honours_retry_after_header_with_a_cap() -> None:
    """Without retry_after_ms, a Retry-After header (seconds) is waited, capped by the policy."""
    retry = Retry(attempts=2, backoff=0.0, max_retry_after=0.12)
    script = Scripted(answer(429, {}, headers={"retry-after": "30"}), answer(200, OK))
    async with fake_reader(script, retry=retry) as reader:
        started = time.monotonic()
        await reader.whoami()
        assert 0.11 <= time.monotonic() - started < 5


async def test_request_429_with_a_non_ascii_retry_after_backs_off_instead_of_failing() -> None:
    """A hostile `Retry-After: ²` (a digit to `str.isdigit`, not to `float`) is no wait asked
    for: the reader backs off by its own policy and retries, it never raises."""
    retry = Retry(attempts=2, backoff=0.0, max_retry_after=0.12)
    script = Scripted(answer(429, {}, headers={"Retry-After": "\u00b2"}), answer(200, OK))
    async with fake_reader(script, retry=retry) as reader:
        assert await reader.whoami() == "@r:hs.test"
        assert len(script.requests) == 2


async def test_request_502_is_retried_then_succeeds() -> None:
    """A 502 from a proxy (HTML body) is retried with backoff."""
    script = Scripted(answer(502, body="<html>Bad Gateway</html>"), answer(200, OK))
    async with fake_reader(script) as reader:
        assert await reader.whoami() == "@r:hs.test"
        assert len(script.requests) == 2


async def test_request_persistent_5xx_raises_unavailable_after_bound() -> None:
    """5xx on every attempt raises MatrixUnavailable after exactly `attempts` tries."""
    script = Scripted(answer(503, {"errcode": "M_UNKNOWN"}), repeat=True)
    async with fake_reader(script, retry=Retry(attempts=4, backoff=0.001)) as reader:
        with pytest.raises(MatrixUnavailable, match="4 time"):
            await reader.whoami()
        assert len(script.requests) == 4


async def test_request_persistent_429_raises_unavailable_after_bound() -> None:
    """429 counts against the same bound: a server that never relents is unavailable."""
    limited = {"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 1}
    script = Scripted(answer(429, limited), repeat=True)
    async with fake_reader(script, retry=Retry(attempts=3, backoff=0.001)) as reader:
        with pytest.raises(MatrixUnavailable, match="429"):
            await reader.whoami()
        assert len(script.requests) == 3


async def test_request_connection_error_persistent_raises_unavailable() -> None:
    """Connection errors on every attempt end in MatrixUnavailable naming the cause."""
    script = Scripted(ConnectionLost("ClientConnectionError: refused"), repeat=True)
    async with fake_reader(script) as reader:
        with pytest.raises(MatrixUnavailable, match="connection error"):
            await reader.whoami()
        assert len(script.requests) == FAST.attempts


async def test_request_never_connecting_gives_up_after_the_connect_attempts() -> None:
    """A server never reached is tried `connect_attempts` times (the CLI's two), not
    `attempts`; a connect timeout says the bound, an `https://` URL the likely cause."""
    refused = ConnectFailed("ConnectionTimeoutError: no answer", timed_out=True)
    script = Scripted(refused, repeat=True)
    retry = Retry(attempts=5, backoff=0.001, connect_attempts=2)
    async with fake_reader(script, retry=retry, homeserver="https://hs.test") as reader:
        reader.connect_timeout = 0.5
        with pytest.raises(MatrixUnavailable) as caught:
            await reader.whoami()
    assert len(script.requests) == 2
    message = str(caught.value)
    assert "failed 2 time(s)" in message and "no connection within 0.5 s" in message
    assert "TLS to a port that speaks plain HTTP?" in message
    assert "homeserver.url: http://hs.test" in message


async def test_request_a_tls_failure_is_not_retried() -> None:
    """Not TLS where TLS was asked for is no outage: one try, and the hint; a bad certificate
    is named without the hint."""
    for failure, hinted in (
        (TLSFailed("SSLError: wrong version"), True),
        (TLSFailed("CertificateError: expired", certificate=True), False),
    ):
        script = Scripted(failure, repeat=True)
        async with fake_reader(script, homeserver="https://hs.test") as reader:
            with pytest.raises(MatrixUnavailable) as caught:
                await reader.whoami()
        assert len(script.requests) == 1
        assert ("TLS to a port that speaks plain HTTP?" in str(caught.value)) is hinted


@pytest.mark.parametrize(
    ("mode", "token_name"),
    [
        (ReaderMode.CLIENT, "reader.access_token"),
        (ReaderMode.APPSERVICE, "as_token in /etc/muninn/registration.yaml"),
    ],
)
async def test_request_401_raises_auth_error_naming_the_token(
    mode: ReaderMode, token_name: str
) -> None:
    """401 is never retried; the error says which token to fix."""
    body = {"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token passed."}
    script = Scripted(answer(401, body), repeat=True)
    async with fake_reader(script, mode) as reader:
        with pytest.raises(MatrixAuthError, match=re.escape(token_name)):
            await reader.whoami()
        assert len(script.requests) == 1


@pytest.mark.parametrize(
    ("status", "errcode", "error"),
    [
        (403, "M_MISSING_TOKEN", MatrixAuthError),
        (403, "M_FORBIDDEN", MatrixForbidden),
        (404, "M_NOT_FOUND", MatrixNotFound),
    ],
)
async def test_request_4xx_maps_onto_the_error_tree(
    status: int, errcode: str, error: type[Exception]
) -> None:
    """403 with a token errcode is an auth error, other 403 forbidden, 404 not found."""
    script = Scripted(answer(status, {"errcode": errcode, "error": "no"}))
    async with fake_reader(script) as reader:
        with pytest.raises(error) as err:
            await reader.whoami()
    assert getattr(err.value, "status", None) == status


async def test_request_quotes_path_segments_and_adds_user_id_in_appservice_mode() -> None:
    """Room and event ids are percent-quoted; appservice requests carry ?user_id=."""
    script = Scripted(answer(200, {"event_id": "$e"}))
    async with fake_reader(script, ReaderMode.APPSERVICE) as reader:
        await reader.get_event("!room:hs.test", "$ev/x+y")
    (request,) = script.requests
    assert request.method == "GET"
    assert request.path == "/_matrix/client/v3/rooms/%21room%3Ahs.test/event/%24ev%2Fx%2By"
    assert request.params["user_id"] == "@r:hs.test"
    assert request.headers["Authorization"] == "Bearer tok"


# ---------------------------------------------------------------- the product's transport


async def test_request_connection_error_is_retried() -> None:
    """A refused connection is retried, then the answer is returned (aiohttp's exceptions, as
    the product's transport meets them)."""
    async with fake_reader() as reader:
        with MockedTransport() as mocked:
            mocked.get(WHOAMI, exception=aiohttp.ClientConnectionError("refused"))
            mocked.get(WHOAMI, exception=TimeoutError())
            mocked.get(WHOAMI, payload=OK)
            assert await reader.whoami() == "@r:hs.test"
            assert calls(mocked) == 3


async def test_request_through_aiohttp_reads_status_headers_and_body() -> None:
    """The product's transport hands back what aiohttp read: a 429's header is honoured, a
    5xx's HTML body survives, and the query reaches the URL."""
    retry = Retry(attempts=3, backoff=0.0, max_retry_after=0.05)
    async with fake_reader(mode=ReaderMode.APPSERVICE, retry=retry) as reader:
        with MockedTransport() as mocked:
            mocked.get(WHOAMI, status=429, payload={}, headers={"Retry-After": "30"})
            mocked.get(WHOAMI, status=502, body="<html>Bad Gateway</html>")
            mocked.get(WHOAMI, payload=OK)
            started = time.monotonic()
            assert await reader.whoami() == "@r:hs.test"
            assert 0.04 <= time.monotonic() - started < 5
            assert calls(mocked) == 3
            (_, url), *_ = mocked.requests
    assert url.query["user_id"] == "@r:hs.test"


async def test_room_state_that_is_no_list_of_events_is_no_crash() -> None:
    """Regression (issue 37 item 6): `/state` answering `[1, 2, 3]` raised `AttributeError`
    in `ingest.matrix.state`; its entries are no state events (so no membership: not
    joined), and an answer that is no list is a `MatrixError` naming the room."""
    script = Scripted(answer(200, [1, 2, 3]), answer(200, {"chunk": []}))
    async with fake_reader(script) as reader:
        state = await reader.room_state("!r:hs.test")
        assert not state.joined and state.members == ()
        with pytest.raises(MatrixError, match=r"state of !r:hs\.test"):
            await reader.room_state("!r:hs.test")
