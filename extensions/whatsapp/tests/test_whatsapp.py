"""The WhatsApp extension with the real ``pywa_async`` client against the loopback fake of
the Graph API (``hub.testing.whatsapp.FakeWhatsApp``), and Meta's webhooks as real signed
HTTP requests to the hub's ``[http]`` endpoint; only the model is scripted. Negative cases
("this message is not answered") are proven with a sentinel: the intake takes messages one
at a time, so once a later message is answered the earlier one was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, Hub, HubConfig, OutputLog, ScriptedModel
from hub.config import HttpSection
from hub.engine import Plugin
from hub.models import Model
from hub.testing import loopback_resolver, temp_config
from hub.testing.whatsapp import (
    APP_SECRET,
    MEDIA_HOST,
    PHONE_NUMBER_ID,
    TOKEN,
    USER,
    VERIFY_TOKEN,
    FakeWhatsApp,
)
from hub_whatsapp import WhatsAppSettings, extension


class Running:
    """A started hub with the WhatsApp extension, its fake, and what its outputs did."""

    def __init__(self, hub: Hub, wa: FakeWhatsApp, model: Any) -> None:
        self.hub = hub
        self.wa = wa
        self.model = model
        self.outputs: list[OutputLog] = []
        outputs = self.outputs

        class Observe(Plugin):
            def on_output(self, run: Any, out: OutputLog) -> None:
                outputs.append(out)

        hub.plugins.add(Observe())

    async def say(self, text: str, **kw: Any) -> str:
        """A user's message delivered as Meta does; returns its wamid once answered 200."""
        payload, wamid = self.wa.message(text, **kw)
        status, body = await self.wa.deliver(payload)
        assert status == 200, body
        return wamid

    async def wait_outputs(self, n: int, timeout: float = 5) -> list[OutputLog]:
        deadline = time.monotonic() + timeout
        while len(self.outputs) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.outputs)} of {n} outputs: {self.outputs!r}")
            await asyncio.sleep(0.01)
        return self.outputs


def settings_for(wa: FakeWhatsApp, **settings: Any) -> WhatsAppSettings:
    settings.setdefault("phone_number_id", PHONE_NUMBER_ID)
    settings.setdefault("token", TOKEN)
    settings.setdefault("app_secret", APP_SECRET)
    settings.setdefault("verify_token", VERIFY_TOKEN)
    return WhatsAppSettings(base_url=wa.base_url, **settings)


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    responses: Any = (),
    *,
    wa: FakeWhatsApp | None = None,
    default: str | None = "pong",
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    inbox: Any = None,
    **settings: Any,
) -> AsyncIterator[Running]:
    """A started hub with the WhatsApp extension against ``wa`` (default: a fresh fake), its
    webhooks pointed at the hub; answered by ``model`` (default: a ScriptedModel of
    ``responses``, then ``default``); ``settings`` go to WhatsAppSettings."""
    async with contextlib.AsyncExitStack() as stack:
        if wa is None:
            wa = await stack.enter_async_context(FakeWhatsApp())
        cfg = config or temp_config(tmp_path)
        if cfg.http is None:
            cfg.http = HttpSection(port=0, max_body=256 * 1024)
        cfg.hub.shutdown_grace = 1.0
        model = model or ScriptedModel(responses, default=default)
        ext = extension(settings_for(wa, **settings), resolve=loopback_resolver(MEDIA_HOST))
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions], inbox=inbox)
        async with hub:
            assert hub.http is not None
            wa.webhook_url = f"http://127.0.0.1:{hub.http.port}{settings_for(wa, **settings).webhook_path}"
            yield Running(hub, wa, model)


# --- in and out -------------------------------------------------------------------------


async def test_a_message_is_answered_marked_read_and_shown_typing(tmp_path: Path) -> None:
    async with running(tmp_path, ['<response><output type="whatsapp:message">hello *there*</output></response>']) as r:
        wamid = await r.say("hi bot")
        (sent,) = await r.wa.wait_sent(1)
        assert sent["to"] == USER and sent["type"] == "text" and sent["text"] == "hello *there*"
        assert "failed" not in sent
        outs = await r.wait_outputs(1)
        assert outs[0].sent and outs[0].type == "whatsapp:message"
        assert "hi bot" in str(r.model.requests[0].messages[-1]["content"])
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"whatsapp:chat:{USER}"]
        await r.wa.wait_for(lambda: wamid in r.wa.state.typing)
        assert wamid in r.wa.state.reads  # typing marks it read
        # every Graph request carried the token, and went to the fake, not to Meta
        assert all(req.headers.get("Authorization") == f"Bearer {TOKEN}" for req in r.wa.requests)


async def test_a_long_answer_is_split_at_4096_characters_in_order(tmp_path: Path) -> None:
    long = " ".join(f"word{i}" for i in range(1500))  # 13,389 characters: four messages
    async with running(tmp_path, [f'<response><output type="whatsapp:message">{long}</output></response>']) as r:
        await r.say("tell me everything")
        (out,) = await r.wait_outputs(1)
        parts = [s["text"] for s in r.wa.sent]
        assert len(parts) == 4 and all(len(p) <= 4096 for p in parts)
        assert " ".join(parts) == long
        assert [p["index"] for p in out.parts] == [0, 1, 2, 3]


async def test_the_webhook_verification_echoes_the_challenge_only_with_the_verify_token(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        assert await r.wa.verify(VERIFY_TOKEN, "1158201444") == (200, "1158201444")
        status, text = await r.wa.verify("not-the-verify-token-at-all", "1158201444")
        assert status == 403 and "1158201444" not in text


async def test_forged_or_unsigned_webhooks_are_refused_before_anything_is_taken(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        payload, wamid = r.wa.message("nobody should see this")
        import json

        body = json.dumps(payload).encode()
        assert (await r.wa.deliver(body, secret="another-app-secret-0123456789"))[0] == 401
        assert (await r.wa.deliver(body, signature=""))[0] == 401
        assert (await r.wa.deliver(body, signature="sha1=abc"))[0] == 401
        tampered = body.replace(b"nobody", b"anybody")
        from hub.testing.whatsapp import sign

        assert (await r.wa.deliver(tampered, signature=sign(body, APP_SECRET)))[0] == 401
        assert not await r.hub.received(f"whatsapp:{wamid}")
        await r.say("a sentinel")
        await r.wa.wait_sent(1)
        assert len(r.wa.sent) == 1 and not r.model.requests[1:]


async def test_a_redelivered_webhook_is_answered_200_and_not_answered_twice(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        payload, wamid = r.wa.message("once only")
        assert (await r.wa.deliver(payload))[0] == 200
        await r.wa.wait_sent(1)
        assert (await r.wa.deliver(payload))[0] == 200  # Meta did not see the first 200
        await r.say("a sentinel")
        await r.wa.wait_sent(2)
        assert len(r.wa.sent) == 2 and len(r.model.requests) == 2


async def test_the_token_and_secrets_never_reach_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running(tmp_path, pair_wait=0.05) as r:
        r.wa.fail_code(131056, count=1)
        await r.say("hi")
        await r.wa.wait_sent(1)
        await r.wa.verify("a-wrong-verify-token-0123")
        payload, _ = r.wa.message("forged")
        assert (await r.wa.deliver(payload, secret="another-app-secret-0123456789"))[0] == 401
    assert "rate limited sending to" in caplog.text and "verification" in caplog.text  # the log was on
    for secret in (TOKEN, APP_SECRET, VERIFY_TOKEN):
        assert secret not in caplog.text


async def test_without_typing_the_message_is_still_marked_read_and_with_neither_nothing_is(tmp_path: Path) -> None:
    async with running(tmp_path, typing=False) as r:
        wamid = await r.say("hi")
        await r.wa.wait_sent(1)
        await r.wa.wait_for(lambda: wamid in r.wa.state.reads)
        assert wamid not in r.wa.state.typing
    async with running(tmp_path / "2", typing=False, read_receipts=False) as r:
        await r.say("hi")
        await r.say("a sentinel")
        await r.wa.wait_sent(2)
        assert not r.wa.state.reads and not r.wa.state.typing
