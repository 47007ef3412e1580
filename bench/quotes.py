"""Which message a window matched by meaning quotes (rule 22b): the product's choice scored.

    python -m bench.quotes [--data ../shared/data/locomo-dev/locomo-dev.json
        --data ../shared/data/molweni-dev/molweni-dev.json] [--out FILE]

Each conversation is cut into the product's windows (`ingest.index.chunker.chunk`, the default
gap and size) and their embedded texts (`window_text`, `DENSE_LINE`, the speakers' names), and
embedded as the writer embeds them (`Embedder.embed_windows` of the default embedder: its
lines stored as the payload stores them, `linecodec`). For every question and every window of
two or more messages holding one of its evidence turns and some other turn (where every
message is evidence any choice is right), the message each way quotes is right when it is an
evidence turn:

- `product`: `ingest.search.quotes.best_of` over the stored lines, as the read path calls it;
- `lines`: `nearest_line` alone (the stored lines weighed with the words' share; no message
  holding every word first);
- `before`: the choice before issue 47: the words first, then a window sharing a content word
  quotes the message sharing most (`hits.best_message`), else the message whose body, embedded
  alone at query time, is nearest (`Nearest`, the pair's mean cosine);
- `words`: the message sharing most of the question's words.

`in_other_words`: windows none of whose messages holds a content word of the question. No
homeserver, no store: the chunker, the models and the product's choice only.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import SERVER_NAME, arguments, emit
from bench.harness.locomo import Conversation, load
from ingest.config import ChunkerConfig, EmbedderConfig, default_local_model
from ingest.embed import make_embedder
from ingest.embed.linecodec import decode_line, encode_line
from ingest.embed.pair import is_pair
from ingest.index.chunker import DENSE_LINE, chunk, window_text
from ingest.rules import lexical
from ingest.search.hits import CitedMessage, best_message
from ingest.search.matches import Terms, literal_matches
from ingest.search.quotes import best_of, nearest_line
from ingest.types import EventID, Message, RoomID, UserID, Window

WAYS = ("product", "lines", "before", "words")
DEFAULT_DATA = (
    Path("../shared/data/locomo-dev/locomo-dev.json"),
    Path("../shared/data/molweni-dev/molweni-dev.json"),
)


def windows(conv: Conversation) -> tuple[list[Window], dict[str, str]]:
    """The conversation's windows as the writer cuts them, and the speakers' names."""
    cfg = ChunkerConfig()
    names = {f"@{t.speaker.lower()}:{SERVER_NAME}": t.speaker for t in conv.turns}
    messages = [
        Message(
            EventID(t.dia_id),
            RoomID(f"!{conv.sample_id}:{SERVER_NAME}"),
            UserID(f"@{t.speaker.lower()}:{SERVER_NAME}"),
            t.ts,
            t.text,
        )
        for t in conv.turns
        if t.text.strip()
    ]
    cut = chunk(messages, gap_seconds=cfg.gap_seconds, max_bytes=cfg.max_bytes, names=names)
    return cut, names


def _cited(w: Window) -> list[CitedMessage]:
    return [
        CitedMessage(event_id=m.event_id, sender=m.sender, ts=m.ts, body=m.body)
        for m in w.messages
    ]


async def score(path: Path, model: str) -> dict[str, Any]:
    embedder = make_embedder(EmbedderConfig(kind="local", model=model))
    pair = is_pair(embedder.identity)
    right: dict[str, Counter[str]] = defaultdict(Counter)
    sizes: Counter[str] = Counter()
    try:
        for conv in load(path):
            cut, names = windows(conv)
            texts = [window_text(w, names, ChunkerConfig().max_bytes, DENSE_LINE) for w in cut]
            stored = await embedder.embed_windows(texts)
            questions = [q.text for q in conv.questions]
            asked = dict(zip(questions, await embedder.embed_queries(questions), strict=True))
            bodies = sorted({m.body for w in cut for m in w.messages})
            alone = dict(zip(bodies, await embedder.embed_documents(bodies), strict=True))
            where: dict[str, int] = {m.event_id: k for k, w in enumerate(cut) for m in w.messages}
            for q in conv.questions:
                evidence = set(q.evidence)
                for k in sorted({where[e] for e in q.evidence if e in where}):
                    w = cut[k]
                    ids = [m.event_id for m in w.messages]
                    if len(ids) < 2 or all(i in evidence for i in ids):
                        continue
                    cited = _cited(w)
                    lines: dict[str, str] = {
                        m.event_id: encode_line(v)
                        for m, v in zip(w.messages, stored[k].lines[1:], strict=False)
                        if v is not None
                    }
                    query = [asked[q.text]]
                    chosen = {
                        "product": best_of(cited, lines, [q.text], query, pair=pair)[1],
                        "lines": nearest_line(cited, lines, query, [q.text], pair=pair) or ids[0],
                        "before": _before(cited, q.text, asked[q.text], alone),
                        "words": best_message(cited, [q.text]),
                    }
                    words = Terms.of(q.text).words
                    other = not any(words.intersection(lexical.tokens(m.body)) for m in w.messages)
                    for scope in ["all", *(["in_other_words"] if other else [])]:
                        sizes[scope] += 1
                        for way in WAYS:
                            right[scope][way] += chosen[way] in evidence
    finally:
        await embedder.close()
    return {
        "data": str(path),
        "model": model,
        **{
            scope: {"n": n, **{w: round(right[scope][w] / n, 3) for w in WAYS}}
            for scope, n in sizes.items()
        },
        "line_bytes": len(encode_line([0.0] * embedder.identity.dimension)),
        "codec_max_error": _codec_error(embedder.identity.dimension),
    }


def _before(
    cited: Sequence[CitedMessage], question: str, q: list[float], alone: dict[str, list[float]]
) -> str:
    matched = literal_matches(cited, [question])
    if matched:
        return matched[0]
    words = Terms.of(question).words
    if any(words.intersection(lexical.tokens(str(m["body"]))) for m in cited):
        return best_message(cited, [question])
    scores = [float(np.dot(q, alone[str(m["body"])])) for m in cited]
    return str(cited[int(np.argmax(scores))]["event_id"])


def _codec_error(dimension: int) -> float:
    """The largest change of a cosine read through `linecodec`, over random unit vectors."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(200):
        a, b = rng.normal(size=(2, dimension))
        a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
        decoded = decode_line(encode_line(a.tolist()))
        assert decoded is not None
        worst = max(worst, abs(float(np.dot(decoded, b) - np.dot(a, b))))
    return round(worst, 5)


async def run(paths: Sequence[Path], model: str) -> list[dict[str, Any]]:
    return [await score(p, model) for p in paths]


def main(argv: Sequence[str] | None = None) -> int:
    p = arguments("bench.quotes", __doc__)
    p.add_argument("--data", type=Path, action="append")
    p.add_argument("--model", default=None, help="embedder.model (default: the product's)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    emit(
        asyncio.run(run(args.data or DEFAULT_DATA, args.model or default_local_model())), args.out
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["main", "run", "score"]
