"""bot.roster: the roster file, its problems named by entry, its shorthand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.roster import RosterError, load_roster
from tests.bot.cli.roster.rosterkit import SERVER

# ---------------------------------------------------------------- the roster file


def test_load_roster_bad_file_lists_every_problem_naming_entries(tmp_path: Path) -> None:
    """Every bad entry is reported at once, each named by index and room."""
    path = tmp_path / "roster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "rooms": [
                    {"room": "#ok:x"},
                    {"room": "general"},
                    {"note": "no room"},
                    {"room": "!id", "colour": "red"},
                    {"room": "#ok:x", "note": "again"},
                ]
            }
        )
    )
    with pytest.raises(RosterError) as err:
        load_roster(path, SERVER)
    problems = err.value.problems
    assert any(p.startswith("rooms[1] ('general') room:") for p in problems), problems
    assert any(p.startswith("rooms[2] room: is required") for p in problems), problems
    assert any(p.startswith("rooms[3] ('!id') colour: is not a known key") for p in problems)
    assert len(problems) == 3  # the duplicate is found once the entries themselves are valid
    path.write_text(yaml.safe_dump({"rooms": [{"room": "#ok"}, {"room": f"#ok:{SERVER}"}]}))
    with pytest.raises(RosterError, match=r"rooms\[1\].*repeats rooms\[0\]"):
        load_roster(path, SERVER)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "no roster file"),
        ("rooms: [", "not valid YAML"),
        ("- '#a:x'\n", "mapping with a `rooms` list"),
        ("room: []\n", "rooms: is required"),
    ],
    ids=["missing", "yaml", "list", "key"],
)
def test_load_roster_refuses_a_file_that_is_not_a_roster(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    """A missing, unparsable or mis-shaped roster is a RosterError naming the cause."""
    path = tmp_path / "roster.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RosterError, match=problem):
        load_roster(path, SERVER)


def test_load_roster_accepts_a_bare_alias_or_id_as_shorthand(tmp_path: Path) -> None:
    """`rooms: ["#townhall:…"]` is the natural shorthand for `rooms: [{room: "#townhall:…"}]`,
    and mixes with the long form."""
    path = tmp_path / "roster.yaml"
    path.write_text('rooms: ["#townhall:example.org", "!abc", {room: "#ops", note: "on call"}]\n')
    roster = load_roster(path, SERVER)
    assert [(e.room, e.note) for e in roster.rooms] == [
        ("#townhall:example.org", ""),
        ("!abc", ""),
        ("#ops", "on call"),
    ]


def test_load_roster_entry_of_the_wrong_shape_shows_the_right_forms(tmp_path: Path) -> None:
    """An entry that is neither text nor a mapping is named with both accepted forms."""
    path = tmp_path / "roster.yaml"
    path.write_text("rooms:\n  - 42\n  - [a, b]\n")
    with pytest.raises(RosterError) as err:
        load_roster(path, SERVER)
    problems = err.value.problems
    assert len(problems) == 2, problems
    for p in problems:
        assert "must be a room alias or id" in p and "{room:" in p and "instance of" not in p
    assert problems[0].startswith("rooms[0]: ") and "got 42" in problems[0]
