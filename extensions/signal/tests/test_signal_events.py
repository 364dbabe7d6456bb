"""Reading the receive websocket's frames (pure): the documented envelope shapes, mentions
at UTF-16 offsets, edits, and what is not a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hub.testing.signal import BOT_UUID, GROUP, GROUP_INTERNAL, NUMBER, USER, USER_UUID, FakeSignal
from hub_signal import ApiNotice, Ignored, Inbound, Me, Unreadable, read_frame

fake = FakeSignal()


def me() -> Me:
    return Me(NUMBER)


def test_a_direct_message_is_known_by_its_author_and_timestamp() -> None:
    frame, stamp = fake.message("hello")
    m = read_frame(frame, me())
    assert isinstance(m, Inbound)
    assert (m.chat, m.author, m.number, m.text, m.kind) == (USER, USER_UUID, USER, "hello", "text")
    assert m.platform_id == f"signal:{USER_UUID}:{stamp}" and m.group is None and not m.mentioned


def test_a_mention_after_an_emoji_is_cut_at_its_utf16_offset() -> None:
    # "🎉" is two UTF-16 code units: the mention of the bot starts at 3, not at 2
    mention = {"name": "Hub", "number": NUMBER, "uuid": BOT_UUID, "start": 3, "length": 1}
    ann = {"name": "Ann", "uuid": "9f1d2c3b-0000-4000-8000-00000000000a", "start": 9, "length": 1}
    frame, _ = fake.message("🎉 \ufffc ask \ufffc", group=GROUP_INTERNAL, mentions=[mention, ann])
    mine = me()
    m = read_frame(frame, mine)
    assert isinstance(m, Inbound)
    assert m.text == "🎉 ask @Ann" and m.mentioned and m.chat == GROUP
    assert mine.uuid == BOT_UUID  # learnt from the mention of its own number


def test_an_edit_is_a_new_message_that_says_so() -> None:
    frame, stamp = fake.message("the fixed text", edit_of=1234)
    m = read_frame(frame, me())
    assert isinstance(m, Inbound) and m.kind == "edit" and m.timestamp == stamp
    assert m.text == "(edited their message) the fixed text"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda f: f["envelope"].update(sourceNumber=NUMBER, sourceUuid=BOT_UUID), "own account"),
        (lambda f: f.update(account="+15550009999"), "another account"),
        (lambda f: f["envelope"]["dataMessage"].pop("message"), "no text or attachment"),
        (lambda f: f["envelope"].update(dataMessage=None, receiptMessage={"isDelivery": True}), "receiptMessage"),
    ],
)
def test_what_is_not_a_message_is_ignored_with_why(change: Callable[[dict[str, Any]], Any], why: str) -> None:
    frame, _ = fake.message("x")
    change(frame)
    if frame["envelope"].get("dataMessage") is None:
        frame["envelope"].pop("dataMessage", None)
    m = read_frame(frame, me())
    assert isinstance(m, Ignored) and why in m.reason


def test_an_error_frame_is_a_notice_and_a_broken_one_unreadable() -> None:
    assert read_frame({"error": "signal-cli exited"}, me()) == ApiNotice("signal-cli exited")
    frame, stamp = fake.message("x", attachments=[{"contentType": "image/png"}])
    with pytest.raises(Unreadable) as e:
        read_frame(frame, me())
    assert e.value.author == USER_UUID and e.value.timestamp == stamp
    with pytest.raises(Unreadable):
        read_frame({"envelope": {"sourceNumber": USER}}, me())
