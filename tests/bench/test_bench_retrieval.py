"""`bench.retrieval` end to end on a tiny LoCoMo-format file: the real Synapse (on SQLite and on
PostgreSQL), the real writer and embedder, and the JSON file other tools read (issue 7.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.harness.retrieval_setup import Settings
from bench.harness.synapse import postgres_problem
from bench.retrieval import run

# Written from LoCoMo's format: sessions with their date lines, turns with dia_ids, questions
# with evidence. "Who has dogs?" is the probe that tells the two Synapses apart: PostgreSQL's
# English full-text search stems "dogs" and drops "who"/"has", SQLite's FTS wants every word.
CONVERSATION = {
    "sample_id": "conv-t",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo! How was the weekend?"},
            {
                "speaker": "Bo",
                "dia_id": "D1:2",
                "text": "Great, I adopted a dog from the shelter on Saturday.",
            },
            {
                "speaker": "Ann",
                "dia_id": "D1:3",
                "text": "Lovely. I started saxophone lessons with my teacher Marguerite.",
            },
        ],
        "session_2_date_time": "9:10 am on 20 June, 2023",
        "session_2": [
            {
                "speaker": "Bo",
                "dia_id": "D2:1",
                "text": "The puppy chewed my running shoes, so I bought new ones in Lisbon.",
            },
            {
                "speaker": "Ann",
                "dia_id": "D2:2",
                "text": "Marguerite says my saxophone tone is improving.",
            },
        ],
    },
    "qa": [
        {"question": "Who has dogs?", "evidence": ["D1:2"], "category": 4},
        {"question": "Who teaches Ann the saxophone?", "evidence": ["D1:3"], "category": 4},
        {"question": "Where did Bo buy new running shoes?", "evidence": ["D2:1"], "category": 2},
        {"question": "Adversarial: not scored", "evidence": ["D1:1"], "category": 5},
    ],
}
KEYS = {"recall@1000", "recall@2000", "recall@4000", "recall@1", "recall@5", "recall@10", "mrr"}
CONTRACT_NAMES = {
    "muninn-hybrid",
    "muninn-dense",
    "muninn-lexical",
    "synapse-sqlite",
    "synapse-postgres",
}


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return path


@pytest.mark.synapse  # its own Synapse, on PostgreSQL
@pytest.mark.skipif(
    (problem := postgres_problem()) is not None, reason=f"no PostgreSQL here: {problem}"
)
async def test_retrieval_bench_measures_synapse_on_postgres_and_writes_the_contract(
    tmp_path: Path,
) -> None:
    out = tmp_path / "retrieval.json"
    result = await run(_write(tmp_path), out, Settings(), "postgres")

    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["systems"] == result["systems"]
    systems = written["systems"]
    assert set(systems) >= CONTRACT_NAMES
    for name in CONTRACT_NAMES:
        assert KEYS | {"questions"} <= set(systems[name]), name
        assert systems[name]["questions"] == 3, name  # category 5 is not scored
    assert written["run"]["postgres"].startswith("postgres (PostgreSQL)")
    assert set(written["run"]["seed_seconds"]) == {"sqlite", "postgres"}
    # Every answer is one message Muninn can find.
    assert systems["muninn-hybrid"]["recall@2000"] == 1.0
    # The PostgreSQL row is PostgreSQL's ranking, not a copy of SQLite's: only it finds the
    # dog from "Who has dogs?" as typed.
    assert systems["synapse-postgres"]["recall@4000"] > systems["synapse-sqlite"]["recall@4000"]
