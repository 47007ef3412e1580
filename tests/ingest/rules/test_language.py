"""Whether a text reads as English (`ingest.rules.language`): the pair's English-only model is
read only where it can read (rule 22e)."""

from __future__ import annotations

import pytest

from ingest.rules.language import JUDGED, reads_as_english


@pytest.mark.parametrize(
    "text",
    [
        "why is the basement so cold",
        "the roof leaks above the electronics bench",
        "did you mount it with fstab ? give us a pastebin of the fstab",
        "sudo apt-get install ubuntu-desktop",  # no function word of any language
        "ok",
        "I met José at the café, he said the non-free driver works",
        "12:30",
    ],
)
def test_english_and_wordless_texts_read_as_english(text: str) -> None:
    """English, IRC commands and texts without words read as English (as every text did)."""
    assert reads_as_english(text)


@pytest.mark.parametrize(
    "text",
    [
        "Die Heizung im Keller ist kaputt",
        "Se rompió la lavadora y el agua inundó la cocina",
        "Mon vélo a été volé devant la gare",
        "O ônibus para o aeroporto sai de hora em hora",
        "Il treno per Milano è in ritardo di un'ora",
        "De trein naar Utrecht is niet op tijd",
        "У нас в подъезде уже неделю не работает лифт",
        "明日は台風のため学校が休みになります",
        "图书馆的空调坏了，里面非常热",
    ],
)
def test_other_languages_do_not_read_as_english(text: str) -> None:
    """German, Spanish, French, Portuguese, Italian, Dutch, Russian, Japanese and Chinese
    messages do not read as English."""
    assert not reads_as_english(text)


def test_a_window_reads_as_its_messages_together_and_a_long_one_by_its_start() -> None:
    """A window's messages are judged together; a long text by its first `JUDGED` characters
    (bounded work for a hostile message)."""
    assert reads_as_english("Die Heizung ist kaputt", "the heating is broken, the boiler is off")
    assert not reads_as_english("Die Heizung im Keller ist kaputt " * (JUDGED // 8) + "the " * 999)
