"""Pictures, documents and audio on WhatsApp, both ways, and reactions: a user's file found
through its media id and downloaded with the token from Meta's media host only, under the
``[media]`` caps; files an action made uploaded to the media endpoint and sent by their id.
pywa_async against the loopback fake, the real openai client against FakeOpenAI."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from test_whatsapp import Running, running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.whatsapp import MEDIA_HOST, TOKEN, USER

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
OGG = b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x1eOpusHead" + b"\x00" * 40


def answer(text: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<response><output type="whatsapp:message"{extra}>{text}</output></response>'


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


async def test_a_picture_is_downloaded_with_the_token_from_metas_media_host_and_reaches_the_model(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(default=answer("An orange box.")) as ai, with_model(tmp_path, ai) as r:
        payload, _ = r.wa.media_message(png(), "image/png", caption="what is this?")
        assert (await r.wa.deliver(payload))[0] == 200
        (sent,) = await r.wa.wait_sent(1)
        (download,) = r.wa.calls("download")
    assert sent["text"] == "An orange box."
    (url,) = image_parts(ai.bodies[0])
    assert url.startswith("data:image/")
    assert "what is this?" in ai.prompt(0)
    assert download.headers["Host"].startswith(MEDIA_HOST) and download.headers["Authorization"] == f"Bearer {TOKEN}"


async def test_a_document_and_a_voice_note_reach_the_model_as_files(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("Got them.")) as ai, with_model(tmp_path, ai, vision=False) as r:
        doc, _ = r.wa.media_message(b"the quarterly numbers\n", "text/plain", kind="document", filename="q3.txt")
        assert (await r.wa.deliver(doc))[0] == 200
        await r.wa.wait_sent(1)
        voice, _ = r.wa.media_message(OGG, "audio/ogg; codecs=opus", kind="audio")
        assert (await r.wa.deliver(voice))[0] == 200
        await r.wa.wait_sent(2)
    assert "q3.txt" in ai.prompt(0) and "the quarterly numbers" in ai.prompt(0)
    assert "audio" in ai.prompt(1) or "voice" in ai.prompt(1)


async def test_an_oversized_file_is_refused_unfetched(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    cfg.media.max_bytes = 1000
    async with running(tmp_path, config=cfg) as r:
        payload, _ = r.wa.media_message(b"x" * 5000, "application/pdf", kind="document", filename="big.pdf")
        assert (await r.wa.deliver(payload))[0] == 200
        await r.wa.wait_sent(1)
        assert r.wa.calls("media_url") and not r.wa.calls("download")


async def test_pictures_documents_and_audio_an_action_made_are_uploaded_and_sent(tmp_path: Path) -> None:
    picture = png(90, 60)

    @action(name="make", description="Make the files.")
    async def make(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {
            "chart": Media(data=picture, name="chart.png"),
            "report": Media(data=PDF, name="report.pdf"),
            "voice": Media(data=OGG, name="note.ogg"),
        }

    script = [
        '<response><action_call name="make">{}</action_call></response>',
        answer("Here they are", attach="media:1,media:2,media:3"),
    ]
    files = Extension(name="files", actions=[make])
    async with FakeOpenAI(script) as ai, with_model(tmp_path, ai, vision=False, extra=[files]) as r:
        await r.say("make them")
        sent = await r.wa.wait_sent(4)
        (out,) = await r.wait_outputs(1)
    assert [s["type"] for s in sent] == ["text", "image", "document", "audio"]
    assert all(s["to"] == USER for s in sent)
    uploads = {m[2]: m for m in r.wa.state.media.values() if m[2]}
    assert uploads["chart.png"][0] == picture and uploads["report.pdf"][0] == PDF and uploads["note.ogg"][0] == OGG
    assert sent[2]["filename"] == "report.pdf"
    assert out.sent and len(out.data["files"]) == 3


async def test_a_reaction_goes_to_the_users_newest_message(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("", react="👍")]) as r:
        wamid = await r.say("thanks!")
        (sent,) = await r.wa.wait_sent(1)
        (out,) = await r.wait_outputs(1)
    assert sent["type"] == "reaction" and sent["emoji"] == "👍" and sent["reply_to"] == wamid
    assert out.sent


async def test_a_voice_note_is_heard_and_answered_by_a_voice_note_and_text(tmp_path: Path) -> None:
    """[voice]: a voice note recorded in WhatsApp (real OGG/Opus, made at test time) is
    downloaded and transcribed; the reply comes as text, then as an OGG/Opus voice note."""
    from hub.config import VoiceSection
    from hub.testing.audio import measure, ogg_opus

    async with FakeOpenAI(default=answer("Your order ships today.")) as ai:
        cfg = temp_config(tmp_path)
        cfg.model.base_url = ai.url
        cfg.voice = VoiceSection(speak_model="tts-1")
        ai.transcripts = ["where is my order"]
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path, model=model, config=cfg) as r:
            voice, _ = r.wa.media_message(ogg_opus(1.5), "audio/ogg; codecs=opus", kind="audio", voice=True)
            assert (await r.wa.deliver(voice))[0] == 200
            text, spoken = await r.wa.wait_sent(2, timeout=30)
            uploaded = r.wa.state.media[spoken["media_id"]][0]
    assert "[spoken] where is my order" in ai.prompt(0) and abs(ai.heard[0]["seconds"] - 1.5) < 0.1
    assert text["text"] == "Your order ships today."
    assert spoken["type"] == "audio" and spoken["voice"] is True
    assert uploaded[:4] == b"OggS" and (measure(uploaded) or 0) > 0.1
