"""The bolt app between Slack and the intake, and the two ways events reach it.

One ``AsyncApp`` listens for ``message`` and ``app_mention`` events and the slash commands.
It runs with ``process_before_response``: the ack (the Socket Mode envelope's answer, or the
Events API's HTTP answer) is sent only once the listener has returned, that is once the event
is recorded in the inbox. A listener that fails raises: nothing is acknowledged and Slack
delivers the event again; an event that fails `PARK_AFTER` times for a
reason of its own (not the store's) is parked in the inbox, then acknowledged.

- **Socket Mode** (the default): `Bolt.run_socket()` holds the connection
  (``apps.connections.open``, then the websocket; slack-sdk reconnects by itself) on the one
  worker holding the lease ``slack:socket:<bot user id>``.
- **Events API** (``signing_secret`` set): `Bolt.route()` is served on the hub's
  ``[http]`` endpoint at ``events_path``; every worker answers, each request proven by its
  signature (`_signature`) before its body is parsed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from hub import HubError, Route, RouteAnswer, RouteRequest

from ._approvals import ACTION_ID, answer_press
from ._client import SlackClient
from ._commands import SlackCommands
from ._intake import LAST_RETRY, Intake
from ._settings import SlackSettings
from ._signature import SlackSignature

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Bolt"]

log = logging.getLogger("hub_slack")


class Bolt:
    """The bolt app of one Slack bot, its Socket Mode connection and its Events API route."""

    def __init__(self, client: SlackClient, settings: SlackSettings) -> None:
        self.client = client
        self.settings = settings
        self.intake: Intake | None = None  # set while the input is subscribed
        self.commands: SlackCommands | None = None
        self.app: AsyncApp | None = None

    def build(self, hub: Hub) -> AsyncApp:
        """The app and its listeners (the commands are those the hub has on at start)."""
        app = AsyncApp(
            client=self.client.web,
            signing_secret=self.settings.signing_secret.get_secret_value() or "unused-in-socket-mode",
            process_before_response=True,  # ack only once the listener recorded the event
            request_verification_enabled=False,  # the route verified it before the body was parsed
            logger=logging.getLogger("hub_slack.bolt"),
        )
        commands = self.commands = SlackCommands(self.settings, hub)

        async def on_event(event: dict[str, Any], request: AsyncBoltRequest) -> None:
            await self._take(event, last=retry_num(request) >= LAST_RETRY)

        async def on_press(ack: Any, body: dict[str, Any], respond: Any) -> None:
            await ack()  # within Slack's 3 seconds; the answer follows, to the presser only
            message = await answer_press(body, hub)
            try:
                await respond(text=message, response_type="ephemeral", replace_original=False)
            except Exception as e:  # the press is answered in the hub either way
                log.info("slack: answering a press failed: %s", e)

        app.event("message")(on_event)
        app.event("app_mention")(on_event)
        app.action(ACTION_ID)(on_press)  # approval buttons (hub_slack/_approvals.py)
        for name in commands.names():
            app.command(f"/{name}")(commands.invoked)
        self.app = app
        return app

    async def _take(self, event: dict[str, Any], *, last: bool = False) -> None:
        intake = self.intake
        if intake is None:
            raise HubError("slack: events are not taken now (the input is not subscribed)")
        # raises while the event is neither recorded nor parked: not acked, Slack delivers it again
        await intake.take_or_park(event, last=last)

    # --- Socket Mode ----------------------------------------------------------------------

    async def run_socket(self, hub: Hub) -> None:
        """Hold the Socket Mode connection until cancelled (the lease lost, or the hub stopping)."""
        assert self.app is not None
        handler = AsyncSocketModeHandler(
            self.app,
            self.settings.app_token.get_secret_value(),
            web_client=self.client.web,
            logger=logging.getLogger("hub_slack.socket"),
        )
        try:
            await handler.connect_async()
            log.info("slack: Socket Mode connected")
            hub.metrics.platform_connected(self.client.label, True)
            await asyncio.Event().wait()
        finally:
            hub.metrics.platform_connected(self.client.label, False)
            await handler.close_async()

    # --- the Events API -------------------------------------------------------------------

    def route(self) -> Route:
        return Route(
            path=self.settings.events_path,
            handler=self.handle,
            verify=SlackSignature(
                self.settings.signing_secret.get_secret_value(), max_age=self.settings.max_request_age
            ),
            forms=True,  # slash commands are posted as forms
            description="Slack's Events API: events and slash commands",
        )

    async def handle(self, request: RouteRequest) -> RouteAnswer:
        app, intake = self.app, self.intake
        if app is None or intake is None:  # `hub chat`, or the input is stopping: Slack retries
            return RouteAnswer(503, {"error": "Slack events are not taken by this hub now"})
        headers: dict[str, str | Sequence[str]] = {k.lower(): v for k, v in request.headers.items()}
        response = await app.async_dispatch(
            AsyncBoltRequest(body=request.body.decode("utf-8"), headers=headers, mode="http")
        )
        if response.status >= 500:
            return RouteAnswer(503, {"error": "the event was not recorded: Slack delivers it again"})
        intake.hub.metrics.platform_connected(self.client.label, True)  # Slack reaches this worker
        body: Any = {}
        if response.body:
            try:
                body = json.loads(response.body)
            except ValueError:
                body = {"text": response.body}
        return RouteAnswer(response.status, body)


def retry_num(request: AsyncBoltRequest) -> int:
    """Which retry of an event this delivery is (0: the first delivery): Slack's
    ``X-Slack-Retry-Num``, or a Socket Mode envelope's ``retry_attempt`` (bolt makes it the same header)."""
    values = request.headers.get("x-slack-retry-num") or ["0"]
    try:
        return max(0, int(values[0]))
    except (TypeError, ValueError):
        return 0
