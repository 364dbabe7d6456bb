"""Files on Slack, end to end: a shared file found through ``files.info`` and downloaded with
the bot token from Slack's file host only, under the media caps; a file an action made sent
with ``files_upload_v2`` in the thread asked in. slack-sdk against the loopback fake, the real
openai client against FakeOpenAI."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_slack import Running, running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.slack import BOT_TOKEN


def answer(text: str, attach: str = "") -> str:
    extra = f' attach="{attach}"' if attach else ""
    return f'<response><output type="slack:message"{extra}>{text}</output></response>'


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


async def test_a_shared_picture_is_fetched_with_the_bot_token_and_reaches_the_model(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("An orange box.")) as ai, with_model(tmp_path, ai) as r:
        sl, st = r.sl, r.sl.state
        shared = sl.add_file("box.png", png(), "image/png")
        sl.push_message(st.dm, "", files=[shared])  # no text at all
        (sent,) = await sl.wait_sent(1)
    assert sent["text"] == "An orange box."
    (url,) = image_parts(ai.bodies[0])
    assert url.startswith("data:image/jpeg;base64,")
    assert [c.params["file"] for c in sl.calls("files.info")] == [shared["id"]]
    (download,) = st.downloads
    assert download["host"] == "files.slack.com" and download["auth"] == f"Bearer {BOT_TOKEN}"


async def test_an_oversized_file_is_refused_unfetched_with_a_clear_reply(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("Hi.")) as ai, with_model(tmp_path, ai) as r:
        sl, st = r.sl, r.sl.state
        shared = sl.add_file("film.mov", b"\x00" * 10, "video/quicktime")
        shared["size"] = 25_000_000  # what Slack says it is
        sl.push_message(st.dm, "", files=[shared])
        (refused,) = await sl.wait_sent(1)
    assert refused["text"].startswith("Sorry, I could not open film.mov: it is 25 MB, over the")
    assert st.downloads == [] and ai.bodies == []


@pytest.mark.parametrize(
    "where",
    [
        "http://127.0.0.1:{port}/files-pri/T0001-F0000001/notes.txt",
        "http://localhost:{port}/files-pri/x",
        "http://169.254.169.254/latest/meta-data/x",
        "http://files.slack.com.evil.example:{port}/files-pri/x",
    ],
)
async def test_a_download_url_off_slacks_file_hosts_is_never_fetched(tmp_path: Path, where: str) -> None:
    async with FakeOpenAI(default=answer("Hm.")) as ai, with_model(tmp_path, ai, vision=False) as r:
        sl, st = r.sl, r.sl.state
        shared = sl.add_file("notes.txt", b"secret", "text/plain", url=where.format(port=sl.port))
        sl.push_message(st.dm, "read this", files=[shared])
        (sent,) = await sl.wait_sent(1)
    assert sent["text"] == "Hm."
    assert st.downloads == []
    assert "notes.txt" in ai.prompt(0) and "secret" not in ai.prompt(0)
    assert "not one of the platform's media hosts" in ai.prompt(0) or "not a public address" in ai.prompt(0)


@pytest.mark.parametrize("live", [False, True], ids=["whole", "live"])
async def test_an_action_file_is_uploaded_into_the_thread_asked_in(tmp_path: Path, live: bool) -> None:
    chart_png = png(90, 60)

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = ['<response><action_call name="chart">{}</action_call></response>', answer("Here it is", "media:1")]
    charts = Extension(name="charts", actions=[chart])
    async with FakeOpenAI(script) as ai, with_model(tmp_path, ai, vision=False, extra=[charts], live=live) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> draw it")
        (sent,) = await sl.wait_sent(1)
        await sl.wait_for(lambda: any(u["data"] for u in st.uploads))
        (out,) = await r.wait_outputs(1)
    assert sent["text"] == "Here it is" and sent["thread_ts"] == ts
    (upload,) = st.uploads
    assert upload["data"] == chart_png and upload["filename"] == "chart.png"
    assert upload["channel"] == st.channel and upload["thread_ts"] == ts
    assert out.data["files"] == [upload["id"]]


async def test_an_audio_clip_is_heard_through_voice(tmp_path: Path) -> None:
    """[voice]: a clip recorded in Slack (real WebM/Opus, made at test time) is fetched with the
    bot token and transcribed; the transcript is what the model reads."""
    from hub.config import VoiceSection
    from hub.testing.audio import audio_bytes

    async with FakeOpenAI(default=answer("Done.")) as ai:
        cfg = temp_config(tmp_path)
        cfg.model.base_url = ai.url
        cfg.voice = VoiceSection()
        ai.transcripts = ["book the meeting room"]
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path, model=model, config=cfg) as r:
            sl, st = r.sl, r.sl.state
            clip = sl.add_file("audio_message.webm", audio_bytes(1.5, format="webm"), "audio/webm")
            clip["subtype"] = "slack_audio"
            sl.push_message(st.dm, "", files=[clip])
            (sent,) = await sl.wait_sent(1, timeout=30)
    assert sent["text"] == "Done." and "[spoken] book the meeting room" in ai.prompt(0)
    assert abs(ai.heard[0]["seconds"] - 1.5) < 0.1 and len(st.downloads) == 1
