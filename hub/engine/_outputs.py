"""Output dispatch: validate an ``<output>`` and hand it to its platform, in order.

Outputs of a run are sent one after the other by a chain of tasks, each as soon as its
closing tag arrives, so a reply reaches the platform before the model has finished. An
output's attributes are validated against its ``attributes`` schema; attributes the schema
does not declare are dropped (logged), never a reason to refuse the reply. An output the
stream ended inside is delivered marked as cut off, never as if it were whole.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..definitions import OutputResult, RunContext, validation_message
from ..logs import ErrorLog, OutputLog, ThoughtLog, jsonable
from ..protocol import Element, ElementParser, Partial
from ._live_output import LiveOutput, LiveText

if TYPE_CHECKING:
    from ..definitions import Output
    from ._active_run import Run
    from ._deps import EngineDeps

__all__ = ["OutputDispatch", "CUT_OFF_MARK", "output_type"]

log = logging.getLogger("hub.engine")

CUT_OFF_MARK = " […]"
"""Appended to the text of an output the model's response ended inside (a length cut)."""


class OutputDispatch:
    """Validates a run's outputs and sends them through their handlers, in order."""

    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps

    # --- live outputs (delivered while the model writes them) ---------------------------

    def partial(self, run: Run, p: Partial) -> None:
        """Content inside an open ``<output>``: the first decides whether it is delivered live
        (its handler starts now, in the output chain); then each is handed to its handler."""
        current = run.live
        if current is None:
            if run.output_open:
                return  # open, and not delivered live: dispatched whole when it closes
            run.output_open = True
            otype, attrs = output_type(p.attrs)
            current = run.live = self._start_live(run, otype, attrs)
            if current is None:
                return
        current.text.append(p.text)

    def close_live(self, run: Run, el: Element) -> bool:
        """The ``<output>`` that ``partial`` saw ended (closed, or cut off when the stream ended
        inside it): True if it was live, its final text now handed to its handler."""
        current, run.live, run.output_open = run.live, None, False
        if current is None:
            return False
        out, entry = current.out, current.entry
        text = self.deps.redactor.redact(el.content.strip())
        if not el.closed:
            if text:
                text += CUT_OFF_MARK
            run.append(
                ErrorLog(
                    message=f"<output type={out.type!r}> was cut off: delivered marked as such",
                    where="parser",
                    step=run.step,
                )
            )
        entry.content = text
        if out.format is not None:
            entry.formatted = _formatted(run, out, text)
        current.text.finish(text, cut_off=not el.closed)
        return True

    def abandon_live(self, run: Run) -> bool:
        """The run ends inside a live output (a time limit, a stalled run): what it showed is
        finished as cut off, marked as such, never left looking whole. True if there was one."""
        current = run.live
        if current is None:
            return False
        return self.close_live(run, Element("output", {}, current.text.raw, closed=False))

    def _start_live(self, run: Run, otype: str | None, attrs: dict[str, str]) -> LiveOutput | None:
        """Start a live output's handler; None when the output is not live or would be refused
        (it is then dispatched when it closes, as any output, which reports why)."""
        assert run.instance is not None and run.ctx is not None
        otype = otype or run.instance.definition.reply_output
        out = run.outputs.get(otype) if otype else None
        if out is None or not out.live:
            return None
        declared = self._declared(run, out, attrs)
        try:
            attributes = out.attributes.model_validate(declared)
        except ValidationError:
            return None
        entry = OutputLog(type=out.type, content="", attrs=declared, step=run.step, live=True)
        bus, record = self.deps.bus, run.record
        on_delta = None
        if bus is not None:

            def on_delta(piece: str) -> None:
                bus.partial(record, entry.id, entry.type, piece)

        redactor = self.deps.redactor
        text = LiveText(redact=redactor.redact, hold=redactor.unsafe_tail, on_delta=on_delta)
        self._chain(run, out, text, run.ctx.derive(attributes=attributes, output=entry), entry)
        return LiveOutput(out, entry, text)

    # --- whole outputs ------------------------------------------------------------------

    def dispatch(
        self,
        run: Run,
        otype: str | None,
        content: str,
        attrs: dict[str, str],
        *,
        cut_off: bool = False,
        tool_call_id: str | None = None,
    ) -> None:
        """Validate one output and queue its send after the run's previous one (``tool_call_id``:
        the tools style's call that asked for it)."""
        assert run.instance is not None and run.ctx is not None
        definition = run.instance.definition
        otype = otype or definition.reply_output
        out = run.outputs.get(otype) if otype else None
        entry = OutputLog(
            type=otype or "",
            content=self.deps.redactor.redact(content.strip()),
            attrs=attrs,
            step=run.step,
            tool_call_id=tool_call_id,
        )
        if out is None:
            known = ", ".join(sorted(run.outputs)) or "none"
            entry.error = f"unknown output type {otype!r}; available: {known}" if otype else "output without a type"
            self._refuse(run, entry)
            return
        if cut_off:
            if not out.is_text:
                entry.error = f"output {out.type!r} was cut off before </output>: its content is incomplete"
                self._refuse(run, entry)
                return
            if entry.content:
                entry.content += CUT_OFF_MARK
            run.append(
                ErrorLog(
                    message=f"<output type={out.type!r}> was cut off: delivered marked as such",
                    where="parser",
                    step=run.step,
                )
            )
        entry.attrs = attrs = self._declared(run, out, attrs)
        try:
            value: Any = entry.content
            if not out.is_text:
                value = TypeAdapter(out.schema).validate_python(json.loads(entry.content))
                entry.content = jsonable(value)
            attributes = out.attributes.model_validate(attrs)
        except (ValidationError, json.JSONDecodeError) as e:
            msg = validation_message(e) if isinstance(e, ValidationError) else f"content is not valid JSON ({e.msg})"
            entry.error = f"output {out.type!r} rejected: {msg}"
            self._refuse(run, entry)
            return
        if out.is_text and not entry.content and not any(attrs.values()):
            return  # an empty reply says nothing; nothing to send (a file to send, named by an attribute, does)
        if out.format is not None:
            entry.formatted = _formatted(run, out, value)
        if out.live:  # a live output's handler reads a LiveText on every path: plain text, chat, a tool call
            value = LiveText.whole(entry.content)
            entry.live = True
        self._chain(run, out, value, run.ctx.derive(attributes=attributes, output=entry), entry)

    def _chain(self, run: Run, out: Output, value: Any, ctx: RunContext, entry: OutputLog) -> None:
        """Send ``value`` through ``out``'s handler once the run's previous output is sent."""
        previous = run.output_chain
        run.output_chain = asyncio.create_task(
            self._send(run, out, value, ctx, entry, previous), name=f"output:{out.type}"
        )
        run.logs.append(entry)  # persisted once its send is over, with its outcome

    def stray(self, run: Run, parser: ElementParser, *, answered: bool, cut_off: bool) -> None:
        """Text outside every element: the reply when there are no tags (small models), or
        when nothing else answered (marked when the response was cut at the token limit);
        otherwise dropped, with a log line that says so."""
        text = parser.stray_text.strip()
        if not text:
            return
        answered = answered or any(isinstance(e, (OutputLog, ThoughtLog)) and e.step == run.step for e in run.logs)
        if not parser.saw_tags or not answered:
            self.dispatch(run, None, text, {}, cut_off=cut_off)
        else:
            log.info("run %s: dropped %d characters of text outside any element: %r", run.id, len(text), text[:200])

    @staticmethod
    def _declared(run: Run, out: Output, attrs: dict[str, str]) -> dict[str, str]:
        """The attributes the output's schema declares; the others are dropped, with a log line."""
        names = _attribute_names(out.attributes)
        if names is None:
            return attrs
        dropped = sorted(set(attrs) - names)
        if not dropped:
            return attrs
        log.debug(
            "run %s: <output type=%r>: dropped attribute(s) it does not declare: %s",
            run.id,
            out.type,
            ", ".join(dropped),
        )
        return {k: v for k, v in attrs.items() if k in names}

    def _refuse(self, run: Run, entry: OutputLog) -> None:
        assert entry.error is not None
        run.append(entry)
        run.feedback = True
        run.append(ErrorLog(message=entry.error, where="output", step=run.step))

    async def _send(
        self, run: Run, out: Output, value: Any, ctx: RunContext, entry: OutputLog, previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:
            await previous
        extra: list[OutputLog] = []
        try:
            data = await out.handler(value, ctx)
        except asyncio.CancelledError:
            entry.error = _cut(entry, "cancelled before it was sent")
            self.deps.runs.append(run.record, entry)
            raise
        except Exception as e:
            entry.error = _cut(entry, f"{type(e).__name__}: {e}")
            log.error("run %s: output %s failed: %s", run.id, out.type, entry.error)
        else:
            entry.sent = True
            extra = self._results(run, out, entry, data)
        run.progress()
        self.deps.runs.append(run.record, entry)
        for more in extra:
            run.append(more)
        if entry.sent or entry.parts:
            # durable before anything else happens: a crash from here on must not answer twice
            await self.deps.runs.sync()
        self.deps.plugins.on_output(run.ctx, entry)  # type: ignore[arg-type]

    @staticmethod
    def _results(run: Run, out: Output, entry: OutputLog, data: Any) -> list[OutputLog]:
        """Apply what the handler returned: plain data, one [`OutputResult`][hub.OutputResult] or a list of
        them. The first updates ``entry``; each further one is returned as an entry of its own."""
        results = data if isinstance(data, list) and data and all(isinstance(r, OutputResult) for r in data) else [data]
        extra: list[OutputLog] = []
        for i, r in enumerate(results):
            target = (
                entry
                if i == 0
                else OutputLog(
                    type=entry.type,
                    content=entry.content,
                    attrs=dict(entry.attrs),
                    sent=True,
                    step=run.step,
                    formatted=entry.formatted,
                )
            )
            if isinstance(r, OutputResult):
                target.processed = r.processed
                r = r.data
            if r is not None:
                target.data = jsonable(r)
            if i:
                extra.append(target)
        return extra


def _formatted(run: Run, out: Output, value: Any) -> str | None:
    """The output's ``format(content)``; a format that fails leaves the raw content shown."""
    assert out.format is not None
    try:
        return str(out.format(value))
    except Exception as e:
        log.error("run %s: format of output %s failed: %s: %s", run.id, out.type, type(e).__name__, e)
        return None


def output_type(tag_attrs: dict[str, str]) -> tuple[str | None, dict[str, str]]:
    """An ``<output>``'s type (``name=`` is accepted for ``type=``) and its other attributes."""
    attrs = dict(tag_attrs)
    otype = attrs.pop("type", None) or attrs.pop("name", None)
    attrs.pop("name", None)
    return otype, attrs


def _cut(entry: OutputLog, reason: str) -> str:
    if entry.parts:
        return f"{reason} (after {len(entry.parts)} part(s) were sent: not sent again)"
    return reason


@functools.cache
def _attribute_names(schema: type[BaseModel]) -> frozenset[str] | None:
    """The attribute names ``schema`` declares (its fields, their aliases); None when it takes
    any (``extra="allow"``). Worked out once per schema, not at every output of every turn
    (reading pydantic's ``model_fields`` cost about 4 µs an output, even with no fields)."""
    if schema.model_config.get("extra") == "allow":
        return None
    names = set()
    for name, f in schema.model_fields.items():
        names.add(name)
        if f.alias:
            names.add(f.alias)
        if isinstance(f.validation_alias, str):
            names.add(f.validation_alias)
    return frozenset(names)
