"""The email extension with the real clients (``aioimaplib``, ``aiosmtplib``) against a real
Dovecot started in a temporary folder and a real SMTP server (``aiosmtpd``), both on
loopback (``hub.testing.email``); only the model is scripted. Negative cases ("this mail is
not answered") are proven with a sentinel: the reader takes mail in UID order, one at a
time, so once a later mail is answered the earlier one was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, Hub, HubConfig, OutputLog, ScriptedModel, StoreError
from hub.engine import Plugin
from hub.logs import InputLog
from hub.models import Model
from hub.models.openai import OpenAIModel
from hub.store import InMemoryInbox
from hub.testing import FakeOpenAI, temp_config
from hub.testing.email import BOT, DOVECOT, PASSWORD, USER, Dovecot, SmtpSink, mail
from hub_email import CURSOR_KEY, PARK_AFTER, EmailSettings, extension

pytestmark = pytest.mark.skipif(
    not Path(DOVECOT).exists(), reason="Dovecot is not installed (apt-get install dovecot-imapd; .ci/run does)"
)

REPLY = '<response><output type="email:reply">{}</output></response>'


class Running:
    """A started hub with the email extension, its servers, and what its outputs did."""

    def __init__(self, hub: Hub, dovecot: Dovecot, smtp: SmtpSink, model: Any) -> None:
        self.hub = hub
        self.dovecot = dovecot
        self.smtp = smtp
        self.model = model
        self.outputs: list[OutputLog] = []
        outputs = self.outputs

        class Observe(Plugin):
            def on_output(self, run: Any, out: OutputLog) -> None:
                outputs.append(out)

        hub.plugins.add(Observe())

    async def send(self, text: str | None = "hello", *, folder: str = "INBOX", **kw: Any) -> str:
        """A mail delivered to the bot's folder; its Message-ID (without brackets)."""
        raw, msg_id = mail(text, **kw)
        await self.dovecot.deliver(raw, folder=folder)
        return msg_id.strip("<>")

    async def wait_outputs(self, n: int, timeout: float = 10) -> list[OutputLog]:
        deadline = time.monotonic() + timeout
        while len(self.outputs) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.outputs)} of {n} outputs: {self.outputs!r}")
            await asyncio.sleep(0.01)
        return self.outputs


def settings_for(dovecot: Dovecot, smtp: SmtpSink, **settings: Any) -> EmailSettings:
    settings.setdefault("username", BOT)
    settings.setdefault("password", PASSWORD)
    settings.setdefault("tls", "none")
    return EmailSettings(
        imap_host="127.0.0.1", imap_port=dovecot.port, smtp_host="127.0.0.1", smtp_port=smtp.port, **settings
    )


@contextlib.asynccontextmanager
async def servers() -> AsyncIterator[tuple[Dovecot, SmtpSink]]:
    async with Dovecot() as dovecot, SmtpSink() as smtp:
        yield dovecot, smtp


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    responses: Any = (),
    *,
    on: tuple[Dovecot, SmtpSink] | None = None,
    default: str | None = REPLY.format("pong"),
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    inbox: Any = None,
    **settings: Any,
) -> AsyncIterator[Running]:
    """A started hub reading ``on`` (default: a fresh Dovecot and SMTP server)."""
    async with contextlib.AsyncExitStack() as stack:
        if on is None:
            on = await stack.enter_async_context(servers())
        dovecot, smtp = on
        cfg = config or temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        model = model or ScriptedModel(responses, default=default)
        ext = extension(settings_for(dovecot, smtp, **settings))
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions], inbox=inbox)
        async with hub:
            yield Running(hub, dovecot, smtp, model)


def prompt_of(model: Any, i: int) -> str:
    return str(model.requests[i].messages[-1]["content"])


# --- in and out -------------------------------------------------------------------------


async def test_a_mail_is_answered_in_its_thread_and_flagged_read(tmp_path: Path) -> None:
    async with running(tmp_path, [REPLY.format("Hello Alice!")]) as r:
        msg_id = await r.send("Can you help me?", subject="A question")
        (sent,) = await r.smtp.wait_sent(1)
        m = sent.message
        assert sent.recipients == [USER] and sent.login == BOT and str(m["From"]) == BOT
        assert str(m["Subject"]) == "Re: A question"
        assert str(m["In-Reply-To"]) == f"<{msg_id}>" and str(m["References"]) == f"<{msg_id}>"
        assert str(m["Auto-Submitted"]) == "auto-replied" and str(m["Message-ID"]).startswith("<")
        assert sent.text == "Hello Alice!"
        assert "Can you help me?" in prompt_of(r.model, 0)
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"email:thread:{msg_id}"]
        await r.wait_outputs(1)
        assert await r.dovecot.seen() == [1]


async def test_a_reply_joins_the_thread_of_its_first_mail_with_only_its_new_part(tmp_path: Path) -> None:
    async with running(tmp_path, [REPLY.format("first answer"), REPLY.format("second answer")]) as r:
        first = await r.send("What is the capital of France?", subject="Geography")
        (sent,) = await r.smtp.wait_sent(1)
        bot_id = str(sent.message["Message-ID"]).strip("<>")
        quoted = (
            "And of Italy?\n\n--\nAlice Example\nAcme Inc.\n\n"
            "On Mon, 1 Jan 2026 at 10:00, Bot <bot@example.org> wrote:\n> first answer\n"
        )
        await r.send(
            quoted, subject="Re: Geography", in_reply_to=f"<{bot_id}>", references=[f"<{first}>", f"<{bot_id}>"]
        )
        _, second = await r.smtp.wait_sent(2)
        assert str(second.message["Subject"]) == "Re: Geography"
        refs = str(second.message["References"]).split()
        assert refs[0] == f"<{first}>" and f"<{bot_id}>" in refs
        runs = await r.hub.runs.list(limit=5)
        assert {run.context for run in runs} == {f"email:thread:{first}"}
        text = prompt_of(r.model, 1)
        assert "And of Italy?" in text
        assert "first answer" not in text.split("And of Italy?")[1] and "Acme Inc." not in text


async def test_html_mail_becomes_text(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.send(None, html="<html><body><p>Hello <b>from</b> HTML</p><style>p {}</style></body></html>")
        await r.smtp.wait_sent(1)
        text = prompt_of(r.model, 0)
        assert "Hello from HTML" in text and "<b>" not in text and "p {}" not in text


async def test_an_attached_file_reaches_the_model_fetched_again_from_the_mailbox(tmp_path: Path) -> None:
    async with FakeOpenAI(default=REPLY.format("Got it.")) as ai:
        cfg = temp_config(tmp_path)
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path, model=model, config=cfg) as r:
            await r.send("the numbers", attachments=[("q3.txt", "text/plain", b"the quarterly numbers\n")])
            (sent,) = await r.smtp.wait_sent(1)
        assert sent.text == "Got it."
        prompt = ai.prompt(0)
        assert "q3.txt" in prompt and "the quarterly numbers" in prompt


async def test_an_attachment_over_the_media_cap_is_refused_by_name(tmp_path: Path) -> None:
    async with FakeOpenAI(default=REPLY.format("ok")) as ai:
        cfg = temp_config(tmp_path)
        cfg.media.max_bytes = 1000
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path, model=model, config=cfg) as r:
            await r.send("big", attachments=[("big.txt", "text/plain", b"x" * 5000)])
            await r.smtp.wait_sent(1)
        prompt = ai.prompt(0)
        assert "big.txt" in prompt and "over the 1 KB limit" in prompt and "xxxxxxxx" not in prompt


async def test_without_idle_on_the_server_new_mail_is_polled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hub_email")
    async with Dovecot(capability="IMAP4rev1 UIDPLUS") as dovecot, SmtpSink() as smtp:
        async with running(tmp_path, on=(dovecot, smtp), poll_interval=0.1) as r:
            await r.send("polled")
            await smtp.wait_sent(1)
            await r.send("polled again")
            await smtp.wait_sent(2)
        assert "polled again" in prompt_of(r.model, 1)
    assert "polling for new mail every 0.1s (the server has no IDLE)" in caplog.text


# --- what is not answered ------------------------------------------------------------------


async def test_forged_automatic_and_own_mail_is_not_answered(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.send("forged", authenticated=False)
        await r.send("no results at all", authenticated=None)
        # a sender's own Authentication-Results below the receiving server's counts for nothing
        raw, _ = mail("spoofed", authenticated=None)
        forged = b"Authentication-Results: mx.example.org; dkim=pass header.d=example.com\r\n"
        receiving = b"Authentication-Results: mx.example.org; dkim=fail header.d=example.com\r\n"
        await r.dovecot.deliver(receiving + forged + raw)
        await r.send("out of office", headers={"Auto-Submitted": "auto-replied"})
        await r.send("newsletter", headers={"Precedence": "bulk"})
        await r.send("a list's mail", headers={"List-Id": "<talk.lists.example.com>"})
        await r.send("a bounce", sender="mailer-daemon@example.com")
        await r.send("from myself", sender=BOT)
        await r.send(
            "dkim for another domain",
            authenticated=None,
            headers={"Authentication-Results": "mx.example.org; dkim=pass header.d=evil.example"},
        )
        await r.send("a sentinel")
        (sent,) = await r.smtp.wait_sent(1)
        assert len(r.model.requests) == 1 and "a sentinel" in prompt_of(r.model, 0)


async def test_spf_pass_for_the_sender_domain_is_enough(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.send(
            "spf only",
            authenticated=None,
            headers={"Authentication-Results": "mx.example.org; dkim=none; spf=pass smtp.mailfrom=alice@example.com"},
        )
        await r.smtp.wait_sent(1)
        assert "spf only" in prompt_of(r.model, 0)


async def test_the_loop_guard_stops_answering_a_bot_in_a_thread(tmp_path: Path) -> None:
    robot = "robot@example.com"
    async with running(tmp_path, bots=[robot], loop_guard_turns=2) as r:
        ids = [await r.send("I am a robot", sender=robot)]
        for i in range(3):
            refs = [f"<{m}>" for m in ids]
            ids.append(await r.send(f"robot again {i}", sender=robot, in_reply_to=refs[-1], references=refs))
        await r.send("a sentinel")  # taken after the robot's mails: they were decided before it
        while not any(sent.recipients == [USER] for sent in r.smtp.sent):
            await r.smtp.wait_sent(len(r.smtp.sent) + 1)
        recorded = [await r.hub.received(f"email:{m}") for m in ids]
        assert recorded == [True, True, False, False]


async def test_require_authenticated_false_answers_unauthenticated_mail(tmp_path: Path) -> None:
    async with running(tmp_path, require_authenticated=False) as r:
        await r.send("no results", authenticated=None)
        await r.smtp.wait_sent(1)


async def test_allowed_senders_by_address_and_domain(tmp_path: Path) -> None:
    async with running(tmp_path, allowed_senders=["bob@example.net", "@example.com"]) as r:
        await r.send("stranger", sender="mallory@example.org")
        await r.send("bob", sender="Bob@Example.net")
        await r.send("alice by domain")
        await r.smtp.wait_sent(2)
        assert sorted(s.recipients[0] for s in r.smtp.sent) == [USER, "bob@example.net"]


async def test_pairing_mails_the_code_once_and_answers_after_approval(tmp_path: Path) -> None:
    async with running(tmp_path, dm_policy="pairing") as r:
        await r.send("let me in")
        (code_mail,) = await r.smtp.wait_sent(1)
        assert code_mail.recipients == [USER] and "hub pairing approve" in code_mail.text
        assert not r.model.requests
        code = re.search(r"hub pairing approve (\S+)", code_mail.text)
        assert code is not None
        await r.hub.access.approve(code.group(1).strip("`.'\""))
        await r.send("now?")
        await r.smtp.wait_sent(2)
        assert "now?" in prompt_of(r.model, 0)


# --- commands ---------------------------------------------------------------------------------


async def test_a_mail_whose_subject_is_a_command_runs_it(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.send("whatever the body says", subject="/help")
        (sent,) = await r.smtp.wait_sent(1)
        assert "/new" in sent.text and not r.model.requests


# --- durable intake -----------------------------------------------------------------------


async def test_a_restart_reads_nothing_twice_and_takes_what_came_meanwhile(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    async with servers() as on:
        async with running(tmp_path, on=on, config=cfg) as r:
            await r.send("one")
            await r.smtp.wait_sent(1)
        dovecot, smtp = on
        raw, _ = mail("two, while the bot was away")
        await dovecot.deliver(raw)
        async with running(tmp_path, on=on, config=cfg) as r:
            await r.smtp.wait_sent(2)
            await r.send("a sentinel")
            await r.smtp.wait_sent(3)
            assert "two, while" in prompt_of(r.model, 0) and "a sentinel" in prompt_of(r.model, 1)
        assert len(smtp.sent) == 3
        assert await dovecot.seen() == [1, 2, 3]


async def test_recorded_but_not_flagged_is_not_answered_again(tmp_path: Path) -> None:
    """A crash after the inbox took a mail and before it was flagged: read again, refused."""
    cfg = temp_config(tmp_path)
    async with servers() as on:
        dovecot, smtp = on
        async with running(tmp_path, on=on, config=cfg) as r:
            await r.send("once")
            await r.smtp.wait_sent(1)
            # as if the flag and the cursor had never been written
            await r.hub.memory.set(f"{CURSOR_KEY}{BOT}:INBOX", None)
        import imaplib

        def unflag() -> None:
            m = imaplib.IMAP4("127.0.0.1", dovecot.port)
            m.login(BOT, PASSWORD)
            m.select("INBOX")
            m.uid("STORE", "1", "-FLAGS", r"(\Seen)")
            m.logout()

        await asyncio.to_thread(unflag)
        async with running(tmp_path, on=on, config=cfg) as r:
            await r.send("a sentinel")
            await r.smtp.wait_sent(2)
            assert len(r.model.requests) == 1 and "a sentinel" in prompt_of(r.model, 0)
        assert await dovecot.seen() == [1, 2]


async def test_a_new_uidvalidity_resets_the_cursor_without_answering_old_mail(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    async with servers() as on:
        dovecot, smtp = on
        await dovecot.create("Bot")
        async with running(tmp_path, on=on, config=cfg, folder="Bot") as r:
            for i in range(3):
                await dovecot.deliver(mail(f"old {i}")[0], folder="Bot")
            await smtp.wait_sent(3)
        await dovecot.recreate("Bot")  # a new UIDVALIDITY; UIDs start at 1 again
        await dovecot.deliver(mail("old, restored and read")[0], folder="Bot", seen=True)
        await dovecot.deliver(mail("new after the change")[0], folder="Bot")
        async with running(tmp_path, on=on, config=cfg, folder="Bot") as r:
            await smtp.wait_sent(4)
            await dovecot.deliver(mail("a sentinel")[0], folder="Bot")
            await smtp.wait_sent(5)
            texts = [prompt_of(r.model, i) for i in range(len(r.model.requests))]
            assert len(texts) == 2 and "new after the change" in texts[0] and "a sentinel" in texts[1]


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does; it counts them."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.refused = 0

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.failures:
            self.failures -= 1
            self.refused += 1
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


async def test_a_store_outage_parks_nothing_and_the_mail_is_answered_once_the_store_is_back(tmp_path: Path) -> None:
    inbox = FailingInbox(PARK_AFTER + 1)  # more failures than would park a poison mail
    async with running(tmp_path, inbox=inbox) as r:
        await r.send("keep me")
        (sent,) = await r.smtp.wait_sent(1)
        assert sent.text == "pong" and inbox.refused == PARK_AFTER + 1
        assert not await r.hub.inbox.parked()
        assert await r.dovecot.seen() == [1] and len(r.model.requests) == 1


async def test_a_mail_that_cannot_be_read_is_parked_after_three_failures_and_reading_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-abcdefghijklmnopqrstuvwxyz012345"
    monkeypatch.setenv("EMAIL_PASSWORD", secret)  # a secret the hub knows, as from the config
    async with running(tmp_path) as r:
        await r.dovecot.deliver(f"Subject: no sender\r\nX-Token: {secret}\r\n\r\nbody\r\n".encode())
        await r.send("a sentinel")
        await r.smtp.wait_sent(1)
        (entry,) = await r.hub.inbox.parked()
        assert "no sender address" in entry.error and entry.failures == 3
        assert secret not in str(entry.entry.content) and secret not in str(entry.entry.meta)
        assert "X-Token: [REDACTED]" in str(entry.entry.content)
        assert await r.dovecot.seen() == [1, 2]
