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
from collections import Counter
from collections.abc import Mapping

from ingest.index.chunker import display_name
from ingest.types import UserID

__all__ = ["sender_label"]

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
    name = display_name(sender, names)
    if name == sender:
        return name
    looks_like_id = name.strip().startswith(_ID_SIGILS)
    key = _key(name)
    others = [user for user in names if user != sender]
    taken = Counter(_key(names[user]) for user in others if names[user].strip())
    taken.update(_key(_localpart(user)) for user in others)
    if looks_like_id or not key or taken[key]:
        return f"{name} ({sender})"
    return name
