"""PNG plots of the benchmark results: recall vs context budget, search latency vs index size.

    python -m bench.plots [--in bench/out] [--out bench/]

Reads `retrieval.json` (`bench.retrieval --out`) and every `latency*.json` (`bench.latency
--out`; rows of the same size in several files: the first file in name order wins) from `--in`
and writes `recall_vs_budget.png` and `latency_vs_size.png` into `--out`. Needs the `bench`
extra (matplotlib).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import arguments

BUDGETS = (1000, 2000, 4000)
_STYLE = {
    "muninn-hybrid": ("tab:blue", "-", "o"),
    "muninn-dense": ("tab:green", "--", "s"),
    "muninn-lexical": ("tab:orange", "--", "^"),
    "muninn-hybrid-rrf-only": ("tab:purple", ":", "D"),
    "synapse-sqlite": ("tab:red", "-", "x"),
    "synapse-sqlite-keywords": ("tab:red", ":", "v"),
    "synapse-postgres": ("tab:brown", "-", "+"),
    "synapse-postgres-keywords": ("tab:brown", ":", "<"),
}


def recall_plot(retrieval: dict[str, Any], out: Path) -> Path:
    systems: dict[str, dict[str, Any]] = retrieval["systems"]
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=120)
    for name, row in systems.items():
        color, line, marker = _STYLE.get(name, ("tab:gray", "-", "."))
        ys = [float(row[f"recall@{b}"]) for b in BUDGETS]
        n = row.get("questions", "?")
        label = f"{name}: {' / '.join(f'{y:.3f}' for y in ys)} (n={n})"
        ax.plot(BUDGETS, ys, color=color, linestyle=line, marker=marker, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(BUDGETS, [f"{b:,}" for b in BUDGETS])
    ax.set_xlabel("context budget (characters of returned message text)")
    ax.set_ylabel("evidence recall within the budget")
    ax.set_ylim(0, 1)
    ax.set_title("LoCoMo dev: evidence recall vs context budget")
    ax.grid(True, alpha=0.3)
    ax.legend(
        fontsize=8,
        loc="upper left",
        title="recall at 1,000 / 2,000 / 4,000 chars",
        title_fontsize=8,
    )
    path = out / "recall_vs_budget.png"
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _latency_rows(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    rows: dict[int, dict[str, Any]] = {}
    e2e: dict[str, Any] | None = None
    for f in sorted(folder.glob("latency*.json")):
        doc = json.loads(f.read_text())
        for row in doc.get("in_process", []):
            rows.setdefault(int(row["messages"]), row)
        if e2e is None and "end_to_end" in doc:
            e2e = doc["end_to_end"]
    return [rows[k] for k in sorted(rows)], e2e


def latency_plot(folder: Path, out: Path) -> Path | None:
    rows, e2e = _latency_rows(folder)
    if not rows:
        return None
    xs = [int(r["messages"]) for r in rows]
    fig, ax = plt.subplots(figsize=(10.5, 5.5), dpi=120)
    series = [
        ("hybrid", "tab:blue", "Searcher hybrid (incl. query embedding)"),
        ("lexical", "tab:orange", "Searcher lexical only"),
        ("query_embedding", "tab:gray", "query embedding alone"),
    ]
    for key, color, label in series:
        ax.plot(
            xs, [r[key]["p50_ms"] for r in rows], color=color, marker="o", label=f"{label} p50"
        )
        ax.plot(xs, [r[key]["p99_ms"] for r in rows], color=color, marker="^", linestyle="--",
                label=f"{label} p99")  # fmt: skip
    for r in rows:
        synthetic = r["dense_vectors"].get("perturbed_copies", 0)
        note = f"{r['points']:,} points" + (" (dense mostly synthetic)" if synthetic else "")
        ax.annotate(note, (int(r["messages"]), r["hybrid"]["p99_ms"]), fontsize=7,
                    textcoords="offset points", xytext=(4, 6))  # fmt: skip
    if e2e is not None:
        n = e2e["room_messages"]
        for key, color, label in (
            ("bang_search_client", "tab:red", "!search → reply"),
            ("synapse_search", "tab:brown", "Synapse POST /search"),
        ):
            ax.scatter([n], [e2e[key]["p50_ms"]], color=color, marker="*", s=80,
                       label=f"{label} p50 ({n:,}-message room)")  # fmt: skip
            ax.scatter([n], [e2e[key]["p99_ms"]], color=color, marker="P", s=50,
                       label=f"{label} p99")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("indexed messages (one room)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("Search latency vs index size (embedded store, 2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlim(min([*xs, e2e["room_messages"] if e2e else xs[0]]) / 1.6, max(xs) * 2.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    path = out / "latency_vs_size.png"
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.plots", __doc__)
    p.add_argument("--in", dest="src", type=Path, default=Path("bench/out"))
    p.add_argument("--out", type=Path, default=Path("bench"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    retrieval = args.src / "retrieval.json"
    if retrieval.is_file():
        written.append(recall_plot(json.loads(retrieval.read_text()), args.out))
    else:
        print(f"no {retrieval}: recall plot skipped", file=sys.stderr)
    lat = latency_plot(args.src, args.out)
    if lat is None:
        print(f"no latency*.json in {args.src}: latency plot skipped", file=sys.stderr)
    else:
        written.append(lat)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
