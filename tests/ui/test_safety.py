"""The dashboard's safety: a confirmation step before anything is deleted or rewritten, errors
as pages of the layout, no server path in what a page says, and a favicon."""

from __future__ import annotations

import html
import re
from pathlib import Path

from .conftest import client, dashboard, login


def _form_fields(page: str, action: str) -> dict[str, str]:
    form = re.search(rf'<form method="post" action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.S)
    assert form, page[-1500:]
    return {m[0]: html.unescape(m[1]) for m in re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(1))}


async def test_forget_revoke_and_rollback_each_ask_first_and_do_nothing_until_confirmed(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        csrf = await login(s, d.base)
        await d.hub.memory.set("working-memory:telegram:chat:42", [])
        pending = await d.hub.access.check("telegram", "501", "pairing")
        await d.hub.access.approve(pending.code)
        url = d.base + "/ui/personas/default"
        async with s.get(url) as resp:
            text = (await resp.text()).split('id="persona-text"', 1)[1]
        async with s.post(url + "/save", data={"csrf": csrf, "text": PERSONA_2}) as resp:
            assert "saved: rev 2 is in force" in await resp.text()

        cases = [
            ("/ui/conversation/forget", {"context": "telegram:chat:42"}, "Forget telegram:chat:42?"),
            ("/ui/access/revoke", {"user": "501", "platform": "telegram"}, "Revoke user 501 on telegram?"),
            ("/ui/personas/default/rollback", {"rev": "1"}, "Roll persona default back to rev 1?"),
        ]
        for action, fields, title in cases:
            async with s.post(d.base + action, data={"csrf": csrf, **fields}) as resp:
                assert resp.status == 200
                page = await resp.text()
            assert f"<h1>{html.escape(title)}</h1>" in page and 'class="cancel"' in page
            again = _form_fields(page, action)
            assert again == {"csrf": csrf, **fields, "confirm": "yes"}  # the same fields, posted once more
        # nothing happened on the first post
        assert await d.hub.memory.get("working-memory:telegram:chat:42") is not None
        assert (await d.hub.access.check("telegram", "501", "pairing")).allowed
        assert (await d.hub.revisions.history("default"))[-1].rev == 2
        assert "BRAVO" in (d.contexts / "default.toml").read_text()
        # the confirmed post acts
        for action, fields, _ in cases:
            async with s.post(d.base + action, data={"csrf": csrf, **fields, "confirm": "yes"}) as resp:
                assert resp.status == 200 and 'id="confirm"' not in await resp.text()
        assert await d.hub.memory.get("working-memory:telegram:chat:42") is None
        assert not (await d.hub.access.check("telegram", "501", "pairing")).allowed
        assert "ALPHA" in (d.contexts / "default.toml").read_text()
        assert text  # the page was the editor


PERSONA_2 = 'name = "default"\ninstructions = """Sign every reply as BRAVO."""\n'


async def test_an_unknown_run_or_page_is_a_styled_404_in_the_layout(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        await login(s, d.base)
        for path in ("/ui/runs/nope-no-such-run", "/ui/no/such/page", "/ui/personas/ghost"):
            async with s.get(d.base + path) as resp:
                assert resp.status == 404, path
                assert resp.content_type == "text/html"
                page = await resp.text()
            assert "<h1>Not found" in page and '<link rel="stylesheet" href="/ui/static/app.css">' in page
            assert '<a href="/ui/conversations"' in page, "the navigation is on the page"
        async with s.get(d.base + "/ui/runs/nope-no-such-run") as resp:
            assert "No run has the id &#39;nope-no-such-run&#39;" in await resp.text()
        # a handler that fails is a page too, saying where to look, not a traceback
        ui = d.hub.http._ui

        async def broken(*a, **kw):
            raise RuntimeError("/secret/internal/path exploded")

        d.hub.runs.page = broken  # type: ignore[method-assign]
        async with s.get(d.base + "/ui/") as resp:
            assert resp.status == 500
            page = await resp.text()
        assert "Something went wrong" in page and "the hub&#39;s log" in page and "exploded" not in page
        assert ui is not None


async def test_a_toml_error_names_the_file_not_the_servers_path(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        csrf = await login(s, d.base)
        (d.contexts / "broken.toml").write_text('name = "broken"\ninstructions = \n')
        d.hub.personas.refresh(force=True)
        async with s.get(d.base + "/ui/personas") as resp:
            listing = await resp.text()
        async with s.post(
            d.base + "/ui/personas/default/preview", data={"csrf": csrf, "text": "name = [unclosed\n"}
        ) as resp:
            preview = await resp.text()
        for page in (listing, preview):
            assert str(tmp_path) not in page and str(tmp_path.resolve()) not in page
        assert "contexts/broken.toml" in listing
        assert "does not validate" in preview and "contexts/default.toml" in preview


async def test_every_page_links_a_favicon_that_is_served(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        async with s.get(d.base + "/ui/login") as resp:
            assert '<link rel="icon" href="/ui/static/favicon.svg"' in await resp.text()
        for path in ("/ui/static/favicon.svg", "/ui/favicon.ico"):
            async with s.get(d.base + path) as resp:
                assert resp.status == 200 and resp.content_type == "image/svg+xml"
                assert (await resp.text()).startswith("<svg")
