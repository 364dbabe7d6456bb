"""The speech seam every platform uses: a reply as voice messages, when the run wants one.

A platform's reply output delivers the text as always, then calls [`speak()`][hub.platform.speak] and sends
each clip as its voice message (Telegram ``sendVoice``, a Discord voice message, WhatsApp
audio). Whether a reply is spoken is the hub's decision (``[voice] speak_model`` and
``reply_with_voice``, and whether this run's input was a voice note), so every platform
behaves alike; a platform only says how long one voice message's text may be. Live replies
stay text: a live output does not call it.
"""

from __future__ import annotations

from ..audio import AudioClip
from ..definitions import RunContext

__all__ = ["speak", "AudioClip", "DEFAULT_SPEECH_CHARS"]

DEFAULT_SPEECH_CHARS = 1000
"""Characters of text one voice message speaks (about a minute) unless the platform says less."""


async def speak(ctx: RunContext, text: str, *, max_chars: int = DEFAULT_SPEECH_CHARS) -> list[AudioClip]:
    """``text`` spoken, as OGG/Opus clips (``clip.data``, ``clip.seconds``), one per part of at
    most ``max_chars`` characters; [] when this run's replies are not spoken (no ``[voice]``,
    no ``speak_model``, ``reply_with_voice`` says no) or speaking failed (the run's log says
    why). Never raises for speech: the caller has delivered the text already.
    """
    speaker = ctx.media.speaker
    if speaker is None:
        return []
    clips: list[AudioClip] = await speaker(text, max_chars)
    return clips
