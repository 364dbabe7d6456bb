"""Pictures and files on Telegram, end to end: python-telegram-bot against the loopback fake
(getFile, downloads, sendPhoto/sendDocument uploads) and the real openai client against
FakeOpenAI, with ``[model] vision`` on and off."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from test_telegram import Harness, running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, image_bytes, png, temp_config
from hub.testing.telegram import FakeTelegram

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

JPEG = image_bytes(format="JPEG", color=(30, 30, 220))
WEBP_STICKER = image_bytes(64, 64, format="WEBP", mode="RGBA", color=(255, 200, 0, 128))  # with alpha


def answer(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


def with_model(
    tmp_path: Path, tg: FakeTelegram, ai: FakeOpenAI, *, vision: bool, extra: Sequence[Extension] = (), **media: Any
) -> AbstractAsyncContextManager[Harness]:
    """``running`` with the real OpenAI provider against ``ai``; ``media`` sets ``[media]`` keys."""
    cfg = temp_config(tmp_path)
    cfg.model.vision = vision
    for key, value in media.items():
        setattr(cfg.media, key, value)
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    return running(tmp_path, tg, model=model, config=cfg, extensions=extra)


def image_parts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    return [] if isinstance(content, str) else [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


@pytest.mark.parametrize("vision", [True, False], ids=["vision", "no-vision"])
async def test_a_photo_with_and_without_a_caption_is_answered(tmp_path: Path, vision: bool) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("A blue square.")) as ai:
        async with with_model(tmp_path, tg, ai, vision=vision):
            tg.push_media(chat_id=42, photo=JPEG, caption="what is this?")
            await tg.wait_sent(1)
            tg.push_media(chat_id=42, photo=JPEG)  # no caption at all: answered too
            sent = await tg.wait_sent(2)
    assert [s["text"] for s in sent] == ["A blue square.", "A blue square."]
    first, second = ai.bodies
    assert "what is this?" in ai.prompt(0)
    if vision:
        assert len(image_parts(first)) == 1 and image_parts(first)[0].startswith("data:image/jpeg;base64,")
        assert len(image_parts(second)) == 1  # only the current run's picture; the first is history now
        assert "picture 1 of this run, attached" in ai.prompt(1)
        assert tg.state.downloads == ["photos/file_1.jpg", "photos/file_3.jpg"]  # the largest size, by getFile
    else:
        assert image_parts(first) == [] and image_parts(second) == []
        assert "image/jpeg" in ai.prompt(1) and "this model does not see pictures" in ai.prompt(1)
        assert tg.state.downloads == []  # not needed: never fetched


async def test_a_document_is_read_and_a_sticker_is_seen(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Got it.")) as ai:
        async with with_model(tmp_path, tg, ai, vision=True):
            tg.push_media(chat_id=42, document=("notes.txt", "text/plain", b"buy milk\nfix the <bike>"))
            await tg.wait_sent(1)
            tg.push_media(chat_id=42, sticker=WEBP_STICKER)
            await tg.wait_sent(2)
    assert "buy milk\nfix the &lt;bike&gt;" in ai.prompt(0) and '"notes.txt", text/plain' in ai.prompt(0)
    (sticker,) = image_parts(ai.bodies[1])
    assert sticker.startswith("data:image/png;base64,")  # a WebP with alpha, re-encoded as PNG


async def test_an_oversized_file_and_a_bomb_get_a_clear_reply_and_reach_no_model(tmp_path: Path) -> None:
    white = png(3000, 3000, color=(255, 255, 255))  # a few KB, 9 million pixels decoded
    assert len(white) < 50_000
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Hello.")) as ai:
        async with with_model(tmp_path, tg, ai, vision=True, max_pixels=4_000_000):
            tg.push_media(chat_id=42, document=("video.mp4", "video/mp4", b"\x00" * 10), size=30_000_000)
            (refused,) = await tg.wait_sent(1)
            tg.push_media(chat_id=42, photo=white)
            bomb = (await tg.wait_sent(2))[1]
            tg.push_message(chat_id=42, text="hello")  # the sentinel: a message the model answers
            sentinel = (await tg.wait_sent(3))[2]
    assert refused["text"] == "Sorry, I could not open video.mp4: it is 30 MB, over the 10 MB limit per file."
    assert bomb["text"].startswith("Sorry, I could not open photo_") and "3000×3000 pixels" in bomb["text"]
    assert sentinel["text"] == "Hello."
    (only,) = ai.bodies  # the model was asked once: about "hello", never about either file
    assert image_parts(only) == []
    assert tg.state.downloads == ["photos/file_3.jpg"]  # the oversized file was never downloaded


async def test_an_action_png_is_sent_as_a_photo_and_as_a_document(tmp_path: Path) -> None:
    chart_png = png(120, 80)

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = [
        '<response><action_call name="chart">{}</action_call></response>',
        '<response><output type="telegram:photo" src="media:1">Your chart</output>'
        '<output type="telegram:document" src="media:1"></output></response>',
    ]
    async with FakeTelegram() as tg, FakeOpenAI(script) as ai:
        async with with_model(tmp_path, tg, ai, vision=False, extra=[Extension(name="charts", actions=[chart])]):
            tg.push_message(chat_id=42, text="draw it")
            photo, document = await tg.wait_sent(2)
    assert photo["method"] == "sendPhoto" and photo["data"] == chart_png and photo["caption"] == "Your chart"
    assert document["method"] == "sendDocument" and document["data"] == chart_png
    assert document["filename"] == "chart.png" and document["caption"] is None
    assert '"media": "media:1"' in ai.prompt(1).replace("&quot;", '"') and "base64" not in ai.prompt(1)


async def test_a_caption_over_1024_follows_the_photo_and_a_bad_src_is_reported(tmp_path: Path) -> None:
    long = "word " * 300  # 1,500 characters: over Telegram's 1,024 for a caption

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=png(), name="c.png")}

    script = [
        '<response><action_call name="chart">{}</action_call></response>',
        f'<response><output type="telegram:photo" src="media:1">{long}</output>'
        '<output type="telegram:photo" src="media:7">never sent</output></response>',
    ]
    async with FakeTelegram() as tg, FakeOpenAI(script, default=answer("ok")) as ai:
        async with with_model(tmp_path, tg, ai, vision=False, extra=[Extension(name="charts", actions=[chart])]) as h:
            outputs: list[Any] = []
            events = h.hub.events(kinds=["output"])
            tg.push_message(chat_id=42, text="draw it")
            photo, text = await tg.wait_sent(2)
            async with asyncio.timeout(5):
                async for event in events:
                    entry = getattr(event, "entry", None)
                    if entry is not None and entry.type == "telegram:photo" and entry.error:
                        outputs.append(entry)
                        break
            events.close()
    assert photo["method"] == "sendPhoto" and photo["caption"] is None
    assert text["method"] == "sendMessage" and text["text"] == long.strip()
    assert "no file 'media:7' in this run" in outputs[0].error


# -- a hostile Bot API server (issue 24, finding 7) ----------------------------------------------


async def test_a_file_path_on_the_local_disk_is_never_read(tmp_path: Path) -> None:
    """python-telegram-bot reads any getFile file_path that exists on the local disk, so a
    hostile Bot API server (a base_url the operator set) could put a local file's text into
    the prompt. Now files come over HTTP from the file API, and a path outside it is refused."""
    secret = tmp_path / "secret.txt"
    secret.write_text("DB_PASSWORD=local-disk-secret-0123")
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Hm.")) as ai:
        async with with_model(tmp_path / "hub", tg, ai, vision=False):
            tg.push_media(chat_id=42, document=("notes.txt", "text/plain", b""), file_path=str(secret), caption="read")
            await tg.wait_sent(1)
    prompt = ai.prompt(0)
    assert "local-disk-secret" not in prompt
    assert "notes.txt" in prompt and "a path outside its file API" in prompt and "local_mode = true" in prompt


async def test_with_local_mode_a_local_bot_api_servers_files_are_read_from_its_disk(tmp_path: Path) -> None:
    on_disk = tmp_path / "srv" / "documents" / "file_1.txt"
    on_disk.parent.mkdir(parents=True)
    on_disk.write_text("minutes of the meeting")
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Read.")) as ai:
        cfg = temp_config(tmp_path / "hub")
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path / "hub", tg, model=model, config=cfg, local_mode=True):
            tg.push_media(chat_id=42, document=("m.txt", "text/plain", b""), file_path=str(on_disk), caption="read")
            await tg.wait_sent(1)
            tg.push_media(chat_id=42, document=("n.txt", "text/plain", b"served over HTTP"), caption="and")
            await tg.wait_sent(2)
    assert "minutes of the meeting" in ai.prompt(0)
    assert "served over HTTP" in ai.prompt(1)  # a relative path is still the file API's


async def test_a_file_that_claims_1_kb_but_serves_60_mb_is_cut_while_it_downloads(tmp_path: Path) -> None:
    """getFile said 1 KB; the download never ends. The cap is enforced while reading: the hub
    stops at max_bytes, and the server never gets to send the whole 60 MB."""
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Hm.")) as ai:
        async with with_model(tmp_path, tg, ai, vision=False, max_bytes=1_000_000):
            tg.push_media(
                chat_id=42, document=("log.txt", "text/plain", b""), size=1000, stream=60_000_000, caption="read"
            )
            await tg.wait_sent(1)
    assert "over the 1 MB limit per file" in ai.prompt(0)
    assert tg.state.streamed < 20_000_000, tg.state.streamed  # kernel buffers aside, nowhere near 60 MB
