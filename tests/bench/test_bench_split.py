"""The rule-based question split `bench.loco_extra` measures (one text a hop)."""

from bench.split import split


def test_two_people_joined_by_and_become_one_text_each() -> None:
    assert split("What do Jon and Gina both have in common?") == [
        "What do Jon have in common?",
        "What do Gina have in common?",
    ]


def test_a_conjunction_cuts_two_clauses_keeping_whom_the_question_is_about() -> None:
    assert split("When did Melanie go on a hike after the roadtrip?") == [
        "When did Melanie go on a hike?",
        "When Melanie the roadtrip?",
    ]


def test_one_hop_stays_one_text() -> None:
    assert split("What did Caroline research?") == ["What did Caroline research?"]
    # A month or a multi-word title is not a second person.
    june = "When did Melanie go camping in June?"
    assert split(june) == [june]
