"""Voice on Discord, end to end: a voice message (flag IS_VOICE_MESSAGE, real OGG/Opus made at
test time) fetched by the hub from the fake's CDN, transcribed by the real openai client
against FakeOpenAI's audio routes, and answered by text and by a voice message that
discord.py posts with its duration and waveform; an audio file where voice messages are
not allowed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_discord import running

from hub.config import VoiceSection
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, temp_config
from hub.testing.audio import audio_bytes, measure, ogg_opus
from hub.testing.discord import IS_VOICE_MESSAGE, FakeDiscord


def answer(text: str) -> str:
    return f'<response><output type="discord:message">{text}</output></response>'


@contextlib.asynccontextmanager
async def with_voice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ai: FakeOpenAI, **voice: Any
) -> AsyncIterator[FakeDiscord]:
    cfg = temp_config(tmp_path)
    cfg.model.base_url = ai.url
    cfg.voice = VoiceSection(**{"speak_model": "tts-1", **voice})
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    async with running(tmp_path, monkeypatch, model=model, config=cfg) as r:
        await r.dc.wait_ready()
        yield r.dc


async def test_a_voice_message_is_answered_by_voice_and_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeOpenAI(default=answer("Meet at six.")) as ai:
        ai.transcripts = ["when do we meet"]
        async with with_voice(tmp_path, monkeypatch, ai) as dc:
            dc.push_attachments(dc.dm_channel_id, [("voice-message.ogg", "audio/ogg", ogg_opus(2.0))], voice=True)
            text, voice = await dc.wait_sent(2, timeout=30)
    assert abs(ai.heard[0]["seconds"] - 2.0) < 0.1 and len(dc.state.downloads) == 1
    assert "[spoken] when do we meet" in ai.prompt(0)
    assert text["content"] == "Meet at six."
    payload = voice["payload"]
    assert int(payload["flags"]) & IS_VOICE_MESSAGE and voice["content"] == ""
    (meta,) = payload["attachments"]
    assert meta["duration_secs"] > 0 and meta["waveform"]
    (data,) = voice["files"].values()
    assert data[:4] == b"OggS" and (measure(data) or 0) > 0.1


async def test_an_audio_attachment_is_heard_and_a_channel_without_voice_gets_an_audio_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI(default=answer("Noted.")) as ai:
        ai.transcripts = ["remember the milk"]
        async with with_voice(tmp_path, monkeypatch, ai, reply_with_voice="when_spoken_to") as dc:
            dc.state.no_voice_messages.add(dc.dm_channel_id)
            dc.push_attachments(dc.dm_channel_id, [("memo.mp3", "audio/mpeg", audio_bytes(1.0, format="mp3"))])
            text, audio = await dc.wait_sent(2, timeout=30)
    assert "[spoken] remember the milk" in ai.prompt(0) and text["content"] == "Noted."
    assert not int(audio["payload"].get("flags") or 0) & IS_VOICE_MESSAGE
    assert list(audio["files"]) == ["reply.ogg"]
    refused = [r for r in dc.state.requests if r.status == 403]
    assert len(refused) == 1 and json.dumps(refused[0].params.get("flags"))  # tried as a voice message first
