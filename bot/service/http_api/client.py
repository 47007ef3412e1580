"""The listener's client: how `muninn search` and `muninn purge` reach a running service.

While `muninn run` holds the embedded store, the CLI posts to its loopback listener with the
token the service wrote (`bot.service.http_api.token`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from bot.config import MetricsConfig
from bot.service.http_api.wire import PURGE_PATH, SEARCH_PATH, STATUS_PATH
from ingest.errors import QueryError, StoreError, StoreUnavailable

__all__ = ["post_purge", "post_search", "post_status", "service_url"]

CLIENT_TIMEOUT = 120.0


def service_url(cfg: MetricsConfig) -> str:
    """Where a local client reaches the listener (a wildcard bind is reached on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(cfg.host, cfg.host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{cfg.port}"


async def post_search(url: str, token: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a search to a running service; a 400 raises the `QueryError` it names."""
    return await _post(url, token, SEARCH_PATH, "search", body)


async def post_purge(url: str, token: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a purge to a running service; a 400 raises the `QueryError` it names."""
    return await _post(url, token, PURGE_PATH, "purge", body)


async def post_status(url: str, token: str) -> dict[str, Any]:
    """Ask a running service for the store's half of `muninn status` (`ingest.index.facts`)."""
    return await _post(url, token, STATUS_PATH, "status", {})


async def _post(
    url: str, token: str, path: str, what: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url + path, json=dict(body), headers=headers) as resp,
        ):
            status = resp.status
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        raise StoreUnavailable(
            f"the service's {what} endpoint at {url} did not answer: {e}"
        ) from e
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = text.strip()  # e.g. aiohttp's plain 404 from a service without this endpoint
    if status == 400 and isinstance(doc, dict) and "field" in doc:
        raise QueryError(str(doc["field"]), str(doc.get("message", "")))
    if status != 200 or not isinstance(doc, dict):
        error = doc.get("error") if isinstance(doc, dict) else doc
        raise StoreError(f"the service at {url} answered {status}: {error}")
    return doc
