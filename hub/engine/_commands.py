"""Chat commands, answered before any model call: the built-in ``/start``, ``/help``, ``/new``
and ``/stop``, and the extensions' own (``@command``).

A platform that recognises a command (Telegram's ``/cmd@bot``, a Discord application
command, a line typed in the terminal) hands it to ``send(..., command=CommandCall(...))``.
The intake (`hub.engine`) records it in the inbox like any input (a redelivery is
not answered twice), and instead of queueing it behind the conversation's run it has
`Commands.answer()` answer it at once: a ``/stop`` must not wait for the run it stops.

Each command is a run of its own, with no step: its input, the answer sent through the
conversation's reply output, its end, all in the run's log (``hub trace``). It loads no
memory and writes no history, so the model never sees it. ``[commands] enabled = false``
or a name in ``[commands] disabled`` makes it plain text again, for the model to read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..config import CommandsSection
from ..definitions import (
    Command,
    CommandCall,
    CommandContext,
    Context,
    ContextInstance,
    Queued,
    RunContext,
    RunResult,
    command_handler_result,
    store_reason,
)
from ..errors import ExtensionError, StoreError
from ..logs import InputLog, OutputLog, StateLog
from ..store import LinkError, People, RunRecord, RunState
from ._conversation import conversation
from ._replies import failure_text, send_reply
from ._run_summary import describe_input, note_reply

if TYPE_CHECKING:
    from ._deps import EngineDeps

__all__ = ["BUILT_IN", "CommandInfo", "Commands", "Stopper", "STOPPED_BY_USER"]

log = logging.getLogger("hub.engine")

STOPPED_BY_USER = "stopped by user"
"""The reason a run ``/stop`` (or ``/new``) ends ``killed`` with."""

BUILT_IN: Mapping[str, str] = {
    "start": "Say hello and what I am",
    "help": "The commands you can use",
    "new": "Start a new conversation (I forget this one's history)",
    "stop": "Stop the answer I am writing",
    "link": "Join your accounts on other platforms: /link gives a code, /link CODE uses it",
    "unlink": "Detach this account from your other accounts",
}
"""The built-in commands and their descriptions, in the order ``/help`` lists them."""

STOP_WAIT = 5.0
"""Seconds ``/stop`` and ``/new`` wait for the stopped run to end before they answer."""


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command as menus and ``/help`` show it."""

    name: str
    """The command, without its slash."""
    description: str
    """What it does, one line."""
    arguments: str = ""
    """What text it takes after its name ("": none)."""
    roles: tuple[str, ...] = ()
    """The roles that may use it; empty: everyone."""
    built_in: bool = False
    """Whether it is one of the hub's own (``/start``, ``/help``, ``/new``, ``/stop``...)."""

    def usage(self) -> str:
        """``/name [arguments]``."""
        return f"/{self.name} [{self.arguments}]" if self.arguments else f"/{self.name}"


class Stopper(Protocol):
    """What ``/stop`` and ``/new`` stop runs with (`hub.features.RunStops`)."""

    async def stop_conversation(
        self,
        conversation: str,
        reason: str,
        *,
        wait: float,
        exclude: Collection[str] = (),
        user: str | None = None,
    ) -> list[str]:
        """Stop the conversation's runs in progress (but ``exclude``: commands being answered;
        with ``user``, only the runs answering that user), on whichever worker holds them,
        waiting up to ``wait`` seconds for them to end; their ids."""
        ...


Submit = Callable[..., Awaitable[Queued]]


class Commands:
    """The commands of one hub: which are on (``[commands]``), who may use which (``roles_of``:
    the ``[roles]`` a user holds on a platform), and answering one (`answer()`).
    ``stopper`` stops runs for ``/stop`` and ``/new`` (None: nothing is ever stopped)."""

    def __init__(
        self,
        deps: EngineDeps,
        *,
        settings: CommandsSection,
        roles_of: Callable[[str, str | None], set[str]],
        stopper: Stopper | None = None,
        person_roles: Callable[[str, str | None], Awaitable[set[str]]] | None = None,
    ) -> None:
        self.deps = deps
        self.settings = settings
        self.roles_of = roles_of
        # the roles a user holds as a person (theirs and their linked identities'): what a
        # command is allowed by; ``roles_of`` alone is what the platforms' menus are built from
        self.person_roles = person_roles
        self.stopper = stopper
        self._answering: set[str] = set()  # the runs of the commands being answered here
        self._built_in: dict[str, Callable[[CommandContext], Awaitable[str | None]]] = {
            "start": self._start,
            "help": self._help,
            "new": self._new,
            "stop": self._stop,
            "link": self._link,
            "unlink": self._unlink,
        }

    # --- which commands there are ---------------------------------------------------------

    @property
    def extensions(self) -> Mapping[str, Command]:
        return self.deps.registry.commands

    def available(self) -> list[CommandInfo]:
        """Every command that is on: the built-in ones first, then the extensions'. A name in
        ``[commands] disabled`` turns off the built-in or the extension's command of that name;
        an extension may then answer a built-in's name with its own."""
        if not self.settings.enabled:
            return []
        off = set(self.settings.disabled)
        infos = [CommandInfo(n, d, roles=self.roles_for(n), built_in=True) for n, d in BUILT_IN.items() if n not in off]
        for c in self.extensions.values():
            # a disabled built-in's name is free for an extension's own (check() refuses the others)
            if c.name in BUILT_IN or c.name not in off:
                infos.append(CommandInfo(c.name, c.description, c.arguments, self.roles_for(c.name, c.roles)))
        return infos

    def roles_for(self, name: str, declared: Collection[str] = (), *, group: bool = False) -> tuple[str, ...]:
        """The roles one of which a user needs for ``/name`` (none: anyone): in a group
        ``[commands] group_roles``, else ``[commands] roles``, else what the command declared."""
        for table in (self.settings.group_roles if group else {}, self.settings.roles):
            if name in table:
                return tuple(table[name])
        return tuple(declared)

    def names(self) -> set[str]:
        """The names of the commands that are on (what a platform treats as a command)."""
        return {i.name for i in self.available()}

    def takes(self, name: str) -> bool:
        return name in self.names()

    def menu(self, platform: str, user: str | None = None, *, held: Collection[str] | None = None) -> list[CommandInfo]:
        """The commands ``user`` may use on ``platform`` (None: anyone, so only commands
        without roles, and those whose role every user holds); ``/help`` lists these, for
        the roles the user ``held`` as a person."""
        held = set(self.roles_of(platform, user) if held is None else held)
        return [i for i in self.available() if not i.roles or held & set(i.roles)]

    def menus(self, platform: str) -> tuple[list[CommandInfo], dict[str, list[CommandInfo]]]:
        """What a platform registers in its command menus: everyone's (`menu()` with no
        user), and for each user ``[roles]`` names on ``platform`` whose menu differs (a
        role's commands added), that user's own."""
        everyone = self.menu(platform)
        users: set[str] = set()
        for by_platform in self.deps.config.roles.values():
            users.update(u for u in by_platform.get(platform, ()) if u != "*")
        own = {u: m for u in sorted(users) if (m := self.menu(platform, u)) != everyone}
        return everyone, own

    def check(self) -> None:
        """At start: an extension's command named like a built-in one that is on is refused
        (``[commands] disabled`` frees the name).

        Raises:
            ExtensionError: naming the extension and the command.
        """
        off = set(self.settings.disabled)
        for name, c in self.extensions.items():
            if name in BUILT_IN and name not in off:
                owner = self.deps.registry.owner_of(c) or "?"
                raise ExtensionError(
                    owner,
                    f"command /{name} is built in: add {name!r} to [commands] disabled to answer it yourself",
                )

    # --- answering one ----------------------------------------------------------------------

    async def answer(
        self,
        definition: Context,
        args: Any,
        key: str,
        entry: InputLog,
        call: CommandCall,
        *,
        submit: Submit,
        started: Callable[[str], None] | None = None,
    ) -> RunResult:
        """Answer the command ``call`` that ``entry`` (recorded in the inbox) carries, as a run
        of its own with no step; ``started(run_id)`` once its row is written. ``submit`` is how
        a handler's [`CommandContext.run()`][hub.CommandContext.run] hands text to the model. Never raises but for
        a cancellation."""
        deps = self.deps
        inst = conversation(deps, definition, args, key)
        record = describe_input(RunRecord(context=inst.id, user=entry.user), entry)
        logs: list[Any] = [entry]
        ctx: RunContext = RunContext(deps.hub, record, inst, logs, runs=deps.runs)
        ctx.inputs = [entry]
        state, reason = RunState.COMPLETED, None
        store_failure: StoreError | None = None
        self._answering.add(record.id)
        try:
            await deps.memory.begin(inst.id)  # a command is activity: retention keeps the conversation
            await deps.runs.create(record)
            deps.runs.append(record, entry)
            deps.inbox.take([entry.id], record.id)
            if started is not None:
                started(record.id)
            text = await self._dispatch(call, ctx, inst, entry, submit)
            if text:
                await self._reply(ctx, logs, text, {"command": call.name})
        except StoreError as e:
            state, reason, store_failure = RunState.FAILED, store_reason(e), e
            log.error("command /%s in %s: %s", call.name, inst.id, reason)
        except Exception as e:  # a handler's bug: the user is told something went wrong
            state, reason = RunState.FAILED, f"command /{call.name} failed: {type(e).__name__}: {e}"
            log.exception("command /%s in %s failed", call.name, inst.id)
            text = failure_text(deps.config, deps.persona_for(inst))
            if text:
                await self._reply(ctx, logs, text, {"failure_reply": reason})
        finally:
            self._answering.discard(record.id)
        return await self._finish(ctx, logs, state, reason, store_failure)

    async def _reply(self, ctx: RunContext, logs: list[Any], text: str, data: dict[str, Any]) -> None:
        entry = await send_reply(ctx, text, outputs=self.deps.registry.outputs, runs=self.deps.runs, data=data)
        if entry is not None:
            logs.append(entry)

    async def _finish(
        self, ctx: RunContext, logs: list[Any], state: RunState, reason: str | None, store_failure: StoreError | None
    ) -> RunResult:
        deps, record = self.deps, ctx.run
        answered = any(isinstance(e, OutputLog) and e.answered for e in logs)
        if answered or store_failure is None:  # a store that failed before any answer: the input waits
            try:
                await deps.inbox.done([e.id for e in ctx.inputs])
            except Exception as e:
                log.error("command in %s: marking its input done failed: %s", record.context, e)
        if reason:
            reason = deps.redactor.redact(reason)
        record.state, record.reason, record.ended = state, reason, time.time()
        record.store_failed = store_failure is not None
        note_reply(record, logs)
        end = StateLog(state=str(state), reason=reason)
        logs.append(end)
        try:
            deps.runs.append(record, end)
            await deps.runs.finish(record)
        except Exception as e:
            log.error("command in %s: recording its end failed: %s", record.context, e)
        return RunResult(
            run_id=record.id,
            context=record.context,
            state=state,
            reason=reason,
            logs=logs,
            duration=record.ended - record.started,
            store_failure=store_failure,
        )

    async def _dispatch(
        self, call: CommandCall, ctx: RunContext, inst: ContextInstance, entry: InputLog, submit: Submit
    ) -> str | None:
        """Run the command's handler; the answer's text (or None)."""
        platform = inst.extension or inst.type.split(":", 1)[0]
        held = frozenset(
            await self.person_roles(platform, entry.user) if self.person_roles else self.roles_of(platform, entry.user)
        )
        meta = {k: v for k, v in entry.meta.items() if k != "command"}

        async def reply(text: str) -> None:
            await self._reply(ctx, ctx.logs, text, {"command": call.name})

        async def run(text: str) -> Queued:
            return await submit(inst.definition, inst.args, inst.key, text, type=entry.type, user=entry.user, meta=meta)

        cmd = CommandContext(
            name=call.name,
            args=call.args.strip(),
            context=inst,
            user=entry.user,
            platform=platform,
            roles=held,
            run_id=ctx.run.id,
            hub=self.deps.hub,
            reply=reply,
            run=run,
        )
        built_in = self._built_in.get(call.name) if call.name in BUILT_IN else None
        if built_in is not None and call.name not in self.extensions:
            needed = self.roles_for(call.name, group=call.group)
            if needed and not held & set(needed):
                if call.name == "stop" and call.group:  # a member still stops the answers to their own messages
                    return await self._stop(cmd, only=entry.user)
                return self._refuse(call, inst, entry, needed)
            if call.name == "link":
                return await self._link(cmd, group=call.group)
            return await built_in(cmd)
        command = self.extensions.get(call.name)
        if command is None:  # turned off since it was recorded (a restart, a config change)
            return f"/{call.name} is not available."
        needed = self.roles_for(call.name, command.roles, group=call.group)
        if needed and not held & set(needed):
            if not self.settings.roles.get(call.name) and not (call.group and call.name in self.settings.group_roles):
                return self._refuse(call, inst, entry, needed, plain=True)  # the extension's own roles
            return self._refuse(call, inst, entry, needed)
        return command_handler_result(await command.handler(cmd))

    @staticmethod
    def _refuse(
        call: CommandCall, inst: ContextInstance, entry: InputLog, needed: Collection[str], *, plain: bool = False
    ) -> str:
        log.info("command /%s in %s: user %s holds none of %s", call.name, inst.id, entry.user, sorted(needed))
        if plain:
            return f"You may not use /{call.name}."
        wanted = " or ".join(sorted(needed))
        if call.group:
            return f"You may not use /{call.name} here: in a group it needs the role {wanted}."
        return f"You may not use /{call.name}: it needs the role {wanted}."

    # --- the built-in commands ------------------------------------------------------------

    async def _start(self, cmd: CommandContext) -> str:
        persona = self.deps.persona_for(cmd.context)
        if persona is not None and persona.greeting is not None:
            return persona.greeting
        hello = f"Hi, I'm {persona.name}!" if persona is not None else "Hi!"
        return f"{hello} Send me a message, or /help to see what I can do."

    async def _help(self, cmd: CommandContext) -> str:
        lines = [f"{i.usage()} — {i.description}" for i in self.menu(cmd.platform or "", cmd.user, held=cmd.roles)]
        return "Commands:\n" + "\n".join(lines)

    async def _stop(self, cmd: CommandContext, *, only: str | None = None) -> str:
        """``only``: stop just the runs answering that user (a group member without the role)."""
        stopped = await self._stop_runs(cmd, user=only)
        if stopped:
            return "Stopped."
        return "Nothing of yours to stop." if only is not None else "Nothing to stop."

    async def _new(self, cmd: CommandContext) -> str:
        """Forget the conversation: a new generation (hub/store/_conversations.py), so that no
        run that began before, stopped or queued, saves the old history or memory back; its
        run in progress stopped; and its episodes, so that recall does not bring it back."""
        await self.deps.memory.forget(cmd.conversation)
        await self._stop_runs(cmd)
        log.info("command /new in %s: history and memory cleared", cmd.conversation)
        episodes = getattr(self.deps.hub, "episodes", None)
        if episodes is not None:
            try:
                await episodes.flush()  # the episode of the run just stopped, if it is being written
                await episodes.forget(context=cmd.conversation)
            except Exception as e:
                log.error("command /new in %s: its episodes were not forgotten: %s", cmd.conversation, e)
                return (
                    "Started a new conversation: what we said before is forgotten, but I could not "
                    "forget what I recall from it yet. Send /new again later."
                )
        return "Started a new conversation: what we said before is forgotten."

    async def _link(self, cmd: CommandContext, *, group: bool = False) -> str:
        """``/link``: a one-time code, given in private only (anyone who reads it could join
        the person); ``/link CODE``: this identity joins the person who was given it."""
        if cmd.user is None or cmd.platform is None:
            return "/link needs a user: it joins your accounts."
        people = People(self.deps.memory)
        if not cmd.args:
            if group:
                return "Send /link to me in a private chat: anyone here could use the code."
            code = await people.new_code(cmd.platform, cmd.user)
            minutes = round(people.code_ttl / 60)
            return f"Your link code: {code}\nSend /link {code} from your other account within {minutes} minutes."
        try:
            linked = await people.redeem(cmd.args, cmd.platform, cmd.user)
        except LinkError as e:
            log.info("command /link in %s: %s", cmd.conversation, e)
            return f"Not linked: {e}"
        log.info("command /link: %s:%s joined person %s", cmd.platform, cmd.user, linked.person)
        return f"Linked: {', '.join(linked.identities)} are one person to me now."

    async def _unlink(self, cmd: CommandContext) -> str:
        if cmd.user is None or cmd.platform is None:
            return "/unlink needs a user."
        fresh = await People(self.deps.memory).unlink(cmd.platform, cmd.user)
        if fresh is None:
            return "This account is not linked to another."
        log.info("command /unlink: %s:%s is person %s now", cmd.platform, cmd.user, fresh)
        return "Unlinked: this account is on its own now."

    async def _stop_runs(self, cmd: CommandContext, *, user: str | None = None) -> list[str]:
        if self.stopper is None:
            return []
        # not the runs of commands (this one's, or a /help sent with it): they have nothing to stop
        return await self.stopper.stop_conversation(
            cmd.conversation, STOPPED_BY_USER, wait=STOP_WAIT, exclude=frozenset(self._answering), user=user
        )
