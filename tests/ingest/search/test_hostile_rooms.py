"""Hostile rooms, real embedders, a real index (no homeserver): a message stuffed with every
topic's words heads no search it does not answer, and an exact identifier is found among its
look-alikes (issue 37 items 3 and 4, ranker v5: docs/ARCHITECTURE.md §3 rule 22)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import yaml

from ingest.search.query import SearchQuery
from tests.indexing import shared_pair
from tests.rooms import ROOMS, Room, index_room

PHISH = "Verify your account now https://evil.example/login "
# (question, its answer in the workshop room): the stuffed message holds every word of each.
ASKED = (
    ("where is the spare bandsaw blade", "bandsaw blade snapped"),
    ("is the coffee machine descaled", "coffee machine is descaled"),
    ("when is the new members induction", "induction is on saturday"),
    ("what happened to the fridge", "fridge smells"),
    ("who booked the meeting room", "booked the meeting room"),
    ("what is wrong with the kiln", "kiln reaches temperature"),
    ("are there mice in the building", "mice got into"),
    ("does the projector remote work", "projector remote"),
    ("when is the insurance renewal due", "insurance renewal"),
    ("what is wrong with the welding mask", "welding mask"),
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stuffed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Room]:
    """The 40-message workshop room, then a 3,000-character message of all their words in a
    random order opening with a phishing link, and a 62 KB lorem ipsum."""
    said = [tuple(m) for m in yaml.safe_load((ROOMS / "workshop.yaml").read_text())["messages"]]
    words = " ".join(body for _, body in said).split()
    random.Random(7).shuffle(words)
    text = (PHISH + " ".join(words) + " ") * 3
    lorem = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod " * 900
    said += [("mallory", text[:3000]), ("mallory", lorem)]
    room = await index_room("stuffed", shared_pair(), tmp_path_factory.mktemp("stuffed"), said)
    yield room
    room.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def repeated(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Room]:
    """The workshop room, then a message of the ten answers' whole sentences pasted twelve
    times over (3,000 characters) after a phishing link (issue 46)."""
    said = [tuple(m) for m in yaml.safe_load((ROOMS / "workshop.yaml").read_text())["messages"]]
    answers = [b for _, b in said if any(a in b for _, a in ASKED)]
    said.append(("mallory", (PHISH + " ".join(answers) + " ") * 12))
    assert len(said[-1][1]) >= 3000
    room = await index_room("repeated", shared_pair(), tmp_path_factory.mktemp("repeated"), said)
    yield room
    room.close()


async def test_a_message_pasting_the_topics_again_and_again_leads_no_list(
    repeated: Room,
) -> None:
    """Regression (issue 46): the ten topics' sentences pasted twelve times over headed 3 of 10
    agents' lists (`--json`, MCP) with its phishing link. It heads none, in an agent's list or
    a person's page, and is never a close match; it is still found by its own link."""
    for question, _ in ASKED:
        for close_only in (False, True):
            query = SearchQuery.build([question], limit=5, close_only=close_only)
            hits = (await repeated.searcher.search(query)).hits
            first = str(hits[0].messages[0]["body"])
            assert not first.startswith(PHISH), (question, close_only)
            assert not any(h.close and PHISH in str(h.messages[0]["body"]) for h in hits)
    own = await repeated.searcher.search(SearchQuery.build(["evil.example login"]))
    assert any(str(h.messages[0]["body"]).startswith(PHISH) for h in own.hits)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def orders(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Room]:
    """300 messages `order ORD1048NNN shipped to <city>`: one identifier each, alike."""
    cities = ("Berlin", "Lyon", "Porto", "Oslo", "Graz", "Turin")
    said = [("shop", f"order ORD1048{n:03d} shipped to {cities[n % 6]}") for n in range(300)]
    room = await index_room("orders", shared_pair(), tmp_path_factory.mktemp("orders"), said)
    yield room
    room.close()


async def test_a_stuffed_message_heads_no_search_it_does_not_answer(stuffed: Room) -> None:
    """Ten questions about the room's topics: each answer is among the first two a person is
    shown, and the stuffed message heads at most one list (ranker v4: ten of ten). `length`
    stops at the chunker's window and the question's words count where they stand together
    (`rank.passages`), not scattered over 3,000 characters."""
    headed = 0
    for question, answer in ASKED:
        query = SearchQuery.build([question], limit=5, close_only=True)
        bodies = [str(h.messages[0]["body"]) for h in (await stuffed.searcher.search(query)).hits]
        assert any(answer in b for b in bodies[:2]), (question, bodies[:2])
        headed += bodies[0].startswith(PHISH)
    assert headed <= 1
    lorem = await stuffed.searcher.search(SearchQuery.build(["zebra"], close_only=True))
    assert not any(h.close for h in lorem.hits)


async def test_an_identifier_is_found_among_its_look_alikes(orders: Room) -> None:
    """Each of 12 order numbers finds its own message first: a token holding a digit is matched
    whole (`rank.stemmed`), not by the four characters every order shares (ranker v4: 6 of 12
    outside the first five)."""
    for n in random.Random(11).sample(range(300), 12):
        number = f"ORD1048{n:03d}"
        result = await orders.searcher.search(SearchQuery.build([number]))
        assert number in str(result.hits[0].messages[0]["body"]), number


async def test_a_look_alike_identifier_is_no_close_match(orders: Room) -> None:
    """Regression (issue 46, low): `ORD1048088` was labelled a close match for `ORD1048068`.
    A window that does not hold the identifier asked for is never close: a person is shown
    the exact order alone among the close matches, an agent sees the others marked not close."""
    for n in random.Random(5).sample(range(300), 6):
        number = f"ORD1048{n:03d}"
        agent = await orders.searcher.search(SearchQuery.build([number], limit=10))
        close = [str(h.messages[0]["body"]) for h in agent.hits if h.close]
        assert close and all(number in b for b in close), (number, close)
        assert any(not h.close for h in agent.hits)
