"""Acting from the dashboard: a new persona, the conversations each persona is used by."""

from __future__ import annotations

import html
from pathlib import Path

from .conftest import client, dashboard, login

SUPPORT = 'name = "support"\ninstructions = """Sign every reply as SUPPORT."""\ncontexts = ["telegram:chat:43"]\n'


async def test_a_new_persona_is_validated_created_and_used_by_the_conversations_it_names(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        csrf = await login(s, d.base)
        async with s.get(d.base + "/ui/personas") as resp:
            assert 'href="/ui/personas/new"' in await resp.text()
        async with s.get(d.base + "/ui/personas/new") as resp:
            assert resp.status == 200 and 'id="persona-text"' in await resp.text()
        refused = [
            ({"name": "../etc", "text": SUPPORT}, "a persona&#39;s name is its file&#39;s name"),
            ({"name": "default", "text": SUPPORT}, "there is a persona &#39;default&#39; already"),
            ({"name": "support", "text": 'name = "support"\n'}, "the edit does not validate"),
        ]
        for form, why in refused:
            async with s.post(d.base + "/ui/personas/new", data={"csrf": csrf, **form}) as resp:
                page = await resp.text()
                assert resp.status == 400 and why in page, page[-800:]
                assert form["text"] in html.unescape(page)  # the text comes back as typed
        assert not (d.contexts / "support.toml").exists()
        async with s.post(d.base + "/ui/personas/new", data={"csrf": csrf, "name": "support", "text": SUPPORT}) as resp:
            assert "created persona support: rev 1 is in force" in await resp.text()
        assert (d.contexts / "support.toml").read_text() == SUPPORT
        assert [r.rev for r in await d.hub.revisions.history("support")] == [1]

        d.tg.push_message(chat_id=42, text="hello", first_name="Ada")
        d.tg.push_message(chat_id=43, text="help me", first_name="Bob")
        sent = await d.tg.wait_sent(2)
        assert {m["chat_id"]: m["text"] for m in sent} == {42: "Hello from ALPHA", 43: "Hello from SUPPORT"}
        async with s.get(d.base + "/ui/personas/support") as resp:
            support = await resp.text()
        async with s.get(d.base + "/ui/personas/default") as resp:
            default = await resp.text()
        async with s.get(d.base + "/ui/personas") as resp:
            listing = await resp.text()
        async with s.get(d.base + "/ui/conversation?context=telegram:chat:43") as resp:
            conversation = await resp.text()

        def used(page: str) -> str:
            return page.split("<h2>Conversations using it", 1)[1].split("<h2>", 1)[0]

        assert "telegram:chat:43" in used(support) and "telegram:chat:42" not in used(support)
        assert "telegram:chat:42" in used(default) and "telegram:chat:43" not in used(default)
        assert listing.count("used by 1 recent conversation</small>") == 2
        assert 'Persona: <a href="/ui/personas/support">support</a>' in conversation
