"""``[voice]`` as a client of an OpenAI-compatible audio server (OpenAI, Groq, whisper.cpp's
server, faster-whisper servers, vLLM, Kokoro or Piper behind the same routes)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from ..audio import AudioClip
from ..config import HubConfig, VoiceSection
from ..errors import VoiceError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Voice", "speech_parts"]

log = logging.getLogger("hub.voice")

SPEECH_INPUT_LIMIT = 4096
"""Characters one ``audio.speech`` request takes (OpenAI's limit): longer text is spoken in parts."""

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n+")


class Voice:
    """Transcribes voice notes and speaks replies, through the openai SDK (one client)."""

    def __init__(self, config: HubConfig, *, client: AsyncOpenAI | None = None) -> None:
        section = config.voice
        if section is None:
            raise ValueError("Voice needs a [voice] table")
        self.section: VoiceSection = section
        self.timeout = config.model.timeout
        self._base_url = section.base_url or config.model.base_url or None
        self._api_key = section.api_key or config.model.api_key or "not-needed"
        self._made: AsyncOpenAI | None = client

    @property
    def _client(self) -> AsyncOpenAI:
        """The SDK's client, made at the first voice note: a hub that hears none never imports it."""
        if self._made is None:
            from openai import AsyncOpenAI

            self._made = AsyncOpenAI(
                base_url=self._base_url,
                api_key=self._api_key,
                timeout=self.timeout,
                max_retries=0,  # a voice note is answered now or told it failed: never a queue of retries
            )
        return self._made

    @property
    def speaks(self) -> bool:
        """Whether replies may be spoken at all (``speak_model`` set)."""
        return bool(self.section.speak_model) and self.section.reply_with_voice != "never"

    async def start(self, hub: object = None) -> None:
        """Nothing: the client connects on first use."""

    async def stop(self) -> None:
        if self._made is not None:
            await self._made.close()

    async def transcribe(self, clip: AudioClip) -> str:
        """The text spoken in ``clip`` (WAV, measured already).

        Raises:
            VoiceError: the server failed, hung past ``[model] timeout`` or answered nothing usable.
        """
        import openai

        try:
            result = await self._client.audio.transcriptions.create(
                model=self.section.transcribe_model,
                file=(clip.name, clip.data, clip.mime),
                response_format="json",
            )
        except openai.APITimeoutError as e:
            raise VoiceError(f"the transcription server did not answer in {self.timeout:g}s") from e
        except openai.APIStatusError as e:
            log.warning("voice: transcription failed: %s %s", e.status_code, e.message)
            raise VoiceError(f"the transcription server answered {e.status_code}") from e
        except openai.APIError as e:  # a refused or broken connection
            raise VoiceError("the transcription server could not be reached") from e
        text = getattr(result, "text", result if isinstance(result, str) else None)
        if not isinstance(text, str):
            raise VoiceError("the transcription server answered no text")
        return text.strip()

    async def speak(self, text: str) -> bytes:
        """``text`` spoken (``speak_model``, ``voice``), as the server encoded it (Opus asked for).

        Raises:
            VoiceError: no ``speak_model``, or the server failed, hung or refused.
        """
        if not self.section.speak_model:
            raise VoiceError("no [voice] speak_model is set")
        import openai

        try:
            response = await self._client.audio.speech.create(
                model=self.section.speak_model,
                voice=self.section.voice,
                input=text,
                response_format="opus",
            )
            return response.content
        except openai.APITimeoutError as e:
            raise VoiceError(f"the speech server did not answer in {self.timeout:g}s") from e
        except openai.APIStatusError as e:
            raise VoiceError(f"the speech server answered {e.status_code}") from e
        except openai.APIError as e:
            raise VoiceError("the speech server could not be reached") from e


def speech_parts(text: str, *, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut between sentences where it can
    (then between words, then anywhere): a long reply is spoken as several voice messages."""
    limit = max(1, min(limit, SPEECH_INPUT_LIMIT))
    parts: list[str] = []
    current = ""
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        while len(sentence) > limit:  # one sentence longer than a part: between words, else hard
            cut = sentence.rfind(" ", 0, limit + 1)
            cut = cut if cut > 0 else limit
            if current:
                parts.append(current)
                current = ""
            parts.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > limit:
            parts.append(current)
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current:
        parts.append(current)
    return parts
