"""LoCoMo-format conversations, questions and retrieval metrics. Pure: no I/O beyond `load`.

A LoCoMo file is a JSON list of samples. Each sample has `conversation` (`speaker_a`,
`speaker_b`, `session_N` lists of turns `{speaker, dia_id, text}` and `session_N_date_time`
strings such as "1:56 pm on 8 May, 2023") and `qa` (questions with `evidence` dia_ids and a
`category`; 1–4 are answerable from the conversation, 5 is adversarial).

Metrics (issue 7): a system answers a question with ranked *hits*; a hit is the
messages it returns, each `(turn id, characters of returned text)`. Evidence recall within a
budget of B characters walks the hits in rank order and their messages in order, counting a
message's characters once, and stops at the first message that would take the total over B.
Recall@k is the share of evidence turns among the messages of the first k hits; MRR is
1 / rank of the first hit holding any evidence turn (0 if none of the hits does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ingest.search.ranking.rank import STOP_WORDS

__all__ = [
    "BUDGETS",
    "CATEGORIES",
    "HIT_CUTOFFS",
    "Conversation",
    "Hit",
    "Question",
    "Scores",
    "Turn",
    "budget_recall",
    "keywords",
    "load",
    "parse_conversations",
    "parse_session_time",
    "recall_at",
    "reciprocal_rank",
]

CATEGORIES = frozenset({1, 2, 3, 4})
BUDGETS = (1000, 2000, 4000)
HIT_CUTOFFS = (1, 5, 10)
TURN_SPACING_MS = 30_000  # turns of one session are this far apart

_SESSION = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    ts: int  # milliseconds since the epoch, UTC


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]  # dia_ids, de-duplicated, in the file's order
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]  # categories 1–4 with at least one known evidence turn


def parse_session_time(text: str) -> int:
    """ "1:56 pm on 8 May, 2023" → epoch milliseconds (read as UTC)."""
    cleaned = " ".join(text.replace(",", " ").split())
    when = datetime.strptime(cleaned, "%I:%M %p on %d %B %Y").replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _evidence_ids(raw: Iterable[Any]) -> list[str]:
    # A few entries join two ids in one string ("D8:6; D9:17"): read every id in each entry.
    out: dict[str, None] = {}
    for entry in raw:
        for dia_id in _DIA_ID.findall(str(entry)):
            out.setdefault(dia_id, None)
    return list(out)


def parse_conversations(samples: Sequence[Mapping[str, Any]]) -> list[Conversation]:
    """Samples of a LoCoMo file → conversations with their answerable questions."""
    conversations: list[Conversation] = []
    for i, sample in enumerate(samples):
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := _SESSION.match(key)) and isinstance(conv[key], list)
        )
        turns: list[Turn] = []
        for _n, key in sessions:
            start = parse_session_time(str(conv[f"{key}_date_time"]))
            for j, raw in enumerate(conv[key]):
                turns.append(
                    Turn(
                        dia_id=str(raw["dia_id"]),
                        speaker=str(raw["speaker"]),
                        text=str(raw.get("text", "")),
                        ts=start + j * TURN_SPACING_MS,
                    )
                )
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        for qa in sample.get("qa", []):
            category = int(qa.get("category", 0))
            evidence = [e for e in _evidence_ids(qa.get("evidence", [])) if e in known]
            if category in CATEGORIES and evidence:
                questions.append(Question(str(qa["question"]), tuple(evidence), category))
        conversations.append(
            Conversation(
                sample_id=str(sample.get("sample_id", f"sample-{i}")),
                speakers=(str(conv["speaker_a"]), str(conv["speaker_b"])),
                turns=tuple(turns),
                questions=tuple(questions),
            )
        )
    return conversations


def load(path: Path) -> list[Conversation]:
    with path.open(encoding="utf-8") as f:
        samples = json.load(f)
    if not isinstance(samples, list):
        raise ValueError(f"{path}: a LoCoMo file is a JSON list of samples")
    return parse_conversations(samples)


def keywords(question: str, n: int = 3) -> str:
    """The §9 keyword row: the n longest content words, stop words dropped, joined by ` or `.

    Ties keep the question's order. Possessives lose their `'s`. Empty if nothing is left.
    """
    text = question.lower().replace("\u2019", "'")
    text = re.sub(r"'s\b", "", text)
    words = list(dict.fromkeys(w for w in _WORD.findall(text) if w not in STOP_WORDS))
    longest = sorted(words, key=lambda w: -len(w))[:n]
    ordered = [w for w in words if w in longest]
    return " or ".join(ordered)


# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Hit:
    """One returned result: its messages as (turn id, characters of returned text), in order."""

    messages: tuple[tuple[str, int], ...]

    @property
    def turns(self) -> frozenset[str]:
        return frozenset(t for t, _ in self.messages)


def budget_recall(hits: Sequence[Hit], evidence: Iterable[str], budget: int) -> float:
    wanted = set(evidence)
    seen: set[str] = set()
    used = 0
    for hit in hits:
        for turn, chars in hit.messages:
            if turn in seen:
                continue
            if used + chars > budget:
                return len(wanted & seen) / len(wanted)
            used += chars
            seen.add(turn)
    return len(wanted & seen) / len(wanted)


def recall_at(hits: Sequence[Hit], evidence: Iterable[str], k: int) -> float:
    wanted = set(evidence)
    found: set[str] = set()
    for hit in hits[:k]:
        found |= hit.turns
    return len(wanted & found) / len(wanted)


def reciprocal_rank(hits: Sequence[Hit], evidence: Iterable[str]) -> float:
    wanted = set(evidence)
    for rank, hit in enumerate(hits, start=1):
        if hit.turns & wanted:
            return 1.0 / rank
    return 0.0


@dataclass
class Scores:
    """Running means of every metric over the questions a system answered."""

    sums: dict[str, float] = field(default_factory=dict)
    questions: int = 0

    def add(self, hits: Sequence[Hit], evidence: Sequence[str]) -> None:
        row: dict[str, float] = {}
        for b in BUDGETS:
            row[f"recall@{b}"] = budget_recall(hits, evidence, b)
        for k in HIT_CUTOFFS:
            row[f"recall@{k}"] = recall_at(hits, evidence, k)
        row["mrr"] = reciprocal_rank(hits, evidence)
        for key, value in row.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        self.questions += 1

    def as_json(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            key: round(self.sums.get(key, 0.0) / max(self.questions, 1), 4)
            for key in [*(f"recall@{b}" for b in BUDGETS), *(f"recall@{k}" for k in HIT_CUTOFFS)]
        }
        out["mrr"] = round(self.sums.get("mrr", 0.0) / max(self.questions, 1), 4)
        out["questions"] = self.questions
        return out
