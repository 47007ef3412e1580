"""`bench.load`'s reading of py-spy's raw stacks."""

from __future__ import annotations

from bench.harness.probes import top_costs


def test_top_costs_counts_a_function_once_per_sample_and_splits_per_command() -> None:
    raw = "\n".join(
        [
            "main (a.py:1);handle (b.py:5);fold (c.py:9) 30",
            "main (a.py:1);handle (b.py:5) 10",
            "main (a.py:1);recurse (d.py:2);recurse (d.py:2) 20",
            "garbage line",
        ]
    )
    rows = {name: (inclusive, own) for name, inclusive, own in top_costs(raw, 2, rate=100)}
    assert rows["main (a.py:1)"] == (300.0, 0.0)  # 60 samples × 10 ms ÷ 2 commands
    assert rows["handle (b.py:5)"] == (200.0, 50.0)
    assert rows["fold (c.py:9)"] == (150.0, 150.0)
    assert rows["recurse (d.py:2)"] == (100.0, 100.0)  # twice on one stack, counted once
