"""Audio: voice notes measured and converted, spoken replies encoded. Pure functions of bytes.

What a platform sends as a voice note (OGG/Opus on Telegram and WhatsApp, M4A/AAC from
iPhones, MP3, WAV, WebM from browsers) is decoded with PyAV (FFmpeg inside its wheels) and
handed to a transcription server as 16 kHz mono WAV, which every OpenAI-compatible server
takes (whisper.cpp's server takes nothing else). A spoken reply, in whatever format the
speech server answered, is encoded as OGG/Opus, the voice-message format of Telegram,
Discord and WhatsApp.

These run in the engine's bounded decoding workers (`hub.engine.Decoder`), never on
the hub's loop: an audio bomb (a tiny file whose header claims hours, or that decodes to
hours) is refused on its claim before decoding, or as soon as what it decoded passes
``max_seconds``, so its CPU and memory stay those of ``max_seconds`` of audio.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass, field
from typing import Any

from .errors import MediaRefused

__all__ = ["AudioClip", "for_transcription", "to_voice", "TRANSCRIBE_RATE", "VOICE_RATE"]

TRANSCRIBE_RATE = 16_000
"""Samples per second of the WAV a transcription server gets (what Whisper works at)."""
VOICE_RATE = 48_000
"""Samples per second of a spoken reply's OGG/Opus (Opus's own rate)."""


@dataclass(slots=True, frozen=True)
class AudioClip:
    """Audio ready to send on: its bytes, type, length in seconds and a display name."""

    data: bytes = field(repr=False)
    """The encoded audio."""
    mime: str
    """Its type (``audio/ogg`` for OGG/Opus)."""
    seconds: float
    """Its length in seconds."""
    name: str = "audio"
    """A file name to show."""
    peaks: bytes = field(default=b"", repr=False)
    """Its loudness over time, at most 256 levels of 0-255 (the waveform Discord draws on a
    voice message); empty for audio that is not a spoken reply."""


def _seconds(value: float) -> str:
    return f"{value / 60:.0f} min" if value >= 120 else f"{value:.0f}s"


def _open(data: bytes, name: str) -> Any:
    import av  # lazily: only a voice note or a spoken reply loads FFmpeg

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.FFmpegError, ValueError, OSError) as e:  # not a container FFmpeg knows
        raise MediaRefused("it is not audio that could be read", name=name) from e
    if not container.streams.audio:
        container.close()
        raise MediaRefused("it holds no audio", name=name)
    return container


def _pcm(data: bytes, *, name: str, rate: int, max_seconds: float | None) -> tuple[bytes, float]:
    """Mono 16-bit PCM at ``rate`` of ``data``'s first audio stream, and its seconds.

    Raises:
        MediaRefused: not audio, corrupt, or longer than ``max_seconds`` (by its header's
            claim, before decoding; or by what it decoded to, as soon as it passes).
    """
    import av

    container = _open(data, name)
    try:
        stream = container.streams.audio[0]
        claimed = max(
            (container.duration or 0) / av.time_base,
            float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0,
        )
        if max_seconds is not None and claimed > max_seconds:
            raise MediaRefused(f"it is {_seconds(claimed)} long, over the {_seconds(max_seconds)} limit", name=name)
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        limit = None if max_seconds is None else int(max_seconds * rate)
        chunks: list[bytes] = []
        samples = 0

        def take(frames: list[Any]) -> None:
            nonlocal samples
            for frame in frames:
                chunk = bytes(frame.planes[0])[: frame.samples * 2]
                chunks.append(chunk)
                samples += frame.samples
                if limit is not None and samples > limit:  # a bomb: stop at once, never decode the rest
                    raise MediaRefused(f"it is longer than the {_seconds(max_seconds or 0)} limit", name=name)

        try:
            for frame in container.decode(stream):
                take(resampler.resample(frame))
            take(resampler.resample(None))
        except av.FFmpegError as e:
            if not chunks:
                raise MediaRefused("it is corrupt: no audio could be decoded", name=name) from e
            # a damaged tail: what decoded before it is kept, as players do
    finally:
        container.close()
    if not samples:
        raise MediaRefused("it holds no sound", name=name)
    return b"".join(chunks), samples / rate


def for_transcription(data: bytes, *, name: str = "voice", max_seconds: float) -> AudioClip:
    """``data`` (any audio FFmpeg reads) as 16 kHz mono WAV, measured before anything is sent.

    Raises:
        MediaRefused: not audio, corrupt, or longer than ``max_seconds``.
    """
    pcm, seconds = _pcm(data, name=name, rate=TRANSCRIBE_RATE, max_seconds=max_seconds)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(TRANSCRIBE_RATE)
        w.writeframes(pcm)
    return AudioClip(data=out.getvalue(), mime="audio/wav", seconds=seconds, name="voice.wav")


def to_voice(data: bytes, *, name: str = "reply", max_seconds: float | None = None) -> AudioClip:
    """``data`` (what a speech server answered: MP3, WAV, Opus, ...) as an OGG/Opus voice message.

    Raises:
        MediaRefused: not audio, corrupt, or longer than ``max_seconds``.
    """
    import av
    import numpy as np

    pcm, seconds = _pcm(data, name=name, rate=VOICE_RATE, max_seconds=max_seconds)
    samples = np.frombuffer(pcm, dtype=np.int16)
    out = io.BytesIO()
    with av.open(out, mode="w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=VOICE_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = VOICE_RATE
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return AudioClip(data=out.getvalue(), mime="audio/ogg", seconds=seconds, name="voice.ogg", peaks=_peaks(samples))


def _peaks(samples: Any, count: int = 256) -> bytes:
    """The loudest sample of each of ``count`` equal stretches, scaled to 0-255."""
    import numpy as np

    if not len(samples):
        return b""
    chunks = np.array_split(np.abs(samples.astype(np.int32)), min(count, len(samples)))
    return bytes(min(255, int(chunk.max()) * 255 // 32767) for chunk in chunks)
