"""The LoCoMo loader and the retrieval metrics of `bench.harness.locomo`, on a tiny hand-made
fixture."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.harness.locomo import (
    Hit,
    Scores,
    budget_recall,
    keywords,
    load,
    parse_session_time,
    recall_at,
    reciprocal_rank,
)

SAMPLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "I adopted a dog."},
            ],
            "session_2_date_time": "12:09 am on 13 September, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "How is the dog?"}],
            "session_3_date_time": "9:00 am on 1 October, 2023",  # a date with no session
        },
        "qa": [
            {"question": "What did Bo adopt?", "evidence": ["D1:2"], "category": 1},
            {"question": "Two?", "evidence": ["D1:2; D2:1"], "category": 2},
            {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
            {"question": "No evidence", "evidence": [], "category": 4},
            {"question": "Unknown turn", "evidence": ["D9:9"], "category": 3},
        ],
    }
]


def test_load(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    [conv] = load(path)
    assert conv.sample_id == "conv-x"
    assert conv.speakers == ("Ann", "Bo")
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    start = int(datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp() * 1000)
    assert [t.ts for t in conv.turns[:2]] == [start, start + 30_000]
    assert conv.turns[2].ts == int(datetime(2023, 9, 13, 0, 9, tzinfo=UTC).timestamp() * 1000)
    # Categories 1–4 with known evidence only; "a; b" entries are split.
    assert [(q.text, q.evidence) for q in conv.questions] == [
        ("What did Bo adopt?", ("D1:2",)),
        ("Two?", ("D1:2", "D2:1")),
    ]


def test_load_refuses_non_list(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="JSON list"):
        load(path)


def test_session_time_noon_and_midnight() -> None:
    noon = parse_session_time("12:30 pm on 1 January, 2024")
    midnight = parse_session_time("12:30 am on 1 January, 2024")
    assert noon - midnight == 12 * 3600 * 1000


def test_keywords() -> None:
    # Ties (lgbtq, group: 5 letters) keep the question's order.
    assert keywords("When did Caroline go to the LGBTQ support group?") == (
        "caroline or lgbtq or support"
    )
    assert keywords("What is Melanie's favourite book?") == "melanie or favourite or book"
    assert keywords("What did you do?") == ""


def hit(*turns: tuple[str, int]) -> Hit:
    return Hit(tuple(turns))


def test_budget_recall_stops_at_the_first_message_over_budget() -> None:
    hits = [hit(("a", 400), ("b", 400)), hit(("c", 300)), hit(("d", 10))]
    assert budget_recall(hits, ["b"], 800) == 1.0
    assert budget_recall(hits, ["b"], 799) == 0.0
    assert budget_recall(hits, ["c", "d"], 1100) == 0.5  # c fits (1100), d does not
    assert budget_recall(hits, ["c", "d"], 1110) == 1.0
    # A message returned twice costs its characters once.
    assert budget_recall([hit(("a", 600)), hit(("a", 600), ("b", 400))], ["b"], 1000) == 1.0


def test_recall_at_and_mrr() -> None:
    hits = [hit(("a", 1)), hit(("b", 1), ("c", 1)), hit(("d", 1))]
    assert recall_at(hits, ["c", "d"], 1) == 0.0
    assert recall_at(hits, ["c", "d"], 2) == 0.5
    assert recall_at(hits, ["c", "d"], 10) == 1.0
    assert reciprocal_rank(hits, ["c", "d"]) == 0.5
    assert reciprocal_rank(hits, ["z"]) == 0.0


def test_scores_are_means() -> None:
    s = Scores()
    s.add([hit(("a", 10))], ["a"])
    s.add([hit(("b", 10))], ["a"])
    row = s.as_json()
    assert row["recall@1"] == 0.5
    assert row["mrr"] == 0.5
    assert row["recall@1000"] == 0.5
    assert row["questions"] == 2
