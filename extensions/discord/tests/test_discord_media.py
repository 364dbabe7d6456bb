"""Attachments on Discord, end to end: discord.py against the loopback fake (attachment URLs it
serves, multipart uploads) and the real openai client against FakeOpenAI, vision on and off."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_discord import running

from hub import Extension, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.discord import FakeDiscord


def answer(text: str) -> str:
    return f'<response><output type="discord:message">{text}</output></response>'


@contextlib.asynccontextmanager
async def with_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ai: FakeOpenAI,
    *,
    vision: bool,
    extra: Sequence[Extension] = (),
    live: bool = False,
    **media: Any,
) -> AsyncIterator[FakeDiscord]:
    """``running`` with the real OpenAI provider against ``ai``, once the bot is ready;
    ``media`` sets ``[media]`` keys."""
    cfg = temp_config(tmp_path)
    cfg.model.vision = vision
    for key, value in media.items():
        setattr(cfg.media, key, value)
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    async with running(tmp_path, monkeypatch, model=model, config=cfg, extensions=extra, live=live) as r:
        await r.dc.wait_ready()
        yield r.dc


def image_parts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    return [] if isinstance(content, str) else [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


@pytest.mark.parametrize("vision", [True, False], ids=["vision", "no-vision"])
async def test_an_image_attachment_reaches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vision: bool
) -> None:
    async with FakeOpenAI(default=answer("An orange box.")) as ai:
        async with with_model(tmp_path, monkeypatch, ai, vision=vision) as dc:
            dc.push_attachments(dc.dm_channel_id, [("box.png", "image/png", png())])  # no text at all
            (sent,) = await dc.wait_sent(1)
    assert sent["content"] == "An orange box."
    (body,) = ai.bodies
    assert "[attachment:" not in ai.prompt(0) and "http://" not in ai.prompt(0)  # no link the model cannot open
    if vision:
        (url,) = image_parts(body)
        assert url.startswith("data:image/jpeg;base64,") and len(dc.state.downloads) == 1
    else:
        assert image_parts(body) == [] and dc.state.downloads == []
        assert '[image, "box.png", image/png, ' in ai.prompt(0)


async def test_an_oversized_attachment_and_a_bomb_get_a_clear_reply_and_reach_no_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    white = png(3000, 3000, color=(255, 255, 255))
    async with FakeOpenAI(default=answer("Hi.")) as ai:
        async with with_model(tmp_path, monkeypatch, ai, vision=True, max_pixels=4_000_000) as dc:
            dc.push_attachments(dc.dm_channel_id, [("film.mov", "video/quicktime", b"\x00" * 10)], size=25_000_000)
            (refused,) = await dc.wait_sent(1)
            dc.push_attachments(dc.dm_channel_id, [("white.png", "image/png", white)])
            bomb = (await dc.wait_sent(2))[1]
            dc.push_message(dc.dm_channel_id, "hello")  # the sentinel the model answers
            sentinel = (await dc.wait_sent(3))[2]
    assert refused["content"] == "Sorry, I could not open film.mov: it is 25 MB, over the 10 MB limit per file."
    assert bomb["content"].startswith("Sorry, I could not open white.png: it is 3000×3000 pixels")
    assert sentinel["content"] == "Hi."
    (only,) = ai.bodies  # asked once, about "hello"
    assert image_parts(only) == [] and len(dc.state.downloads) == 1  # the oversized one never fetched


@pytest.mark.parametrize("live", [False, True], ids=["whole", "live"])
async def test_an_action_png_is_sent_as_an_attachment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: bool
) -> None:
    """With live = true too: a reply that attaches a file is sent whole, with the file on it."""
    chart_png = png(90, 60)

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = [
        '<response><action_call name="chart">{}</action_call></response>',
        '<response><output type="discord:message" attach="media:1">Here it is</output></response>',
    ]
    async with FakeOpenAI(script) as ai:
        async with with_model(
            tmp_path, monkeypatch, ai, vision=False, extra=[Extension(name="charts", actions=[chart])], live=live
        ) as dc:
            dc.push_message(dc.dm_channel_id, "draw it")
            (sent,) = await dc.wait_sent(1)
    assert sent["content"] == "Here it is" and sent["files"] == {"chart.png": chart_png}


@pytest.mark.parametrize(
    "where",
    [
        "http://127.0.0.1:{port}/latest/meta-data/iam/security-credentials/role",  # the probe's
        "http://localhost:{port}/latest/meta-data/x",
        "http://169.254.169.254/latest/meta-data/x",
        "http://[::1]:{port}/latest/meta-data/x",
        "http://cdn.discordapp.com.evil.example:{port}/latest/meta-data/x",
    ],
)
async def test_an_attachment_off_discords_media_hosts_is_never_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Issue 24, finding 7: an attachment whose URL pointed at 127.0.0.1 was fetched and its
    body (a cloud's metadata) reached the prompt. Now only Discord's media hosts are fetched
    from, at public addresses."""
    async with FakeOpenAI(default=answer("Hm.")) as ai:
        async with with_model(tmp_path, monkeypatch, ai, vision=False) as dc:
            url = where.format(port=dc.port)
            dc.push_attachments(dc.dm_channel_id, [("notes.txt", "text/plain", b"")], "read this", url=url)
            (sent,) = await dc.wait_sent(1)
    assert sent["content"] == "Hm."
    assert dc.state.metadata_reads == []
    prompt = ai.prompt(0)
    assert "metadata-secret" not in prompt and "AKIA" not in prompt
    assert "notes.txt" in prompt and "not one of the platform's media hosts" in prompt


async def test_a_media_host_that_resolves_to_a_private_address_is_refused(tmp_path: Path) -> None:
    """The address rule holds whatever the name: a host added to media_hosts that resolves
    to the loopback (the system's resolver, no test seam) is not connected to."""
    from hub import MediaRefused
    from hub.platform import MediaHosts, fetch_url

    async with FakeDiscord() as dc:
        hosts = MediaHosts(("localhost",))  # the default resolver: public addresses only
        with pytest.raises(MediaRefused, match="not a public address"):
            await fetch_url(f"http://localhost:{dc.port}/latest/meta-data/x", max_bytes=1000, hosts=hosts)
        assert dc.state.metadata_reads == []
