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
