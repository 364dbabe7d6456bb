"""The dashboard in a real browser: Playwright drives Debian's Chromium, headless.

One browser for the module; each test a fresh hub (Telegram against the fake Bot API) and a
fresh browser context. Screenshots of each page go to ``tests/ui/screenshots/`` (not
committed). Without ``/usr/bin/chromium`` (or Playwright) the tests skip, saying why, except
under CI (``CI`` set), where they must run: ``.ci/run`` installs Chromium.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from hub.store import Review
from tests._support.browser import LAUNCH, needs_browser

from .conftest import TOKEN, HeldModel, dashboard, persona_text, seed, wait_until

SHOTS = Path(__file__).parent / "screenshots"

with contextlib.suppress(ImportError):  # without it the tests skip, saying why
    from playwright.async_api import Browser, Page, async_playwright, expect

pytestmark = [needs_browser("the dashboard's browser tests"), pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    SHOTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        b = await pw.chromium.launch(**LAUNCH)
        try:
            yield b
        finally:
            await b.close()


_TIMED_FETCH = """async (url) => {
    const t = performance.now();
    const resp = await fetch(url);
    await resp.text();
    return performance.now() - t;
}"""


async def new_page(browser: Browser, base: str, **kw: Any) -> Page:
    ctx = await browser.new_context(base_url=base, **kw)
    ctx.set_default_timeout(8000)
    return await ctx.new_page()


async def log_in(page: Page) -> None:
    await page.goto("/ui/login")
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Runs")


async def test_log_in_and_a_wrong_token_is_refused(browser: Browser, tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        page = await new_page(browser, d.base)
        await page.goto("/ui/")
        assert page.url.endswith("/ui/login")  # not logged in: sent to the login page
        await page.fill("#token", "not-the-token")
        await page.click("button[type=submit]")
        await expect(page.locator(".error")).to_contain_text("not the hub's [http] token")
        assert await page.context.cookies() == []
        await page.screenshot(path=SHOTS / "login-refused.png")
        await log_in(page)
        (cookie,) = await page.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
        assert await page.evaluate("document.cookie") == ""  # no script can read the session
        await page.context.close()


async def test_a_telegram_message_shows_running_then_completed_live_and_its_trace(
    browser: Browser, tmp_path: Path
) -> None:
    model = HeldModel(hold=True)
    async with dashboard(tmp_path, model=model) as d:
        page = await new_page(browser, d.base)
        await log_in(page)
        await page.evaluate("window.notReloaded = true")
        d.tg.push_message(chat_id=42, text="hello from telegram", first_name="Ada")
        await asyncio.wait_for(model.waiting.wait(), 5)  # the run started, the model is held
        row = page.locator("tr", has=page.locator("td.ctx", has_text="telegram:chat:42"))
        await expect(row.locator(".badge")).to_have_text("running")
        await page.screenshot(path=SHOTS / "runs-running.png", full_page=True)
        model.release()
        await expect(row.locator(".badge")).to_have_text("completed")
        assert await page.evaluate("window.notReloaded") is True  # it changed without a reload
        await page.screenshot(path=SHOTS / "runs.png", full_page=True)
        await row.locator("a").first.click()
        await expect(page.locator("#run-state")).to_have_text("completed")
        trace = page.locator("ol.trace")
        await expect(trace).to_contain_text("input telegram:message from Ada @user42 (42)")
        await expect(trace).to_contain_text("hello from telegram")
        await expect(trace).to_contain_text("The persona says sign as ALPHA.")
        await expect(trace).to_contain_text("Hello from ALPHA")
        await page.screenshot(path=SHOTS / "trace.png", full_page=True)
        await page.click("text=telegram:chat:42")
        await expect(page.locator("h1")).to_have_text("telegram:chat:42")
        await page.screenshot(path=SHOTS / "conversation.png", full_page=True)
        await page.context.close()


async def test_a_running_trace_follows_the_run_live(browser: Browser, tmp_path: Path) -> None:
    model = HeldModel(hold=True)
    async with dashboard(tmp_path, model=model) as d:
        page = await new_page(browser, d.base)
        await log_in(page)
        d.tg.push_message(chat_id=7, text="slow one")
        await asyncio.wait_for(model.waiting.wait(), 5)
        (run,) = await d.hub.runs.page(limit=1)
        await page.goto(f"/ui/runs/{run.id}")
        await expect(page.locator("#run-state")).to_have_text("running")
        await expect(page.locator("ol.trace")).to_contain_text("slow one")
        model.release()
        await expect(page.locator("#run-state")).to_have_text("completed")
        await expect(page.locator("ol.trace")).to_contain_text("Hello from ALPHA")
        await page.context.close()


async def test_edit_the_persona_the_next_reply_follows_it_then_roll_back(browser: Browser, tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        page = await new_page(browser, d.base)
        await log_in(page)
        await page.click("nav.desktop >> text=Personas")
        await page.click("text=default")
        await page.fill("#persona-text", 'name = "default"\ninstructions = ""\n')
        await page.click("#review")
        await expect(page.locator(".error")).to_contain_text("does not validate")
        await expect(page.locator("#save")).to_have_count(0)
        await page.fill("#persona-text", persona_text("BRAVO"))
        await page.click("#review")
        await expect(page.locator("pre.diff .add")).to_contain_text("Sign every reply as BRAVO.")
        await expect(page.locator("pre.diff .del")).to_contain_text("Sign every reply as ALPHA.")
        await page.screenshot(path=SHOTS / "persona-diff.png", full_page=True)
        await page.click("#save")
        await expect(page.locator(".msg")).to_contain_text("saved: rev 2 is in force")
        d.tg.push_message(chat_id=42, text="who are you?")
        sent = await d.tg.wait_sent(1)
        assert sent[0]["text"] == "Hello from BRAVO"
        await page.screenshot(path=SHOTS / "persona.png", full_page=True)
        await page.click("text=Roll back to rev 1")
        await expect(page.locator("h1")).to_have_text("Roll persona default back to rev 1?")
        await page.click("#confirm")
        await expect(page.locator(".msg")).to_contain_text("rolled back to rev 1")
        d.tg.push_message(chat_id=42, text="and now?")
        sent = await d.tg.wait_sent(2)
        assert sent[1]["text"] == "Hello from ALPHA"
        await page.goto("/ui/personas/default")
        await expect(page.locator("#rev-3")).to_contain_text("rollback to rev 1")
        await page.context.close()


async def test_approve_a_pairing_code(browser: Browser, tmp_path: Path) -> None:
    async with dashboard(tmp_path, dm_policy="pairing") as d:
        d.tg.push_message(chat_id=901, text="let me in")
        (sent,) = await d.tg.wait_sent(1)
        code = sent["text"].rsplit(" ", 1)[-1]
        page = await new_page(browser, d.base)
        await log_in(page)
        await page.click("nav.desktop >> text=Access")
        row = page.locator("tr.pairing", has_text="901")
        await expect(row).to_contain_text(code)
        await page.screenshot(path=SHOTS / "access.png", full_page=True)
        await row.locator("button", has_text="Approve").click()
        await expect(page.locator(".msg")).to_contain_text("approved: telegram user 901")
        await expect(page.locator("tr.pairing", has_text="901").locator(".badge")).to_have_text("approved")
        d.tg.push_message(chat_id=901, text="now?")
        sent2 = await d.tg.wait_sent(2)
        assert sent2[1]["text"] == "Hello from ALPHA"  # the model answers an approved user
        await page.context.close()


async def test_phone_viewport_and_a_thousand_runs_paged_fast(browser: Browser, tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        await seed(d.hub.runs, 1000, t0=1_700_000_000.0)
        page = await new_page(browser, d.base, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
        timings: list[tuple[str, float]] = []

        def took(resp: Any) -> None:
            t = resp.request.timing  # ms from the request's start; responseStart is the first byte
            if "/ui/" in resp.url and t["responseStart"] >= 0:
                timings.append((resp.url, t["responseStart"] - t["requestStart"]))

        page.on("response", took)
        await log_in(page)
        await expect(page.locator("tbody#rows tr[data-run]")).to_have_count(50)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the runs page is {width}px wide on a 390px phone"
        await page.screenshot(path=SHOTS / "runs-phone.png", full_page=True)
        first = await page.locator("tbody#rows tr[data-run]").first.get_attribute("data-run")
        await page.click("text=Older runs")
        await expect(page.locator("tbody#rows tr[data-run]")).to_have_count(50)
        assert await page.locator("tbody#rows tr[data-run]").first.get_attribute("data-run") != first
        await page.select_option("select[name=state]", "failed")
        await page.click("text=Filter")
        await expect(page.locator("tbody#rows .badge").first).to_have_text("failed")
        for nav, title in (
            ("Conversations", "Conversations"),
            ("Personas", "Personas"),
            ("Access", "Access"),
            ("Health", "Health"),
        ):
            await page.click(".phone-nav summary")  # the phone's compact bar: a menu
            await page.click(f".phone-nav .menu >> text={nav}")
            await expect(page.locator("h1")).to_have_text(title)
            await page.screenshot(path=SHOTS / f"{title.lower()}-phone.png", full_page=True)
        await wait_until(lambda: len(timings) >= 8)
        print("dashboard requests (ms to first byte):", ", ".join(f"{t:.0f}" for _, t in timings))
        # Every request under 200 ms. This machine is shared: one over it is asked again three
        # times, and the best of those must be under (a page that is slow fails all four).
        for url, ms in timings:
            if ms >= 200:
                again = [await page.evaluate(_TIMED_FETCH, url) for _ in range(3)]
                print(f"{url} took {ms:.0f} ms, then {', '.join(f'{t:.0f}' for t in again)} ms")
                assert min(again) < 200, f"{url} took {ms:.0f} ms, then {again} ms"
        await page.context.close()


async def test_review_page_approves_an_edit_and_rejects(browser: Browser, tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        now = time.time()
        reviews = d.hub.stores.reviews
        for rid, text in (("aa11", "A draft with a typo"), ("bb22", "Not this one")):
            await reviews.add(Review(rid, "twitter", "twitter:reply", "c1", text, "pending", now, now + 600, "99"))
        page = await new_page(browser, d.base)
        await log_in(page)
        await page.click("nav.desktop >> text=Review")
        first = page.locator("section.review#review-aa11")
        await expect(first).to_contain_text("in reply to 99")
        await page.screenshot(path=SHOTS / "reviews.png", full_page=True)
        await first.locator("textarea").fill("A checked draft")
        await first.locator("button", has_text="Approve").click()
        await expect(page.locator(".msg")).to_contain_text("approved: twitter post aa11")
        await page.locator("section.review#review-bb22").locator("button", has_text="Reject").click()
        await expect(page.locator(".msg")).to_contain_text("rejected: twitter post bb22")
        await expect(page.locator("section.review")).to_have_count(0)
        await expect(page.locator("tr.review-done[data-review=aa11] .badge")).to_have_text("approved")
        approved, rejected = await reviews.get("aa11"), await reviews.get("bb22")
        assert approved is not None and (approved.state, approved.text) == ("approved", "A checked draft")
        assert rejected is not None and rejected.state == "rejected"
        await page.context.close()
