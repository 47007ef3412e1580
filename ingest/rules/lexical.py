"""BM25-style sparse vectors for the lexical retriever. Pure: no I/O.

The store applies IDF itself (Qdrant's sparse `Modifier.IDF`), so a document vector carries only
BM25's saturated, length-normalised term frequency, and a query vector carries 1.0 a unique term.

Tokens, after NFKC and case folding (`caseless`, the one caseless form of text for search):
- words are runs of letters, digits and marks; an identifier joined by `_`, `.` or `-`
  (`err_connection_refused`, `v1.2.3`, `0x80070005`, `foo-bar`) is emitted whole and then
  part by part, so both `ERR_CONNECTION_REFUSED` and `refused` find it;
- scripts written without spaces (Han, Hiragana, Katakana, Thai, Hangul) emit overlapping
  character bigrams of each run, or the character itself for a one-character run, so `東京`
  finds `明日は東京で会議があります` without a dictionary.
Documents and queries go through the same function, so whatever splits, splits the same way.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator

import regex

from ingest.types import SparseVector

__all__ = [
    "LEXICAL_VERSION",
    "MAX_EXPANSIONS",
    "caseless",
    "document_vector",
    "expand_prefix",
    "query_vector",
    "term_index",
    "token_spans",
    "tokens",
]

# Bump when tokens or weights change: stored sparse vectors must then be rebuilt.
# 2: `İ` folds to `i` (`caseless`): `İstanbul` and `istanbul` are one token.
LEXICAL_VERSION: int = 2


def caseless(text: str) -> str:
    """`text` NFKC-normalised and case-folded, the one caseless form search compares: `İ`
    (Turkish capital I with dot) folds to `i` plus a combining dot, which is dropped after an
    `i`, so `İstanbul` and `istanbul` read alike."""
    return unicodedata.normalize("NFKC", text).casefold().replace("i\u0307", "i")


_NO_SPACE = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Hangul}\u30fc"  # ー is script Common
_WORD_CHAR = rf"[[\p{{L}}\p{{N}}\p{{M}}]--[{_NO_SPACE}]]"
_TOKEN = regex.compile(
    rf"(?P<run>[{_NO_SPACE}]+)|(?P<word>{_WORD_CHAR}+(?:[_.\-]{_WORD_CHAR}+)*)",
    flags=regex.V1,
)
_CONNECTOR = regex.compile(r"[_.\-]")


MEMO_TEXT = 500  # texts up to this long have their tokens remembered (`_memo`)


def tokens(text: str) -> list[str]:
    """The lexical tokens of `text`, in order, duplicates kept (term frequency needs them).

    Remembered for short texts: every `!search` in a room reranks much the same candidate
    messages, ~40 µs each to tokenize."""
    if len(text) <= MEMO_TEXT:
        return list(_memo(text))
    return _tokens(text)


@functools.lru_cache(maxsize=4096)  # ~4 MB of IRC lines and tokens; ~30 MB at most
def _memo(text: str) -> tuple[str, ...]:
    return tuple(_tokens(text))


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    for match in _TOKEN.finditer(caseless(text)):
        if (run := match.group("run")) is not None:
            out.extend(_bigrams(run))
        else:
            word = match.group("word")
            out.append(word)
            if _CONNECTOR.search(word):
                out.extend(p for p in _CONNECTOR.split(word) if p)
    return out


def token_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Where each of `tokens(text)` stands in `text` itself: (start, end, token), so a reply
    can mark a word as search reads it (whole, caseless) in the text as it was written; an
    identifier, then each of its parts; a run without spaces, by its bigrams. The words are
    found in `text` as written (NFKC and case folding change lengths), each read caseless."""
    for match in _TOKEN.finditer(text):
        start = match.start()
        if (run := match.group("run")) is not None:
            width = min(2, len(run))
            for i in range(max(1, len(run) - 1)):
                yield start + i, start + i + width, caseless(run[i : i + width])
            continue
        word = match.group("word")
        yield start, match.end(), caseless(word)
        if _CONNECTOR.search(word):
            offset = 0
            for part in _CONNECTOR.split(word):
                if part:
                    yield start + offset, start + offset + len(part), caseless(part)
                offset += len(part) + 1


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def term_index(token: str) -> int:
    """A token's sparse index: a stable unsigned 32-bit hash (Python's hash() is salted)."""
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def _vector(weights: Iterable[tuple[str, float]]) -> SparseVector:
    # Two tokens hashing to one index are summed: the store allows one value an index.
    summed: dict[int, float] = {}
    for token, weight in weights:
        index = term_index(token)
        summed[index] = summed.get(index, 0.0) + weight
    ordered = sorted(summed.items())
    return SparseVector(tuple(i for i, _ in ordered), tuple(v for _, v in ordered))


def document_vector(
    text: str, *, avg_len: float = 40.0, k1: float = 1.2, b: float = 0.75
) -> SparseVector:
    """BM25's term-frequency part, tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len)), a term."""
    counts = Counter(tokens(text))
    length = sum(counts.values())
    norm = k1 * (1.0 - b + b * length / avg_len)
    return _vector((t, tf * (k1 + 1.0) / (tf + norm)) for t, tf in counts.items())


def query_vector(text: str, expansions: Iterable[str] = ()) -> SparseVector:
    """1.0 for each unique query token; the store's IDF does the weighting. `expansions`: the
    words a `word*` of the text stands for (`expand_prefix`), added as tokens of their own."""
    return _vector((t, 1.0) for t in dict.fromkeys([*tokens(text), *expansions]))


MAX_EXPANSIONS = 16  # words one `word*` stands for: the most frequent of the room's words


def expand_prefix(stem: str, vocabulary: Counter[str], cap: int = MAX_EXPANSIONS) -> list[str]:
    """The words of `vocabulary` (token → count, as the rooms say them) starting with `stem`,
    most frequent first, at most `cap`: the index holds hashed terms only, so a prefix is
    expanded against the words actually said, never guessed."""
    folded = caseless(stem)
    found = [(n, t) for t, n in vocabulary.items() if t.startswith(folded)]
    found.sort(key=lambda item: (-item[0], item[1]))
    return [t for _, t in found[:cap]]
