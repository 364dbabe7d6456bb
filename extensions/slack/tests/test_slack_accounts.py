"""Two Slack apps in one hub (``[extensions.slack.accounts.NAME]``): slack-bolt's Socket Mode
client and the Web API client of each against a fake Slack of its own."""

from __future__ import annotations

from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import loopback_resolver, temp_config
from hub.testing.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, SlackState
from hub_slack import SlackSettings, extension

SUPPORT_BOT = "xoxb-support-token"
SUPPORT_APP = "xapp-support-token"


async def test_each_account_answers_its_own_workspace_through_its_own_app(tmp_path: Path) -> None:
    support_state = SlackState(bot_token=SUPPORT_BOT, app_token=SUPPORT_APP, bot_user="USUP0001", bot_id="BSUP0001")
    async with FakeSlack() as main, FakeSlack(support_state) as support:
        settings = SlackSettings.model_validate(
            {
                "bot_token": BOT_TOKEN,
                "app_token": APP_TOKEN,
                "base_url": main.api_url,
                "accounts": {
                    "support": {"bot_token": SUPPORT_BOT, "app_token": SUPPORT_APP, "base_url": support.api_url}
                },
            }
        )
        cfg = temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        ext = extension(settings, resolve=loopback_resolver("files.slack.com"))
        hub = Hub(cfg, model=ScriptedModel([], default="pong"), load_extensions=False, extensions=[ext])
        async with hub:
            # each app holds its own Socket Mode connection, under its own lease
            await main.wait_for(lambda: main.state.connections > 0, timeout=10)
            await support.wait_for(lambda: support.state.connections > 0, timeout=10)
            dm = main.state.dm  # the same channel id in both workspaces: two conversations
            main.push_message(dm, "hello main")
            support.push_message(dm, "hello support")
            assert (await main.wait_sent(1))[0]["channel"] == dm
            assert (await support.wait_sent(1))[0]["channel"] == dm
            runs = sorted(r.context for r in await hub.runs.page(limit=10))
            assert runs == [f"slack:channel:{dm}", f"slack:channel:support/{dm}"]
            # a thread on the second account: its name carries the account before CHANNEL/TS
            ts = support.push_message(text=f"<@{support_state.bot_user}> in a thread")
            await support.wait_sent(2)
            assert f"slack:thread:support/{support_state.channel}/{ts}" in {
                r.context for r in await hub.runs.page(limit=10)
            }
            # an output naming the second account's conversation goes out through its app
            result = await hub.send(f"slack:channel:support/{dm}", None, "say hi")
            assert result.outputs[0].sent and len(support.sent) == 3 and len(main.sent) == 1
            metrics = hub.metrics.registry
            assert (
                metrics.get_sample_value("hub_platform_sends_total", {"platform": "slack/support", "result": "ok"}) == 3
            )
