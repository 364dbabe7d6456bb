"""A conversation as a run sees it: prepared before the run, shown each step, saved after.

:func:`prepare` loads a context instance's persistent memory (or creates it), its bounded
history and the contexts it uses; :func:`available` and :func:`prompt_parts` are what one
step may do and what its prompt shows; :func:`save` writes the state back when the run ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .logs import ActionCallLog, ActionResultLog, InputLog, Log, OutputLog, from_dict, to_dict
from .prompt import PromptParts, escape
from .run import ContextInstance, RunContext, jsonable
from .runs import RunRecord

if TYPE_CHECKING:
    from .definitions import Action, Context, Output
    from .hub import Hub
    from .run import Run

__all__ = ["prepare", "save", "available", "prompt_parts"]


async def prepare(hub: Hub, definition: Context, args: Any, key: str, run: RunRecord, logs: list[Log]) -> ContextInstance:
    inst = ContextInstance(definition=definition, args=args, key=key, extension=hub.owner_of(definition))
    ctx: RunContext[Any, Any] = RunContext(hub, run, inst, logs)
    store = hub.memory
    inst.memory = await load_memory(hub, inst, ctx)
    raw = await store.get(f"working-memory:{inst.id}") or []
    inst.history = [from_dict(d) for d in raw if isinstance(d, dict)]
    if definition.use is not None:
        for sub_def, sub_args in definition.use(args, ctx):
            sub_args = sub_def.schema.model_validate(sub_args) if not isinstance(sub_args, BaseModel) else sub_args
            inst.used.append(ContextInstance(sub_def, sub_args, sub_def.key_of(sub_args), extension=hub.owner_of(sub_def)))
        # the seed's "prepared in parallel": each used context's load (or create) at once
        memories = await asyncio.gather(*(load_memory(hub, sub, ctx) for sub in inst.used))
        for sub, memory in zip(inst.used, memories, strict=True):
            sub.memory = memory
    if hub.agent is not None:
        await hub.agent.prepare(ctx)
    return inst


async def load_memory(hub: Hub, inst: ContextInstance, ctx: RunContext) -> Any:
    """A context instance's persistent memory: its ``load`` override or the store, else
    its ``create`` (awaited when async), else a new one; in its ``memory_schema``."""
    definition = inst.definition
    if definition.load is not None:
        memory = await _value(definition.load(inst.id, ctx))
    else:
        memory = await hub.memory.get(f"memory:{inst.id}")
    if memory is None:
        memory = await _value(definition.create(inst.args, ctx)) if definition.create is not None else definition.new_memory()
    return definition.memory_from(memory)


async def save_memory(hub: Hub, inst: ContextInstance, ctx: RunContext) -> None:
    """Write a context instance's memory back: its ``save`` override, or the store."""
    definition = inst.definition
    if definition.save is not None:
        await _value(definition.save(inst.id, inst.memory, ctx))
    else:
        await hub.memory.set(f"memory:{inst.id}", definition.memory_to(inst.memory))


async def save(hub: Hub, inst: ContextInstance, run_logs: list[Log], ctx: RunContext) -> None:
    store = hub.memory
    definition = inst.definition
    # The writes are independent: issued together they share one SQLite group commit
    # (four sequential commits cost ~0.4 ms of CPU per run, one ~0.12 ms).
    writes = [save_memory(hub, i, ctx) for i in (inst, *inst.used)]
    if hub.agent is not None:
        writes.append(hub.agent.save(ctx))
    keep = definition.max_history if definition.max_history is not None else hub.config.agent.max_history
    kept = [e for e in run_logs if isinstance(e, (InputLog, OutputLog, ActionCallLog, ActionResultLog))]
    history = (inst.history + kept)[-keep:] if keep else []
    writes.append(store.set(f"working-memory:{inst.id}", [to_dict(e) for e in history]))
    writes.append(store.set(
        f"context:{inst.id}",
        {"type": inst.type, "key": inst.key, "args": jsonable(inst.args), "updated": time.time()},
    ))
    results = await asyncio.gather(*writes, return_exceptions=True)
    for r in results:  # every write was tried; the first failure is reported
        if isinstance(r, BaseException):
            raise r


def available(hub: Hub, run: Run) -> None:
    """The actions and outputs this step of ``run`` may use."""
    inst, ctx = run.instance, run.ctx
    assert inst is not None and ctx is not None
    defs = [i.definition for i in _shown(hub, inst)]
    types = {d.type for d in defs}
    actions: dict[str, Action] = {}
    for a in (*hub.actions.values(), *(a for d in defs for a in d.actions)):
        if a.enabled is None or a.enabled(ctx):
            actions[a.name] = a
    outputs: dict[str, Output] = {}
    for o in (*hub.outputs.values(), *(o for d in defs for o in d.outputs)):
        if (o.context is None or o.context in types) and (o.enabled is None or o.enabled(ctx)):
            outputs[o.type] = o
    run.actions, run.outputs = actions, outputs


def prompt_parts(hub: Hub, run: Run) -> PromptParts:
    """What the prompt of this step of ``run`` shows."""
    inst, ctx = run.instance, run.ctx
    assert inst is not None and ctx is not None
    persona = hub.persona_for(inst)
    state_lines = []
    shown = _shown(hub, inst)
    for i in shown:
        d = i.definition
        if d.render is not None:
            state_lines.append(str(d.render(i.memory, ctx)))
        elif i.memory:
            state_lines.append(f'<memory of="{i.type}">{_escape_json(d.memory_to(i.memory))}</memory>')
    return PromptParts(
        persona_name=persona.name if persona else "a helpful assistant",
        persona_instructions=persona.instructions if persona else "",
        persona_examples=tuple(persona.examples) if persona else (),
        context_id=inst.id,
        context_type=inst.type,
        context_instructions=[_about(i.definition) for i in shown],
        context_state=state_lines,
        actions=list(run.actions.values()),
        outputs=list(run.outputs.values()),
        reply_output=inst.definition.reply_output,
        history=inst.history,
        run=run.logs,
        episodes=ctx.episodes,
    )


def _shown(hub: Hub, inst: ContextInstance) -> list[ContextInstance]:
    """The contexts a run of ``inst`` sees: itself, those it uses, and the bot's own."""
    agent = hub.agent.instance if hub.agent is not None else None
    return [inst, *inst.used, *([agent] if agent is not None else [])]


def _about(d: Context) -> str:
    """A context's description and instructions, as its prompt section shows them."""
    return "\n".join(t.strip() for t in (d.description, d.instructions) if t and t.strip())


async def _value(res: Any) -> Any:
    if asyncio.iscoroutine(res):
        return await res
    return res


def _escape_json(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, default=str))
