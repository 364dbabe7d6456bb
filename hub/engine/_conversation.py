"""A conversation as a run sees it: prepared before the run, shown each step, saved after.

`conversation()` is the context instance a run handles; `prepare()` loads its
persistent memory (or creates it), its bounded history and the contexts it uses;
`available()` and `prompt_parts()` are what one step may do and what its prompt
shows; `save()` writes the state back when the run ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..definitions import ContextInstance, RunContext, load_memory, save_memory
from ..logs import ActionCallLog, ActionResultLog, InputLog, Log, OutputLog, SummaryLog, from_dict, jsonable, to_dict
from ..protocol import PromptParts, escape
from ..store import People

if TYPE_CHECKING:
    from ..definitions import Action, Context, Output
    from ..store import MemoryStore
    from ._active_run import Run
    from ._deps import EngineDeps

__all__ = ["conversation", "prepare", "save", "available", "prompt_parts", "COMPACTION_SLACK"]

COMPACTION_SLACK = 2
"""With ``[agent] compaction``, a conversation's history is summarised once it holds more than
this many times ``max_history`` entries (or no longer fits the prompt budget)."""

log = logging.getLogger("hub.engine")


def conversation(deps: EngineDeps, definition: Context, args: Any, key: str) -> ContextInstance:
    """The context instance a run handles, before `prepare()` loads it."""
    return ContextInstance(definition=definition, args=args, key=key, extension=deps.registry.owner_of(definition))


async def prepare(deps: EngineDeps, inst: ContextInstance, ctx: RunContext) -> None:
    """Load ``inst``'s memory (or create it), its history, the contexts it uses and the
    bot's own context; ``ctx`` is the run's context, which their callbacks get."""
    store = deps.memory
    inst.memory = await load_memory(store, inst, ctx)
    raw = await store.get(f"working-memory:{inst.id}") or []
    entries = [from_dict(d) for d in raw if isinstance(d, dict)]
    # a compaction's summary heads the working memory, in place of the entries it covers
    inst.summary = next((e for e in entries if isinstance(e, SummaryLog)), None)
    inst.history = [e for e in entries if not isinstance(e, SummaryLog)]
    await _use(deps, inst, ctx)
    await _person(deps, inst, ctx)
    agent = deps.agent()
    if agent is not None:
        await agent.prepare(ctx)


async def _person(deps: EngineDeps, inst: ContextInstance, ctx: RunContext) -> None:
    """The speaking person and their own memory, when the run has one user: in a group, one
    member's memory must never reach a prompt that answers another."""
    users = {e.user for e in ctx.inputs} | {ctx.user}
    if len(users) != 1 or ctx.user is None:
        return
    people = People(deps.memory)
    ctx.person = await people.person_of(_platform(inst), ctx.user)
    ctx.person_memory = await people.memory_of(ctx.person)


def _platform(inst: ContextInstance) -> str:
    return inst.extension or inst.type.split(":", 1)[0]


def _speaker(ctx: RunContext) -> bool:
    """Whether the person memory loaded still belongs to every input of the run (a message
    from someone else that joined it, ``busy = "steer"``, hides it)."""
    return ctx.person is not None and all(e.user == ctx.user for e in ctx.inputs)


MAX_USE_DEPTH = 4
"""How deep ``use`` may nest (a used context that uses another, ...): a cycle is refused."""


async def _use(deps: EngineDeps, inst: ContextInstance, ctx: RunContext) -> None:
    """The contexts ``inst`` uses, and those they use in turn (each instance once, flat in
    ``inst.used``, nearest first), their memories loaded at once per level (the seed's
    "prepared in parallel"). ``use`` may be sync or async."""
    seen = {inst.id}
    level = [inst]
    for depth in range(MAX_USE_DEPTH + 1):
        found: list[ContextInstance] = []
        for parent in level:
            use = parent.definition.use
            if use is None:
                continue
            for sub_def, sub_args in await _value(use(parent.args, ctx)):
                args = sub_def.schema.model_validate(sub_args) if not isinstance(sub_args, BaseModel) else sub_args
                sub = ContextInstance(sub_def, args, sub_def.key_of(args), extension=deps.registry.owner_of(sub_def))
                if sub.id in seen:
                    continue  # used twice, or a cycle: prepared once
                if depth == MAX_USE_DEPTH:
                    raise ValueError(f"context {inst.type!r}: use() nests deeper than {MAX_USE_DEPTH} ({sub.id})")
                seen.add(sub.id)
                found.append(sub)
        if not found:
            return
        memories = await asyncio.gather(*(load_memory(deps.memory, sub, ctx) for sub in found))
        for sub, memory in zip(found, memories, strict=True):
            sub.memory = memory
        inst.used.extend(found)
        level = found


async def _value(res: Any) -> Any:
    """``res``, awaited when a callback returned an awaitable (an async ``use``)."""
    if inspect.isawaitable(res):
        return await res
    return res


async def save(deps: EngineDeps, inst: ContextInstance, run_logs: list[Log], ctx: RunContext) -> None:
    store = deps.memory
    definition = inst.definition
    # The writes are independent: issued together they share one SQLite group commit
    # (one commit costs a third of the CPU of four sequential ones).
    writes = [save_memory(store, i, ctx) for i in (inst, *inst.used)]
    agent = deps.agent()
    if agent is not None:
        writes.append(agent.save(ctx))
    keep = definition.max_history if definition.max_history is not None else deps.config.agent.max_history
    kept = _private(
        [e for e in run_logs if isinstance(e, (InputLog, OutputLog, ActionCallLog, ActionResultLog))], ctx.person_calls
    )
    # With compaction, a run folds the oldest entries into the summary once there are more
    # than COMPACTION_SLACK times max_history (hub/engine/_compaction.py); one more
    # max_history bounds them until then, and if compactions keep failing.
    cap = keep * (COMPACTION_SLACK + 1) if deps.config.agent.compaction else keep
    history = (inst.history + kept)[-cap:] if keep else []
    head = [to_dict(inst.summary)] if inst.summary is not None and keep else []
    # under the generation the run began in: once /new or retention forgot the conversation,
    # the history (and summary) this run loaded is not written back (hub/store/_conversations.py)
    writes.append(_set(store, inst, f"working-memory:{inst.id}", head + [to_dict(e) for e in history]))
    writes.append(
        _set(
            store,
            inst,
            f"context:{inst.id}",
            {"type": inst.type, "key": inst.key, "args": jsonable(inst.args), "updated": time.time()},
        )
    )
    results = await asyncio.gather(*writes, return_exceptions=True)
    for r in results:  # every write was tried; the first failure is reported
        if isinstance(r, BaseException):
            raise r


async def _set(store: MemoryStore, inst: ContextInstance, key: str, value: Any) -> None:
    if inst.generation is None:
        await store.set(key, value)
    elif not await store.set_if_current(key, value, inst.generation):
        log.info("%s not saved: the conversation was forgotten since this run began", key)


PERSONAL = {"kept": "in the memory of the person who spoke"}
"""What the shared history keeps of a call that wrote a person's memory, in place of its
arguments and result (the run's own log, ``hub trace``, keeps them whole)."""


def _private(entries: list[Log], calls: set[str]) -> list[Log]:
    """``entries`` with the calls that wrote person memory (``calls``) emptied: the history is
    the conversation's, and in a group another member's prompt shows it."""
    if not calls:
        return entries
    out: list[Log] = []
    for e in entries:
        if isinstance(e, ActionCallLog) and e.id in calls:
            e = dataclasses.replace(e, args=PERSONAL)
        elif isinstance(e, ActionResultLog) and e.call_id in calls:
            e = dataclasses.replace(e, data=PERSONAL)
        out.append(e)
    return out


def available(deps: EngineDeps, run: Run) -> None:
    """The actions and outputs this step of ``run`` may use."""
    inst, ctx = run.instance, run.ctx
    assert inst is not None and ctx is not None
    defs = [i.definition for i in _shown(deps, inst)]
    types = {d.type for d in defs}
    # a route's allow-list: an action outside it is never offered, and a call to it is refused
    # as unknown (the engine calls only what is in run.actions)
    route = run.route = deps.config.route_for(inst.id)
    actions: dict[str, Action] = {}
    for a in (*deps.registry.actions.values(), *(a for d in defs for a in d.actions)):
        if (a.enabled is None or a.enabled(ctx)) and (route is None or route.allows(a.name)):
            actions[a.name] = a
    outputs: dict[str, Output] = {}
    for o in (*deps.registry.outputs.values(), *(o for d in defs for o in d.outputs)):
        if (o.context is None or o.context in types) and (o.enabled is None or o.enabled(ctx)):
            outputs[o.type] = o
    run.actions, run.outputs = actions, outputs


def prompt_parts(deps: EngineDeps, run: Run) -> PromptParts:
    """What the prompt of this step of ``run`` shows."""
    inst, ctx = run.instance, run.ctx
    assert inst is not None and ctx is not None
    persona = deps.persona_for(inst)
    state_lines = []
    shown = _shown(deps, inst)
    for i in shown:
        d = i.definition
        if d.render is not None:
            state_lines.append(str(d.render(i.memory, ctx)))
        elif i.memory:
            state_lines.append(f'<memory of="{i.type}">{_escape_json(d.memory_to(i.memory))}</memory>')
    if ctx.person_memory and _speaker(ctx):
        state_lines.append(f'<memory of="person">{_escape_json(ctx.person_memory)}</memory>')
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
        summary=inst.summary.content if inst.summary is not None else "",
        run=run.logs,
        episodes=ctx.episodes,
        skills=deps.skills.summaries() if deps.skills is not None and "load_skill" in run.actions else (),
    )


def _shown(deps: EngineDeps, inst: ContextInstance) -> list[ContextInstance]:
    """The contexts a run of ``inst`` sees: itself, those it uses, and the bot's own."""
    bot = deps.agent()
    agent = bot.instance if bot is not None else None
    return [inst, *inst.used, *([agent] if agent is not None else [])]


def _about(d: Context) -> str:
    """A context's description and instructions, as its prompt section shows them."""
    return "\n".join(t.strip() for t in (d.description, d.instructions) if t and t.strip())


def _escape_json(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, default=str))
