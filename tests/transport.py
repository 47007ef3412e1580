"""aioresponses for faults a real homeserver cannot produce on demand (the transport only)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
from aioresponses import aioresponses


class CompatResponse(aiohttp.ClientResponse):
    """aioresponses 0.7.9 does not pass aiohttp 3.14's new `stream_writer`; give it a stub."""

    def __init__(self, method: str, url: Any, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)


class MockedTransport(aioresponses):
    """aioresponses with a response class this aiohttp accepts."""

    def add(self, url: Any, method: str = "GET", *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("response_class", CompatResponse)
        super().add(url, method, *args, **kwargs)


def calls(mocked: aioresponses) -> int:
    """How many requests went through the mocked transport."""
    return sum(len(v) for v in mocked.requests.values())
