"""``tls = "implicit"`` and ``"starttls"`` against a Dovecot and an SMTP server that speak
TLS with a certificate from a test authority (``trustme``): the mail is read and answered
over TLS, the password never crosses in the clear, and a certificate the client does not
trust stops ``hub run`` with a line that says why."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.email import BOT, DOVECOT, PASSWORD, USER, Dovecot, SmtpSink, mail
from hub_email import EmailSettings, EmailStartError, extension

pytestmark = pytest.mark.skipif(not Path(DOVECOT).exists(), reason="Dovecot is not installed (.ci/run installs it)")

REPLY = '<response><output type="email:reply">over TLS</output></response>'


@contextlib.asynccontextmanager
async def tls_servers(tls: str) -> AsyncIterator[tuple[Dovecot, SmtpSink, trustme.CA]]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    key_and_chain = cert.private_key_and_cert_chain_pem.bytes()
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    async with (
        Dovecot(cert=(chain, key_and_chain)) as dovecot,
        SmtpSink(tls=server_ctx, implicit=tls == "implicit") as smtp,
    ):
        yield dovecot, smtp, ca


def settings_for(dovecot: Dovecot, smtp: SmtpSink, tls: str, **kw: Any) -> EmailSettings:
    return EmailSettings(
        imap_host="127.0.0.1",
        imap_port=dovecot.tls_port if tls == "implicit" else dovecot.port,
        smtp_host="127.0.0.1",
        smtp_port=smtp.port,
        tls=tls,
        username=BOT,
        password=PASSWORD,
        **kw,
    )


@pytest.mark.parametrize("tls", ["implicit", "starttls"])
async def test_a_mail_is_read_and_answered_over_tls(tmp_path: Path, tls: str) -> None:
    async with tls_servers(tls) as (dovecot, smtp, ca):
        client_ctx = ssl.create_default_context()
        ca.configure_trust(client_ctx)
        ext = extension(settings_for(dovecot, smtp, tls), tls_context=client_ctx)
        model = ScriptedModel([], default=REPLY)
        async with Hub(temp_config(tmp_path), model=model, load_extensions=False, extensions=[ext]):
            await dovecot.deliver(mail("hello over TLS")[0])
            (sent,) = await smtp.wait_sent(1)
        assert sent.recipients == [USER] and sent.login == BOT and sent.text == "over TLS"
        assert "hello over TLS" in str(model.requests[0].messages[-1]["content"])
        log = dovecot.log()
        assert "Login: user=<bot@example.org>" in log and "TLS" in log


@pytest.mark.parametrize("tls", ["implicit", "starttls"])
async def test_a_certificate_the_client_does_not_trust_stops_the_start(tmp_path: Path, tls: str) -> None:
    async with tls_servers(tls) as (dovecot, smtp, _):
        ext = extension(settings_for(dovecot, smtp, tls))  # the system's authorities: not the test's
        hub = Hub(temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[ext])
        with pytest.raises(Exception) as caught:
            async with hub:
                pass
        chain = [caught.value, caught.value.__cause__, getattr(caught.value.__cause__, "__cause__", None)]
        assert any(isinstance(e, EmailStartError) for e in chain), chain
        assert "CERTIFICATE_VERIFY_FAILED" in str(chain) or "certificate verify failed" in str(chain)
        assert "Login: user=" not in dovecot.log()
