"""The dashboard over HTTP (aiohttp's client): login, cookie, CSRF, the pages and their changes.

The hub runs with the real Telegram extension against the fake Bot API; what the pages
show is checked against what the hub's stores hold.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from yarl import URL

from hub import Extension, action
from hub.store import InMemoryRunStore, RunRecord, RunState, RunStore
from hub.store.sql import PostgresRunStore, SqlRunStore
from tests._support.backends import BACKENDS, sql_database

from .conftest import PERSONA, TOKEN, HeldModel, client, dashboard, login, make_config, persona_text, seed, wait_until


async def test_the_dashboard_is_off_without_a_token(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, token="")
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        for path in ("/ui/", "/ui/login", "/ui"):
            async with s.get(d.base + path, allow_redirects=False) as resp:
                assert resp.status == 404
                assert "set [http] token" in await resp.text()


async def test_login_refuses_a_wrong_token_and_sets_a_strict_cookie(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        # not logged in: the pages send you to the login page; htmx gets a header it follows
        async with s.get(d.base + "/ui/", allow_redirects=False) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/ui/login"
        async with s.get(d.base + "/ui/runs/rows", headers={"HX-Request": "true"}, allow_redirects=False) as resp:
            assert resp.status == 401 and resp.headers["HX-Redirect"] == "/ui/login"
        for wrong in ("", "nope", TOKEN + "x", TOKEN[:-1], "é" * 10):
            async with s.post(d.base + "/ui/login", data={"token": wrong}, allow_redirects=False) as resp:
                assert resp.status == 401
                assert "Set-Cookie" not in resp.headers
                page = await resp.text()
                assert "not the hub&#39;s [http] token" in page and TOKEN not in page
        assert len(d.hub.http._ui.sessions) == 0
        async with s.post(d.base + "/ui/login", data={"token": TOKEN}, allow_redirects=False) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/ui/"
            cookie = resp.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
        assert "Secure" not in cookie  # plain http on loopback; over https it is Secure
        assert TOKEN not in cookie
        async with s.get(d.base + "/ui/") as resp:
            assert resp.status == 200
            assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
            assert resp.headers["Cache-Control"] == "no-store"
        # logging out ends the session on the server, not only in this browser
        sid = s.cookie_jar.filter_cookies(URL(d.base + "/ui/"))["hub_session"].value
        csrf = await login(s, d.base)
        async with s.post(d.base + "/ui/logout", data={"csrf": csrf}, allow_redirects=False) as resp:
            assert resp.status == 303
        async with client(cookies={"hub_session": sid}) as other:
            async with other.get(d.base + "/ui/", allow_redirects=False) as resp:
                assert resp.status == 200  # the first session is still live
        async with s.get(d.base + "/ui/", allow_redirects=False) as resp:
            assert resp.status == 303


async def test_an_address_that_keeps_guessing_is_held_back(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        for i in range(10):
            async with s.post(d.base + "/ui/login", data={"token": f"guess-{i}"}, allow_redirects=False) as resp:
                assert resp.status == 401
        async with s.post(d.base + "/ui/login", data={"token": TOKEN}, allow_redirects=False) as resp:
            assert resp.status == 429 and "Set-Cookie" not in resp.headers  # even the right token waits
            assert "Too many wrong tokens from 127.0.0.1: try again in" in await resp.text()


async def test_every_change_needs_the_csrf_token_and_this_origin(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        pending = await d.hub.access.check("telegram", "77", "pairing")
        csrf = await login(s, d.base)
        url = d.base + "/ui/access/approve"
        for data, headers in (
            ({"code": pending.code}, {}),
            ({"code": pending.code, "csrf": "forged"}, {}),
            ({"code": pending.code}, {"X-CSRF-Token": csrf[:-1]}),
            ({"code": pending.code, "csrf": csrf}, {"Origin": "http://evil.example"}),
            ({"code": pending.code, "csrf": csrf}, {"Origin": "null"}),
        ):
            async with s.post(url, data=data, headers=headers, allow_redirects=False) as resp:
                assert resp.status == 403, (data, headers)
                assert "refused" in await resp.text() or "CSRF" in await resp.text()
        assert (await d.hub.access.store.get("telegram", "77")).state == "pending"  # nothing changed
        async with s.post(
            url, data={"code": pending.code}, headers={"X-CSRF-Token": csrf, "Origin": d.base}, allow_redirects=False
        ) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/ui/access"
        assert (await d.hub.access.store.get("telegram", "77")).state == "approved"
        # a login from another site is refused too (login CSRF)
        async with s.post(
            d.base + "/ui/login",
            data={"token": TOKEN},
            headers={"Origin": "http://evil.example"},
            allow_redirects=False,
        ) as resp:
            assert resp.status == 403


@pytest.mark.parametrize("kind", BACKENDS)
async def test_keyset_pages_cover_every_run_once_in_order(tmp_path: Path, kind: str) -> None:
    if kind == "memory":
        store = InMemoryRunStore()
        await store.open()
        try:
            await _check_keyset_pages(store)
        finally:
            await store.close()
        return
    async with sql_database(kind, tmp_path) as db:
        store = SqlRunStore(db) if kind == "sqlite" else PostgresRunStore(db)
        await store.open()
        try:
            await _check_keyset_pages(store)
        finally:
            await store.close()


async def _check_keyset_pages(store: RunStore) -> None:
    runs = await seed(store, 230)  # two runs share each start time: the id breaks the tie
    expected = sorted(runs, key=lambda r: (r.started, r.id), reverse=True)
    got, before = [], None
    while True:
        page = await store.page(limit=50, before=before)
        if not page:
            break
        got.extend(page)
        before = (page[-1].started, page[-1].id)
    assert [r.id for r in got] == [r.id for r in expected]
    tg = await store.page(limit=500, platform="telegram", state="failed")
    assert tg and all(r.context.startswith("telegram:") and r.state == "failed" for r in tg)
    assert len(tg) == sum(1 for r in runs if r.context.startswith("telegram:") and r.state == "failed")
    assert await store.page(platform="tele") == []  # a platform is a whole name, not a prefix
    recent = await store.recent_contexts(platform="discord")
    assert {c for c, _, _ in recent} == {r.context for r in runs if r.context.startswith("discord:")}
    assert sum(n for _, _, n in recent) == sum(1 for r in runs if r.context.startswith("discord:"))


async def test_runs_list_filters_pages_and_refuses_bad_parameters(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        runs = await seed(d.hub.runs, 1000)
        await login(s, d.base)
        seen: list[str] = []
        url = d.base + "/ui/"
        slowest = 0.0
        while url:
            t = time.perf_counter()
            async with s.get(url) as resp:
                page = await resp.text()
            slowest = max(slowest, time.perf_counter() - t)
            ids = re.findall(r'data-run="([0-9a-f]+)"', page)
            assert len(ids) <= 50
            seen.extend(ids)
            m = re.search(r'href="(/ui/\?[^"]*before=[^"]+)" rel="next"', page)
            url = d.base + m.group(1).replace("&amp;", "&") if m else ""
        assert len(seen) == len(set(seen)) == 1000  # 20 pages, each run once
        print(f"runs list, 1,000 runs: the slowest of 20 pages took {slowest * 1000:.0f} ms")
        async with s.get(d.base + "/ui/runs/rows?state=killed&platform=discord") as resp:
            ids = re.findall(r'data-run="([0-9a-f]+)"', await resp.text())
        want = [r for r in runs if r.state == "killed" and r.context.startswith("discord:")]
        assert len(ids) == min(50, len(want)) and set(ids) <= {r.id for r in want}
        async with s.get(d.base + "/ui/?context=twitter:chat:3") as resp:
            assert set(re.findall(r'data-run="([0-9a-f]+)"', await resp.text())) <= {
                r.id for r in runs if r.context == "twitter:chat:3"
            }
        for query, names in (
            ("state=done", "state must be one of"),
            ("platform=a/b", "platform must be"),
            ("before=yesterday", "before must be STARTED:ID"),
            ("context=" + "x" * 400, "context is longer"),
        ):
            async with s.get(d.base + "/ui/?" + query) as resp:
                assert resp.status == 400 and names in await resp.text(), query


async def test_trace_shows_the_whole_run_and_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-dashboard-0123456789abcdef"
    monkeypatch.setenv("UI_TEST_API_KEY", secret)
    async with dashboard(tmp_path) as d, client() as s:
        d.tg.push_message(chat_id=42, text=f"hello, my key is {secret}")
        await d.tg.wait_sent(1)
        (run,) = await d.hub.runs.page(limit=5)
        await wait_until(lambda: _ended(d, run.id))
        await login(s, d.base)
        async with s.get(f"{d.base}/ui/runs/{run.id}") as resp:
            page = await resp.text()
        assert secret not in page and "[REDACTED]" in page
        assert "input telegram:message from User42 @user42 (42)" in page and "The persona says sign as ALPHA." in page
        assert "output telegram:send" in page and "Hello from ALPHA" in page and ">sent<" in page
        assert re.search(r"step 1: \d+ ms \(first token \d+ ms\), tokens \d+ prompt \+ \d+ completion", page)
        assert 'hx-trigger="every 1s"' not in page  # an ended run's trace stops polling
        for path in (
            "/ui/",
            "/ui/runs/rows",
            f"/ui/runs/{run.id}/trace",
            "/ui/conversations",
            "/ui/conversation?context=telegram:chat:42",
            "/ui/personas",
            "/ui/personas/default",
            "/ui/access",
            "/ui/health",
            "/ui/health/charts",
            "/ui/health?window=24h",
            "/ui/?q=key",
            "/ui/conversations?q=key",
            "/ui/chat",
            "/ui/access/rows",
            "/ui/personas/new",
        ):
            async with s.get(d.base + path) as resp:
                body = await resp.text()
            assert resp.status == 200 and secret not in body and TOKEN not in body, path
        # the conversation: its history, and forgetting it as `hub memory forget` does
        async with s.get(d.base + "/ui/conversation?context=telegram:chat:42") as resp:
            page = await resp.text()
        assert "Hello from ALPHA" in page and secret not in page
        assert await d.hub.memory.get("working-memory:telegram:chat:42")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        async with s.post(
            d.base + "/ui/conversation/forget", data={"csrf": csrf, "context": "telegram:chat:42", "confirm": "yes"}
        ) as resp:
            assert "forgot telegram:chat:42: 0 episodes, working-memory:telegram:chat:42" in await resp.text()
        assert await d.hub.memory.get("working-memory:telegram:chat:42") is None


class City(BaseModel):
    city: str


@action(name="lookupWeather", description="The weather in a city.")
async def lookup_weather(args: City, ctx: Any) -> dict[str, Any]:
    if args.city == "Atlantis":
        raise ValueError("no such city: Atlantis")
    return {"city": args.city, "temperature": 72}


def weather_model(request: Any) -> str:
    """Step 1 calls the action twice (one fails); step 2 answers with what came back."""
    prompt = "".join(m["content"] for m in request.messages)
    if "72" not in prompt:
        return (
            "<response><reasoning>Look it up.</reasoning>"
            '<action_call name="lookupWeather">{"city": "Paris"}</action_call>'
            '<action_call name="lookupWeather">{"city": "Atlantis"}</action_call></response>'
        )
    return '<response><output type="telegram:send">Paris: 72F</output></response>'


async def test_trace_shows_action_calls_results_errors_and_child_runs(tmp_path: Path) -> None:
    tools = Extension(name="tools", actions=[lookup_weather])
    async with dashboard(tmp_path, model=HeldModel(weather_model), extensions=[tools]) as d, client() as s:
        d.tg.push_message(chat_id=5, text="weather in Paris?")
        await d.tg.wait_sent(1)
        (run,) = await d.hub.runs.page(limit=5)
        await wait_until(lambda: _ended(d, run.id))
        child = RunRecord(context="telegram:chat:5", parent_id=run.id, state=RunState.COMPLETED)
        grandchild = RunRecord(context="telegram:chat:6", parent_id=child.id, state=RunState.FAILED)
        for r in (child, grandchild):
            await d.hub.runs.create(r)
            r.ended = r.started + 1
            await d.hub.runs.finish(r)
        await login(s, d.base)
        async with s.get(f"{d.base}/ui/runs/{run.id[:12]}") as resp:  # a unique prefix is enough
            page = html.unescape(await resp.text())
        assert "call #0 lookupWeather" in page and '"city": "Paris"' in page
        assert "result of lookupWeather" in page and '"temperature": 72' in page
        assert "no such city: Atlantis" in page and 'class="badge error"' in page
        assert "Paris: 72F" in page and "step 2:" in page
        assert "<h2>Child runs</h2>" in page
        tree = page[page.index("<h2>Child runs</h2>") :]
        assert tree.index(child.id[:10]) < tree.index(grandchild.id[:10])  # nested under its parent
        assert tree.count('<ul class="tree">') == 2
        async with s.get(f"{d.base}/ui/runs/{grandchild.id}") as resp:
            assert f'href="/ui/runs/{child.id}"' in await resp.text()  # a link up to its parent
        async with s.get(f"{d.base}/ui/runs/nosuchrun") as resp:
            assert resp.status == 404 and "No run has the id" in await resp.text()


async def _ended(d, run_id: str) -> bool:
    r = await d.hub.runs.get(run_id)
    return r is not None and r.ended is not None


async def test_persona_edit_is_validated_diffed_saved_and_rolled_back(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        csrf = await login(s, d.base)
        path = d.contexts / "default.toml"
        url = d.base + "/ui/personas/default"
        broken = 'name = "default"\ninstructions = ""\n'
        async with s.post(url + "/preview", data={"csrf": csrf, "text": broken, "base": "1"}) as resp:
            assert resp.status == 400
            page = await resp.text()
        assert "does not validate" in page and "instructions" in page
        assert (
            "instructions = &#34;&#34;" in page or "instructions = &quot;&quot;" in page or 'instructions = ""' in page
        )
        async with s.post(url + "/save", data={"csrf": csrf, "text": broken, "base": "1"}) as resp:
            assert resp.status == 400
        assert path.read_text() == PERSONA  # nothing was written
        new = persona_text("BRAVO")
        async with s.post(url + "/preview", data={"csrf": csrf, "text": new, "base": "1"}) as resp:
            page = await resp.text()
        assert "-instructions = &#34;&#34;&#34;Sign every reply as ALPHA.&#34;&#34;&#34;" in page
        assert "+instructions = &#34;&#34;&#34;Sign every reply as BRAVO.&#34;&#34;&#34;" in page
        assert path.read_text() == PERSONA  # a preview writes nothing
        async with s.post(url + "/save", data={"csrf": csrf, "text": new, "base": "1"}) as resp:
            assert "saved: rev 2 is in force" in await resp.text()
        assert path.read_text() == new
        assert d.hub.personas.get("default").instructions == "Sign every reply as BRAVO."
        revs = await d.hub.revisions.history("default")
        assert [r.rev for r in revs] == [1, 2] and revs[-1].note == "edited in the dashboard"
        # an editor who worked on rev 1 cannot overwrite rev 2 unseen
        async with s.post(url + "/save", data={"csrf": csrf, "text": persona_text("CHARLIE"), "base": "1"}) as resp:
            assert resp.status == 400 and "changed since you opened it" in await resp.text()
        assert path.read_text() == new
        # an edit on disk shows up as a revision
        path.write_text(persona_text("DELTA"))
        async with s.get(url) as resp:
            assert "Sign every reply as DELTA" in await resp.text()
        await wait_until(lambda: _revs(d, 3))
        async with s.post(url + "/rollback", data={"csrf": csrf, "rev": "1", "confirm": "yes"}) as resp:
            assert "rolled back to rev 1" in await resp.text()
        assert path.read_text() == PERSONA
        assert d.hub.personas.get("default").instructions == "Sign every reply as ALPHA."
        async with s.post(url + "/rollback", data={"csrf": csrf, "rev": "99", "confirm": "yes"}) as resp:
            assert "has no revision 99" in await resp.text()
        async with s.get(d.base + "/ui/personas/..%2Fsecrets") as resp:
            assert resp.status in (400, 404)


async def _revs(d, n: int) -> bool:
    return len(await d.hub.revisions.history("default")) >= n


async def test_a_persona_holding_a_secret_is_masked_and_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-persona-0123456789abcdef"
    monkeypatch.setenv("UI_PERSONA_API_KEY", secret)
    cfg = make_config(tmp_path)
    text = f'name = "default"\ninstructions = """Sign every reply as ALPHA. Key: {secret}"""\n'
    (tmp_path / "contexts" / "default.toml").write_text(text)
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        csrf = await login(s, d.base)
        async with s.get(d.base + "/ui/personas/default") as resp:
            page = await resp.text()
        assert secret not in page and "[REDACTED]" in page
        masked = text.replace(secret, "[REDACTED]")
        async with s.post(d.base + "/ui/personas/default/save", data={"csrf": csrf, "text": masked}) as resp:
            assert resp.status == 400 and "holds a secret" in await resp.text()
        assert (tmp_path / "contexts" / "default.toml").read_text() == text


async def test_access_lists_approves_and_revokes(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        csrf = await login(s, d.base)
        pending = await d.hub.access.check("telegram", "501", "pairing")
        async with s.get(d.base + "/ui/access") as resp:
            assert pending.code in await resp.text()
        async with s.post(d.base + "/ui/access/approve", data={"csrf": csrf, "code": "WRONG123"}) as resp:
            assert "not approved: no pending pairing has the code &#39;WRONG123&#39;" in await resp.text()
        async with s.post(d.base + "/ui/access/approve", data={"csrf": csrf, "code": pending.code.lower()}) as resp:
            assert "approved: telegram user 501" in await resp.text()
        assert (await d.hub.access.check("telegram", "501", "pairing")).allowed
        async with s.get(d.base + "/ui/access") as resp:
            assert "approved: telegram user 501" not in await resp.text()  # said once
        async with s.get(d.base + "/ui/access?msg=Your+token+expired") as resp:
            assert "Your token expired" not in await resp.text()  # no link can make it say things
        async with s.post(
            d.base + "/ui/access/revoke", data={"csrf": csrf, "user": "501", "platform": "telegram", "confirm": "yes"}
        ) as resp:
            assert "revoked 1 pairing of user 501" in await resp.text()
        assert not (await d.hub.access.check("telegram", "501", "pairing")).allowed


async def test_health_draws_the_metrics_history(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        ui = d.hub.http._ui
        d.hub.metrics.platform_429("telegram")
        d.hub.metrics.platform_429("telegram")
        d.hub.metrics.llm_latency.observe(0.25)
        ui.history.sample()
        d.hub.metrics.llm_latency.observe(0.75)
        ui.history.sample()
        assert [s.rate_limited for s in ui.history.samples][-2:] == [2.0, 0.0]
        assert ui.history.samples[-1].llm_latency_ms == pytest.approx(750.0)
        await login(s, d.base)
        connected = lambda: d.hub.metrics.registry.get_sample_value("hub_platform_connected", {"platform": "telegram"})
        await wait_until(lambda: connected() == 1, timeout=10)  # the poller reached the fake
        async with s.get(d.base + "/ui/health") as resp:
            page = await resp.text()
        assert page.count('<svg class="plot"') == 8 and ("<polyline" in page or "<circle" in page)
        assert "model latency (first token): <strong>now 750 ms, mean 500 ms</strong>" in page
        assert "429s from platforms: <strong>2 in the last 1h</strong>" in page
        assert re.search(
            r'<td>telegram</td><td data-label="listening">yes</td><td data-label="connected">yes</td>'
            r'<td data-label="sent">0</td><td data-label="failed">0</td><td data-label="429s">2</td>',
            page,
        )


async def test_forget_deletes_the_conversations_episodes_as_hub_memory_forget_does(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.memory.episodes = True  # embedded Chroma in data_dir, the offline embedder
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        for chat in (42, 43):
            d.tg.push_message(chat_id=chat, text=f"remember me, chat {chat}")
        await d.tg.wait_sent(2)
        await wait_until(lambda: _episodes(d, "telegram:chat:42", 1), timeout=20)
        await wait_until(lambda: _episodes(d, "telegram:chat:43", 1), timeout=20)
        csrf = await login(s, d.base)
        async with s.get(d.base + "/ui/conversation?context=telegram:chat:42") as resp:
            assert "remember me, chat 42" in html.unescape(await resp.text())
        async with s.post(
            d.base + "/ui/conversation/forget", data={"csrf": csrf, "context": "telegram:chat:42", "confirm": "yes"}
        ) as resp:
            assert "forgot telegram:chat:42: 1 episode, working-memory:telegram:chat:42" in await resp.text()
        assert await d.hub.episodes.episodes(context="telegram:chat:42") == []
        assert len(await d.hub.episodes.episodes(context="telegram:chat:43")) == 1  # only that conversation


async def _episodes(d, context: str, n: int) -> bool:
    await d.hub.episodes.flush()
    return len(await d.hub.episodes.episodes(context=context)) >= n


async def test_the_stop_button_stops_a_running_run(tmp_path: Path) -> None:
    async with dashboard(tmp_path, model=HeldModel(hold=True)) as d, client() as s:
        d.tg.push_message(chat_id=42, text="think about it for a long time")
        await d.model.waiting.wait()  # the run is waiting on the model
        (run,) = await d.hub.runs.page(limit=5)
        csrf = await login(s, d.base)
        async with s.get(f"{d.base}/ui/runs/{run.id}") as resp:
            page = await resp.text()
        assert f'action="/ui/runs/{run.id}/stop"' in page and ">Stop</button>" in page
        async with s.post(f"{d.base}/ui/runs/{run.id}/stop", allow_redirects=False) as resp:
            assert resp.status == 403  # without the CSRF token: refused, nothing stopped
        assert (await d.hub.runs.get(run.id)).state == RunState.RUNNING
        async with s.post(f"{d.base}/ui/runs/{run.id}/stop", data={"csrf": csrf}) as resp:
            page = await resp.text()
        assert "stopped: killed (stopped by operator)" in page
        assert ">Stop</button>" not in page  # an ended run has nothing to stop
        got = await d.hub.runs.get(run.id)
        assert (got.state, got.reason) == (RunState.KILLED, "stopped by operator")
        sent = await d.tg.wait_sent(1)
        assert sent[0]["text"] == "Sorry, something went wrong on my side. Please try again in a moment."
        async with s.post(f"{d.base}/ui/runs/{run.id}/stop", data={"csrf": csrf}) as resp:
            assert "not stopped: run" in await resp.text() and "is not running" in await resp.text()


async def test_the_runs_list_shows_what_each_run_cost(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.model.price_input, cfg.model.price_output = 2.0, 8.0
    cfg.limits.cost_per_day = 5.0
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        d.tg.push_message(chat_id=42, text="hello")
        await d.tg.wait_sent(1)
        (run,) = await d.hub.runs.page(limit=5)
        await wait_until(lambda: _ended(d, run.id))
        record = await d.hub.runs.get(run.id)
        await login(s, d.base)
        async with s.get(d.base + "/ui/") as resp:
            page = await resp.text()
        async with s.get(f"{d.base}/ui/runs/{run.id}") as resp:
            trace = await resp.text()
        async with s.get(f"{d.base}/ui/health") as resp:
            health = await resp.text()
    assert (
        record.cost > 0
        and "<th>cost</th>" in page
        and f'<td class="num" data-label="cost">{record.cost:.4f}</td>' in page
    )
    assert "the whole bot: <meter" in health and f"{round(record.cost, 4)} of 5.0 spent" in health
    assert f"<dt>cost</dt><dd>{record.cost:.4f}</dd>" in trace


async def test_the_health_page_shows_the_background_spend_and_the_runs_it_skipped(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.model.price_input, cfg.model.price_output = 2000.0, 8000.0
    cfg.limits.background_cost_per_day = 0.01
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        first = await d.hub.send("telegram:chat:42", data="the nightly report", type="schedule")
        second = await d.hub.send("telegram:chat:42", data="the nightly report", type="schedule")
        await login(s, d.base)
        async with s.get(f"{d.base}/ui/health") as resp:
            health = await resp.text()
    assert first.state == RunState.COMPLETED and second.reason == "background_cost_per_day (0.01)"
    assert "background runs (schedules, reminders, webhooks, child runs): <meter" in health
    assert "of 0.01 spent, <strong>1 skipped</strong> on this worker today" in health
