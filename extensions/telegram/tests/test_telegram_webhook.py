"""Telegram across workers: webhook mode on the hub's [http] endpoint, and polling under a lease.

The real python-telegram-bot client talks to ``hub.testing.telegram.FakeTelegram``; the fake
POSTs updates to the hub's endpoint the way Telegram does (``FakeTelegram.deliver``, with
the secret header that setWebhook registered). Several hubs on one data dir are several
workers sharing one store.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hub import ConfigError, Hub, HubConfig, ScriptedModel, StoreError
from hub.config import HttpSection
from hub.logs import InputLog
from hub.store import InMemoryInbox
from hub.testing import temp_config
from hub.testing.telegram import FakeTelegram
from hub_telegram import TelegramSettings, extension

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

TOKEN = "123456:TEST-secret-token"
SECRET = "s3cret_-webhook-0123"  # 16 characters at least, as every webhook secret
PUBLIC_URL = "https://bot.example.com/telegram/updates"  # what Telegram is told; the LB forwards the path


def config(tmp_path: Path, *, http: bool = True) -> HubConfig:
    cfg = temp_config(tmp_path)  # workers on one tmp_path share its store
    cfg.hub.shutdown_grace = 1
    if http:
        cfg.http = HttpSection(port=0, max_body=10_000)
    return cfg


def echo(request: Any) -> str:
    text = request.messages[-1]["content"]
    marker = text.rfind("<input ")
    body = text[text.index(">", marker) + 1 : text.index("</input>", marker)] if marker >= 0 else "?"
    return f'<response><output type="telegram:send">echo: {body.strip()}</output></response>'


def worker(tmp_path: Path, tg: FakeTelegram, *, http: bool = True, inbox: Any = None, **settings: Any) -> Hub:
    settings.setdefault("poll_timeout", 1)
    settings.setdefault("chat_rate", 20)
    settings.setdefault("lease_ttl", 4)  # a stopped worker's poller is taken over within a third of it
    ext = extension(TelegramSettings(token=TOKEN, base_url=f"{tg.base_url}/bot", **settings))
    return Hub(
        config(tmp_path, http=http), model=ScriptedModel(echo), load_extensions=False, extensions=[ext], inbox=inbox
    )


def webhook_worker(tmp_path: Path, tg: FakeTelegram, **kw: Any) -> Hub:
    return worker(tmp_path, tg, webhook_url=PUBLIC_URL, webhook_secret=SECRET, **kw)


def local(hub: Hub) -> str:
    """Where the load balancer would send Telegram's POSTs for this worker."""
    assert hub.http is not None and hub.http.port
    return f"http://127.0.0.1:{hub.http.port}/telegram/updates"


def texts(tg: FakeTelegram) -> list[str]:
    return [s["text"] for s in tg.sent]


@contextlib.asynccontextmanager
async def started(*hubs: Hub, tg: FakeTelegram | None = None) -> AsyncIterator[None]:
    """The hubs started; with ``tg``, also until one of them has called setWebhook (the fake
    then knows the secret it sends)."""
    async with contextlib.AsyncExitStack() as stack:
        for hub in hubs:
            await stack.enter_async_context(hub)
        if tg is not None:
            await tg.wait_for(lambda: tg.state.webhook_set >= 1, timeout=15)
        yield


async def test_webhook_mode_answers_posted_updates_and_sets_the_webhook(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg)
        async with started(hub, tg=tg):
            assert tg.state.webhook_url == PUBLIC_URL
            assert tg.state.webhook_secret == SECRET
            assert tg.state.webhook_allowed_updates == ["message", "callback_query"]
            update_id, _ = tg.push_message(chat_id=42, text="hello over the webhook")
            status, body = await tg.deliver(update_id, url=local(hub))
            assert (status, body) == (200, {"ok": True})
            await tg.wait_sent(1, timeout=15)
            assert texts(tg) == ["echo: hello over the webhook"]
            assert tg.sent[0]["chat_id"] == 42
            assert tg.calls("getUpdates") == []  # nothing polls in webhook mode
            assert tg.state.webhook_deleted == 0


async def test_a_wrong_or_missing_secret_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg)
        async with started(hub, tg=tg):
            forged, _ = tg.push_message(chat_id=42, text="forged")
            status, body = await tg.deliver(forged, url=local(hub), secret="not-the-secret")
            assert status == 401 and "X-Telegram-Bot-Api-Secret-Token" in body["error"]
            status, _ = await tg.deliver(forged, url=local(hub), secret="")
            assert status == 401
            assert await hub.inbox.pending() == [] and not await hub.received("telegram:42:1")
            # a genuine update afterwards is the only one that reaches the model
            real, _ = tg.push_message(chat_id=42, text="genuine")
            assert (await tg.deliver(real, url=local(hub)))[0] == 200
            await tg.wait_sent(1, timeout=15)
            assert texts(tg) == ["echo: genuine"]
            assert len(hub.model.requests) == 1  # type: ignore[attr-defined]
            assert "forged" not in hub.model.requests[0].messages[-1]["content"]  # type: ignore[attr-defined]


async def test_a_redelivered_update_is_answered_once(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg)
        async with started(hub, tg=tg):
            first, _ = tg.push_message(chat_id=42, text="once")
            assert (await tg.deliver(first, url=local(hub)))[0] == 200
            await tg.wait_sent(1, timeout=15)
            assert (await tg.deliver(first, url=local(hub)))[0] == 200  # Telegram did not see the answer
            sentinel, _ = tg.push_message(chat_id=42, text="after")
            assert (await tg.deliver(sentinel, url=local(hub)))[0] == 200
            await tg.wait_sent(2, timeout=15)
            assert texts(tg) == ["echo: once", "echo: after"]


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.failures:
            self.failures -= 1
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


async def test_an_update_the_store_could_not_record_is_refused_and_redelivered(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg, inbox=FailingInbox(1))
        async with started(hub, tg=tg):
            update_id, _ = tg.push_message(chat_id=42, text="keep me")
            status, body = await tg.deliver(update_id, url=local(hub))
            assert status == 503 and "store" in body["error"]
            assert [u["update_id"] for u in tg.pending_updates] == [update_id]  # Telegram keeps it
            assert (await tg.deliver(update_id, url=local(hub)))[0] == 200
            await tg.wait_sent(1, timeout=15)
            assert texts(tg) == ["echo: keep me"]
            assert tg.pending_updates == []


async def test_every_worker_takes_updates_and_one_sets_the_webhook(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        one, two = webhook_worker(tmp_path, tg), webhook_worker(tmp_path, tg)
        async with started(one, two, tg=tg):
            holder = await one.leases.holder("telegram:webhook:123456")
            assert holder is not None and holder.holder in (one.worker, two.worker)
            a, _ = tg.push_message(chat_id=1, text="to worker one")
            b, _ = tg.push_message(chat_id=2, text="to worker two")
            assert (await tg.deliver(a, url=local(one)))[0] == 200
            assert (await tg.deliver(b, url=local(two)))[0] == 200
            await tg.wait_sent(2, timeout=15)
            assert sorted(texts(tg)) == ["echo: to worker one", "echo: to worker two"]
            assert tg.state.webhook_set == 1
            assert (await two.leases.holder("telegram:webhook:123456")) == holder


async def test_polling_workers_poll_one_at_a_time_and_the_other_takes_over(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        one, two = worker(tmp_path, tg, http=False), worker(tmp_path, tg, http=False)
        async with started(one):
            async with started(two):
                tg.push_message(chat_id=7, text="first")
                await tg.wait_sent(1, timeout=15)
                polling = await one.leases.holder("telegram:poll:123456")
                assert polling is not None
                first, other = (one, two) if polling.holder == one.worker else (two, one)
                # two pollers on one token would end each other's long polls with 409s
                assert [r for r in tg.calls("getUpdates") if r.status == 409] == []
                await first.stop()
                tg.push_message(chat_id=7, text="second")
                await tg.wait_sent(2, timeout=10)
                assert texts(tg) == ["echo: first", "echo: second"]
                now = await other.leases.holder("telegram:poll:123456")
                assert now is not None and now.holder == other.worker and now.token > polling.token


def test_webhook_settings_are_checked_with_the_key_named() -> None:
    with pytest.raises(ValidationError, match="webhook_secret") as e:
        TelegramSettings(token=TOKEN, webhook_url=PUBLIC_URL)
    assert "TELEGRAM_WEBHOOK_SECRET" in str(e.value)
    with pytest.raises(ValidationError, match="webhook_url"):
        TelegramSettings(token=TOKEN, webhook_url="bot.example.com/telegram", webhook_secret=SECRET)
    with pytest.raises(ValidationError, match="needs a path"):
        TelegramSettings(token=TOKEN, webhook_url="https://bot.example.com", webhook_secret=SECRET)
    with pytest.raises(ValidationError, match="A-Z a-z 0-9"):
        TelegramSettings(token=TOKEN, webhook_url=PUBLIC_URL, webhook_secret="has spaces")
    ok = TelegramSettings(token=TOKEN, webhook_url=PUBLIC_URL, webhook_secret=SECRET)
    assert ok.webhook_path() == "/telegram/updates" and ok.bot_id() == "123456"


@pytest.mark.parametrize("short", ["x", "q7", "s3cret_-webhook"])  # 1, 2 and 15 characters: found by trying
def test_a_short_webhook_secret_stops_the_hub_and_hub_check_names_the_key(tmp_path: Path, short: str) -> None:
    """Issue 24, finding 5: a one-character secret was found in 43 POSTs, and a forged update
    "from user 42" (an admin, by user id) was answered."""
    from hub.cli import check_config
    from hub.config import config_from_dict
    from hub.definitions import load_extension

    (tmp_path / "contexts").mkdir()
    table = {"token": TOKEN, "webhook_url": PUBLIC_URL, "webhook_secret": short}
    cfg = config_from_dict(
        {"hub": {"contexts_dir": str(tmp_path / "contexts")}, "http": {}, "extensions": {"telegram": table}}
    )
    with pytest.raises(ConfigError, match="extensions.telegram.webhook_secret") as e:
        load_extension("telegram", table, cfg)  # what the hub does at start
    assert f"is {len(short)} characters: use at least 16" in str(e.value)
    report = check_config(cfg)
    (error,) = [e for e in report.errors if "webhook_secret" in e]
    assert "extensions.telegram.webhook_secret" in error and "use at least 16" in error
    assert repr(short) not in error and f"got '{short}'" not in error  # the secret is never echoed


async def test_webhook_mode_without_the_http_endpoint_is_a_config_error(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg, http=False)
        with pytest.raises(ConfigError, match=r"\[http\].*telegram \(/telegram/updates\)"):
            await hub.start()
        assert tg.state.webhook_set == 0


def test_hub_check_reports_webhook_mode_without_the_http_endpoint(tmp_path: Path) -> None:
    from hub.cli import check_config
    from hub.config import config_from_dict

    (tmp_path / "contexts").mkdir()
    table = {"token": TOKEN, "webhook_url": PUBLIC_URL, "webhook_secret": SECRET}
    report = check_config(
        config_from_dict({"hub": {"contexts_dir": str(tmp_path / "contexts")}, "extensions": {"telegram": table}})
    )
    assert any("[http]" in e and "telegram (/telegram/updates)" in e for e in report.errors), report.errors
    with_http = check_config(
        config_from_dict(
            {
                "hub": {"contexts_dir": str(tmp_path / "contexts")},
                "http": {"port": 0},
                "extensions": {"telegram": table},
            }
        )
    )
    assert not any("[http]" in e for e in with_http.errors), with_http.errors


async def test_a_poison_update_is_parked_after_redeliveries_and_answered_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hub_telegram._intake as intake

    real = intake.classify

    def classify(update: Any, *args: Any, **kw: Any) -> Any:
        if update.effective_message is not None and update.effective_message.text == "poison":
            raise KeyError("injected")
        return real(update, *args, **kw)

    monkeypatch.setattr(intake, "classify", classify)
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg)
        async with started(hub, tg=tg):
            poison, _ = tg.push_message(chat_id=42, text="poison")
            statuses = [(await tg.deliver(poison, url=local(hub)))[0] for _ in range(intake.PARK_AFTER)]
            # Telegram delivers it again after an error; the last delivery parks it
            assert statuses == [500] * (intake.PARK_AFTER - 1) + [200]
            (parked,) = await hub.inbox.parked()
            assert parked.entry.content == "poison" and "KeyError" in parked.error
            assert (await tg.deliver(poison, url=local(hub)))[0] == 200  # known now: not parked twice
            after, _ = tg.push_message(chat_id=42, text="after")
            assert (await tg.deliver(after, url=local(hub)))[0] == 200
            await tg.wait_sent(1, timeout=15)
            assert texts(tg) == ["echo: after"]
            assert len(await hub.inbox.parked()) == 1


async def test_an_update_the_library_cannot_parse_is_parked_and_answered_200(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        hub = webhook_worker(tmp_path, tg)
        async with started(hub, tg=tg):
            bad = tg.push_update({"message": {"message_id": 7, "date": 0, "chat": "not a chat", "text": "broken"}})
            assert (await tg.deliver(bad, url=local(hub)))[0] == 200  # parked: Telegram may forget it
            (parked,) = await hub.inbox.parked()
            assert parked.entry.platform_id == f"telegram:update:{bad}" and "not a chat" in str(parked.entry.content)
