"""The pure parts of the Matrix extension: settings, which events are answered, event content."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from hub_matrix import (
    MAX_EVENT_BYTES,
    Encrypted,
    Ignored,
    Inbound,
    MatrixSettings,
    classify,
    edit_content,
    message_content,
)

ME = "@hubbot:example.org"
ROOM = "!room:example.org"


def settings(**kw: Any) -> MatrixSettings:
    return MatrixSettings(homeserver="https://m.example.org", user_id=ME, access_token="t", **kw)


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"user_id": "hubbot"}, "is not a Matrix user id"),
        ({"homeserver": "matrix.example.org"}, "is not the homeserver's URL"),
        ({"allowed_rooms": ["#room:example.org"]}, "an alias '#room:server' is not an id"),
        ({"bots": ["otherbot"]}, "is not a Matrix user id"),
        ({"access_token": "", "password": ""}, "no way to log in"),
        ({"room_rate": (0, 1.0)}, "messages >= 1"),
    ],
)
def test_settings_name_what_is_wrong(kw: dict[str, Any], error: str) -> None:
    base = {"homeserver": "https://m.example.org", "user_id": ME, "access_token": "t", **kw}
    with pytest.raises(ValidationError, match=error):
        MatrixSettings(**base)


def event(body: str = "hi", sender: str = "@ann:example.org", **content: Any) -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "event_id": "$e1",
        "sender": sender,
        "origin_server_ts": 1,
        "content": {"msgtype": "m.text", "body": body, **content},
    }


@pytest.mark.parametrize(
    ("ev", "direct", "answered"),
    [
        (event("hello"), True, True),
        (event("hello"), False, False),
        (event("hello", **{"m.mentions": {"user_ids": [ME]}}), False, True),
        (event(f"hey {ME}"), False, True),
        (event("HubBot: hey"), False, True),  # the name first, then a colon
        (event("hubbotty: hey"), False, False),
        (event("see", formatted_body=f'<a href="https://matrix.to/#/{ME}">Hub</a> see'), False, True),
        (event("mine", sender=ME), True, False),
        (event("note", msgtype="m.notice"), True, False),
        (event("* fixed", **{"m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}}), True, False),
        ({**event(), "state_key": ""}, True, False),
        ({"type": "m.reaction", "event_id": "$r", "sender": "@a:b", "content": {}}, True, False),
    ],
)
def test_which_events_are_answered(ev: dict[str, Any], direct: bool, answered: bool) -> None:
    verdict = classify(ROOM, ev, me=ME, settings=settings(), direct=direct)
    assert isinstance(verdict, Inbound) is answered, verdict


def test_a_watched_room_answers_everything_and_groups_none_only_direct_rooms() -> None:
    assert isinstance(classify(ROOM, event("x"), me=ME, settings=settings(rooms=[ROOM]), direct=False), Inbound)
    mention = event("x", **{"m.mentions": {"user_ids": [ME]}})
    verdict = classify(ROOM, mention, me=ME, settings=settings(groups="none"), direct=False)
    assert isinstance(verdict, Ignored) and "groups" in verdict.reason


def test_a_reply_loses_its_quoted_fallback_and_a_file_its_name_as_text() -> None:
    reply = event(
        "> <@bob:example.org> the question\n> second line\n\nthe answer",
        **{"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}},
    )
    verdict = classify(ROOM, reply, me=ME, settings=settings(), direct=True)
    assert isinstance(verdict, Inbound) and verdict.text == "the answer" and verdict.replied_to == "$q"
    image = event("box.png", msgtype="m.image", url="mxc://example.org/abc", info={"mimetype": "image/png", "size": 5})
    verdict = classify(ROOM, image, me=ME, settings=settings(), direct=True)
    assert isinstance(verdict, Inbound) and verdict.text == ""
    (part,) = verdict.media
    assert (part.kind, part.ref, part.mime, part.size, part.name) == (
        "image",
        "mxc://example.org/abc",
        "image/png",
        5,
        "box.png",
    )
    captioned = event("look at this", msgtype="m.file", filename="r.pdf", url="mxc://example.org/d")
    verdict = classify(ROOM, captioned, me=ME, settings=settings(), direct=True)
    assert isinstance(verdict, Inbound) and verdict.text == "look at this" and verdict.media[0].name == "r.pdf"


def test_an_encrypted_event_is_told_apart() -> None:
    ev = {"type": "m.room.encrypted", "event_id": "$x", "sender": "@ann:example.org", "content": {}}
    assert isinstance(classify(ROOM, ev, me=ME, settings=settings(), direct=True), Encrypted)


def test_content_plain_html_reply_and_edit() -> None:
    plain = message_content("just words")
    assert plain == {"msgtype": "m.text", "body": "just words", "m.mentions": {}}
    rich = message_content("<b>not html</b> and `code`", reply_to="$q", mention="@ann:example.org", notice=True)
    assert rich["msgtype"] == "m.notice" and rich["format"] == "org.matrix.custom.html"
    assert rich["formatted_body"] == "<p>&lt;b&gt;not html&lt;/b&gt; and <code>code</code></p>"
    assert rich["m.relates_to"] == {"m.in_reply_to": {"event_id": "$q"}}
    assert rich["m.mentions"] == {"user_ids": ["@ann:example.org"]}
    edit = edit_content("$m", "**done**")
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$m"} and edit["body"] == "* **done**"
    assert edit["m.new_content"]["formatted_body"] == "<p><strong>done</strong></p>"
    assert "m.mentions" not in edit["m.new_content"] and edit["m.mentions"] == {}


def test_an_html_body_that_would_burst_the_event_is_left_out() -> None:
    text = "<" * 15_000  # escaped to &lt; in HTML: four times as long
    content = edit_content("$m", "- " + text)
    assert len(json.dumps(content)) <= MAX_EVENT_BYTES
    assert content["m.new_content"]["body"] == "- " + text and "formatted_body" not in content["m.new_content"]
