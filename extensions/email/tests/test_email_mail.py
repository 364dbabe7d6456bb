"""Reading a mail (pure): the thread it belongs to, only its new part, whether the receiving
server authenticated its sender (the topmost Authentication-Results only, aligned with the
From domain), automatic mail; and the reply's headers."""

from __future__ import annotations

import pytest

from hub.testing.email import mail
from hub_email import EmailSettings, Unreadable, build_reply, read_mail, reply_subject


def with_results(*headers: str, sender: str = "alice@example.com") -> bytes:
    raw, _ = mail("hi", sender=sender, authenticated=None)
    return b"".join(f"Authentication-Results: {h}\r\n".encode() for h in headers) + raw


@pytest.mark.parametrize(
    ("headers", "sender", "ok"),
    [
        (["mx.example.org; dkim=pass header.d=example.com"], "alice@example.com", True),
        (["mx.example.org; dkim=pass header.d=example.com"], "alice@mail.example.com", True),  # a parent domain
        (["mx.example.org; dkim=pass header.d=mail.example.com"], "alice@example.com", False),
        (["mx.example.org; dkim=pass header.d=evil.example"], "alice@example.com", False),
        (["mx.example.org; spf=pass smtp.mailfrom=bounce@example.com"], "alice@example.com", True),
        (["mx.example.org; spf=pass smtp.mailfrom=example.com"], "alice@example.com", True),
        (
            ["mx.example.org; spf=softfail smtp.mailfrom=example.com; dkim=fail header.d=example.com"],
            "alice@example.com",
            False,
        ),
        # only the topmost is the receiving server's: a pass written below it by the sender is nothing
        (
            ["mx.example.org; dkim=fail header.d=example.com", "mx.example.org; dkim=pass header.d=example.com"],
            "alice@example.com",
            False,
        ),
        (["mx.example.org; dkim=pass header.d=example.com", "evil; dkim=fail"], "alice@example.com", True),
        (["this is not ; a = valid header"], "alice@example.com", False),
        ([], "alice@example.com", False),
    ],
)
def test_authenticated_only_by_the_topmost_results_for_the_from_domain(
    headers: list[str], sender: str, ok: bool
) -> None:
    m = read_mail(with_results(*headers, sender=sender), ref="1/1")
    assert m.authenticated is ok, m.auth_reason


def test_the_thread_is_the_first_of_references_else_in_reply_to_else_itself() -> None:
    alone, own = mail("a")
    assert read_mail(alone, ref="1/1").root == own.strip("<>")
    answer, _ = mail("b", in_reply_to="<p@x>")
    assert read_mail(answer, ref="1/2").root == "p@x"
    deep, _ = mail("c", in_reply_to="<q@x>", references=["<root@x>", "<p@x>", "<q@x>"])
    assert read_mail(deep, ref="1/3").root == "root@x"


def test_only_the_new_part_is_read() -> None:
    text = (
        "Yes, Tuesday works.\n\nBest regards,\nAlice\n\n"
        "On Mon, 1 Jan 2026 at 10:00, Bot <bot@example.org> wrote:\n> Does Tuesday work?\n> The bot\n"
    )
    assert read_mail(mail(text)[0], ref="1/1").text == "Yes, Tuesday works."
    assert read_mail(mail("Hi\n\nSent from my iPhone")[0], ref="1/1").text == "Hi"
    html = "<div>Hello <i>there</i></div><div><br></div><blockquote>On ... wrote: old</blockquote>"
    assert read_mail(mail(None, html=html)[0], ref="1/1").text.startswith("Hello there")


def test_a_mail_without_a_sender_is_unreadable() -> None:
    with pytest.raises(Unreadable, match="no sender address"):
        read_mail(b"Subject: x\r\n\r\nbody\r\n", ref="1/1")


@pytest.mark.parametrize(
    ("headers", "sender", "why"),
    [
        ({"Auto-Submitted": "auto-replied"}, "alice@example.com", "Auto-Submitted"),
        ({"Auto-Submitted": "no"}, "alice@example.com", ""),
        ({"Precedence": "list"}, "alice@example.com", "Precedence"),
        ({"List-Id": "<a.lists.example.com>"}, "alice@example.com", "List-Id"),
        ({}, "MAILER-DAEMON@example.com", "sent by mailer-daemon@example.com"),
        ({}, "alice@example.com", ""),
    ],
)
def test_automatic_mail(headers: dict[str, str], sender: str, why: str) -> None:
    auto = read_mail(mail("x", sender=sender, headers=headers)[0], ref="1/1").auto
    assert auto.startswith(why) if why else auto == ""


def test_the_reply_threads_and_keeps_references_bounded() -> None:
    settings = EmailSettings(
        imap_host="imap.example.org", smtp_host="smtp.example.org", username="bot@example.org", password="pw"
    )
    refs = [f"r{i}@x" for i in range(40)]
    msg = build_reply(
        settings, to="alice@example.com", subject="Re: Plans", text="ok", in_reply_to="last@x", references=refs
    )
    kept = str(msg["References"]).split()
    assert kept[0] == "<r0@x>" and kept[-1] == "<last@x>" and len(kept) == 20
    assert str(msg["Subject"]) == "Re: Plans" and str(msg["In-Reply-To"]) == "<last@x>"
    assert str(msg["From"]) == "bot@example.org" and str(msg["Auto-Submitted"]) == "auto-replied"
    assert reply_subject("re: x") == "re: x" and reply_subject("") == "Re: (no subject)"
