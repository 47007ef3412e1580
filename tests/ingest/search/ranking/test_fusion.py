"""Reciprocal rank fusion, docs/ARCHITECTURE.md §2: deterministic, two votes beat one, no double
counting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.search.ranking.fusion import rrf, text_key

IDS = st.lists(st.sampled_from("abcdefgh"), max_size=8)


def test_rrf_one_list_keeps_its_order() -> None:
    """A single list comes back in exactly its own order."""
    fused = rrf({("dense", "q"): ["c", "a", "b"]})
    assert [point_id for point_id, _ in fused] == ["c", "a", "b"]


def test_rrf_score_is_reciprocal_rank() -> None:
    """Each list contributes 1/(k + rank), rank starting at 1."""
    fused = dict(rrf({("dense", "q"): ["a", "b"], ("sparse", "q"): ["b"]}, k=60))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_rrf_first_in_two_lists_outranks_first_in_one() -> None:
    """An id ranked first by two retrievers beats an id ranked first by one."""
    fused = rrf({("dense", "q"): ["a", "b"], ("sparse", "q"): ["a", "c"], ("dense", "r"): ["d"]})
    assert fused[0][0] == "a"
    assert dict(fused)["a"] > dict(fused)["d"]


@pytest.mark.parametrize("duplicate", ["q", "Q", "  q ", "q\n"])
def test_rrf_duplicated_text_does_not_count_twice(duplicate: str) -> None:
    """The same text given twice (up to case and spacing) is one vote per retriever."""
    once = rrf({("dense", "q"): ["a"], ("dense", "other"): ["b"]})
    twice = rrf({("dense", "q"): ["a"], ("dense", duplicate): ["a"], ("dense", "other"): ["b"]})
    assert twice == once


def test_rrf_same_text_other_retriever_counts() -> None:
    """The same text through a different retriever is a separate vote."""
    fused = dict(rrf({("dense", "q"): ["a"], ("sparse", "q"): ["a"]}))
    assert fused["a"] == pytest.approx(2 / 61)


def test_rrf_repeated_id_in_one_list_counts_once_at_best_rank() -> None:
    """An id listed twice by one retriever counts once, at its better rank."""
    fused = dict(rrf({("dense", "q"): ["a", "b", "a"]}))
    assert fused["a"] == pytest.approx(1 / 61)


def test_rrf_ties_break_by_best_rank_then_id() -> None:
    """Equal scores order by best rank, then id, whatever the input order."""
    lists = {("dense", "x"): ["b", "a"], ("sparse", "x"): ["a", "b"], ("dense", "y"): ["z"]}
    fused = rrf(lists)
    assert [point_id for point_id, _ in fused] == ["a", "b", "z"]
    assert rrf(dict(reversed(list(lists.items())))) == fused


def test_rrf_weights_scale_a_retriever() -> None:
    """A retriever's weight multiplies its contributions; the default is 1."""
    lists = {("dense", "q"): ["a"], ("sparse", "q"): ["b"]}
    fused = rrf(lists, weights={"sparse": 2.0})
    assert [point_id for point_id, _ in fused] == ["b", "a"]
    assert dict(fused)["b"] == pytest.approx(2 / 61)
    assert dict(fused)["a"] == pytest.approx(1 / 61)


def test_rrf_zero_weight_drops_the_retriever() -> None:
    """Weight 0 removes a retriever's ids entirely."""
    fused = rrf({("dense", "q"): ["a"], ("sparse", "q"): ["b"]}, weights={"dense": 0.0})
    assert [point_id for point_id, _ in fused] == ["b"]
    assert fused[0][1] == pytest.approx(1 / 61)


@pytest.mark.parametrize(("k", "weights"), [(-1, None), (60, {"dense": -0.5})])
def test_rrf_rejects_bad_parameters(k: int, weights: dict[str, float] | None) -> None:
    """A negative k or weight is a programming error."""
    with pytest.raises(ValueError):
        rrf({("dense", "q"): ["a"]}, k=k, weights=weights)


def test_rrf_empty_input_is_empty() -> None:
    """No lists, no hits."""
    assert rrf({}) == []


def test_text_key_normalises_case_and_space() -> None:
    """text_key is what decides two texts are the same question."""
    assert text_key("  Hello\tWORLD ") == text_key("hello world")


@given(st.dictionaries(st.tuples(st.sampled_from(["dense", "sparse"]), st.text(max_size=3)), IDS))
def test_rrf_order_is_independent_of_list_order(lists: dict[tuple[str, str], list[str]]) -> None:
    """Fusion is a function of the lists, not of the order they were given in."""
    forward = rrf(lists)
    backward = rrf(dict(reversed(list(lists.items()))))
    # Keys that normalise together keep the first list given; compare only when none collide.
    if len({(r, text_key(t)) for r, t in lists}) == len(lists):
        assert forward == backward
    assert len({point_id for point_id, _ in forward}) == len(forward)
