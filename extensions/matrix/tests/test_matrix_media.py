"""Files on Matrix, end to end: matrix-nio against the fake homeserver's content repository
and the real openai client against FakeOpenAI; the hub's caps hold on the way in and out."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from matrix_harness import ANN, Harness, running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.matrix import FakeMatrix


def answer(text: str, attach: str = "") -> str:
    extra = f' attach="{attach}"' if attach else ""
    return f'<response><output type="matrix:message"{extra}>{text}</output></response>'


@contextlib.asynccontextmanager
async def with_model(
    tmp_path: Path, hs: FakeMatrix, ai: FakeOpenAI, *, extra: Sequence[Extension] = (), **settings: Any
) -> AsyncIterator[Harness]:
    cfg = temp_config(tmp_path)
    cfg.model.vision = True
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    async with running(tmp_path, hs, model=model, config=cfg, extensions=extra, **settings) as h:
        yield h


def image_parts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    return [] if isinstance(content, str) else [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


def downloads(hs: FakeMatrix) -> list[Any]:
    return [r for r in hs.calls("download") if r.status == 200]


async def test_an_image_from_the_content_repository_reaches_the_model(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("An orange box.")) as ai, FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with with_model(tmp_path, hs, ai):
            uri = hs.put_media(png(), "image/png", "box.png")
            hs.push_event(
                room,
                {
                    "type": "m.room.message",
                    "sender": ANN,
                    "content": {"msgtype": "m.image", "body": "box.png", "url": uri, "info": {"mimetype": "image/png"}},
                },
            )
            await hs.wait_sent(1)
        assert hs.texts(room) == ["An orange box."]
        (body,) = ai.bodies
        (url,) = image_parts(body)
        assert url.startswith("data:image/jpeg;base64,") and len(downloads(hs)) == 1
        assert downloads(hs)[0].headers["Authorization"].startswith("Bearer ")


async def test_a_file_over_the_cap_is_refused_unread_and_the_room_goes_on(tmp_path: Path) -> None:
    async with FakeOpenAI(default=answer("Hi.")) as ai, FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with with_model(tmp_path, hs, ai):
            big = hs.put_media(b"\x00" * 100, "video/quicktime", "film.mov")
            hs.push_event(
                room,
                {
                    "type": "m.room.message",
                    "sender": ANN,
                    "content": {
                        "msgtype": "m.video",
                        "body": "film.mov",
                        "url": big,
                        "info": {"mimetype": "video/quicktime", "size": 25_000_000},
                    },
                },
            )
            await hs.wait_sent(1)
            hs.push_text(room, ANN, "hello")  # the sentinel the model answers
            await hs.wait_sent(2)
        refused, sentinel = hs.texts(room)
        assert refused == "Sorry, I could not open film.mov: it is 25 MB, over the 10 MB limit per file."
        assert sentinel == "Hi."
        assert downloads(hs) == [], "the oversized one is never fetched"


async def test_an_action_png_is_uploaded_and_sent_as_an_image(tmp_path: Path) -> None:
    chart_png = png(90, 60)

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = ['<response><action_call name="chart">{}</action_call></response>', answer("Here it is", "media:1")]
    async with FakeOpenAI(script) as ai, FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with with_model(tmp_path, hs, ai, extra=[Extension(name="charts", actions=[chart])]):
            asked = hs.push_text(room, ANN, "draw it")
            await hs.wait_sent(2)
    text, image = [s["content"] for s in hs.sent]
    assert text["body"] == "Here it is"
    assert text["m.relates_to"] == {"m.in_reply_to": {"event_id": asked["event_id"]}}
    assert image["msgtype"] == "m.image" and image["body"] == "chart.png"
    assert image["info"] == {"mimetype": "image/png", "size": len(chart_png)}
    media_id = image["url"].rsplit("/", 1)[1]
    assert hs.state.media[media_id][0] == chart_png


async def test_a_file_over_the_homeservers_upload_limit_is_a_failed_output(tmp_path: Path) -> None:
    chart_png = png(90, 60)

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = ['<response><action_call name="chart">{}</action_call></response>', answer("Here", "media:1")]
    async with FakeOpenAI(script, default=answer("ok")) as ai, FakeMatrix() as hs:
        hs.state.upload_limit = 100
        room = hs.create_room([ANN])
        async with with_model(tmp_path, hs, ai, extra=[Extension(name="charts", actions=[chart])]) as h:
            hs.push_text(room, ANN, "draw it")
            (result,) = await h.wait_results(1, timeout=20)
        (out,) = [o for o in result.outputs if o.type == "matrix:message"]
        assert not out.sent and "over the homeserver's 100 B" in (out.error or "")
        assert hs.calls("upload") == [], "nothing over the limit is uploaded"
        assert hs.texts(room)[:1] != ["Here"], "and the reply is not half sent"


async def test_a_voice_message_is_heard_through_voice(tmp_path: Path) -> None:
    """[voice]: an Element voice message (m.audio with MSC3245's key, real OGG/Opus made at
    test time) is downloaded from the content repository and transcribed."""
    from hub.config import VoiceSection
    from hub.testing.audio import ogg_opus

    async with FakeOpenAI(default=answer("On it.")) as ai, FakeMatrix() as hs:
        room = hs.create_room([ANN])
        cfg = temp_config(tmp_path)
        cfg.model.base_url = ai.url
        cfg.voice = VoiceSection()
        ai.transcripts = ["water the plants"]
        model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
        async with running(tmp_path, hs, model=model, config=cfg):
            uri = hs.put_media(ogg_opus(1.0), "audio/ogg", "Voice message.ogg")
            content = {
                "msgtype": "m.audio",
                "body": "Voice message.ogg",
                "url": uri,
                "info": {"mimetype": "audio/ogg", "duration": 1000},
                "org.matrix.msc3245.voice": {},
            }
            hs.push_event(room, {"type": "m.room.message", "sender": ANN, "content": content})
            await hs.wait_sent(1, timeout=30)
        assert hs.texts(room) == ["On it."] and "[spoken] water the plants" in ai.prompt(0)
        assert abs(ai.heard[0]["seconds"] - 1.0) < 0.1
