"""The typed entries of a run's event log and of a conversation's working memory.

Each entry is a slotted dataclass with a ``kind`` discriminator. ``to_dict``/``from_dict``
round-trip them through JSON for SQLite; match on the classes (or on ``kind``) exhaustively.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

__all__ = [
    "MediaPart",
    "InputLog",
    "ThoughtLog",
    "ActionCallLog",
    "ActionResultLog",
    "OutputLog",
    "StepLog",
    "VoiceLog",
    "ErrorLog",
    "StateLog",
    "SummaryLog",
    "Log",
    "to_dict",
    "from_dict",
    "jsonable",
    "new_id",
]


def new_id() -> str:
    """A random UUID (version 4) as 32 hex digits, what ``uuid.uuid4().hex`` gives, made
    without a ``UUID`` object: a turn makes about ten of them."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return b.hex()


@dataclass(slots=True, frozen=True)
class MediaPart:
    """A picture or file that came with an input, as a reference: never its bytes.

    ``kind`` is what the platform calls it (``"image"``, ``"document"``, ``"sticker"``,
    ``"audio"``, ``"video"``, ``"voice"``); ``mime``, ``size`` and ``name`` are what the
    platform *claims* (the bytes are sniffed when fetched, :mod:`hub.media`); ``ref`` is what
    the input's ``fetch`` needs to get the bytes again (a Telegram ``file_id``, a URL), so an
    input resumed after a restart fetches them anew. ``name`` is for display only, never a path.
    """

    kind: str
    ref: str
    mime: str = ""
    size: int | None = None
    name: str = ""
    width: int | None = None
    height: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaPart:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(slots=True)
class InputLog:
    """Something that came in: a message, a webhook body, a scheduled prompt, a child-run request."""

    kind: ClassVar[Literal["input"]] = "input"
    type: str
    content: Any
    id: str = field(default_factory=new_id)
    user: str | None = None
    platform_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=time.time)
    processed: bool = False
    formatted: str | None = None
    """How the log shows it, from the input's ``format`` (None: the content itself)."""
    media: list[MediaPart] = field(default_factory=list)
    """Pictures and files that came with it, as references (:class:`MediaPart`)."""
    drafts: list[dict[str, Any]] = field(default_factory=list)
    """Live replies an interrupted run left half-written for this input (``type`` and
    ``parts``), that the run handling it again completes in place of sending new ones."""


@dataclass(slots=True)
class ThoughtLog:
    kind: ClassVar[Literal["thought"]] = "thought"
    content: str
    step: int = 0
    ts: float = field(default_factory=time.time)


@dataclass(slots=True)
class ActionCallLog:
    kind: ClassVar[Literal["action_call"]] = "action_call"
    name: str
    args: Any
    index: int = 0
    id: str = field(default_factory=new_id)
    step: int = 0
    ts: float = field(default_factory=time.time)
    tool_call_id: str | None = None
    """In the tools style, the call's id as the model gave it (or one the hub made where
    it gave none): sent back as is, since some servers accept only their own ids."""


@dataclass(slots=True)
class ActionResultLog:
    """The result (or the error) of one call; what the model sees next step."""

    kind: ClassVar[Literal["action_result"]] = "action_result"
    call_id: str
    name: str
    ok: bool
    data: Any = None
    error: str | None = None
    denied: bool = False
    step: int = 0
    duration: float = 0.0
    ts: float = field(default_factory=time.time)
    processed: bool = False


@dataclass(slots=True)
class OutputLog:
    """An output the model produced; ``sent`` is True only once its handler succeeded."""

    kind: ClassVar[Literal["output"]] = "output"
    type: str
    content: Any
    attrs: dict[str, str] = field(default_factory=dict)
    id: str = field(default_factory=new_id)
    sent: bool = False
    error: str | None = None
    data: Any = None
    step: int = 0
    ts: float = field(default_factory=time.time)
    parts: list[dict[str, Any]] = field(default_factory=list)
    """The parts a platform reported sent (``RunContext.part_sent``), when it splits one output."""
    formatted: str | None = None
    """How the log shows it, from the output's ``format`` (None: the content itself)."""
    processed: bool = True
    """False when its handler asked the model to see it as new (the run takes another step)."""
    live: bool = False
    """Delivered while the model wrote it (a message edited in place): until it is ``sent``,
    its ``parts`` are a draft that a resumed run completes, not an answer."""
    tool_call_id: str | None = None
    """In the tools style, the id of the ``output_TYPE`` tool call that sent it, as the model gave it."""

    @property
    def answered(self) -> bool:
        """The user got this output, or a part of it that is not a draft: the input it
        answers is not handled again after a restart."""
        return self.sent or (bool(self.parts) and not self.live)


@dataclass(slots=True)
class StepLog:
    kind: ClassVar[Literal["step"]] = "step"
    step: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration: float = 0.0
    llm_latency: float = 0.0
    ts: float = field(default_factory=time.time)
    cost: float = 0.0
    """What the step's model call cost, at the answering model's prices (0: unknown prices, or no call)."""
    model: str = ""
    """Which named model answered (``"model"``: ``[model]``; else a ``[models.NAME]``); "": the only model."""
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those the provider served from its prompt cache."""


@dataclass(slots=True)
class ErrorLog:
    """Something went wrong but was handled (malformed XML, a failed hook)."""

    kind: ClassVar[Literal["error"]] = "error"
    message: str
    where: str = ""
    step: int = 0
    ts: float = field(default_factory=time.time)


@dataclass(slots=True)
class StateLog:
    kind: ClassVar[Literal["state"]] = "state"
    state: str
    reason: str | None = None
    ts: float = field(default_factory=time.time)


@dataclass(slots=True)
class SummaryLog:
    """A summary of a conversation's oldest history, written by the model when the history
    no longer fitted (``[agent] compaction``). Kept at the head of the conversation's working
    memory in place of the entries it covers, and in the trace of the run that wrote it."""

    kind: ClassVar[Literal["summary"]] = "summary"
    content: str
    entries: int = 0
    """How many history entries it covers, all compactions together."""
    step: int = 0
    ts: float = field(default_factory=time.time)


@dataclass(slots=True)
class VoiceLog:
    """Speech in a run: a voice note heard (transcribed) or a reply spoken, with what it cost
    at ``[voice] price_transcribe``/``price_speak``. Traces show it; prompts do not (the
    transcript is the input's text)."""

    kind: ClassVar[Literal["voice"]] = "voice"
    direction: Literal["heard", "spoken"]
    model: str = ""
    seconds: float = 0.0
    """Seconds of audio transcribed, or spoken."""
    chars: int = 0
    """Characters spoken (0 for a transcription)."""
    cost: float = 0.0
    text: str = ""
    """The transcript, or the text spoken."""
    input_id: str | None = None
    """The input whose voice note this is (a transcription)."""
    step: int = 0
    ts: float = field(default_factory=time.time)


Log = (
    InputLog
    | ThoughtLog
    | ActionCallLog
    | ActionResultLog
    | OutputLog
    | StepLog
    | ErrorLog
    | StateLog
    | SummaryLog
    | VoiceLog
)

_BY_KIND: dict[str, type] = {
    c.kind: c
    for c in (
        InputLog,
        ThoughtLog,
        ActionCallLog,
        ActionResultLog,
        OutputLog,
        StepLog,
        ErrorLog,
        StateLog,
        SummaryLog,
        VoiceLog,
    )
}
_FIELDS: dict[type, tuple[str, ...]] = {c: tuple(f.name for f in fields(c)) for c in _BY_KIND.values()}


def to_dict(entry: Log) -> dict[str, Any]:
    d = {name: getattr(entry, name) for name in _FIELDS[type(entry)]}
    d["kind"] = entry.kind
    if isinstance(entry, InputLog):  # plain data for JSON: the references, never bytes
        if entry.media:
            d["media"] = [m.to_dict() for m in entry.media]
        else:
            del d["media"]  # entries without media keep the shape they always had
    return d


def from_dict(data: dict[str, Any]) -> Log:
    cls = _BY_KIND.get(data.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown log kind {data.get('kind')!r}")
    names = _FIELDS[cls]
    values = {k: v for k, v in data.items() if k in names}
    if cls is InputLog and values.get("media"):
        values["media"] = [m if isinstance(m, MediaPart) else MediaPart.from_dict(m) for m in values["media"]]
    return cls(**values)


def jsonable(value: Any) -> Any:
    """``value`` as an entry's JSON can hold it (a model dumped, an unknown object as its
    repr): what a handler returns, an action's result, a part a platform reports sent."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
