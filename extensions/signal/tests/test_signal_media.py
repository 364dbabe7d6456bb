"""Attachments on Signal, both ways: a user's picture or file fetched from the API
(``GET /v1/attachments/{id}``) under the ``[media]`` caps and passed to the model; files an
action made sent with the reply as ``base64_attachments``. The real openai client against
FakeOpenAI, the extension against FakeSignal."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from test_signal import Running, answer, running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.signal import USER

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@contextlib.asynccontextmanager
async def with_model(
    tmp_path: Path, ai: FakeOpenAI, *, vision: bool = True, extra: Sequence[Extension] = (), **kw: Any
) -> AsyncIterator[Running]:
    cfg = temp_config(tmp_path)
    cfg.model.vision = vision
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    async with running(tmp_path, model=model, config=cfg, extensions=extra, **kw) as r:
        yield r


def image_parts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    return [] if isinstance(content, str) else [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


async def test_a_picture_is_fetched_from_the_api_and_reaches_the_model(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("An orange box.")) as ai, with_model(tmp_path, ai) as r:
        att = r.sig.attachment(png(), "image/png", filename="box.png")
        await r.say("what is this?", attachments=[att])
        (sent,) = await r.sig.wait_sent(1)
        (fetched,) = r.sig.calls("attachment")
    assert sent["text"] == "An orange box."
    assert fetched.path == f"/v1/attachments/{att['id']}"
    (url,) = image_parts(ai.bodies[0])
    assert url.startswith("data:image/") and "what is this?" in ai.prompt(0)


async def test_a_document_reaches_the_model_as_a_file(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("Got it.")) as ai, with_model(tmp_path, ai, vision=False) as r:
        att = r.sig.attachment(b"the quarterly numbers\n", "text/plain", filename="q3.txt")
        await r.say(None, attachments=[att])  # a file with no text
        await r.sig.wait_sent(1)
    assert "q3.txt" in ai.prompt(0) and "the quarterly numbers" in ai.prompt(0)


async def test_an_oversized_attachment_is_refused_unfetched(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    cfg.media.max_bytes = 1000
    async with running(tmp_path, config=cfg) as r:
        att = r.sig.attachment(b"x" * 5000, "application/pdf", filename="big.pdf")
        await r.say("read this", attachments=[att])
        await r.sig.wait_sent(1)
        assert not r.sig.calls("attachment")


async def test_files_an_action_made_go_with_the_reply(tmp_path: Path) -> None:
    picture = png(90, 60)

    @action(name="make", description="Make the files.")
    async def make(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"chart": Media(data=picture, name="chart.png"), "report": Media(data=PDF, name="report.pdf")}

    script = [
        '<response><action_call name="make">{}</action_call></response>',
        answer("Here they are", attach="media:1,media:2"),
    ]
    files = Extension(name="files", actions=[make])
    async with FakeOpenAI(script) as ai, with_model(tmp_path, ai, vision=False, extra=[files]) as r:
        await r.say("make them")
        (sent,) = await r.sig.wait_sent(1)
        (out,) = await r.wait_outputs(1)
    assert sent["to"] == USER and sent["text"] == "Here they are"
    assert [(f["name"], f["mime"], f["data"]) for f in sent["files"]] == [
        ("chart.png", "image/png", picture),
        ("report.pdf", "application/pdf", PDF),
    ]
    assert out.sent and [f["name"] for f in out.data["files"]] == ["chart.png", "report.pdf"]
