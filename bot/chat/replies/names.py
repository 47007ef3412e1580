"""Who a reply says sent a message: a display name, unless it could pass for someone else
(docs/ARCHITECTURE.md §3 rule 16).

A display name is anyone's to choose: a member renamed "Alice" reads as Alice (and so do the
messages they sent before the rename, since a reply names senders by their name now), and a
name shaped like a user id, room alias or room id (`@ops:server`, `#general:server`) reads as
that user or room. So the user id is shown beside a name that another member of the room also
holds (compared case-folded, NFKC, ignoring format characters and spacing, and against the
members' localparts too) or that starts like an id or alias; a unique, plain name stands alone.
"""

from __future__ import annotations

import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Mapping

from ingest.index.chunker import display_name
from ingest.types import UserID

__all__ = ["SenderLabels", "sender_label"]

_ID_SIGILS = ("@", "#", "!", "+", "$")


def _key(name: str) -> str:
    folded = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(c for c in folded if unicodedata.category(c) != "Cf" and not c.isspace())
    return kept.lstrip("".join(_ID_SIGILS))


def _localpart(user_id: str) -> str:
    return user_id.removeprefix("@").split(":", 1)[0]


def sender_label(sender: UserID, names: Mapping[str, str]) -> str:
    """`sender`'s display name in the room (`names`: every member → its name, '' for none),
    with the user id beside it (`Alice (@mallory:hs)`) when another member's name or localpart
    reads the same or the name looks like an id."""
    return SenderLabels(names).of(sender)


# A room's keys of every member's name and localpart, by its members and names: a reply labels
# up to 50 senders against all of the room's members (a busy room: thousands of `_key`s, 7 ms
# a command in a burst). A few rooms' worth, the least recently used out first.
_TAKEN: OrderedDict[frozenset[tuple[str, str]], Counter[str]] = OrderedDict()
_TAKEN_ROOMS = 16


def _taken(names: Mapping[str, str]) -> Counter[str]:
    """Every member's name key (a name given) and localpart key, counted."""
    known = frozenset(names.items())
    taken = _TAKEN.pop(known, None)
    if taken is None:
        taken = Counter(_key(name) for name in names.values() if name.strip())
        taken.update(_key(_localpart(user)) for user in names)
    _TAKEN[known] = taken
    while len(_TAKEN) > _TAKEN_ROOMS:
        _TAKEN.popitem(last=False)
    return taken


class SenderLabels:
    """`sender_label` for many senders of one room: the members' keys counted once."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = names
        self._taken = _taken(names)

    def of(self, sender: UserID) -> str:
        names = self._names
        name = display_name(sender, names)
        if name == sender:
            return name
        looks_like_id = name.strip().startswith(_ID_SIGILS)
        key = _key(name)
        # Another member's: the sender's own name and localpart are not counted against it.
        clash = self._taken[key]
        if sender in names:
            clash -= (names[sender].strip() != "" and _key(names[sender]) == key) + (
                _key(_localpart(sender)) == key
            )
        if looks_like_id or not key or clash:
            return f"{name} ({sender})"
        return name
