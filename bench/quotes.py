"""Which message a window matched by meaning quotes (rule 22b): each model's choice scored.

    python -m bench.quotes [--data ../shared/data/locomo-dev/locomo-dev.json
        --data ../shared/data/molweni-dev/molweni-dev.json] [--out FILE]

Each conversation is cut into the product's windows (`ingest.index.chunker.chunk`, the default
gap and size). For every question and every window of two or more messages holding one of its
evidence turns (and some other turn: where every message is evidence any choice is right), the
message each way would quote is scored right when it is an evidence turn:

- `pair`: the mean of MiniLM's and e5's cosines (the pair's joined vectors: what `Nearest`
  compared before issue 34's second pass);
- `minilm`, `e5`: that model's cosine alone (its own query and document prefixes);
- `words`: the message sharing most of the question's words (`hits.best_message`: what a
  window sharing words quotes, and an agent's list).

`in_other_words` is the product's case: windows none of whose messages holds a content word of
the question, the only ones `Nearest` embeds. `e5_vs_pair` counts the questions one of the two
got right and the other wrong (a sign test's counts). No homeserver, no store: the models and
the chunker only.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import SERVER_NAME, arguments, emit
from bench.e5native import embedder_for
from bench.locomo import Conversation, Turn, load
from ingest.config import ChunkerConfig
from ingest.index.chunker import chunk
from ingest.rules import lexical
from ingest.search.hits import best_message
from ingest.search.matches import Terms
from ingest.types import EventID, Message, RoomID, UserID

WAYS = ("pair", "minilm", "e5", "words")
DEFAULT_DATA = (
    Path("../shared/data/locomo-dev/locomo-dev.json"),
    Path("../shared/data/molweni-dev/molweni-dev.json"),
)
# conversation, question, evidence, window
Case = tuple[str, str, frozenset[str], tuple[Turn, ...]]


def windows(conv: Conversation) -> list[tuple[Turn, ...]]:
    """The conversation's windows as the writer cuts them."""
    cfg = ChunkerConfig()
    by_id = {t.dia_id: t for t in conv.turns}
    messages = [
        Message(
            EventID(t.dia_id),
            RoomID(f"!{conv.sample_id}:{SERVER_NAME}"),
            UserID(f"@{t.speaker.lower()}:{SERVER_NAME}"),
            t.ts,
            t.text,
        )
        for t in conv.turns
    ]
    cut = chunk(messages, gap_seconds=cfg.gap_seconds, max_bytes=cfg.max_bytes, names={})
    return [tuple(by_id[m.event_id] for m in w.messages) for w in cut]


def cases(conv: Conversation) -> list[Case]:
    where = {t.dia_id: w for w in windows(conv) for t in w}
    out: list[Case] = []
    for q in conv.questions:
        evidence = frozenset(q.evidence)
        seen: set[int] = set()
        for e in q.evidence:
            w = where[e]
            if id(w) in seen or len(w) < 2 or all(t.dia_id in evidence for t in w):
                continue
            seen.add(id(w))
            out.append((conv.sample_id, q.text, evidence, w))
    return out


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def _vectors(model: str, texts: list[str], questions: list[str]) -> Any:
    embedder = embedder_for(model)
    try:
        docs = await embedder.embed_documents(texts)
        queries = await embedder.embed_queries(questions)
    finally:
        await embedder.close()
    return dict(zip(texts, docs, strict=True)), dict(zip(questions, queries, strict=True))


async def score(path: Path) -> dict[str, Any]:
    found = [c for conv in load(path) for c in cases(conv)]
    texts = sorted({t.text for *_, w in found for t in w})
    questions = sorted({q for _, q, _, _ in found})
    mini = await _vectors("minilm", texts, questions)
    e5 = await _vectors("multilingual-e5-small", texts, questions)

    def cos(vectors: Any, question: str, turn: Turn) -> float:
        return _cosine(vectors[1][question], vectors[0][turn.text])

    right: dict[str, Counter[str]] = defaultdict(Counter)  # scope → way → right
    sizes: Counter[str] = Counter()
    versus: Counter[str] = Counter()
    for conv, question, evidence, w in found:
        picks = {
            "pair": max(w, key=lambda t: cos(mini, question, t) + cos(e5, question, t)),
            "minilm": max(w, key=lambda t: cos(mini, question, t)),
            "e5": max(w, key=lambda t: cos(e5, question, t)),
        }
        said = [{"event_id": t.dia_id, "body": t.text} for t in w]
        chosen = {k: t.dia_id for k, t in picks.items()}
        chosen["words"] = best_message(said, [question])  # type: ignore[arg-type]
        words = Terms.of(question).words
        other = not any(words.intersection(lexical.tokens(t.text)) for t in w)
        scopes = ["all", *(["in_other_words", f"in_other_words {conv}"] if other else [])]
        for scope in scopes:
            sizes[scope] += 1
            for way in WAYS:
                right[scope][way] += chosen[way] in evidence
        if other:
            e5_ok, pair_ok = chosen["e5"] in evidence, chosen["pair"] in evidence
            versus["e5 right, pair wrong"] += e5_ok and not pair_ok
            versus["pair right, e5 wrong"] += pair_ok and not e5_ok
    return {
        "data": str(path),
        "windows": len(found),
        **{
            scope: {"n": n, **{w: round(right[scope][w] / n, 3) for w in WAYS}}
            for scope, n in sizes.items()
        },
        "e5_vs_pair": dict(versus),
    }


async def run(paths: Sequence[Path]) -> list[dict[str, Any]]:
    return [await score(p) for p in paths]


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.quotes", __doc__)
    p.add_argument("--data", type=Path, action="append")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    emit(asyncio.run(run(args.data or DEFAULT_DATA)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
