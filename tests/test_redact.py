"""Secrets never appear in a log line, a trace or a prompt."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path

from hub import Extension, Hub, NoArgs, ScriptedModel, action, load_config
from hub.cli import main
from hub.logging_setup import setup_logging
from hub.redact import MASK, Redactor, is_secret_name
from hub_cli import CliSettings
from hub_cli import extension as cli_extension

ENV_SECRET = "sk-env-0123456789abcdef"  # reaches the config through ${HUB_TEST_API_KEY}
FILE_SECRET = "tg-file-token-<&>-9876"  # written in the config under a key named like a secret


def test_secret_names():
    for name in (
        "api_key",
        "token",
        "bearer_token",
        "access_token_secret",
        "TELEGRAM_BOT_TOKEN",
        "dbPassword",
        "OPENAI_API_KEY",
        "secret",
        "apiKey",
    ):
        assert is_secret_name(name), name
    for name in ("max_tokens", "keyboard", "monkey", "base_url", "conversation_tokens_per_day", "PATH", "name"):
        assert not is_secret_name(name), name


def test_redactor_masks_every_form_and_keeps_short_values():
    r = Redactor([FILE_SECRET, "abc"])
    assert r.redact(f"x {FILE_SECRET} y") == f"x {MASK} y"
    assert FILE_SECRET not in r.redact(json.dumps({"t": FILE_SECRET}))  # JSON-escaped
    assert r.redact("tg-file-token-&lt;&amp;&gt;-9876") == MASK  # as the XML prompt escapes it
    assert r.redact("abc") == "abc"  # too short to be a secret worth garbling logs for
    assert r.redact_tree({"a": [FILE_SECRET, 1], FILE_SECRET: None}) == {"a": [MASK, 1], MASK: None}


def write_config(tmp_path: Path) -> Path:
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text('name = "Hub"\ninstructions = "Be brief."\n')
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[hub]
data_dir = "data"
[model]
provider = "openai"
api_key = "${{HUB_TEST_API_KEY}}"
[extensions.tools]
bot_token = "{FILE_SECRET}"
[extensions.cli]
stdin = false
""",
        encoding="utf-8",
    )
    return path


def test_secrets_never_reach_logs_traces_or_prompts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HUB_TEST_API_KEY", ENV_SECRET)
    path = write_config(tmp_path)
    config = load_config(path)
    log = logging.getLogger("tests.tools")

    @action(name="leak", description="Reads the credentials.")
    async def leak(args: NoArgs, ctx) -> dict:
        log.warning("the token is %s", FILE_SECRET, extra={"detail": {"key": ENV_SECRET}})
        try:
            raise RuntimeError(f"login with {ENV_SECRET} failed")
        except RuntimeError:
            log.exception("handled")
        return {"token": FILE_SECRET, "key": ENV_SECRET}

    @action(name="fail", description="Fails with the key in its message.")
    async def fail(args: NoArgs, ctx) -> dict:
        raise ValueError(f"bad key {ENV_SECRET}")

    model = ScriptedModel(
        [
            f"<response><reasoning>the key is {ENV_SECRET}</reasoning>"
            '<action_call name="leak">{}</action_call><action_call name="fail">{}</action_call></response>',
            f"<response><output>your token: {FILE_SECRET}</output></response>",
        ]
    )
    streams = {"text": io.StringIO(), "json": io.StringIO()}
    text_handler = setup_logging("DEBUG", "text", streams["text"], redactor=Redactor.from_config(config))
    setup_logging("DEBUG", "json", streams["json"], redactor=Redactor.from_config(config))  # the root's handler now
    logging.getLogger().addHandler(text_handler)  # both at once

    async def go() -> str:
        out = io.StringIO()
        hub = Hub(
            config,
            model=model,
            load_extensions=False,
            extensions=[cli_extension(CliSettings(stdin=False), out=out), Extension("tools", actions=[leak, fail])],
        )
        async with hub:
            result = await hub.send("cli:session", {"user": "ann"}, f"my key is {ENV_SECRET}", user="ann")
            assert result.ok
            events = await hub.runs.events(result.run_id)
            recorded = json.dumps([e.__class__.__name__ + repr(e) for e in events])
        return result.run_id, recorded

    run_id, recorded = asyncio.run(go())
    for secret in (ENV_SECRET, FILE_SECRET):
        assert secret not in recorded  # the event log on disk
        for req in model.requests:  # every prompt
            assert secret not in req.system and all(secret not in m["content"] for m in req.messages)
        for stream in streams.values():  # every log line, extras and tracebacks included
            assert secret not in stream.getvalue()
    assert MASK in recorded and MASK in model.requests[1].messages[0]["content"]
    assert "the token is [REDACTED]" in streams["text"].getvalue()
    assert "Traceback" in streams["text"].getvalue() and "login with [REDACTED] failed" in streams["text"].getvalue()
    lines = [json.loads(line) for line in streams["json"].getvalue().splitlines()]
    assert any(line.get("detail") == {"key": MASK} for line in lines)

    for args in (["trace", run_id], ["trace", run_id, "--json"]):
        capsys.readouterr()
        assert main([*args, "--config", str(path)]) == 0
        shown = capsys.readouterr().out
        assert MASK in shown and ENV_SECRET not in shown and FILE_SECRET not in shown
