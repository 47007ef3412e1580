"""bot.chat.replies.names: a reply's sender name never passes for another (issue 37 item 8)."""

from __future__ import annotations

import pytest

from bot.chat.replies.names import sender_label
from ingest.types import UserID

ALICE, MALLORY, BOB = (UserID(f"@{n}:hs") for n in ("alice", "mallory", "bob"))


@pytest.mark.parametrize(
    ("names", "sender", "label"),
    [
        ({ALICE: "Alice", BOB: "Bob"}, ALICE, "Alice"),  # unique and plain: the name alone
        ({ALICE: "Alice", MALLORY: "Alice"}, MALLORY, "Alice (@mallory:hs)"),
        ({ALICE: "Alice", MALLORY: "Alice"}, ALICE, "Alice (@alice:hs)"),  # which is which
        ({ALICE: "Alice", MALLORY: "ALICE"}, MALLORY, "ALICE (@mallory:hs)"),
        ({ALICE: "Alice", MALLORY: "Al\u200bice"}, MALLORY, "Al\u200bice (@mallory:hs)"),
        ({ALICE: "Alice", MALLORY: "Ａｌｉｃｅ"}, MALLORY, "Ａｌｉｃｅ (@mallory:hs)"),
        ({ALICE: "", MALLORY: "alice"}, MALLORY, "alice (@mallory:hs)"),  # alice's localpart
        ({MALLORY: "@ops:hs"}, MALLORY, "@ops:hs (@mallory:hs)"),
        ({MALLORY: "#general:hs"}, MALLORY, "#general:hs (@mallory:hs)"),
        ({MALLORY: "!room:hs"}, MALLORY, "!room:hs (@mallory:hs)"),
        ({ALICE: "", BOB: "Bob"}, ALICE, "alice"),  # no name: the localpart, unique
    ],
)
def test_sender_label_shows_the_id_beside_a_name_that_could_pass_for_another(
    names: dict[str, str], sender: UserID, label: str
) -> None:
    """Regression (issue 37 item 8): a member renamed "Alice" was quoted as Alice, and a nick
    shaped like `@ops:server` or `#general:server` read as that user or room."""
    assert sender_label(sender, names) == label


def _reference(sender: str, names: dict[str, str]) -> str:
    """The rule spelt out member by member (as it was before the keys were counted once)."""
    from bot.chat.replies.names import _key, _localpart
    from ingest.index.chunker import display_name

    name = display_name(UserID(sender), names)
    if name == sender:
        return name
    others = [u for u in names if u != sender]
    keys = [_key(names[u]) for u in others if names[u].strip()]
    keys += [_key(_localpart(u)) for u in others]
    if name.strip().startswith(("@", "#", "!", "+", "$")) or not _key(name) or _key(name) in keys:
        return f"{name} ({sender})"
    return name


def test_a_reply_labels_every_sender_as_the_rule_does_and_sees_a_rename_at_once() -> None:
    """A busy room's reply counts the members' names once (`SenderLabels`), and a member who
    renames to "Alice" between two replies is shown with their id in the second: the counted
    keys are the room's names now, never the last reply's."""
    import random

    from bot.chat.replies.names import SenderLabels

    rng = random.Random(47)
    pool = ["Alice", "alice", "ALICE", "Bob", "", " ", "bob", "Carol", "@ops:hs", "Al\u200bice"]
    for _ in range(200):
        users = [
            f"@{rng.choice(['alice', 'bob', 'carol', 'dave', 'eve'])}{i}:hs" for i in range(6)
        ]
        users += ["@alice:hs", "@bob:hs"]
        names = {u: rng.choice(pool) for u in users}
        labels = SenderLabels(names)
        for sender in [*users, "@stranger:hs"]:
            assert (
                labels.of(UserID(sender))
                == _reference(sender, names)
                == sender_label(UserID(sender), names)
            )
    room = {ALICE: "Alice", BOB: "Bob", MALLORY: "Mallory"}
    assert SenderLabels(room).of(MALLORY) == "Mallory"
    assert SenderLabels(room).of(ALICE) == "Alice"
    renamed = {**room, MALLORY: "Alice"}  # the next reply, after Mallory's rename
    assert SenderLabels(renamed).of(MALLORY) == "Alice (@mallory:hs)"
    assert SenderLabels(renamed).of(ALICE) == "Alice (@alice:hs)"
