"""Reading Meta's webhook payloads (pure): messages of every kind, statuses with their error
codes, another number's changes left out, a user known only by their business-scoped id,
and what cannot be read reported in its place."""

from __future__ import annotations

import pytest

from hub.testing.whatsapp import PHONE_NUMBER_ID, USER, FakeWhatsApp
from hub_whatsapp import Inbound, Unreadable, read_payload


def test_a_text_message_with_its_sender_and_a_status_with_its_error_codes() -> None:
    fake = FakeWhatsApp()
    payload, wamid = fake.message("hi there", name="Ada")
    (msg,), () = read_payload(payload, PHONE_NUMBER_ID)
    assert isinstance(msg, Inbound)
    assert (msg.wamid, msg.wa_id, msg.text, msg.name, msg.user_id) == (wamid, USER, "hi there", "Ada", f"US.{USER}")
    assert msg.platform_id == f"whatsapp:{wamid}"
    errors = [{"code": 131047, "title": "Re-engagement message"}]
    (), (status,) = read_payload(fake.status("wamid.x", "failed", errors=errors), PHONE_NUMBER_ID)
    assert status.status == "failed" and status.error_codes == (131047,) and status.wa_id == USER


def test_another_numbers_changes_and_other_fields_are_left_out() -> None:
    fake = FakeWhatsApp(phone_number_id="999")
    payload, _ = fake.message("for the other number")
    assert read_payload(payload, PHONE_NUMBER_ID) == ([], [])
    payload["entry"][0]["changes"][0]["field"] = "account_update"
    assert read_payload(payload, "999") == ([], [])


def test_a_user_known_only_by_their_business_scoped_id() -> None:
    fake = FakeWhatsApp()
    payload, wamid = fake.message("no number shown")
    value = payload["entry"][0]["changes"][0]["value"]
    del value["messages"][0]["from"]
    del value["contacts"][0]["wa_id"]
    (msg,), _ = read_payload(payload, PHONE_NUMBER_ID)
    assert isinstance(msg, Inbound) and msg.wa_id == f"US.{USER}" and msg.text == "no number shown"


@pytest.mark.parametrize(
    ("kind", "extra", "text"),
    [
        ("reaction", {"reaction": {"message_id": "wamid.bot1", "emoji": "👍"}}, "(reacted 👍 to message wamid.bot1)"),
        ("location", {"location": {"latitude": 1.5, "longitude": 2.5}}, "(shared a location: 1.5, 2.5)"),
        ("button", {"button": {"text": "Yes"}}, "Yes"),
        ("sticker", {"sticker": {"id": "777", "mime_type": "image/webp"}}, ""),
        ("unsupported", {}, "(sent a unsupported this bot cannot read)"),
    ],
)
def test_other_kinds_are_read_as_text(kind: str, extra: dict, text: str) -> None:
    payload, _ = FakeWhatsApp().message(kind=kind, extra=extra)
    (msg,), _ = read_payload(payload, PHONE_NUMBER_ID)
    assert isinstance(msg, Inbound) and msg.text == text
    if kind == "sticker":
        assert msg.media[0].ref == "777"


def test_what_cannot_be_read_is_reported_in_its_place_and_a_non_whatsapp_body_raises() -> None:
    fake = FakeWhatsApp()
    payload, wamid = fake.message(kind="text", extra={"text": None})
    (bad,), _ = read_payload(payload, PHONE_NUMBER_ID)
    assert isinstance(bad, Unreadable) and bad.wamid == wamid and bad.wa_id == USER
    with pytest.raises(Unreadable, match="whatsapp_business_account"):
        read_payload({"object": "page", "entry": []}, PHONE_NUMBER_ID)
