"""The text the scrub's rules read: a normalised view of a body, mapped back to it
(docs/ARCHITECTURE.md §3 rule 8).

A stranger's characters must not carry a secret past a pattern that only knows ASCII: a
no-break or narrow space beside the separator (`password:\\u00a0…`, `mot de passe\\u202f: …`), a
zero-width space, soft hyphen or word joiner inside a key or token (`pass\\u00adword=`,
`ghp_…\\u200b…`), full-width letters (`ｐａｓｓｗｏｒｄ＝…`), a Cyrillic `а` in a Latin word
(`pаssword`). The rules match on the view and the scrub replaces the original characters each
match covers, so what is stored and quoted keeps its own text except the secret.

The view, character by character: format characters (Unicode `Cf`: U+200B, U+00AD, U+2060,
U+FEFF, bidi marks…) and combining marks (`Mn`: an accent typed over a letter, `pa\u0301ssword`)
are dropped; every other character is NFKC-normalised (full-width and compatibility forms to
their plain ones) and any space but a tab or line break becomes U+0020; then in a word holding
an ASCII letter, Cyrillic or Greek look-alikes read as Latin and accented Latin letters as their
base letter (NFKD without the marks: `pássword` as `password`, `contraseña` as `contrasena`);
`пароль`, all Cyrillic, and a one-letter `é` stay themselves. ASCII text is its own view (no
copy, no map). Word lists the rules compare with the view go through `fold` first.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["View", "fold"]

# Cyrillic and Greek letters drawn like Latin ones, read as those inside a mixed word.
_FROM = "аеорсухіјѕԁӏһԛԝАВЕКМНОРСТХУІЈЅԜαουνκρχΑΒΕΗΙΚΜΝΟΡΤΥΧΖ"
_TO = "aeopcyxijsdlhqwABEKMHOPCTXYIJSWaouvkpxABEHIKMNOPTYXZ"


def _base_letter(char: str) -> str:
    """An accented Latin letter's base letter (NFKD without its marks), else itself."""
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    return base if len(base) == 1 and base.isascii() and base.isalpha() else char


# Latin-1 Supplement to Latin Extended-B: the accented letters Latin scripts type.
_ACCENTED = "".join(c for c in map(chr, range(0xC0, 0x250)) if _base_letter(c) != c)
_LATIN = str.maketrans(_FROM + _ACCENTED, _TO + "".join(map(_base_letter, _ACCENTED)))
# A word holding a look-alike or an accented letter: only these cost a call (a page of Russian
# prose costs a few). Tried only at a word's start, so a long word is scanned once.
_WORD = re.compile(r"(?<![^\W\d_])[^\W\d_]*[" + _FROM + _ACCENTED + r"][^\W\d_]*")
_ASCII_LETTER = re.compile(r"[A-Za-z]")


class _Folds(dict[int, str]):
    """What each character reads as in the view ('' when dropped), for `str.translate`:
    worked out once a character, then a lookup at C speed."""

    def __init__(self) -> None:
        super().__init__()
        self.resizing: set[str] = set()  # characters read as none or several

    def __missing__(self, ordinal: int) -> str:
        char = chr(ordinal)
        if ordinal < 128:
            folded = char
        elif unicodedata.category(char) in ("Cf", "Mn"):
            folded = ""
        else:
            nfkc = unicodedata.normalize("NFKC", char)
            folded = "".join(
                " " if c.isspace() and c not in "\t\n\r" else c
                for c in nfkc
                if not unicodedata.combining(c)  # `¨` reads as a space, not a space and a mark
            )
        if len(folded) != 1:
            self.resizing.add(char)
        if len(self) < _MAX_FOLDS:
            self[ordinal] = folded
        return folded


_MAX_FOLDS = 1 << 16  # distinct characters remembered (a hostile body may hold many)
_FOLDS = _Folds()


def _read_as_latin(m: re.Match[str]) -> str:
    word = m.group(0)
    if _ASCII_LETTER.search(word):
        return word.translate(_LATIN)  # one character for one: positions stay
    return word


def fold(text: str) -> str:
    """`text` as the view reads it (for word lists compared with a view)."""
    return View.of(text).text


@dataclass(frozen=True)
class View:
    """`text` as the rules read it, and where its characters come from: view position `v`
    in segment `k` (`starts[k] <= v`) is original `origins[k] + (v - starts[k])`, or
    `origins[k]` itself in a segment one original character expanded to (`whole[k]`)."""

    text: str
    starts: tuple[int, ...] = (0,)
    origins: tuple[int, ...] = (0,)
    whole: tuple[bool, ...] = (False,)

    @classmethod
    def of(cls, original: str) -> View:
        if original.isascii():
            return cls(original)
        text = original.translate(_FOLDS)
        text = _WORD.sub(_read_as_latin, text)
        resizing = [c for c in _FOLDS.resizing if c in original] if _FOLDS.resizing else []
        if not resizing:
            return cls(text)
        starts, origins, whole = [0], [0], [False]
        view_at = 0
        done = 0  # original characters mapped so far
        pattern = "[" + "".join(re.escape(c) for c in resizing) + "]+"
        for m in re.finditer(pattern, original):
            view_at += m.start() - done
            for at in range(m.start(), m.end()):  # a dropped character adds no segment
                folded = len(_FOLDS[ord(original[at])])
                if folded:
                    starts.append(view_at)
                    origins.append(at)
                    whole.append(True)
                    view_at += folded
            done = m.end()
            starts.append(view_at)
            origins.append(done)
            whole.append(False)
        return cls(text, tuple(starts), tuple(origins), tuple(whole))

    def _origin(self, v: int) -> int:
        k = bisect.bisect_right(self.starts, v) - 1
        return self.origins[k] + (0 if self.whole[k] else v - self.starts[k])

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original characters the view's `[start, end)` covers, and any dropped inside."""
        if len(self.starts) == 1:
            return start, end
        first = self._origin(start)
        return (first, first) if end <= start else (first, self._origin(end - 1) + 1)
