"""Voice (hub/audio.py, hub/voice, hub/engine/_voice.py, hub.platform.speak): voice notes
measured and converted with PyAV in the bounded workers, transcribed through the real openai
SDK against FakeOpenAI's audio routes, replies spoken as OGG/Opus, the failure paths, and the
cost in the run and its trace. All audio is real, encoded at test time."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import av
import pytest

from hub import Context, Extension, Hub, HubConfig, Input, MediaPart, MediaRefused, RunContext, TextArgs, output
from hub.audio import for_transcription, to_voice
from hub.cli import render_trace
from hub.config import VoiceSection
from hub.logs import VoiceLog
from hub.models.openai import OpenAIModel
from hub.platform import speak
from hub.testing import FakeOpenAI, temp_config
from hub.testing.audio import FORMATS, audio_bytes, lying_wav, ogg_opus, silence
from hub.voice import speech_parts

# -- audio, pure ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_voice_format_becomes_16khz_wav_measured(fmt: str) -> None:
    clip = for_transcription(audio_bytes(1.5, format=fmt), max_seconds=10)
    assert clip.mime == "audio/wav" and abs(clip.seconds - 1.5) < 0.1
    with av.open(io.BytesIO(clip.data)) as c:
        stream = c.streams.audio[0]
        assert (stream.rate, stream.channels) == (16_000, 1)


def test_longer_than_max_seconds_is_refused_by_its_claim_and_by_what_it_decodes() -> None:
    with pytest.raises(MediaRefused, match="it is 5s long, over the 2s limit"):
        for_transcription(audio_bytes(5, format="mp3"), max_seconds=2)
    # a tiny file that decodes to far more than it weighs: decoding stops as soon as it passes
    bomb = silence(60, format="ogg")
    assert len(bomb) < 60_000
    with pytest.raises(MediaRefused, match="over the|longer than"):
        for_transcription(bomb, max_seconds=1)


def test_a_header_that_claims_hours_costs_only_what_the_file_holds() -> None:
    clip = for_transcription(lying_wav(claimed_seconds=10 * 3600), max_seconds=300)
    assert clip.seconds < 0.1  # measured by its samples, never by its claim


def test_not_audio_and_corrupt_audio_are_refused_clearly() -> None:
    with pytest.raises(MediaRefused, match="not audio"):
        for_transcription(b"just some text, not a voice note" * 20, max_seconds=10)
    note = ogg_opus(2.0)
    with pytest.raises(MediaRefused):
        for_transcription(note[:100] + bytes(len(note) - 100), max_seconds=10)


def test_a_spoken_reply_becomes_ogg_opus() -> None:
    clip = to_voice(audio_bytes(1.0, format="mp3"))
    assert clip.data[:4] == b"OggS" and clip.mime == "audio/ogg" and abs(clip.seconds - 1.0) < 0.1
    with av.open(io.BytesIO(clip.data)) as c:
        assert c.streams.audio[0].codec_context.name == "opus"


def test_long_text_is_spoken_in_parts_between_sentences() -> None:
    text = "One sentence here. " * 30 + "A" * 120
    parts = speech_parts(text, limit=100)
    assert all(len(p) <= 100 for p in parts) and len(parts) > 5
    assert parts[0].endswith(".") and "".join(parts).replace(" ", "") == text.replace(" ", "")


# -- end to end -------------------------------------------------------------------------------


def voice_extension(store: dict[str, bytes], sent: list[Any], heard: list[bytes] | None = None) -> Extension:
    """A platform whose reply output delivers the text, then the voice clips (as every real one
    does); ``heard`` gets the audio the run's media holds."""
    heard = [] if heard is None else heard

    async def fetch(part: MediaPart, max_bytes: int) -> bytes:
        return store[part.ref]

    async def subscribe(send: Any, hub: Any) -> Any:
        async def stop() -> None:
            return None

        return stop

    @output(type="talk:send", context="talk:chat", description="Reply.")
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        heard.extend(f.data for files in ctx.media.audio.values() for f in files)
        sent.append(content)
        for clip in await speak(ctx, content, max_chars=60):
            sent.append(clip)
        return {}

    chat = Context(type="talk:chat", schema=TextArgs, key=lambda a: a.id, reply_output="talk:send")
    return Extension(
        name="talk",
        contexts=[chat],
        outputs=[send],
        inputs=[Input(type="talk:message", subscribe=subscribe, fetch=fetch)],
    )


def config_for(tmp_path: Path, fake: FakeOpenAI, **voice: Any) -> HubConfig:
    cfg = temp_config(tmp_path)
    cfg.model.base_url = fake.url
    cfg.model.api_key = "sk-test"
    cfg.voice = VoiceSection(**{"speak_model": "tts-1", "price_transcribe": 0.006, "price_speak": 15.0, **voice})
    return cfg


def note(ref: str, data: bytes) -> MediaPart:
    return MediaPart(kind="voice", ref=ref, mime="audio/ogg", size=len(data), name="voice.ogg")


def reply(text: str) -> str:
    return f'<response><output type="talk:send">{text}</output></response>'


async def test_a_voice_note_is_heard_answered_by_voice_and_text_and_priced(tmp_path: Path) -> None:
    store = {"n1": ogg_opus(3.0)}
    sent: list[Any] = []
    kept: list[bytes] = []
    async with FakeOpenAI([reply("Sunny all day. Take a hat."), reply("You typed that.")]) as fake:
        fake.transcripts = ["what is the weather tomorrow, my key is sk-test"]
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake)
        extension = voice_extension(store, sent, kept)
        async with Hub(cfg, model=model, load_extensions=False, extensions=[extension]) as hub:
            result = await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("n1", store["n1"])])
            assert result.ok
            (heard,) = fake.heard  # the real SDK uploaded real audio: WAV, 3 seconds
            assert heard["model"] == "whisper-1" and heard["content_type"] == "audio/wav"
            assert abs(heard["seconds"] - 3.0) < 0.1
            assert "[spoken] what is the weather tomorrow" in fake.prompt(0)
            assert "sk-test" not in fake.prompt(0)  # a secret said is masked like one typed
            assert kept == [store["n1"]]  # the audio stays in the run's media
            assert sent[0] == "Sunny all day. Take a hat."  # the text always, first
            (clip,) = sent[1:]
            assert clip.data[:4] == b"OggS" and clip.seconds > 0
            assert fake.spoken[0]["input"] == "Sunny all day. Take a hat." and fake.spoken[0]["voice"] == "alloy"
            record = await hub.runs.get(result.run_id)
            chars = len("Sunny all day. Take a hat.")
            assert record.cost == pytest.approx(3.0 / 60 * 0.006 + chars * 15.0 / 1e6, rel=0.05)
            events = await hub.runs.events(result.run_id)
            voices = [e for e in events if isinstance(e, VoiceLog)]
            assert [v.direction for v in voices] == ["heard", "spoken"]
            trace = render_trace(record, events)
            assert "voice    heard 3.0s by whisper-1" in trace and "spoken" in trace
            metrics = hub.metrics.render()[0].decode()
            assert 'hub_voice_seconds_total{direction="heard"} 3.0' in metrics
            # a typed message is answered in text only (when_spoken_to), and the history kept the transcript
            sent.clear()
            await hub.send("talk:chat", {"id": "1"}, "and the day after?", type="talk:message")
            assert sent == ["You typed that."] and len(fake.spoken) == 1
            assert "[spoken] what is the weather tomorrow" in fake.prompt(1)
            history = await hub.memory.get("working-memory:talk:chat:1")
            assert "what is the weather tomorrow" in json.dumps(history)
        await model.close()


async def test_always_speaks_long_replies_in_parts_and_never_speaks_none(tmp_path: Path) -> None:
    long = "This is a sentence of the reply. " * 6
    sent: list[Any] = []
    async with FakeOpenAI([reply(long), reply("quiet")]) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake, reply_with_voice="always")
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension({}, sent)]) as hub:
            await hub.send("talk:chat", {"id": "1"}, "talk to me", type="talk:message")
            clips = sent[1:]
            assert len(clips) == len(fake.spoken) >= 3  # in parts of at most 60 characters (the platform's)
            assert all(len(b["input"]) <= 60 for b in fake.spoken)
        await model.close()
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")  # the hub's stop closed the first
        cfg = config_for(tmp_path, fake, reply_with_voice="never")
        sent.clear()
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension({}, sent)]) as hub:
            await hub.send("talk:chat", {"id": "2"}, "talk to me", type="talk:message")
            assert sent == ["quiet"]
        await model.close()


async def test_a_note_past_max_seconds_is_refused_with_a_reply_and_never_uploaded(tmp_path: Path) -> None:
    store = {"long": ogg_opus(4.0), "junk": b"%PDF-1.4 not a voice note at all" * 10}
    sent: list[Any] = []
    async with FakeOpenAI([]) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake, max_seconds=2)
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension(store, sent)]) as hub:
            await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("long", store["long"])])
            assert sent == ["Sorry, I could not hear your voice note: it is 4s long, over the 2s limit."]
            await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("junk", store["junk"])])
            assert sent[-1].startswith("Sorry, I could not hear your voice note: ")
            assert fake.heard == [] and fake.bodies == []  # nothing uploaded, no model asked
        await model.close()


async def test_a_transcription_server_that_fails_or_hangs_is_told_once_and_nothing_stalls(tmp_path: Path) -> None:
    store = {"n1": ogg_opus(1.0), "n2": ogg_opus(1.0)}
    sent: list[Any] = []
    async with FakeOpenAI(default=reply("answered")) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake, speak_model="")
        cfg.model.timeout = 1.0
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension(store, sent)]) as hub:
            fake.fail_next("transcribe", status=500)
            await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("n1", store["n1"])])
            assert sent == ["Sorry, I could not hear your voice note: the transcription server answered 500."]
            # hung: the other conversation is answered meanwhile, and the hung one is told once
            fake.hang_audio_next()
            hung = asyncio.ensure_future(
                hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("n2", store["n2"])])
            )
            await fake.wait_for(lambda: fake._audio_hangs == 0)
            other = await hub.send("talk:chat", {"id": "2"}, "hello", type="talk:message")
            assert other.ok and sent[-1] == "answered" and not hung.done()
            await hung
            assert sent[-1] == "Sorry, I could not hear your voice note: the transcription server did not answer in 1s."
            assert sent.count(sent[-1]) == 1
            # the inputs were kept: the conversation's history still holds both notes, and it goes on
            history = json.dumps(await hub.memory.get("working-memory:talk:chat:1"))
            assert history.count('"kind": "voice"') == 2
            assert (await hub.send("talk:chat", {"id": "1"}, "still there?", type="talk:message")).ok
            assert sent[-1] == "answered"
        await model.close()


async def test_an_audio_bomb_is_refused_in_a_bounded_worker_that_is_gone_after() -> None:
    from hub.engine import Decoder
    from hub.media import MediaLimits

    decoder = Decoder(MediaLimits(decode_timeout=10, decode_memory=256_000_000))
    try:
        bomb = silence(60)  # tens of KB that decode to a minute
        with pytest.raises(MediaRefused, match="over the 5s limit"):
            await decoder.audio(bomb, name="your voice note", max_seconds=5)
        with pytest.raises(MediaRefused, match="not audio"):
            await decoder.audio(b"MZ not audio at all" * 50, name="x", max_seconds=5)
        clip = await decoder.audio(ogg_opus(1.0), name="ok", max_seconds=5)
        assert abs(clip.seconds - 1.0) < 0.1
        assert decoder.running == 0 and decoder.peak_rss < 256_000_000
    finally:
        await decoder.stop()


async def test_what_voice_costs_counts_against_the_daily_money_budget(tmp_path: Path) -> None:
    store = {"n1": ogg_opus(2.0)}
    sent: list[Any] = []
    async with FakeOpenAI(default=reply("ok")) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake, speak_model="", price_transcribe=6.0)  # 2 s: 0.2
        cfg.limits.cost_per_day = 0.1
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension(store, sent)]) as hub:
            await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("n1", store["n1"])])
            assert sent == ["ok"]
            result = await hub.send("talk:chat", {"id": "2"}, "hello", type="talk:message")
            assert not result.ok and sent[-1] == cfg.limits.reply  # the bot's budget is spent
        await model.close()


async def test_a_speech_server_that_fails_costs_the_voice_never_the_text(tmp_path: Path) -> None:
    store = {"n1": ogg_opus(1.0)}
    sent: list[Any] = []
    async with FakeOpenAI(default=reply("Still here.")) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        cfg = config_for(tmp_path, fake)
        async with Hub(cfg, model=model, load_extensions=False, extensions=[voice_extension(store, sent)]) as hub:
            fake.fail_next("speech", status=500)
            result = await hub.send("talk:chat", {"id": "1"}, "", type="talk:message", media=[note("n1", store["n1"])])
            assert result.ok and sent == ["Still here."]  # the text, and no voice
            events = await hub.runs.events(result.run_id)
            assert any("the reply could not be spoken" in getattr(e, "message", "") for e in events)
        await model.close()
