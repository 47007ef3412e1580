"""Which message a window matched by meaning quotes (`ingest.search.quotes`, rule 22b): the
stored lines' order among themselves, weighed with the share of the question's words each
message holds. Pure: lines written as the writer's codec writes them, no model."""

from __future__ import annotations

import math

from ingest.embed.linecodec import encode_line
from ingest.search.hits import CitedMessage
from ingest.search.quotes import ASKED_AGAIN, WORDS_WEIGHT, best_of

QUESTION = "what is used as the wireless adaptor"  # content words: used, wireless, adaptor


def _line(cosine: float) -> str:
    """A unit line at `cosine` from the question's vector (the first axis)."""
    return encode_line([cosine, math.sqrt(1.0 - cosine * cosine), 0.0, 0.0])


def _by(said: list[tuple[str, str, float]]) -> tuple[list[CitedMessage], dict[str, str]]:
    """A window of (sender localpart, body, cosine) lines."""
    messages = [
        CitedMessage(event_id=f"$e{i}", sender=f"@{who}:x", ts=i, body=body)
        for i, (who, body, _) in enumerate(said)
    ]
    return messages, {f"$e{i}": _line(cos) for i, (_, _, cos) in enumerate(said)}


def _window(said: list[tuple[str, float]]) -> tuple[list[CitedMessage], dict[str, str]]:
    """A window of (body, cosine) lines, each of another sender."""
    return _by([(f"p{i}", body, cos) for i, (body, cos) in enumerate(said)])


ASKED = [[1.0, 0.0, 0.0, 0.0]]


def test_a_line_nearly_as_near_holding_the_questions_words_is_quoted() -> None:
    """In a crowd's window the line read in context nearest a question is often the neighbour
    of the message holding its words ("you set it up as a wireless bridge?" before "I use it
    as a wireless adaptor, I just can't ssh to it"): a line almost as near that holds two of
    the three content words is quoted (molweni-dev: the quote right 0.612 → 0.634)."""
    messages, lines = _window(
        [
            ("not you, sorry", 0.20),
            ("I use it as a wireless adaptor, I just can't ssh to it", 0.47),
            ("you set it up as a bridge?", 0.50),
        ]
    )
    matched, best = best_of(messages, lines, [QUESTION], ASKED)
    assert matched == ()  # no message holds every word: a match by meaning
    assert best == "$e1"


def test_words_do_not_outweigh_a_line_far_from_the_question() -> None:
    """The words weigh `WORDS_WEIGHT` beside a line's place between the window's farthest and
    nearest: a message far from the question (its place 0) holding one word is not quoted
    over the nearest line, and with no word anywhere the nearest line is quoted."""
    assert 0 < WORDS_WEIGHT < 1
    messages, lines = _window(
        [
            ("the adaptor drawer is full", 0.10),
            ("you set it up as a bridge?", 0.50),
            ("lunch is here", 0.30),
        ]
    )
    assert best_of(messages, lines, [QUESTION], ASKED)[1] == "$e1"
    messages, lines = _window([("lunch is here", 0.10), ("it is a bridge", 0.50)])
    assert best_of(messages, lines, [QUESTION], ASKED)[1] == "$e1"


CUPBOARD = "where is the storage cupboard key kept"  # content words: storage, cupboard, key, kept


def _asked_again(after: str, sender: str = "p2") -> tuple[list[CitedMessage], dict[str, str]]:
    return _by(
        [
            ("p0", "the kettle is broken again", 0.10),
            ("p1", "has anyone seen the storage cupboard key?", 0.60),
            (sender, after, 0.30),
            ("p3", "nice work on the mural", 0.05),
        ]
    )


def test_a_line_asking_the_question_again_gives_way_to_the_reply_after_it() -> None:
    """The line nearest "where is the storage cupboard key kept" is the room asking it ("has
    anyone seen the storage cupboard key?", three of its four words); where the key is, is
    the reply right after, another sender's: that is quoted (locomo-dev 0.715 → 0.732,
    molweni-dev 0.634 → 0.635, bench/RESULTS.md §15)."""
    assert 0.5 <= ASKED_AGAIN < 0.75
    messages, lines = _asked_again("blue envelope on the fridge door")
    assert best_of(messages, lines, [CUPBOARD], ASKED) == ((), "$e2")


def test_a_question_line_stays_quoted_where_it_does_not_ask_the_question_again() -> None:
    """A question sharing half the words or fewer can itself be the answer in a crowd ("have
    you tried gparted?"); the asker's own next line is no reply; and a message holding every
    word is what a search by words lists (`from:`, `sort:recent`): each stays quoted."""
    messages, lines = _asked_again("blue envelope on the fridge door")
    assert best_of(messages, lines, ["where is the cupboard kept"], ASKED)[1] == "$e1"
    messages, lines = _asked_again("found it, never mind", sender="p1")
    assert best_of(messages, lines, [CUPBOARD], ASKED)[1] == "$e1"
    messages, lines = _asked_again("blue envelope on the fridge door")
    assert best_of(messages, lines, ["storage cupboard key"], ASKED) == (("$e1",), "$e1")


def test_a_question_naming_a_sender_quotes_one_of_their_messages() -> None:
    """ "what did caroline research?" asks about Caroline's words: in a window matched by
    meaning her message is quoted, not Melanie's nearer line about it (locomo-dev 0.732 →
    0.884, molweni-dev 0.635 → 0.668, bench/RESULTS.md §15). A question naming every sender
    of the window tells none apart: the nearest line is quoted."""
    messages, lines = _by(
        [
            ("melanie", "that sounds like a lot of reading, how did it go?", 0.60),
            ("caroline", "I looked into adoption agencies all week", 0.40),
        ]
    )
    question = "what did caroline research"
    assert best_of(messages, lines, [question], ASKED) == ((), "$e1")
    assert best_of(messages, lines, ["what did they research"], ASKED)[1] == "$e0"
    both = "what did caroline and melanie research"
    assert best_of(messages, lines, [both], ASKED)[1] == "$e0"


def test_a_named_senders_question_line_is_what_was_asked_about() -> None:
    """A question line asking the question again gives way to its reply, but not where the
    question names its sender: "what did fran ask about the cupboard key" is answered by
    fran's line."""
    messages, lines = _by(
        [
            ("hana", "the kettle is broken again", 0.10),
            ("fran", "has anyone seen the storage cupboard key?", 0.60),
            ("gus", "blue envelope on the fridge door", 0.30),
        ]
    )
    assert best_of(messages, lines, [CUPBOARD], ASKED)[1] == "$e2"
    asked = "what did fran ask about the storage cupboard key"
    assert best_of(messages, lines, [asked], ASKED)[1] == "$e1"
