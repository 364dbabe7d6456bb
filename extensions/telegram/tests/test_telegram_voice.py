"""Voice on Telegram, end to end: a voice note (real OGG/Opus, made at test time) fetched by
python-telegram-bot from the fake Bot API, transcribed by the real openai client against
FakeOpenAI's audio routes, and answered by text and by ``sendVoice`` OGG/Opus; audio files
and video notes heard; ``VOICE_MESSAGES_FORBIDDEN`` falls back to text."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from test_telegram import Harness, running

from hub.config import VoiceSection
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, temp_config
from hub.testing.audio import audio_bytes, measure, ogg_opus
from hub.testing.telegram import FakeTelegram

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]


def answer(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


def with_voice(
    tmp_path: Path, tg: FakeTelegram, ai: FakeOpenAI, *, live: bool = False, **voice: Any
) -> AbstractAsyncContextManager[Harness]:
    cfg = temp_config(tmp_path)
    cfg.model.base_url = ai.url
    cfg.voice = VoiceSection(**{"speak_model": "tts-1", **voice})
    model = OpenAIModel("gpt-test", base_url=ai.url, api_key="k")
    return running(tmp_path, tg, model=model, config=cfg, **({"live": True} if live else {}))


async def test_a_voice_note_is_answered_by_voice_and_text(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("It will rain at noon.")) as ai:
        ai.transcripts = ["will it rain tomorrow"]
        async with with_voice(tmp_path, tg, ai):
            tg.push_media(chat_id=42, voice=ogg_opus(2.0))
            text, voice = await tg.wait_sent(2, timeout=30)
    assert tg.state.downloads == ["voice/file_1.oga"]  # fetched through getFile
    assert abs(ai.heard[0]["seconds"] - 2.0) < 0.1  # real audio reached the server, as WAV
    assert "[spoken] will it rain tomorrow" in ai.prompt(0)
    assert (text["method"], text["text"]) == ("sendMessage", "It will rain at noon.")
    assert voice["method"] == "sendVoice" and voice["data"][:4] == b"OggS"
    assert (measure(voice["data"]) or 0) > 0.1  # a real OGG/Opus voice message, with a duration
    assert int(voice["params"]["duration"]) >= 1
    assert ai.spoken[0]["input"] == "It will rain at noon."


async def test_audio_files_and_video_notes_are_heard(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("ok")) as ai:
        ai.transcripts = ["from an iphone", "from a round video"]
        async with with_voice(tmp_path, tg, ai, speak_model=""):
            tg.push_media(chat_id=42, audio=("memo.m4a", "audio/mp4", audio_bytes(1.0, format="m4a")))
            await tg.wait_sent(1, timeout=30)
            tg.push_media(chat_id=42, video_note=audio_bytes(1.0, format="m4a"))
            await tg.wait_sent(2, timeout=30)
    assert "[spoken] from an iphone" in ai.prompt(0) and "[spoken] from a round video" in ai.prompt(1)
    assert [s["method"] for s in tg.sent] == ["sendMessage", "sendMessage"]  # no speak_model: text only


async def test_voice_messages_forbidden_falls_back_to_text(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Here is the answer.")) as ai:
        tg.state.voice_forbidden.add(42)
        async with with_voice(tmp_path, tg, ai):
            tg.push_media(chat_id=42, voice=ogg_opus(1.0))
            await tg.wait_calls("sendVoice", timeout=30)
            tg.push_message(chat_id=42, text="and typed?")  # a sentinel: the conversation goes on
            await tg.wait_sent(2, timeout=30)
    assert [(s["method"], s["text"]) for s in tg.sent] == [
        ("sendMessage", "Here is the answer."),
        ("sendMessage", "Here is the answer."),
    ]
    assert len(tg.calls("sendVoice")) == 1  # refused once, not retried


async def test_a_chat_that_refused_a_voice_message_is_not_sent_another(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Spoken to, written back.")) as ai:
        tg.state.voice_forbidden.add(42)
        async with with_voice(tmp_path, tg, ai):
            tg.push_media(chat_id=42, voice=ogg_opus(1.0))
            await tg.wait_sent(1, timeout=30)
            tg.push_media(chat_id=42, voice=ogg_opus(1.0))  # spoken to again: answered in text only
            await tg.wait_sent(2, timeout=30)
    assert [s["method"] for s in tg.sent] == ["sendMessage", "sendMessage"]
    assert len(tg.calls("sendVoice")) == 1


async def test_live_replies_stay_text(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=answer("Written while you watch.")) as ai:
        async with with_voice(tmp_path, tg, ai, live=True, reply_with_voice="always"):
            tg.push_media(chat_id=42, voice=ogg_opus(1.0))
            await tg.wait_for(lambda: any(s["text"] == "Written while you watch." for s in tg.sent), timeout=30)
            tg.push_message(chat_id=42, text="sentinel")  # answered after the first run is over
            await tg.wait_for(lambda: len(ai.bodies) == 2 and len(tg.sent) >= 2, timeout=30)
    assert ai.heard and not tg.calls("sendVoice") and ai.spoken == []
