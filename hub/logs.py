"""The typed entries of a run's event log and of a conversation's working memory.

Each entry is a slotted dataclass with a ``kind`` discriminator. ``to_dict``/``from_dict``
round-trip them through JSON for SQLite; match on the classes (or on ``kind``) exhaustively.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, cast

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
    platform *claims* (the bytes are sniffed when fetched, `hub.media`); ``ref`` is what
    the input's ``fetch`` needs to get the bytes again (a Telegram ``file_id``, a URL), so an
    input resumed after a restart fetches them anew. ``name`` is for display only, never a path.
    """

    kind: str
    """What the platform calls it: `image`, `document`, `sticker`, `audio`, `video` or `voice`."""
    ref: str
    """What the input's `fetch` needs to get the bytes again (a Telegram `file_id`, a URL)."""
    mime: str = ""
    """The type the platform claims (the bytes are sniffed when fetched)."""
    size: int | None = None
    """The size in bytes the platform claims, if it says."""
    name: str = ""
    """A name to show (a file name as sent); never used as a path."""
    width: int | None = None
    """Width in pixels of a picture or video, if the platform says."""
    height: int | None = None
    """Height in pixels of a picture or video, if the platform says."""

    def to_dict(self) -> dict[str, Any]:
        """The part as JSON can hold it, to store."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaPart:
        """A part from [`to_dict`][hub.MediaPart.to_dict]'s output; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(slots=True)
class InputLog:
    """Something that came in: a message, a webhook body, a scheduled prompt, a child-run request."""

    kind: ClassVar[Literal["input"]] = "input"
    """``"input"``: what the entry is, the same for every instance, to match on."""
    type: str
    """The input's type: `text` for a message, else what the input declared (a webhook's, a schedule's)."""
    content: Any
    """What came in: the message's text, or the input's data (validated by its schema)."""
    id: str = field(default_factory=new_id)
    """The entry's id, unique across runs."""
    user: str | None = None
    """Who sent it, as the platform names them (a user id); None for a schedule or webhook."""
    platform_id: str | None = None
    """The platform's id of the message: a redelivered one is recognised and not answered twice."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Whatever else the platform passed with it (chat type, reply-to id, ...)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""
    processed: bool = False
    """True once a run's prompt has shown it to the model."""
    formatted: str | None = None
    """How the log shows it, from the input's ``format`` (None: the content itself)."""
    media: list[MediaPart] = field(default_factory=list)
    """Pictures and files that came with it, as references ([`MediaPart`][hub.MediaPart])."""
    drafts: list[dict[str, Any]] = field(default_factory=list)
    """Live replies an interrupted run left half-written for this input (``type`` and
    ``parts``), that the run handling it again completes in place of sending new ones."""


@dataclass(slots=True)
class ThoughtLog:
    """What the model wrote between its tags in one step: reasoning the user never sees."""

    kind: ClassVar[Literal["thought"]] = "thought"
    """``"thought"``: what the entry is, the same for every instance, to match on."""
    content: str
    """The text the model wrote outside any tag: its reasoning, not shown to users."""
    step: int = 0
    """The step of the run that wrote it (from 1)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""


@dataclass(slots=True)
class ActionCallLog:
    """A call of an action by the model, as it made it; its result is an [`ActionResultLog`][hub.ActionResultLog]."""

    kind: ClassVar[Literal["action_call"]] = "action_call"
    """``"action_call"``: what the entry is, the same for every instance, to match on."""
    name: str
    """The action called."""
    args: Any
    """The arguments as the model gave them (checked against the action's schema when it runs)."""
    index: int = 0
    """Its position among the run's calls (from 0), by which a `{{calls[N]}}` template names it."""
    id: str = field(default_factory=new_id)
    """The call's id; its [`ActionResultLog`][hub.ActionResultLog] names it as `call_id`."""
    step: int = 0
    """The step of the run that made the call (from 1)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""
    tool_call_id: str | None = None
    """In the tools style, the call's id as the model gave it (or one the hub made where
    it gave none): sent back as is, since some servers accept only their own ids."""


@dataclass(slots=True)
class ActionResultLog:
    """The result (or the error) of one call; what the model sees next step."""

    kind: ClassVar[Literal["action_result"]] = "action_result"
    """``"action_result"``: what the entry is, the same for every instance, to match on."""
    call_id: str
    """The `id` of the [`ActionCallLog`][hub.ActionCallLog] this answers."""
    name: str
    """The action called."""
    ok: bool
    """True when the action returned; False when it raised or was refused."""
    data: Any = None
    """What the action returned (JSON-able), shown to the model."""
    error: str | None = None
    """Why it failed, as the model is told; None when `ok`."""
    denied: bool = False
    """True when the action did not run because a plugin (the role guard) refused it."""
    step: int = 0
    """The step of the run that made the call (from 1)."""
    duration: float = 0.0
    """Seconds the action ran."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""
    processed: bool = False
    """True once a later step's prompt has shown it to the model."""


@dataclass(slots=True)
class OutputLog:
    """An output the model produced; ``sent`` is True only once its handler succeeded."""

    kind: ClassVar[Literal["output"]] = "output"
    """``"output"``: what the entry is, the same for every instance, to match on."""
    type: str
    """The output's type: the `type` of the model's `<output>` tag, or of its `output_TYPE` tool call."""
    content: Any
    """What the model wrote inside the tag (or the tool call's content)."""
    attrs: dict[str, str] = field(default_factory=dict)
    """The tag's attributes, as the model gave them."""
    id: str = field(default_factory=new_id)
    """The entry's id, unique across runs."""
    sent: bool = False
    """True once the output's handler succeeded: the platform took it."""
    error: str | None = None
    """Why sending failed (the handler's error, a [`SendFailed`][hub.platform.SendFailed]); None otherwise."""
    data: Any = None
    """What the handler returned for the log (a platform's message id, ...)."""
    step: int = 0
    """The step of the run that produced it (from 1)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""
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
    """One step of a run, recorded when it ends: one call of the model, with its tokens, cost and timing."""

    kind: ClassVar[Literal["step"]] = "step"
    """``"step"``: what the entry is, the same for every instance, to match on."""
    step: int
    """The step's number in its run (from 1)."""
    prompt_tokens: int = 0
    """Tokens of the prompt, as the model's provider counted them."""
    completion_tokens: int = 0
    """Tokens the model wrote."""
    duration: float = 0.0
    """Seconds the whole step took, the model call and the actions."""
    llm_latency: float = 0.0
    """Seconds from sending the prompt to the model's first token."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""
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
    """``"error"``: what the entry is, the same for every instance, to match on."""
    message: str
    """What went wrong, as the model is told in its next step."""
    where: str = ""
    """Which part of the hub caught it: `model`, `parser`, `output`, `hook`, `voice` or `finish`."""
    step: int = 0
    """The step of the run it happened in (from 1)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""


@dataclass(slots=True)
class StateLog:
    """A change of the run's state; the last one of a run is its terminal state and its reason."""

    kind: ClassVar[Literal["state"]] = "state"
    """``"state"``: what the entry is, the same for every instance, to match on."""
    state: str
    """The state entered: a [`RunState`][hub.RunState] value (`running`, `completed`, `failed`, `rejected`,
    `killed`)."""
    reason: str | None = None
    """Why, for a run that did not complete (an error, a refusal, who stopped it); None otherwise."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""


@dataclass(slots=True)
class SummaryLog:
    """A summary of a conversation's oldest history, written by the model when the history
    no longer fitted (``[agent] compaction``). Kept at the head of the conversation's working
    memory in place of the entries it covers, and in the trace of the run that wrote it."""

    kind: ClassVar[Literal["summary"]] = "summary"
    """``"summary"``: what the entry is, the same for every instance, to match on."""
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
    """``"voice"``: what the entry is, the same for every instance, to match on."""
    direction: Literal["heard", "spoken"]
    """`heard` for a voice note transcribed, `spoken` for a reply turned into speech."""
    model: str = ""
    """The speech model that did it."""
    seconds: float = 0.0
    """Seconds of audio transcribed, or spoken."""
    chars: int = 0
    """Characters spoken (0 for a transcription)."""
    cost: float = 0.0
    """What it cost at `[voice] price_transcribe` or `price_speak` (0: no price set)."""
    text: str = ""
    """The transcript, or the text spoken."""
    input_id: str | None = None
    """The input whose voice note this is (a transcription)."""
    step: int = 0
    """The step of the run it belongs to (0: before the first step, for a transcription)."""
    ts: float = field(default_factory=time.time)
    """When it was recorded (seconds since the epoch)."""


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
"""Any entry of a run's log: match on the classes (or on their ``kind``) to handle each."""

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


def _dict_maker(cls: type, kind: str) -> Callable[[Any], dict[str, Any]]:
    """A function that returns an entry of ``cls`` as a dict, its fields then ``kind``, as a
    dict display (what dataclasses do for ``__init__``): a conversation's history is turned
    into dicts at every turn (docs/benchmarks/index.md, "Figures quoted by the code")."""
    body = "".join(f"{name!r}: e.{name}, " for name in _FIELDS[cls])
    namespace: dict[str, Any] = {}
    exec(f"def as_dict(e):\n    return {{{body}'kind': {kind!r}}}\n", namespace)  # the names are the fields()
    return cast("Callable[[Any], dict[str, Any]]", namespace["as_dict"])


_AS_DICT: dict[type, Callable[[Any], dict[str, Any]]] = {c: _dict_maker(c, kind) for kind, c in _BY_KIND.items()}


def _entry_maker(cls: type) -> Callable[[dict[str, Any]], Any]:
    """A function that builds an entry of ``cls`` from to_dict's output, its fields passed by
    position (an input's media, absent when empty, as a new empty list), cheaper than
    filtering the keys and passing them by name."""
    args = ", ".join("[]" if cls is InputLog and name == "media" else f"d[{name!r}]" for name in _FIELDS[cls])
    namespace: dict[str, Any] = {"cls": cls}
    exec(f"def from_dict(d):\n    return cls({args})\n", namespace)  # the names are the fields()
    return cast("Callable[[dict[str, Any]], Any]", namespace["from_dict"])


_FROM_DICT: dict[type, Callable[[dict[str, Any]], Any]] = {c: _entry_maker(c) for c in _FIELDS}
_SIZE: dict[type, int] = {c: len(names) + (c is not InputLog) for c, names in _FIELDS.items()}
"""The keys of to_dict's output: the fields and "kind" (an input's media left out when empty)."""


def to_dict(entry: Log) -> dict[str, Any]:
    d = _AS_DICT[type(entry)](entry)
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
    if len(data) == _SIZE[cls]:
        # what to_dict wrote (a conversation's history, read at every turn): every field
        # and "kind", an input's media absent; a key missing means an older or other shape
        try:
            return _FROM_DICT[cls](data)
        except KeyError:
            pass
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
