"""`bench.loco`'s replay of the read path over a candidate cache (`bench.harness.replay`),
without a homeserver: each conversation scored by what the others fitted, and the shipped
coefficients' fit."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench import loco
from bench.harness import replay
from bench.harness.replay import Stage1


def _conversation(n: int) -> dict[str, object]:
    """Two questions; each question's evidence window is second by cosine, first lexically."""
    windows: dict[str, list[list[str]]] = {}
    questions = []
    for q in range(2):
        hit, miss = f"c{n}-q{q}-hit", f"c{n}-q{q}-miss"
        windows[hit] = [[f"D{q}:1", "@ann:x", f"the saxophone lesson {q} was on Monday"]]
        windows[miss] = [[f"D{q}:2", "@bo:x", "lovely weather in Lisbon today, a long walk"]]
        questions.append(
            {
                "text": f"When was saxophone lesson {q}?",
                "category": 2,
                "evidence": [f"D{q}:1"],
                "dense": [[miss, 0.8], [hit, 0.7]],
                "lexical": [[hit, 9.0], [miss, 1.0]],
                "lexical_nostop": [[hit, 9.0], [miss, 1.0]],
            }
        )
    spans = {pid: [1_000 * i, 1_000 * i + 500] for i, pid in enumerate(windows)}
    return {"sample_id": f"conv-{n}", "questions": questions, "windows": windows, "spans": spans}


def _cache(tmp_path: Path) -> Path:
    path = tmp_path / "candidates.json"
    doc = {"conversations": [_conversation(n) for n in range(3)]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_each_fold_is_scored_by_the_first_stage_replayed_as_the_read_path_does(
    tmp_path: Path,
) -> None:
    data = replay.load(_cache(tmp_path))
    assert data.names == ("conv-0", "conv-1", "conv-2")

    lexical = loco.folds(data, loco.fixed(Stage1(n=50, dense=0.0)))
    dense = loco.folds(data, loco.fixed(Stage1(n=50, lexical=0.0)))

    assert lexical["all"]["mrr"] == 1.0  # the evidence is first lexically, in every fold
    assert dense["all"]["mrr"] == 0.5  # and second by cosine
    assert set(lexical["folds"]) == {"conv-0", "conv-1", "conv-2"}
    assert lexical["categories"]["temporal"]["questions"] == 6


def test_train_fits_every_shipped_coefficient_and_a_floor(tmp_path: Path) -> None:
    model, floor = loco.train_all(replay.load(_cache(tmp_path)))

    assert set(model.ranker) >= {"bias", "best_message", "lexical_rr"}
    assert all(math.isfinite(w) for w in (*model.ranker.values(), *model.match.values()))
    assert 0.0 <= floor <= 0.5
