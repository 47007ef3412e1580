"""Whether a text reads as English: an English-only model's cosine means something only then.

The default pair embedder is MiniLM (English-only) beside multilingual-e5. On a German window
MiniLM's cosine with an English question is noise (a German message about the basement's heating is
its 16th of 22 for "why is the basement so cold", e5's 2nd), so the second stage reads such a
window's dense rank from e5 alone (`ingest.search.ranking.rank`). Pure, crude on purpose: a text
reads as English unless it shows more signs of another language than English function words. Signs
of another language: letters of another script than Latin (half the letters or more: not English at
once), a word with a letter outside ASCII (vélo, rompió, Ärger), or a common function word of
German, French, Spanish, Portuguese, Italian or Dutch that English lacks; links, paths, nicks and
identifiers are not read. A text with no sign of either (an IRC line of commands, "ok") reads as
English, as every text did before. On 20,000 Ubuntu IRC lines 0.3 % do not read as English, nearly
all of them Spanish, German, Portuguese, French or Dutch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import regex

__all__ = ["FOREIGN_WORDS", "JUDGED", "each_reads_as_english", "reads_as_english"]

# Function words of German, French, Spanish, Portuguese, Italian and Dutch that are not English
# words (`die`, `was`, `son`, `pour`, `met`, `van`, `op`, `non`, `no`, `e`, `im`, `yo`, `da`,
# `ta`, `com`, `lo`, `su`, `os`, `aux`, `dos` are left out: English has them, in words, chat's
# spellings or IRC's commands).
_FOREIGN_TEXT = """
    der den dem des ein eine einen einem einer ist sind nicht und ich wir ihr sie es mit
    auf für von zu ins vom zum zur aus bei nach wie wer wo warum heute auch noch schon
    de le la les un une du et est sont je tu nous vous il ils elle elles ce cette dans
    avec sur pas qui que au mon ma mes ton sa leur où
    el los las una unos unas y tú él ella nosotros con por para del se le
    qué cómo dónde mi mis tus sus pero muy está están
    uma uns umas é são eu ele ela nós em na nos nas das ao às minha meu não
    gli che è sono lui lei noi voi loro della dello
    het een ik jij wij zij niet voor naar bij ook maar dat
"""
FOREIGN_WORDS = frozenset(_FOREIGN_TEXT.split())
_OTHER_SCRIPT = regex.compile(r"[\p{L}--\p{Latin}]", flags=regex.V1)
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters (marks and digits split it: crude is enough)
# A link, path, nick, channel or identifier says nothing of the language (`ubuntu.com/de/`).
_NOT_PROSE = re.compile(r"\S*[/_@#|:\\]\S*|\S+\.\S+")
# English function words (a subset of `rank.STOP_WORDS`, kept here so this module stands alone).
_ENGLISH_TEXT = """
    the a an and or of to is are was were be been it this that these those what which who why
    how when where i you he she we they my your his her our their not no with for from on at by
    about there here have has had do does did can could will would should
"""
_ENGLISH = frozenset(_ENGLISH_TEXT.split())


JUDGED = 1_000  # characters of a text judged: enough to tell its language, and bounded


def reads_as_english(*texts: str) -> bool:
    """Whether `texts` (a window's messages), read together, show no more signs of another
    language than English function words."""
    return _english(" ".join(texts)[:JUDGED])


def each_reads_as_english(texts: Iterable[str]) -> bool:
    """Whether every one of `texts` (a window's lines) reads as English on its own: one German
    line among English ones is still German to an English-only model (rule 22e, by message)."""
    return all(_english(t[:JUDGED]) for t in texts)


@functools.lru_cache(maxsize=4096)  # the candidates of a room's searches recur; ~4 MB at most
def _english(text: str) -> bool:
    words = _WORD.findall(_NOT_PROSE.sub(" ", text.casefold()))
    if not text.isascii():
        letters = sum(map(len, words))
        if letters and len(_OTHER_SCRIPT.findall(text)) * 2 >= letters:
            return False
    english = foreign = 0
    for word in words:
        if word in _ENGLISH:
            english += 1
        elif word in FOREIGN_WORDS or not word.isascii():
            foreign += 1
    return foreign <= english
