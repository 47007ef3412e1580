"""A rule-based split of a question into the texts a Persona could send (up to 8): one per hop.

Not the product: the read path takes whatever texts it is given (`SearchQuery.texts`). This is
the simplest asker that splits, measured on the folds (`bench.loco`, RESULTS.md §1b):

- two names joined by "and" ("Jon and Gina"), or two names one of them possessive ("Melanie
  … Caroline's suggestion") → one text a name, the other and "both" taken out: "What do Jon
  and Gina both have in common?" → "What do Jon have in common?", "What do Gina have in
  common?";
- else a conjunction joining two clauses (" and ", " or ", " after ", " before ", " when ",
  " while ") → the text before it and the question word and its first name with the text after it:
  "When did Melanie go on a hike after the roadtrip?" → "When did Melanie go on a hike?",
  "When Melanie the roadtrip?";
- else the question alone.
"""

from __future__ import annotations

import re

_CONJUNCTION = re.compile(r"\s+(and|or|after|before|when|while)\s+", re.I)
_PAIR = re.compile(r"\b([A-Z][a-z]+) and ([A-Z][a-z]+)\b")
_NAME = re.compile(r"(?<!^)\b([A-Z][a-z]{2,})('s)?\b(?! [A-Z])")
_NOT_NAMES = frozenset(
    {
        *("January", "February", "March", "April", "May", "June", "July", "August"),
        *("September", "October", "November", "December", "European", "American"),
        *("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    }
)


def names(text: str) -> list[str]:
    """The two people a question joins: "X and Y", or two names one of them possessive."""
    pair = _PAIR.search(text)
    if pair:
        return [pair.group(1), pair.group(2)]
    found = [m for m in _NAME.finditer(text) if m.group(1) not in _NOT_NAMES]
    who = list(dict.fromkeys(m.group(1) for m in found))
    if len(who) == 2 and any(m.group(2) for m in found):
        return who
    return []


def split(text: str) -> list[str]:
    """The texts of `text`, one per hop; `[text]` when it has one hop."""
    who = names(text)
    if len(who) >= 2:
        parts = []
        for keep in who:
            t = text
            for other in who:
                if other != keep:
                    t = re.sub(rf"\s*\b(and|or)?\s*\b{other}('s)?\b\s*(and|or)?\b", " ", t)
            t = re.sub(r"\s+both\b", "", t)
            parts.append(re.sub(r"\s+", " ", t).strip())
        return parts
    m = _CONJUNCTION.search(text)
    if m is None:
        return [text]
    head = text[: m.start()].rstrip(" ,?") + "?"
    tail = text[m.end() :].strip()
    # The second hop keeps the question word and whom the question is about.
    who = [w.group(1) for w in _NAME.finditer(head) if w.group(1) not in _NOT_NAMES][:1]
    return [head, " ".join([text.split(maxsplit=1)[0], *who, tail])]
