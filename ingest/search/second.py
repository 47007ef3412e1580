"""`ingest.search.second`: the second stage — the fused candidates re-ordered, the floor applied.

When both retrievers answered, the ranker of `ingest.search.ranking` (`rank`'s features, the
model trained for the embedder, `models.for_embedder`) re-orders the first stage's fused
candidates over their shown messages and judges which match closely (`judgment.Judgment`); a
query of made-up words (a wordless text near the embedder's direction of them,
`RankModel.made_up`) answers nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ingest.embed import Embedder
from ingest.errors import EmbedError, EmbedUnavailable
from ingest.search.hits import has_text, window_of, window_span
from ingest.search.quotes import second_by_lines
from ingest.search.ranking import judgment, models
from ingest.search.ranking.fusion import text_key
from ingest.search.ranking.models import RankModel
from ingest.types import EmbedderIdentity, StoredPoint

__all__ = ["SecondStage"]


@dataclass
class SecondStage:
    """The ranker of a `Searcher`: `relevance_floor` None takes the model's own floors."""

    embedder: Embedder | None
    relevance_floor: float | None = None
    # The embedder's direction of made-up words (`_made_up`), for the identity it was taken.
    _nonsense: tuple[EmbedderIdentity, list[float]] | None = field(default=None, repr=False)

    async def rerank(
        self,
        fused: Sequence[tuple[str, float]],
        lists: Mapping[tuple[str, str], Sequence[tuple[str, float]]],
        points: Mapping[str, StoredPoint],
        texts: Sequence[str],
        dense: Sequence[Sequence[float]],
    ) -> judgment.Judgment:
        """The fused candidates re-ordered by `rank`'s model, each judged close or not."""
        made_up = await self._made_up(texts, dense)
        ids = [pid for pid, _ in fused]
        shown = {
            pid: [m for m in points[pid].payload.get("messages", []) if has_text(m)] for pid in ids
        }
        bodies = {pid: [str(m["body"]) for m in ms] for pid, ms in shown.items()}
        senders = {pid: [str(m["sender"]) for m in ms] for pid, ms in shown.items()}
        spans = {pid: window_span(window_of(points[pid]), ms) for pid, ms in shown.items() if ms}
        per_text: dict[str, tuple[judgment.Found, judgment.Found, judgment.Found]] = {}
        vectors = dict(zip(texts, dense, strict=False))
        windows = {pid: (bodies[pid], points[pid].payload.get("lines")) for pid in ids}
        for retriever, text in lists:
            if retriever == "dense":  # one entry a text, as the fusion counts it
                per_text.setdefault(
                    text_key(text),
                    (
                        lists[("dense", text)],
                        lists[("lexical", text)],
                        second_by_lines(
                            lists.get(("dense2", text), ()), windows, vectors.get(text), text
                        ),
                    ),
                )
        model = self._model()
        if self.relevance_floor is None:
            floor, wordless = model.floor, model.wordless_floor
        else:
            floor = wordless = self.relevance_floor
        return judgment.rerank(
            ids,
            bodies,
            per_text,
            senders,
            spans=spans,
            coefficients=model.coefficients,
            match=model.match,
            floor=floor,
            wordless_floor=wordless,
            made_up=None if made_up is None else {text_key(t) for t in made_up},
            ranked_floor=model.ranked_floor,
        )

    def _model(self) -> RankModel:
        return models.for_embedder(self.embedder.identity.model if self.embedder else "")

    async def _made_up(
        self, texts: Sequence[str], vectors: Sequence[Sequence[float]]
    ) -> list[str] | None:
        """The texts near the embedder's made-up words (`RankModel.made_up`); the direction of
        those is embedded once a searcher. None where there is no such direction (the model has
        none, a floor is configured, or it cannot be embedded): `judgment.rerank` then takes a
        wordless text that nothing matches for nonsense."""
        threshold = self._model().made_up
        if threshold is None or self.embedder is None or self.relevance_floor is not None:
            return None
        if self._nonsense is None or self._nonsense[0] != self.embedder.identity:
            try:
                refs = await self.embedder.embed_queries(list(models.MADE_UP))
            except (EmbedError, EmbedUnavailable):
                return None
            self._nonsense = (self.embedder.identity, models.unit_mean(refs))
        return models.near(texts, vectors, self._nonsense[1], threshold)
