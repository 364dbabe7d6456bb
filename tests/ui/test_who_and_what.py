"""Who wrote and what was said: the sender's name and @username kept with the input, one-line
previews of the message and of the reply on the runs and conversations lists and in the trace,
redacted as the log is; and the search over runs and conversations on every backend."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from hub.store import InMemoryRunStore, RunRecord, RunState, RunStore, preview
from hub.store.sql import PostgresRunStore, SqlRunStore
from tests._support.backends import BACKENDS, sql_database

from .conftest import client, dashboard, login, wait_until


async def _ended(d, run_id: str) -> bool:
    r = await d.hub.runs.get(run_id)
    return r is not None and r.ended is not None and bool(r.reply)


async def test_the_lists_and_the_trace_say_who_wrote_and_what(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-whoandwhat-0123456789abcdef"
    monkeypatch.setenv("UI_TEST_API_KEY", secret)
    async with dashboard(tmp_path) as d, client() as s:
        d.tg.push_message(chat_id=42, text=f"hello there,\n  my key is {secret}", first_name="Ada", username="ada_l")
        d.tg.push_message(chat_id=43, text="second chat", first_name="Bob", username="bobby")
        await d.tg.wait_sent(2)
        runs = await d.hub.runs.page(limit=5)
        for r in runs:
            await wait_until(lambda r=r: _ended(d, r.id))
        ada = next(r for r in runs if r.context == "telegram:chat:42")
        stored = await d.hub.runs.get(ada.id)
        assert stored is not None
        assert (stored.user_name, stored.user_handle, stored.user) == ("Ada", "ada_l", "42")
        assert stored.message == "hello there, my key is [REDACTED]"  # one line, the secret masked in the row
        assert stored.reply == "Hello from ALPHA"
        await login(s, d.base)
        async with s.get(d.base + "/ui/") as resp:
            raw = await resp.text()
        # an id wraps after a colon on a narrow screen, never in the middle of a word
        assert '<span class="context">telegram:<wbr>chat:<wbr>42</span>' in raw
        runs_page = html.unescape(raw).replace("<wbr>", "")
        async with s.get(d.base + "/ui/conversations") as resp:
            conversations = html.unescape(await resp.text()).replace("<wbr>", "")
        async with s.get(f"{d.base}/ui/runs/{ada.id}") as resp:
            trace = html.unescape(await resp.text()).replace("<wbr>", "")
        for page in (runs_page, conversations):
            row = page[page.index("telegram:chat:42") :].split("</tr>", 1)[0]
            assert '<span class="name">Ada</span>' in row and '<span class="handle">@ada_l</span>' in row
            assert "hello there, my key is [REDACTED]" in row and "↩ Hello from ALPHA" in row
            assert "Bob" not in row
        assert '<dt>from</dt><dd class="from"><span class="name">Ada</span> <span class="handle">@ada_l</span>' in trace
        assert '<dd class="said">hello there, my key is [REDACTED]</dd>' in trace
        assert '<dd class="replied">Hello from ALPHA</dd>' in trace
        for page in (runs_page, conversations, trace):
            assert secret not in page


async def test_the_search_box_finds_runs_and_conversations_by_user_text_and_context(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        for chat, name, handle, text in ((42, "Ada", "ada_l", "the weather in Paris"), (43, "Bob", "bobby", "pizza")):
            d.tg.push_message(chat_id=chat, text=text, first_name=name, username=handle)
        await d.tg.wait_sent(2)
        await login(s, d.base)
        for q, found, missing in (
            ("paris", "telegram:chat:42", "telegram:chat:43"),
            ("@BOBBY", "telegram:chat:43", "telegram:chat:42"),
            ("Ada", "telegram:chat:42", "telegram:chat:43"),
            ("chat:43", "telegram:chat:43", "telegram:chat:42"),
        ):
            for path in ("/ui/", "/ui/runs/rows", "/ui/conversations"):
                async with s.get(d.base + path, params={"q": q}) as resp:
                    assert resp.status == 200
                    page = (await resp.text()).replace("<wbr>", "")
                assert found in page and missing not in page, (q, path)
        async with s.get(d.base + "/ui/", params={"q": "nobody-says-this"}) as resp:
            assert "No runs match nobody-says-this." in await resp.text()
        async with s.get(d.base + "/ui/conversations", params={"q": "nobody-says-this"}) as resp:
            assert "No conversation matches nobody-says-this." in await resp.text()
        async with s.get(d.base + "/ui/", params={"q": "x" * 400}) as resp:
            assert resp.status == 400 and "q is longer than 300 characters" in await resp.text()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_search_and_conversations_on_every_backend(tmp_path: Path, kind: str) -> None:
    if kind == "memory":
        store: RunStore = InMemoryRunStore()
        await _check_search(store)
        return
    async with sql_database(kind, tmp_path) as db:
        store = SqlRunStore(db) if kind == "sqlite" else PostgresRunStore(db)
        await store.open()
        await _check_search(store)


async def _check_search(store: RunStore) -> None:
    t0 = 1_700_000_000.0
    rows = [
        RunRecord(context="telegram:chat:1", started=t0, user="1", user_name="Ada", user_handle="ada_l", message="hi"),
        RunRecord(context="telegram:chat:1", started=t0 + 1, user="1", message="100% sure", reply="Noted_ok"),
        RunRecord(context="discord:channel:9", started=t0 + 2, user="9", user_name="Zoë", message="Grüße"),
        RunRecord(context="discord:channel:9", started=t0 + 3, user="9", message="later", state=RunState.FAILED),
    ]
    for r in rows:
        await store.create(r)
    ids = lambda runs: [r.id for r in runs]  # noqa: E731
    assert ids(await store.search("ADA")) == [rows[0].id]
    assert ids(await store.search("@ada_l")) == [rows[0].id]
    assert ids(await store.search("100%")) == [rows[1].id]  # % and _ are themselves, not wildcards
    assert await store.search("1_0") == [] and await store.search("0%s") == []
    assert ids(await store.search("noted_")) == [rows[1].id]
    assert ids(await store.search("Grüße")) == [rows[2].id]
    assert ids(await store.search("chat:1")) == [rows[1].id, rows[0].id]  # newest first
    assert ids(await store.search("chat:1", limit=1, before=(rows[1].started, rows[1].id))) == [rows[0].id]
    assert ids(await store.search("channel", state="failed")) == [rows[3].id]
    assert ids(await store.search("channel", platform="telegram")) == []
    got = await store.search("9", context="discord:channel:9")
    assert ids(got) == [rows[3].id, rows[2].id]
    convs = await store.conversations()
    assert [(r.id, n) for r, n in convs] == [(rows[3].id, 2), (rows[1].id, 2)]
    assert [(r.id, n) for r, n in await store.conversations(text="zo")] == [(rows[2].id, 1)]
    assert [(r.id, n) for r, n in await store.conversations(platform="telegram")] == [(rows[1].id, 2)]
    assert [(r.id, n) for r, n in await store.conversations(limit=1)] == [(rows[3].id, 2)]
    got_back = await store.get(rows[0].id)
    assert got_back is not None and (got_back.user_name, got_back.user_handle, got_back.message) == (
        "Ada",
        "ada_l",
        "hi",
    )


def test_a_preview_is_one_line_and_bounded() -> None:
    assert preview("a\n\n b\tc ") == "a b c"
    assert preview({"k": [1, 2]}) == '{"k": [1, 2]}'
    long = preview("word " * 100, 50)
    assert len(long) == 50 and long.endswith("…")
