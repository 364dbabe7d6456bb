"""A run's speech: its voice notes heard, its replies spoken, each priced and logged.

A voice note is fetched, then measured and converted in a bounded decoding worker (refused
past ``[voice] max_seconds`` before anything is uploaded), then transcribed; the transcript
becomes the input's text, marked spoken (``meta["spoken"]``), and the history keeps it. A
reply is spoken when a platform asks ([`hub.platform.speak()`][hub.platform.speak]) and ``reply_with_voice``
says so for this run: in parts under the platform's limit, each made OGG/Opus in a worker.
Seconds heard and characters spoken are priced into the run's cost, as a [`VoiceLog`][hub.VoiceLog]
the trace shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..audio import AudioClip
from ..errors import MediaError, VoiceError
from ..logs import ErrorLog, InputLog, Log, VoiceLog
from ..media import RunMedia
from ..store import RunRecord
from ..voice import speech_parts

if TYPE_CHECKING:
    from ._deps import EngineDeps

__all__ = ["RunVoice", "SPOKEN_MARK", "is_audio"]

log = logging.getLogger("hub.engine")

SPOKEN_MARK = "[spoken]"
"""What precedes a transcript in the input's text: the model knows it was said, not typed."""
_AUDIO_KINDS = frozenset({"voice", "audio", "video_note"})


def is_audio(kind: str, mime: str) -> bool:
    """Whether a platform's file is speech to hear: a voice note, an audio file, a round video."""
    return kind in _AUDIO_KINDS or mime.startswith("audio/")


class _Run(Protocol):
    """What a run's voice uses of its `Run` (which holds it)."""

    record: RunRecord
    logs: list[Log]
    media: RunMedia
    step: int
    progress: Callable[[], None]

    @property
    def id(self) -> str: ...


class RunVoice:
    """``[voice]`` for one run (built only when the table is present)."""

    def __init__(self, deps: EngineDeps, run: _Run) -> None:
        assert deps.voice is not None
        self.deps = deps
        self.voice = deps.voice
        self.run = run

    def _record(self, entry: Log) -> None:
        self.run.logs.append(entry)
        self.deps.runs.append(self.run.record, entry)
        if isinstance(entry, VoiceLog):
            self.run.record.cost += entry.cost

    async def hear(self, entry: InputLog, data: bytes, *, name: str) -> str:
        """The transcript of ``data`` (a voice note of ``entry``), now the input's text.

        Raises:
            MediaRefused: not audio, corrupt, or longer than ``max_seconds`` (never uploaded).
            VoiceError: the transcription server failed or hung.
        """
        section = self.voice.section
        clip = await self.deps.decoder.audio(data, name=name, max_seconds=section.max_seconds)
        self.run.progress()
        text = self.deps.redactor.redact(await self.voice.transcribe(clip))  # a secret said is masked as one typed
        self._record(
            VoiceLog(
                direction="heard",
                model=section.transcribe_model,
                seconds=round(clip.seconds, 3),
                cost=section.transcribe_cost(clip.seconds),
                text=text,
                input_id=entry.id,
                step=self.run.step,
            )
        )
        said = entry.formatted if entry.formatted is not None else entry.content
        said = said.strip() if isinstance(said, str) else ""
        heard = f"{SPOKEN_MARK} {text}" if text else f"{SPOKEN_MARK} (nothing could be made out)"
        entry.formatted = f"{said}\n{heard}" if said else heard  # the history keeps the transcript
        entry.meta["spoken"] = True
        self.run.media.spoken.add(entry.id)
        return text

    def wanted(self) -> bool:
        """Whether this run's replies are spoken: ``always``, or ``when_spoken_to`` and one of
        its inputs was a voice note."""
        if not self.voice.speaks:
            return False
        if self.voice.section.reply_with_voice == "always":
            return True
        return bool(self.run.media.spoken)

    async def speak(self, text: str, max_chars: int) -> list[AudioClip]:
        """``text`` as OGG/Opus voice messages of at most ``max_chars`` characters each; [] when
        this run's replies are not spoken. A part that fails ends the speaking (logged): the
        text is delivered anyway, so the reply is never lost to its voice."""
        if not self.wanted() or not text.strip():
            return []
        section = self.voice.section
        clips: list[AudioClip] = []
        for part in speech_parts(text, limit=max_chars):
            try:
                raw = await self.voice.speak(part)
                clip = await self.deps.decoder.voice(raw, name="reply")
            except (VoiceError, MediaError) as e:
                log.warning("run %s: a reply could not be spoken: %s", self.run.id[:8], e)
                self._record(ErrorLog(f"the reply could not be spoken: {e}", where="voice", step=self.run.step))
                break
            self.run.progress()
            clips.append(clip)
            self._record(
                VoiceLog(
                    direction="spoken",
                    model=section.speak_model,
                    seconds=round(clip.seconds, 3),
                    chars=len(part),
                    cost=section.speak_cost(len(part)),
                    text=part,
                    step=self.run.step,
                )
            )
        return clips
