"""The dashboard as an operator uses it, in Chromium, on a desktop and on a 390×844 phone
(issue 28): who and what, acting (stop, new persona, the chat panel), safety, health, the phone
layout and access. Screenshots of each go to ``tests/ui/screenshots/`` (NAME-desktop.png,
NAME-phone.png). Skips and CI behave as in test_browser.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from hub.store import RunRecord, RunState
from tests._support.browser import LAUNCH, needs_browser

from .conftest import TG_TOKEN, TOKEN, HeldModel, dashboard, make_config, wait_until
from .test_browser import SHOTS
from .test_chat import WritingModel, chat_reply

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # the module is skipped (pytestmark), saying why
    pass

pytestmark = [needs_browser("the dashboard's browser tests"), pytest.mark.asyncio(loop_scope="module")]

VIEWS = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
views = pytest.mark.parametrize("view", list(VIEWS))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    SHOTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        b = await pw.chromium.launch(**LAUNCH)
        try:
            yield b
        finally:
            await b.close()


class Operator:
    """A browser page logged in to one hub, at one viewport, that notes every failed request."""

    def __init__(self, page: Page, view: str) -> None:
        self.page = page
        self.view = view
        self.failed: list[str] = []
        page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("console", lambda m: self.failed.append(f"console: {m.text}") if m.type == "error" else None)

    @property
    def phone(self) -> bool:
        return self.view == "phone"

    async def log_in(self) -> None:
        await self.page.goto("/ui/login")
        await self.page.fill("#token", TOKEN)
        await self.page.click("button[type=submit]")
        await expect(self.page.locator("h1")).to_have_text("Runs")

    async def go(self, label: str) -> None:
        """Through the navigation, as an operator would: the bar, or the phone's menu."""
        if self.phone:
            await self.page.click(".phone-nav summary")
            await self.page.click(f".phone-nav .menu >> text={label}")
        else:
            await self.page.click(f"nav.desktop >> text={label}")

    async def shot(self, name: str) -> None:
        await self.page.screenshot(path=SHOTS / f"{name}-{self.view}.png", full_page=True)

    async def fits(self) -> None:
        """Nothing is wider than the screen (no sideways scroll, no control cut off)."""
        width = await self.page.evaluate("document.documentElement.scrollWidth")
        view = self.page.viewport_size
        assert view is not None and width <= view["width"], f"{self.page.url} is {width}px wide at {view}"

    async def within(self, locator: Any) -> None:
        box = await locator.bounding_box()
        view = self.page.viewport_size
        assert box is not None and view is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= view["width"], f"{box} leaves the screen"


async def operator(browser: Browser, base: str, view: str) -> Operator:
    ctx = await browser.new_context(base_url=base, **VIEWS[view])
    ctx.set_default_timeout(8000)
    op = Operator(await ctx.new_page(), view)
    await op.log_in()
    return op


async def _ended(d: Any, run_id: str) -> bool:
    r = await d.hub.runs.get(run_id)
    return r is not None and r.ended is not None and bool(r.reply)


@views
async def test_who_and_what_on_the_lists_the_trace_and_the_search(browser: Browser, tmp_path: Path, view: str) -> None:
    async with dashboard(tmp_path) as d:
        d.tg.push_message(
            chat_id=1001,
            text="Where is my order #55? It was due on Monday.",
            first_name="Ada Lovelace",
            username="ada_l",
        )
        d.tg.push_message(chat_id=2002, text="pizza recipes please", first_name="Bob", username="bobby")
        await d.tg.wait_sent(2)
        for r in await d.hub.runs.page(limit=5):
            await wait_until(lambda r=r: _ended(d, r.id))
        op = await operator(browser, d.base, view)
        page = op.page
        row = page.locator("tbody#rows tr", has_text="telegram:chat:1001")
        await expect(row.locator(".who .name")).to_have_text("Ada Lovelace")
        await expect(row.locator(".who .handle")).to_have_text("@ada_l")
        await expect(row.locator(".said")).to_contain_text("Where is my order #55?")
        await expect(row.locator(".replied")).to_have_text("↩ Hello from ALPHA")
        await expect(row.locator("td.started")).to_be_visible()  # start and duration, on a phone too
        await expect(row.locator("td.took")).to_be_visible()
        await op.fits()
        await op.shot("runs-who-and-what")
        await page.fill("input[name=q]", "@bobby")
        await page.press("input[name=q]", "Enter")
        await expect(page.locator("tbody#rows tr[data-run]")).to_have_count(1)
        await expect(page.locator("tbody#rows tr[data-run] .who .name")).to_have_text("Bob")
        await op.shot("runs-search")
        await op.go("Conversations")
        await page.fill("input[name=q]", "order #55")
        await page.press("input[name=q]", "Enter")
        await expect(page.locator("tr.conversation")).to_have_count(1)
        await expect(page.locator("tr.conversation .said")).to_contain_text("Where is my order")
        await op.fits()
        await op.shot("conversations-search")
        await op.go("Runs")
        await page.locator("tbody#rows tr", has_text="telegram:chat:1001").locator("td.id a").click()
        await expect(page.locator("dd.from .name")).to_have_text("Ada Lovelace")
        await expect(page.locator("dd.said")).to_contain_text("Where is my order #55?")
        await expect(page.locator("dd.replied")).to_have_text("Hello from ALPHA")
        await op.fits()
        await op.shot("trace-header")
        assert op.failed == []
        await page.context.close()


@views
async def test_stop_a_running_run_from_its_page(browser: Browser, tmp_path: Path, view: str) -> None:
    model = HeldModel(hold=True)
    async with dashboard(tmp_path, model=model) as d:
        op = await operator(browser, d.base, view)
        page = op.page
        d.tg.push_message(chat_id=42, text="think for a long time", first_name="Ada")
        await asyncio.wait_for(model.waiting.wait(), 5)
        row = page.locator("tbody#rows tr", has_text="telegram:chat:42")
        await expect(row.locator(".badge")).to_have_text("running")
        await row.locator("td.id a").click()
        await expect(page.locator("#run-state")).to_have_text("running")
        await op.within(page.locator("form.stop button"))
        await op.shot("run-stop")
        await page.click("form.stop button")
        await expect(page.locator(".msg")).to_contain_text("stopped: killed (stopped by operator)")
        await expect(page.locator("#run-state")).to_have_text("killed")
        await expect(page.locator("form.stop")).to_have_count(0)
        await op.shot("run-stopped")
        (run,) = await d.hub.runs.page(limit=1)
        assert (run.state, run.reason) == (RunState.KILLED, "stopped by operator")
        model.release()
        await page.context.close()


@views
async def test_new_persona_and_the_conversations_it_is_used_by(browser: Browser, tmp_path: Path, view: str) -> None:
    async with dashboard(tmp_path) as d:
        op = await operator(browser, d.base, view)
        page = op.page
        await op.go("Personas")
        await page.click("#new-persona")
        await page.fill("#persona-name", "support")
        await page.fill("#persona-text", 'name = "support"\ninstructions = """Sign every reply as SUPPORT."""\n')
        await page.click("#create")
        await expect(page.locator(".msg")).to_contain_text("created persona support: rev 1 is in force")
        await expect(page.locator("h1")).to_have_text("Persona support")
        await op.fits()
        await op.shot("persona-new")
        # a persona naming a conversation: its next reply is signed so, and its page lists it
        await page.fill(
            "#persona-text",
            'name = "support"\ninstructions = """Sign every reply as SUPPORT."""\ncontexts = ["telegram:chat:77"]\n',
        )
        await page.click("#review")
        await page.click("#save")
        await expect(page.locator(".msg")).to_contain_text("saved: rev 2 is in force")
        d.tg.push_message(chat_id=77, text="help", first_name="Cy")
        (sent,) = await d.tg.wait_sent(1)
        assert sent["text"] == "Hello from SUPPORT"
        await page.reload()
        await expect(page.locator("ul.uses")).to_contain_text("telegram:chat:77")
        await op.shot("persona-used-by")
        await page.click("ul.uses >> text=telegram:chat:77")
        await expect(page.locator(".persona-used")).to_contain_text("Persona: support")
        assert op.failed == []
        await page.context.close()


@views
async def test_the_chat_panel_streams_the_reply_in(browser: Browser, tmp_path: Path, view: str) -> None:
    model = WritingModel(chat_reply, hold=True)
    async with dashboard(tmp_path, model=model) as d:
        op = await operator(browser, d.base, view)
        page = op.page
        await op.go("Chat")
        await expect(page.locator("h1")).to_have_text("Chat with the bot")
        await page.evaluate("window.notReloaded = true")
        await page.fill("#chat-text", "ping")
        await page.click("#chat-send")
        (
            await expect(page.locator(".chat-log .line.user")).to_have_text("ping"),
            (op.failed, await page.locator("#chat-status").text_content()),
        )
        await asyncio.wait_for(model.waiting.wait(), 5)
        model.release()
        # seen while it is written: part of the reply, still streaming, then the whole
        streaming = page.locator(".chat-log .line.bot.streaming")
        await expect(streaming).to_have_count(1)
        partial = await streaming.text_content()
        whole = "This reply is long enough to come in several pieces, signed ALPHA. (ping, ALPHA)"
        await expect(page.locator(".chat-log .line.bot")).to_have_text(whole)
        await expect(page.locator(".chat-log .line.bot.streaming")).to_have_count(0)
        assert partial is not None and whole.startswith(partial) and len(partial) < len(whole)
        assert await page.evaluate("window.notReloaded") is True
        await op.fits()
        await op.shot("chat")
        await page.reload()  # the transcript is kept, from the run store
        await expect(page.locator(".chat-log .line.bot")).to_have_text(whole)
        assert op.failed == []
        await page.context.close()


@views
async def test_safety_confirmations_a_styled_404_and_a_favicon(browser: Browser, tmp_path: Path, view: str) -> None:
    async with dashboard(tmp_path) as d:
        d.tg.push_message(chat_id=42, text="remember this", first_name="Ada")
        await d.tg.wait_sent(1)
        await wait_until(lambda: d.hub.memory.get("working-memory:telegram:chat:42"))
        op = await operator(browser, d.base, view)
        page = op.page
        favicon = await page.evaluate("document.querySelector('link[rel=icon]').href")
        assert favicon.endswith("/ui/static/favicon.svg")
        await op.go("Conversations")
        await page.click("text=telegram:chat:42")
        await page.click("text=Forget this conversation")
        await expect(page.locator("h1")).to_have_text("Forget telegram:chat:42?")
        await op.within(page.locator("#confirm"))
        await op.shot("confirm-forget")
        await page.click("#cancel")  # nothing happens on the way back
        await expect(page.locator("h1")).to_have_text("telegram:chat:42")
        assert await d.hub.memory.get("working-memory:telegram:chat:42") is not None
        await page.click("text=Forget this conversation")
        await page.click("#confirm")
        await expect(page.locator(".msg")).to_contain_text("forgot telegram:chat:42")
        assert await d.hub.memory.get("working-memory:telegram:chat:42") is None
        assert op.failed == []  # the favicon and every page answered
        await page.goto("/ui/runs/no-such-run")
        await expect(page.locator("h1")).to_contain_text("Not found")
        await expect(page.locator(".error")).to_contain_text("No run has the id 'no-such-run'")
        await op.fits()
        await op.shot("not-found")
        await op.go("Health")  # the navigation is there, on the error page too
        await expect(page.locator("h1")).to_have_text("Health")
        await page.context.close()


@views
async def test_health_totals_windows_and_failed_runs_a_click_away(browser: Browser, tmp_path: Path, view: str) -> None:
    async with dashboard(tmp_path) as d:
        now = time.time()
        for i, state in enumerate([RunState.COMPLETED] * 5 + [RunState.FAILED] * 2):
            r = RunRecord(
                context=f"telegram:chat:{i}",
                started=now - 60 * (i + 1),
                state=state,
                prompt_tokens=300,
                cost=0.002,
                reason="model_error: 500" if state == RunState.FAILED else None,
            )
            await d.hub.runs.create(r)
            r.ended = r.started + 2
            await d.hub.runs.finish(r)
        op = await operator(browser, d.base, view)
        page = op.page
        await op.go("Health")
        hour = page.locator("#totals-last-hour")
        await expect(hour).to_contain_text("runs7")
        await expect(hour).to_contain_text("error rate28.6 %")
        await expect(page.locator("#model")).to_have_text("held")
        await expect(page.locator("#chart-runs figcaption")).to_contain_text("runs started: 7 in the last 1h")
        await expect(page.locator("#chart-runs svg text.y").last).to_be_visible()
        await op.fits()
        await op.shot("health")
        await page.click("small.windows >> text=24h")
        await expect(page.locator("#chart-runs figcaption")).to_contain_text("in the last 24h")
        await hour.locator("a.bad").click()  # the failures, one click away
        await expect(page.locator("h1")).to_have_text("Runs")
        await expect(page.locator("tbody#rows tr[data-run]")).to_have_count(2)
        await expect(page.locator("tbody#rows .badge").first).to_have_text("failed")
        await op.shot("failed-runs")
        assert op.failed == []
        await page.context.close()


@views
async def test_every_page_fits_the_screen(browser: Browser, tmp_path: Path, view: str) -> None:
    async with dashboard(tmp_path, dm_policy="pairing") as d:
        d.tg.push_message(chat_id=987654321012, text="let me in, " + "a" * 300, first_name="Someone With A Long Name")
        await d.tg.wait_sent(1)
        await d.hub.runs.create(
            RunRecord(
                context="telegram:chat:9876543210123456789",
                started=time.time(),
                user="9876543210123456789",
                user_name="A very long display name indeed",
                user_handle="averyveryverylonghandle_0123456789",
                message="x" * 400,
                state=RunState.COMPLETED,
                ended=time.time() + 3.2,
            )
        )
        op = await operator(browser, d.base, view)
        page = op.page
        nav = page.locator(".phone-nav" if op.phone else "nav.desktop")
        box = await nav.bounding_box()
        assert box is not None and box["height"] < 60, f"the navigation is {box} high: on one line"
        for label, title in (
            ("Runs", "Runs"),
            ("Conversations", "Conversations"),
            ("Chat", "Chat with the bot"),
            ("Personas", "Personas"),
            ("Tools", "Tools"),
            ("Access", "Access"),
            ("Health", "Health"),
        ):
            await op.go(label)
            await expect(page.locator("h1")).to_have_text(title)
            await op.fits()
            await op.shot(f"page-{label.lower()}")
        await op.go("Access")
        approve = page.locator("tr.pairing button", has_text="Approve")
        await op.within(approve)
        await op.go("Runs")
        card = page.locator("tbody#rows tr", has_text="A very long display name")
        await expect(card.locator("td.took")).to_have_text("3.20 s")  # on a phone, labelled "took" (CSS)
        await expect(card.locator("td.started")).to_be_visible()
        await op.within(card.locator("td.ctx"))
        await page.goto("/ui/conversation?context=telegram:chat:9876543210123456789")
        await op.fits()
        await op.shot("conversation-long-id")
        await page.context.close()


@views
async def test_access_shows_the_allow_lists_and_new_codes_live(browser: Browser, tmp_path: Path, view: str) -> None:
    cfg = make_config(tmp_path)
    cfg.extensions = {"telegram": {"token": TG_TOKEN, "allowed_users": [1001, "@ada_l"], "dm_policy": "pairing"}}
    async with dashboard(tmp_path, config=cfg, dm_policy="pairing", allowed_users=[1001]) as d:
        op = await operator(browser, d.base, view)
        page = op.page
        await op.go("Access")
        await expect(page.locator("#allow-telegram")).to_contain_text("dm_policy = pairing")
        await expect(page.locator("#allow-telegram .entry")).to_have_text(["1001", "@ada_l"])
        await expect(page.locator("tbody#pairings")).to_contain_text("No pairings")
        await page.evaluate("window.notReloaded = true")
        d.tg.push_message(chat_id=2002, text="hello?", first_name="Bea")
        (sent,) = await d.tg.wait_sent(1)
        code = sent["text"].rsplit(" ", 1)[-1]
        row = page.locator("tr.pairing", has_text="2002")
        await expect(row.locator("code.code")).to_have_text(code, timeout=6000)  # polled in, no reload
        assert await page.evaluate("window.notReloaded") is True
        await expect(row.locator("td.user .name")).to_have_text("Bea")  # who asked, not only an id
        await op.within(row.locator("button", has_text="Approve"))
        await op.fits()
        await op.shot("access-live")
        await row.locator("button", has_text="Approve").click()
        await expect(page.locator(".msg")).to_contain_text("approved: telegram user 2002")
        await page.locator("tr.pairing", has_text="2002").locator("button", has_text="Revoke").click()
        await expect(page.locator("h1")).to_have_text("Revoke user 2002 on telegram?")
        await op.shot("confirm-revoke")
        await page.click("#confirm")
        await expect(page.locator(".msg")).to_contain_text("revoked 1 pairing of user 2002")
        assert op.failed == []
        await page.context.close()
