"""ingest.rules.lexical: tokens and BM25-style sparse vectors for the lexical retriever."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.rules.lexical import document_vector, query_vector, term_index, tokens
from ingest.types import SparseVector


def matches(query: str, document: str) -> bool:
    """The query shares at least one sparse index with the document."""
    return bool(set(query_vector(query).indices) & set(document_vector(document).indices))


def weight(vector: SparseVector, token: str) -> float:
    return dict(zip(vector.indices, vector.values, strict=True)).get(term_index(token), 0.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("Straße STRASSE", ["strasse", "strasse"]),  # case folding, not lower()
        ("ＡＢＣ１２３", ["abc123"]),  # NFKC folds full-width forms
        ("naïve café", ["naïve", "café"]),
        ("E1234 failed", ["e1234", "failed"]),
        ("0x80070005", ["0x80070005"]),
        ("ERR_CONNECTION_REFUSED", ["err_connection_refused", "err", "connection", "refused"]),
        ("v1.2.3.", ["v1.2.3", "v1", "2", "3"]),  # a sentence's full stop is not part of it
        ("well-known", ["well-known", "well", "known"]),
        ("__init__", ["init"]),
        ("a - b", ["a", "b"]),
        ("", []),
    ],
)
def test_tokens_words_and_identifiers(text: str, expected: list[str]) -> None:
    """Words fold case and width; identifiers are emitted whole and then by their parts."""
    assert tokens(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("北京", ["北京"]),
        ("我们去北京", ["我们", "们去", "去北", "北京"]),
        ("は", ["は"]),  # a one-character run is kept whole
        ("Python入門", ["python", "入門"]),
        ("ｺｰﾋｰ", ["コー", "ーヒ", "ヒー"]),  # half-width katakana, long vowel mark kept in the run
        ("서울에서", ["서울", "울에", "에서"]),
    ],
)
def test_tokens_bigrams_for_scripts_without_spaces(text: str, expected: list[str]) -> None:
    """Han, kana, Hangul and Thai runs become overlapping bigrams (or one lone character)."""
    assert tokens(text) == expected


@pytest.mark.parametrize(
    ("query", "document"),
    [
        ("北京", "我们明天去北京开会"),
        ("東京", "明日は東京で会議があります"),
        ("会議", "明日は東京で会議があります"),
        ("ภาษา", "ฉันเรียนภาษาไทย"),
        ("ERR_CONNECTION_REFUSED", "got err_connection_refused again"),
        ("refused", "got ERR_CONNECTION_REFUSED again"),
        ("connection refused", "ERR_CONNECTION_REFUSED"),
        ("E1234", "the build died with error E1234."),
        ("0x80070005", "Windows update says 0x80070005, access denied"),
        ("v1.2.3", "upgrading to v1.2.3 broke it"),
        ("STRASSE", "Die Straße ist gesperrt"),
        ("istanbul", "the İstanbul office opens monday"),  # issue 37: İ folds to i
        ("İstanbul", "flights to istanbul are cheaper"),
        ("İZMİR", "izmir is next"),
    ],
)
def test_lexical_query_finds_document(query: str, document: str) -> None:
    """A query for a word, identifier or CJK/Thai term shares an index with its document."""
    assert matches(query, document)


@pytest.mark.parametrize(
    ("query", "document"),
    [("京都", "明日は東京で会議があります"), ("E1235", "error E1234"), ("pasta", "pizza night")],
)
def test_lexical_query_misses_unrelated_document(query: str, document: str) -> None:
    """Terms the document does not contain share no index with it."""
    assert not matches(query, document)


def test_term_index_stable_unsigned_32_bit() -> None:
    """Indices come from blake2b (pinned values survive restarts), not the salted hash()."""
    assert term_index("hello") == 3_932_620_535
    assert 0 <= term_index("東京") < 2**32
    assert term_index("hello") != term_index("hellO".casefold() + "!")


def test_document_vector_bm25_term_frequency() -> None:
    """Weights follow BM25's tf part: saturating in tf, lower for longer documents."""
    short = document_vector("crash crash log", avg_len=3.0)
    # tf=2, len=3=avg: 2·2.2 / (2 + 1.2) = 1.375; tf=1: 2.2 / 2.2 = 1.0
    assert weight(short, "crash") == pytest.approx(1.375)
    assert weight(short, "log") == pytest.approx(1.0)
    longer = document_vector("crash " + "word " * 20, avg_len=3.0)
    assert weight(longer, "crash") < weight(short, "log")


def test_document_vector_sorted_unique_indices() -> None:
    """Indices are sorted and unique, one value each, all positive."""
    v = document_vector("the cat sat on the mat with the other cat ERR_X_Y 東京都")
    assert list(v.indices) == sorted(set(v.indices))
    assert len(v.indices) == len(v.values)
    assert all(x > 0 for x in v.values)


def test_query_vector_one_per_unique_term() -> None:
    """A query carries 1.0 per unique term, repetitions not counted."""
    v = query_vector("crash crash CRASH log")
    assert sorted(v.values) == [1.0, 1.0]


def test_vectors_empty_text() -> None:
    """Text without tokens gives an empty sparse vector."""
    assert document_vector("  ... !!! ") == SparseVector((), ())
    assert query_vector("") == SparseVector((), ())


@given(st.text(max_size=200))
def test_document_vector_well_formed_for_any_text(text: str) -> None:
    """Any text gives sorted unique 32-bit indices and finite positive values."""
    v = document_vector(text)
    assert list(v.indices) == sorted(set(v.indices))
    assert all(0 <= i < 2**32 for i in v.indices)
    assert all(0 < x < 3 for x in v.values)


def test_vectors_sum_colliding_tokens() -> None:
    """Two tokens with one hash (w52890, w55286) give one index holding both weights."""
    assert term_index("w52890") == term_index("w55286")
    assert query_vector("w52890 w55286") == SparseVector((term_index("w52890"),), (2.0,))
    v = document_vector("w52890 w55286", avg_len=2.0)
    assert v.indices == (term_index("w52890"),)
    assert v.values == pytest.approx((2.0,))
