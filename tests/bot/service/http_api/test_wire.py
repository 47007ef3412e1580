"""The listener's documents (`bot.service.http_api.wire`): a purge's times bounded, a search
request's defaults.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.service.http_api import (
    PurgeRequest,
    SearchRequest,
)
from ingest.errors import QueryError


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"room_id": "!r", "from_ts": -1, "to_ts": 2}, "from_ts"),
        ({"room_id": "!r", "from_ts": 1, "to_ts": 2**53}, "to_ts"),
        ({"room_id": "!r", "from_ts": 2**63, "to_ts": 2**64}, "from_ts"),
    ],
)
def test_http_api_purge_times_are_bounded(body: dict[str, Any], field: str) -> None:
    """A purge range outside [0, 2^53) ms is refused naming the field: a larger int would be
    stored as a float whose tombstone key never matches again."""
    with pytest.raises(QueryError) as e:
        PurgeRequest.parse(body)
    assert e.value.field == field and "2^53" in str(e.value)


def test_http_api_search_request_parse_defaults() -> None:
    """Only texts is required; limit defaults to 5; a bad type raises naming the field."""
    req = SearchRequest.parse({"texts": ["a", "b"]})
    assert (req.texts, req.room_ids, req.limit) == (["a", "b"], None, 5)
    with pytest.raises(QueryError) as e:
        SearchRequest.parse({"texts": ["a"], "after": 1.5})
    assert e.value.field == "after"


async def test_http_api_search_request_takes_match_words() -> None:
    """`match` (issue 49) is `meaning` by default or `words`, carried into the query; another
    value or type is refused naming `match`."""
    assert SearchRequest.parse({"texts": ["a"]}).match == "meaning"
    req = SearchRequest.parse({"texts": ["a"], "match": "words"})

    async def same(room: str) -> str:
        return room

    assert (await req.query(same)).match == "words"
    for bad in ("exact", 1):
        with pytest.raises(QueryError) as e:
            await SearchRequest.parse({"texts": ["a"], "match": bad}).query(same)
        assert e.value.field == "match"
