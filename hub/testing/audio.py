"""Audio for tests of voice: real files, encoded with PyAV at test time (nothing downloaded).

A tone (or noise) of the length a test chooses, in the containers and codecs platforms
send: OGG/Opus (Telegram, WhatsApp and Discord voice notes), M4A/AAC (iPhones), MP3, WAV,
WebM. `lying_wav()` is an audio bomb: a tiny WAV whose header claims hours.
"""

from __future__ import annotations

import io
import struct
from typing import Any

__all__ = ["FORMATS", "audio_bytes", "lying_wav", "measure", "ogg_opus", "silence"]

FORMATS: dict[str, tuple[str, str, int]] = {
    "ogg": ("ogg", "libopus", 48_000),
    "m4a": ("mp4", "aac", 44_100),
    "mp3": ("mp3", "mp3", 44_100),
    "wav": ("wav", "pcm_s16le", 16_000),
    "webm": ("webm", "libopus", 48_000),
}
"""A suffix → (FFmpeg's container, codec, sample rate)."""


def audio_bytes(seconds: float = 1.0, *, format: str = "ogg", freq: float = 440.0, noise: bool = False) -> bytes:  # noqa: A002
    """``seconds`` of a sine tone at ``freq`` Hz (or white noise), mono, encoded as ``format``
    (a key of `FORMATS`)."""
    import av
    import numpy as np

    container_format, codec, rate = FORMATS[format]
    n = max(1, int(seconds * rate))
    if noise:
        wave = np.random.default_rng(7).uniform(-0.3, 0.3, n)
    else:
        wave = 0.3 * np.sin(2 * np.pi * freq * np.arange(n) / rate)
    pcm = (wave * 32767).astype(np.int16).reshape(1, -1)
    out = io.BytesIO()
    with av.open(out, mode="w", format=container_format) as container:
        stream: Any = container.add_stream(codec, rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def ogg_opus(seconds: float = 1.0, *, freq: float = 440.0) -> bytes:
    """A voice note as Telegram sends one: OGG/Opus, mono, 48 kHz."""
    return audio_bytes(seconds, format="ogg", freq=freq)


def lying_wav(*, claimed_seconds: float = 10 * 3600, rate: int = 16_000) -> bytes:
    """A 1 KB WAV whose header claims ``claimed_seconds`` of 16-bit mono audio."""
    data_size = int(claimed_seconds * rate * 2) & 0xFFFFFFFF
    header = b"RIFF" + struct.pack("<I", (36 + data_size) & 0xFFFFFFFF) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    header += b"data" + struct.pack("<I", data_size)
    return header + bytes(1000)


def silence(seconds: float, *, format: str = "ogg") -> bytes:  # noqa: A002
    """``seconds`` of silence: compresses to almost nothing (a file that decodes to far more
    than it weighs)."""
    return audio_bytes(seconds, format=format, freq=0.0)


def measure(data: bytes) -> float | None:
    """The seconds of audio ``data`` decodes to, or None when it is not audio (the fake
    transcription server's check that it was given a real file)."""
    import av

    try:
        container: Any
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.audio:
                return None
            stream = container.streams.audio[0]
            samples = sum(frame.samples for frame in container.decode(stream))
            return samples / (stream.rate or 1)
    except (av.FFmpegError, ValueError, OSError):
        return None
