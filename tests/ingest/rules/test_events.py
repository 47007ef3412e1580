"""ingest.rules.events: one raw event → Message | Edit | Redaction | Skip (docs/ARCHITECTURE.md §3
rules 5–9; malformed events: test_events_malformed.py; media: test_media.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.rules.events import normalize, strip_mx_reply, strip_reply_fallback
from ingest.types import Edit, Message, Redaction, Skip, SkipReason
from tests.ingest.rules.eventkit import OWN, ROOM, load, norm

# ---------------------------------------------------------------- the table, row by row


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("encrypted", SkipReason.ENCRYPTED),
        ("member", SkipReason.STATE),
        ("sticker", SkipReason.MEDIA),
        ("location", SkipReason.MEDIA),
        ("reaction", SkipReason.OTHER),
        ("redacted", SkipReason.REDACTED),
        ("notice", SkipReason.NOTICE),
        ("own", SkipReason.OWN),
        ("command", SkipReason.COMMAND),
        ("edit_no_new_content", SkipReason.INVALID_EDIT),
    ],
)
def test_normalize_skips_fixture(fixture: str, reason: SkipReason) -> None:
    """Each non-indexed spec event is skipped with its reason and keeps its event id."""
    event = load(fixture)
    result = norm(event)
    assert result == Skip(event["event_id"], reason, result.detail)


def test_normalize_text_message() -> None:
    """An m.text message becomes a Message with its body, sender, room and timestamp."""
    assert norm(load("text")) == Message(
        "$text:example.org",
        ROOM,
        "@alice:example.org",
        1432735824653,
        "This is an example text message",
    )


def test_normalize_emote_keeps_body_without_prefix() -> None:
    """An emote is indexed with its body as sent; msgtype says it is an emote."""
    result = norm(load("emote"))
    assert isinstance(result, Message)
    assert result.body == "thinks this is an example emote"
    assert result.msgtype == "m.emote"


def test_normalize_server_notice_is_notice() -> None:
    """m.server_notice is a notice from the homeserver, not conversation."""
    event = load("notice")
    event["content"]["msgtype"] = "m.server_notice"
    assert norm(event).reason is SkipReason.NOTICE


def test_normalize_unknown_msgtype_is_other() -> None:
    """An unknown msgtype is skipped as other, not as malformed."""
    event = load("text")
    event["content"]["msgtype"] = "m.key.verification.request"
    assert norm(event).reason is SkipReason.OTHER


@pytest.mark.parametrize("etype", ["m.receipt", "m.typing", "org.example.custom", "m.call.invite"])
def test_normalize_other_types_are_other(etype: str) -> None:
    """Event types other than m.room.message are not indexed."""
    event = load("text")
    event["type"] = etype
    assert norm(event).reason is SkipReason.OTHER


def test_normalize_state_event_of_message_type_is_state() -> None:
    """Anything with a state_key is state, whatever its type claims."""
    event = load("text")
    event["state_key"] = ""
    assert norm(event).reason is SkipReason.STATE


def test_normalize_encrypted_never_keeps_ciphertext() -> None:
    """An encrypted event's skip detail carries no ciphertext."""
    event = load("encrypted")
    result = norm(event)
    assert event["content"]["ciphertext"] not in repr(result)


# ---------------------------------------------------------------- redactions


@pytest.mark.parametrize("fixture", ["redaction_v10", "redaction_v11"])
def test_normalize_redaction_both_shapes(fixture: str) -> None:
    """`redacts` is read at the top level (rooms v1–10) and in content (v11+)."""
    event = load(fixture)
    assert norm(event) == Redaction(
        event["event_id"], ROOM, "@mod:example.org", 1432735824653, "$text:example.org"
    )


def test_normalize_redaction_prefers_content_redacts() -> None:
    """A v11 redaction with both places set reads content.redacts."""
    event = load("redaction_v11")
    event["redacts"] = "$stale:example.org"
    assert norm(event).redacts == "$text:example.org"


def test_normalize_redacted_redaction_still_redacts() -> None:
    """Redacting a redaction does not undo it, so it still counts as a Redaction."""
    event = load("redaction_v11")
    event["unsigned"]["redacted_because"] = {"type": "m.room.redaction"}
    assert isinstance(norm(event), Redaction)


def test_normalize_redaction_by_own_user_applies() -> None:
    """A redaction is applied whoever sent it."""
    event = load("redaction_v10")
    event["sender"] = "@muninn:example.org"
    assert isinstance(norm(event), Redaction)


@pytest.mark.parametrize("redacts", [None, 42, "", ["$x"]])
def test_normalize_redaction_without_target_is_malformed(redacts: Any) -> None:
    """A redaction without a string target is malformed."""
    event = load("redaction_v10")
    event["redacts"] = redacts
    assert norm(event).reason is SkipReason.MALFORMED


def test_normalize_message_with_empty_content_is_redacted() -> None:
    """Synapse serves a redacted message as `content: {}` even without redacted_because."""
    event = load("text")
    event["content"] = {}
    del event["unsigned"]
    assert norm(event).reason is SkipReason.REDACTED


def test_normalize_redacted_edit_is_skipped() -> None:
    """A redacted edit is not applied, so the message reverts to its previous version."""
    event = load("edit")
    event["unsigned"]["redacted_because"] = {"type": "m.room.redaction"}
    assert norm(event).reason is SkipReason.REDACTED


# ---------------------------------------------------------------- edits


def test_normalize_edit_uses_new_content_not_fallback() -> None:
    """An m.replace becomes an Edit of its target with the m.new_content body, never `* …`."""
    result = norm(load("edit"))
    assert result == Edit(
        "$edit:example.org",
        ROOM,
        "@alice:example.org",
        1432735824653,
        "$some_event_id",
        "Hello! My name is bar",
    )
    assert "*" not in result.new_body


def test_normalize_edit_of_reply_strips_fallback() -> None:
    """An old client's edit of a reply copied the fallback into m.new_content: it is stripped."""
    result = norm(load("edit_of_reply"))
    assert isinstance(result, Edit)
    assert result.new_body == "at noon"


def test_normalize_edit_keeps_users_quote() -> None:
    """An edit whose new body starts with a plain `> ` quote (no fallback signal) keeps it."""
    event = load("edit")
    event["content"]["m.new_content"]["body"] = "> a quote\n\nmy comment"
    assert norm(event).new_body == "> a quote\n\nmy comment"


def test_normalize_edit_to_emote_is_edit() -> None:
    """The spec allows an edit to change m.text into m.emote."""
    event = load("edit")
    event["content"]["m.new_content"]["msgtype"] = "m.emote"
    assert isinstance(norm(event), Edit)


def test_normalize_edit_to_empty_body_still_replaces() -> None:
    """An edit to an empty body is an Edit, so the old words stop being findable."""
    event = load("edit")
    event["content"]["m.new_content"]["body"] = ""
    assert norm(event).new_body == ""


def test_normalize_edit_ignores_missing_fallback_body() -> None:
    """The top-level fallback body is not needed for a valid edit."""
    event = load("edit")
    del event["content"]["body"]
    assert isinstance(norm(event), Edit)


@pytest.mark.parametrize(
    "new_content",
    [
        {"msgtype": "m.notice", "body": "progress 50%"},
        {"msgtype": "m.location", "body": "the shed", "geo_uri": "geo:51.5,0.1"},
        {"msgtype": "m.text", "body": "!pin #later"},
        {"msgtype": "org.example.custom", "body": "custom"},
    ],
)
def test_normalize_edit_into_what_is_not_indexed_withdraws_the_old_text(
    new_content: dict[str, Any],
) -> None:
    """An edit into a notice, a location, a command or another msgtype replaces the text with
    nothing: the original's words must stop being findable, and the new content is not text
    Muninn indexes."""
    event = load("edit")
    event["content"]["m.new_content"] = new_content
    result = norm(event)
    assert isinstance(result, Edit)
    assert result.new_body == ""
    assert result.withdrawn is not None


def test_normalize_edit_of_a_reply_into_a_command_withdraws_the_old_text() -> None:
    """`!pin` as an edit of a reply (its fallback still copied in) is a command, not text."""
    event = load("edit")
    event["content"]["m.new_content"] = {
        "msgtype": "m.text",
        "body": "> <@dave:example.org> Backups run at 03:00\n\n!pin #backups",
        "m.relates_to": {"m.in_reply_to": {"event_id": "$quoted"}},
    }
    result = norm(event)
    assert isinstance(result, Edit)
    assert (result.new_body, result.withdrawn) == ("", SkipReason.COMMAND)


@pytest.mark.parametrize(
    "new_content",
    [{"msgtype": "m.text"}, {"msgtype": "m.text", "body": ["not", "a"]}, {"body": 3}, "Hi", None],
)
def test_normalize_edit_without_usable_new_content_is_invalid(new_content: Any) -> None:
    """An edit without a usable m.new_content is skipped as invalid: nothing to replace with."""
    event = load("edit")
    event["content"]["m.new_content"] = new_content
    assert norm(event).reason is SkipReason.INVALID_EDIT


@pytest.mark.parametrize("target", [None, 7, ""])
def test_normalize_edit_without_target_is_invalid(target: Any) -> None:
    """An m.replace without a string target event id is an invalid edit."""
    event = load("edit")
    event["content"]["m.relates_to"]["event_id"] = target
    assert norm(event).reason is SkipReason.INVALID_EDIT


def test_normalize_own_edit_is_own() -> None:
    """Muninn's own edits (e.g. of a progress notice) are never indexed."""
    event = load("edit")
    event["sender"] = "@muninn-bot:example.org"
    assert norm(event).reason is SkipReason.OWN


# ---------------------------------------------------------------- replies and threads


def test_normalize_reply_strips_body_fallback() -> None:
    """A reply's `> <@user> …` block and the blank line after it are not indexed."""
    result = norm(load("reply"))
    assert isinstance(result, Message)
    assert result.body == "That sounds like a great idea!"


def test_normalize_quote_without_reply_is_kept() -> None:
    """A message starting with `> ` that is not a reply is the user's own quote."""
    result = norm(load("quote"))
    assert result.body == "> To be or not to be\n\nthat is the question"


def test_normalize_thread_reply_has_root() -> None:
    """A thread event names its root; the is_falling_back in-reply-to is not a reply quote."""
    result = norm(load("thread_reply"))
    assert isinstance(result, Message)
    assert result.thread_root == "$alice_hello"
    assert result.body.startswith("> not a fallback, a quote")


def test_normalize_reply_inside_thread_strips_fallback() -> None:
    """A real reply inside a thread (is_falling_back absent) loses its fallback."""
    result = norm(load("thread_inner_reply"))
    assert result.thread_root == "$alice_hello"
    assert result.body == "I'm doing great! Thanks for asking."


def test_normalize_thread_root_is_main_timeline() -> None:
    """The root of a thread is an ordinary main-timeline message."""
    assert norm(load("thread_root")).thread_root is None


def test_normalize_reply_of_only_fallback_is_other() -> None:
    """A reply that is nothing but the fallback has no text of its own."""
    event = load("reply")
    event["content"]["body"] = "> <@bob:example.org> hi\n\n"
    assert norm(event).reason is SkipReason.OTHER


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("> <@a:x> hi\n\nreply", "reply"),
        ("> <@a:x> line one\n> line two\n\nreply\n> later quote", "reply\n> later quote"),
        ("> <@a:x> hi\n>\n> more\n\nreply", "reply"),
        ("> <@a:x> hi\nreply right after", "reply right after"),
        ("no fallback", "no fallback"),
        (">not a quote prefix", ">not a quote prefix"),
        ("", ""),
    ],
)
def test_strip_reply_fallback_cases(body: str, expected: str) -> None:
    """Leading `> ` lines and one blank line go; everything from the first other line stays."""
    assert strip_reply_fallback(body) == expected


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ("<mx-reply><blockquote>q</blockquote></mx-reply>answer", "answer"),
        ("<MX-REPLY>\n<blockquote>a\nb</blockquote>\n</MX-REPLY><b>x</b>", "<b>x</b>"),
        (
            "<b>no reply</b> <mx-reply>later</mx-reply>",
            "<b>no reply</b> <mx-reply>later</mx-reply>",
        ),
    ],
)
def test_strip_mx_reply_cases(html: str, expected: str) -> None:
    """Only a leading <mx-reply> element is removed from formatted_body."""
    assert strip_mx_reply(html) == expected


# ---------------------------------------------------------------- own, commands


def test_normalize_own_text_is_own() -> None:
    """The bot's own plain messages are not indexed either."""
    event = load("text")
    event["sender"] = "@muninn:example.org"
    assert norm(event).reason is SkipReason.OWN


@pytest.mark.parametrize("body", ["!search lake", "!pin", "  !help", "!Search"])
def test_normalize_commands_are_skipped(body: str) -> None:
    """A body starting with the prefix and a letter is a command."""
    event = load("text")
    event["content"]["body"] = body
    assert norm(event).reason is SkipReason.COMMAND


def test_normalize_command_sent_as_reply_is_skipped() -> None:
    """Regression: `!pin` sent as a reply starts with the quote fallback and is still a command."""
    event = load("text")
    event["content"]["body"] = "> <@dave:example.org> Backups run at 03:00\n\n!pin #backups"
    event["content"]["m.relates_to"] = {"m.in_reply_to": {"event_id": "$quoted"}}
    assert norm(event).reason is SkipReason.COMMAND


@pytest.mark.parametrize("body", ["!", "!!!", "! wow", "!1 is a number", "wow!search"])
def test_normalize_exclamations_are_not_commands(body: str) -> None:
    """An exclamation without a letter after the prefix is ordinary text."""
    event = load("text")
    event["content"]["body"] = body
    assert isinstance(norm(event), Message)


def test_normalize_custom_prefix() -> None:
    """The prefix comes from config; another bot's `!` is then ordinary text."""
    event = load("text")
    event["content"]["body"] = "!search x"
    assert isinstance(normalize(event, own_user_ids=OWN, command_prefix="?"), Message)
    event["content"]["body"] = "?search x"
    result = normalize(event, own_user_ids=OWN, command_prefix="?")
    assert result.reason is SkipReason.COMMAND
