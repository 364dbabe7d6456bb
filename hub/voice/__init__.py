"""Voice: speech to text and text to speech through an OpenAI-compatible ``/v1/audio`` server.

`Voice` is ``[voice]`` as a client (the openai SDK's ``audio.transcriptions`` and
``audio.speech``); the engine transcribes voice notes with it and speaks replies when a
platform asks ([`hub.platform.speak()`][hub.platform.speak]). Audio itself is measured and converted by
`hub.audio`, in the engine's bounded workers.
"""

from ._client import Voice, speech_parts

__all__ = ["Voice", "speech_parts"]
