"""Pictures on X: a mention's pictures reach a vision model, and an action's PNG is uploaded
(v1.1 media/upload, OAuth 1.0a) and attached to twitter:post; tweepy against the fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hub import Extension, Hub, Media, RunContext, action
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, png, temp_config
from hub.testing.twitter import FakeTwitter
from hub_twitter import TwitterBot, TwitterSettings, extension, make_client


@asynccontextmanager
async def bot(
    tw: FakeTwitter, ai: FakeOpenAI, data: Path, *, vision: bool, extra: list[Extension] = ()
) -> AsyncIterator[tuple[Hub, TwitterBot]]:
    settings = TwitterSettings(
        bearer_token="app-bearer",
        api_key="ck",
        api_secret="cs",
        access_token=f"{tw.user_id}-at",
        access_token_secret="ats",
        dry_run=False,
        post_interval=0,
        poll_interval=3600,
    )

    def factory(s: TwitterSettings) -> Any:
        client = make_client(s)
        tw.patch_async_client(client)
        return client

    twitter = TwitterBot(settings, client_factory=factory, resolve=tw.resolve)
    cfg = temp_config(data)
    cfg.model.vision = vision
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    try:
        async with Hub(
            cfg, model=model, load_extensions=False, extensions=[extension(settings, bot=twitter), *extra]
        ) as hub:
            yield hub, twitter
    finally:
        await model.close()


async def test_a_mentions_picture_reaches_a_vision_model(tmp_path: Path) -> None:
    reply = '<response><output type="twitter:reply">A blue flag.</output></response>'
    async with FakeTwitter() as tw, FakeOpenAI(default=reply) as ai:
        async with bot(tw, ai, tmp_path, vision=True) as (hub, twitter):
            tw.push_mention_with_media(
                "@hubbot what is this?", "42", "ann", [("flag.png", png(60, 40, color=(0, 90, 200)))]
            )
            await twitter.poll()
            await tw.wait_sent(1)
    (body,) = ai.bodies
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "what is this?" in parts[0]["text"]


async def test_an_action_png_is_uploaded_and_posted_with_the_post(tmp_path: Path) -> None:
    chart_png = png(60, 40, color=(200, 0, 0))

    @action(name="chart", description="Draw the chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=chart_png, name="chart.png")}

    script = [
        '<response><action_call name="chart">{}</action_call></response>',
        '<response><output type="twitter:post" media="media:1">Today\'s chart</output></response>',
    ]
    async with FakeTwitter() as tw, FakeOpenAI(script) as ai:
        async with bot(tw, ai, tmp_path, vision=False, extra=[Extension(name="charts", actions=[chart])]) as (hub, _):
            result = await hub.send("twitter:timeline:home", None, "post today's chart")
    assert result.ok, result.reason
    (upload,) = tw.state.uploads
    assert upload["data"] == chart_png and upload["filename"] == "chart.png" and upload["auth"] == "oauth1"
    (tweet,) = tw.sent
    assert tweet["text"] == "Today's chart" and tweet["json"]["media"] == {"media_ids": [upload["media_id"]]}
