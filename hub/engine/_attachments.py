"""A run's inbound files: fetched when needed, checked, and made into what the prompt shows.

Before each step, `Attachments.prepare()` looks at the inputs the run has not seen yet.
Each file (a [`MediaPart`][hub.MediaPart] reference) is fetched through the ``fetch`` of
the input that recorded it, only when the model can use it: a picture for a vision model
(``[model] vision``), a text file or a PDF to read (``[media] read_files``). Everything else
is a placeholder: kind, name, type, size. The bytes live in the run's
`RunMedia` until it ends; the stored logs and history keep references.

Pictures are decoded and PDFs read by the engine's `Decoder`, in worker
processes bounded in time, CPU and memory. A file over ``[media] max_bytes``, a
decompression bomb, one that takes too long to decode, an archive or an executable is refused: the prompt says so, and when a message brought nothing but refused files,
`Attachments.refusal()` is the reply the user gets without asking the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import PurePath
from typing import TYPE_CHECKING

from ..errors import MediaError, MediaRefused, MediaTooLarge, VoiceError
from ..logs import InputLog, MediaPart
from ..media import (
    MediaFile,
    check,
    data_url,
    display_name,
    human_size,
    is_image,
    placeholder,
    readable,
    refused_by_claim,
)
from ._voice import is_audio

if TYPE_CHECKING:
    from ._active_run import Run
    from ._deps import EngineDeps

__all__ = ["Attachments", "Fetch"]

log = logging.getLogger("hub.engine")

Fetch = Callable[[MediaPart, int], Awaitable[bytes]]
"""An input's ``fetch(part, max_bytes)``: the bytes of one of its references."""

_TEXT_SUFFIXES = frozenset(
    {
        "txt",
        "md",
        "csv",
        "tsv",
        "json",
        "xml",
        "yaml",
        "yml",
        "toml",
        "log",
        "ini",
        "py",
        "js",
        "ts",
        "html",
        "htm",
        "css",
        "sql",
        "sh",
        "pdf",
    }
)
_PICTURE_KINDS = frozenset({"image", "sticker", "photo"})


class Attachments:
    """Prepares the files of a run's new inputs for its next prompt (one per engine)."""

    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps
        self.limits = deps.media_limits

    @property
    def vision(self) -> bool:
        """Pictures go to the model as pictures: configured, and not the in-process local model."""
        return self.deps.config.model.vision and not self.deps.model.is_local()

    async def prepare(self, run: Run) -> None:
        """Fetch and read the files of inputs this run has not prepared yet."""
        media = run.media
        for entry in run.logs:
            if not isinstance(entry, InputLog) or not entry.media or entry.id in media.shown:
                continue
            lines: list[str] = []
            for part in entry.media:
                line, refused = await self._one(run, entry, part)
                lines.append(line)
                if refused:
                    media.refused.setdefault(entry.id, []).append(refused)
            media.shown[entry.id] = "\n".join(lines)
            run.progress()

    def refusal(self, new: list[InputLog], run: Run) -> str | None:
        """The reply for a step whose new inputs are nothing but refused files (no text, no
        file the model could use), or None when the model should answer."""
        reasons: list[str] = []
        for entry in new:
            refused = run.media.refused.get(entry.id, [])
            text = entry.formatted if entry.formatted is not None else entry.content
            said_something = not isinstance(text, str) or bool(text.strip())
            if said_something or not entry.media or len(refused) < len(entry.media):
                return None  # there is something for the model to answer
            reasons.extend(refused)
        if not reasons:
            return None
        unheard = run.media.unheard  # a voice note is heard, not opened
        return "Sorry, I could not " + "; ".join(("hear " if r in unheard else "open ") + r for r in reasons) + "."

    async def _one(self, run: Run, entry: InputLog, part: MediaPart) -> tuple[str, str | None]:
        """(what the prompt shows for ``part``, why it was refused or None)."""
        limits, media = self.limits, run.media
        name = display_name(part.name) or part.kind or "the file"
        why = refused_by_claim(part)
        if why is None and part.size is not None and part.size > limits.max_bytes:
            why = f"it is {human_size(part.size)}, over the {human_size(limits.max_bytes)} limit per file"
        if why is not None:  # refused from what the platform says: never downloaded
            return placeholder(part, f"refused: {why}"), f"{name}: {why}"
        if run.voice is not None and is_audio(part.kind, part.mime):
            return await self._hear(run, entry, part, name)
        picture = part.kind in _PICTURE_KINDS or part.mime.startswith("image/")
        want_text = self.deps.config.media.read_files and (
            readable(part.mime) or PurePath(part.name).suffix.lower().lstrip(".") in _TEXT_SUFFIXES
        )
        if not (picture and self.vision) and not want_text:
            note = "a picture; this model does not see pictures" if picture else "shown by name only"
            return placeholder(part, note), None
        if media.opened >= limits.max_per_run:
            return placeholder(part, f"not opened: more than {limits.max_per_run} files in this run"), None
        media.opened += 1
        try:
            file = await self._fetch(entry, part)
            return await self._read(run, part, file)
        except (MediaTooLarge, MediaRefused) as e:
            return placeholder(part, f"refused: {e.reason}"), f"{name}: {e.reason}"
        except MediaError as e:
            log.warning("run %s: %s of input %s: %s", run.id[:8], name, entry.id[:8], e)
            return placeholder(part, e.reason), None

    async def _hear(self, run: Run, entry: InputLog, part: MediaPart, name: str) -> tuple[str, str | None]:
        """A voice note transcribed (its text now the input's); refused, or not heard, with a
        reason the user is told when the message was nothing else."""
        assert run.voice is not None
        limits, media = self.limits, run.media
        if media.opened >= limits.max_per_run:
            return placeholder(part, f"not heard: more than {limits.max_per_run} files in this run"), None
        media.opened += 1
        shown = "your voice note" if part.kind in ("voice", "video_note") else name
        try:
            file = await self._fetch(entry, part)
            media.audio.setdefault(entry.id, []).append(file)  # the audio stays in the run's media
            await run.voice.hear(entry, file.data, name=shown)
        except (MediaError, VoiceError) as e:
            why = e.reason
            if isinstance(e, VoiceError) or not isinstance(e, (MediaTooLarge, MediaRefused)):
                log.warning("run %s: %s of input %s not heard: %s", run.id[:8], name, entry.id[:8], e)
            reason = f"{shown}: {why}"
            media.unheard.add(reason)
            return placeholder(part, f"not heard: {why}"), reason
        return placeholder(part, "a voice note, transcribed as the message's text"), None

    async def _fetch(self, entry: InputLog, part: MediaPart) -> MediaFile:
        limits = self.limits
        inp = self.deps.registry.inputs.get(entry.type)
        fetch = inp.fetch if inp is not None else None
        if fetch is None:
            raise MediaError(f"not opened: the input {entry.type!r} cannot fetch files")
        try:
            async with asyncio.timeout(limits.fetch_timeout):
                data = await fetch(part, limits.max_bytes)
        except MediaError:
            raise
        except TimeoutError:
            raise MediaError(f"it could not be fetched in {limits.fetch_timeout:g}s") from None
        except Exception as e:  # a platform's own error (its client raised): the run goes on
            raise MediaError(f"it could not be fetched ({type(e).__name__}: {e})") from e
        return check(data, name=part.name, limits=limits)

    async def _read(self, run: Run, part: MediaPart, file: MediaFile) -> tuple[str, str | None]:
        media = run.media
        seen = dataclasses.replace(part, mime=file.mime, size=file.size)  # what the content says
        if is_image(file.mime):
            if not self.vision:
                return placeholder(seen, "a picture; this model does not see pictures"), None
            mime, data = await self.deps.decoder.image(file.data, name=file.name)
            media.images.append(data_url(mime, data))
            return placeholder(seen, f"picture {len(media.images)} of this run, attached"), None
        if readable(file.mime) and self.deps.config.media.read_files:
            text = await self.deps.decoder.text(file)
            text = self.deps.redactor.redact(text)  # a secret in a file is masked like one in a message
            return f"{placeholder(seen, 'its text follows')}\n{text}\n[end of {file.name}]", None
        return placeholder(seen, "shown by name only"), None
