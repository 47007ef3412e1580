"""`bench.retrieval`'s questions: every system asked every question, the answers scored, and
the Markdown table of the scores."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from bench.locomo import BUDGETS, HIT_CUTOFFS, Hit, Scores, keywords
from bench.retrieval_setup import Settings, log
from bench.synapse_run import SeededRoom, synapse_search
from ingest.embed import Embedder
from ingest.hits import Hit as MuninnHit
from ingest.query import MAX_LIMIT, SearchQuery
from ingest.search import Searcher
from ingest.store import Store
from tests.homeserver import MatrixUser

LIMIT = MAX_LIMIT  # hits asked of every system

# ---------------------------------------------------------------- asking


def muninn_hit(hit: MuninnHit, dia_ids: Mapping[str, str]) -> Hit:
    return Hit(
        tuple(
            (dia_ids.get(str(m["event_id"]), str(m["event_id"])), len(str(m["body"])))
            for m in hit.messages
        )
    )


async def ask_muninn(
    searcher: Searcher, rooms: Sequence[SeededRoom], scores: Scores, by_cat: dict[int, Scores]
) -> list[str]:
    warnings: set[str] = set()
    for room in rooms:
        for q in room.conversation.questions:
            query = SearchQuery.build([q.text], room_ids=[room.room_id], limit=LIMIT)
            result = await searcher.search(query)
            warnings.update(result.warnings)
            hits = [muninn_hit(h, room.dia_ids) for h in result.hits]
            scores.add(hits, q.evidence)
            by_cat.setdefault(q.category, Scores()).add(hits, q.evidence)
    return sorted(warnings)


async def ask_synapse(
    user: MatrixUser,
    rooms: Sequence[SeededRoom],
    scores: Scores,
    by_cat: dict[int, Scores],
    *,
    as_keywords: bool,
) -> int:
    """Score Synapse's answers; returns how many searches it refused (scored as no hits)."""
    refused = 0
    for room in rooms:
        for q in room.conversation.questions:
            term = keywords(q.text) if as_keywords else q.text
            answer = await synapse_search(user, room.room_id, term, LIMIT)
            refused += answer.error is not None
            hits = [Hit(((room.dia_ids.get(e, e), len(body)),)) for e, body in answer.events]
            scores.add(hits, q.evidence)
            by_cat.setdefault(q.category, Scores()).add(hits, q.evidence)
    return refused


def searchers(
    store: Store, embedder: Embedder, server_name: str, s: Settings
) -> dict[str, Searcher]:
    def make(weights: dict[str, float]) -> Searcher:
        return Searcher(
            store, embedder, server_name=server_name, candidates=s.candidates, weights=weights
        )

    rows = {
        "muninn-hybrid": make({"dense": s.dense_weight, "lexical": s.lexical_weight}),
        "muninn-dense": make({"dense": 1.0, "lexical": 0.0}),
        "muninn-lexical": make({"dense": 0.0, "lexical": 1.0}),
    }
    if s.proposed:  # the product without its second stage: what the ranker adds
        rows["muninn-hybrid-rrf-only"] = Searcher(
            store,
            embedder,
            server_name=server_name,
            candidates=s.candidates,
            weights={"dense": s.dense_weight, "lexical": s.lexical_weight},
            ranker=False,
        )
    return rows


async def ask_synapse_rows(
    db: str,
    reader: MatrixUser,
    rooms: Sequence[SeededRoom],
    systems: dict[str, Scores],
    categories: dict[str, dict[int, Scores]],
) -> dict[str, int]:
    """The `synapse-DB` (question as typed) and `synapse-DB-keywords` rows; refusals by row."""
    refused: dict[str, int] = {}
    for name, as_kw in ((f"synapse-{db}", False), (f"synapse-{db}-keywords", True)):
        t = time.monotonic()
        systems[name], categories[name] = Scores(), {}
        refused[name] = await ask_synapse(
            reader, rooms, systems[name], categories[name], as_keywords=as_kw
        )
        log(f"{name}: {time.monotonic() - t:.1f}s, {refused[name]} refused")
    return refused


# ---------------------------------------------------------------- report


COLUMNS = [
    *(f"recall@{b}" for b in BUDGETS),
    *(f"recall@{k}" for k in HIT_CUTOFFS),
    "mrr",
    "questions",
]


def table(systems: Mapping[str, Mapping[str, float | int]]) -> str:
    """A Markdown table: one row a system. Budget columns are characters, @k columns hits."""
    heads = ["system", "R@1000ch", "R@2000ch", "R@4000ch", "R@1", "R@5", "R@10", "MRR", "n"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    for name, row in systems.items():
        cells = [name]
        for col in COLUMNS:
            v = row[col]
            cells.append(str(v) if col == "questions" else f"{float(v):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
