"""The ACP engine: an agent that speaks the Agent Client Protocol does the
work, driven over its stdio instead of read from a screen.

The agent runs confined like any agent (`sandbox.launch_agent`), in the
session's worktree; corral sends `initialize` and `session/new` (or
`session/load` when the agent can load and the session knows its
conversation: a revive), then each round's prompt (the task, a repair,
waiting guidance and messages) as one `session/prompt`. One turn at a time:
the next prompt is sent only after the previous one returned. The status is
the protocol's: running while a prompt is in flight, waiting while a
`session/request_permission` is pending (a question with the agent's own
options), idle once the prompt returned its `stopReason`, shown as the agent
gave it. A permission answer is reported only once the response was written
to the agent's stdin. Cancel sends `session/cancel`, then stops the agent.

What the agent announces it can switch (modes, models, config options) is
kept on the session (`AgentOffers`) and shown in its conversation; the
operator sets them while it runs (`session/set_mode`, `session/set_model`,
`session/set_config_option`), only to a value the agent offers. A pinned
model (`corral run --model`) is asked for with `session/set_model` once the
session is ready; an agent that does not offer it ends the run with the
models it does offer.

An agent that never answers `initialize`, exits mid-turn or writes lines
that are not JSON-RPC is reported in one sentence with the last lines of its
stderr; the events so far are journaled and the worktree is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from ..acp.agents import AcpAgent, mode_model_note
from ..acp.client import CorralClient, tool_detail
from ..acp.contained import Contained, contained_writes, sandbox_roots
from ..acp.files import WorktreeFiles
from ..acp.loop import Outbox, call_owner, on_acp_loop, on_owner
from ..acp.offers import (
    choose_mode,
    choose_model,
    describe,
    read_models,
    read_modes,
    read_options,
    settings_text,
)
from ..acp.offers import (
    choose_option as choose_setting,
)
from ..acp.terminals import Terminals
from ..acp.wire import StdioWire, quiet_unrecorded_spans
from ..agents.base import SESSION_ENV, AgentUnavailable, check_recursion
from ..agents.provider_home import isolate
from ..errors import CorralError, swallowed
from ..events import (
    BLOCKED_BY_OPERATOR,
    BLOCKED_BY_PROVIDER,
    GUIDANCE_DELIVERED,
    MESSAGE_ACCEPTED,
    AgentStartedData,
    BlockedData,
    ConversationData,
    OperatorGuidanceData,
    PaneAnswerData,
    PlanTextData,
)
from ..governance.env_scrub import scrubbed_env
from ..models import AgentOffers, TokenUse
from ..paths import AGENT_SOCKET_ENV, agent_socket_dir, agent_socket_path, ensure_private_dir
from ..sandbox import active_policy
from ..sandbox.agent import AgentLaunch, launch_agent
from ..sandbox.netproxy import forget_agent, serve_agent
from ..session.messages import message_prompt
from ..session.questions import QuestionCleared
from ..states import LoopFailure
from ..status import AgentStatus, Question, StatusReading, limit_refusal
from .base import EngineOutcome, RunContext
from .external import RESUMED, guidance_prompt, repair_prompt, task_prompt

log = logging.getLogger("corral.supervisor.engines.acp")

PROTOCOL = "protocol"  # the status source shown for ACP agents
STDERR_TAIL_LINES = 20
STOP_GRACE_SECS = 3.0

REFUSAL = "refusal"  # an ACP stopReason


class AgentGone(Exception):
    """The agent's process ended, or its connection broke; the message says how."""


class ModelRefused(Exception):
    """The pinned model is not one the agent offers; the message names those it does."""


MAX_REPORTED = 10**10  # more tokens than this in one report is not a count


def reported_usage(usage: Any) -> TokenUse | None:
    """An ACP prompt answer's `usage` (the session's totals so far, as the
    protocol's fields say: input, output, thoughts, cache reads and writes)
    as tokens; None when absent or implausible. Thoughts are billed as output."""
    if usage is None:
        return None
    counts = [
        getattr(usage, name, None) or 0
        for name in (
            "input_tokens",
            "output_tokens",
            "thought_tokens",
            "cached_write_tokens",
            "cached_read_tokens",
        )
    ]
    if not all(isinstance(c, int) and 0 <= c <= MAX_REPORTED for c in counts):
        return None
    fresh, out, thought, write, read = counts
    return TokenUse(input=fresh, output=out + thought, cache_write=write, cache_read=read)


class _Conversation:
    """One running agent process and its ACP session."""

    def __init__(
        self, proc: asyncio.subprocess.Process, conn: ClientSideConnection, wire: StdioWire
    ) -> None:
        self.proc = proc
        self.conn = conn
        self.wire = wire
        self.session_id = ""
        self.can_load = False
        self.loaded = False  # the conversation was loaded (session/load), not new
        self.offers = AgentOffers()
        # what the wire saw in the raw answers (`models`, which the SDK's schema lacks)
        self.announced: dict[str, Any] = {}
        self.client: CorralClient | None = None
        self.terminals: Terminals | None = None


class AcpEngine:
    """Runs one ACP agent for one session, turn by turn."""

    def __init__(
        self,
        agent: AcpAgent,
        *,
        session_dir: Callable[[str], Path],
        state_dir: Path,
        python: str = sys.executable,
        start_timeout: float = 60.0,
        shell_network: bool = False,
    ) -> None:
        self.agent = agent
        self.session_dir = session_dir
        self.state_dir = state_dir
        self.python = python
        self.start_timeout = start_timeout
        self.shell_network = shell_network
        self.label = agent.name
        self._conv: _Conversation | None = None
        self._ctx: RunContext | None = None
        self._turn = asyncio.Lock()  # one prompt in flight at a time
        self._asking = asyncio.Lock()  # one permission question at a time
        self._answers: dict[
            str, tuple[str, str, str]
        ] = {}  # tool call → (question, answer, option id)
        self._malformed = 0
        self._prompt_sent = asyncio.Event()
        self._inflight: asyncio.Future[Any] | None = None
        # the owner's loop and what this engine tells it (see `acp.loop`)
        self._outbox: Outbox | None = None
        self._owner_emit: Callable[[Any], None] | None = None

    # -- status and events ---------------------------------------------------------------

    def _emit(self, data: Any) -> None:
        if self._ctx is not None:
            self._ctx.emit(data)

    def _status(self, status: AgentStatus, reason: str, question: Question | None = None) -> None:
        if self._ctx is not None:
            self._ctx.note_status(StatusReading(status, reason, question, source=PROTOCOL))

    # -- starting ------------------------------------------------------------------------

    def _stderr_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "acp-stderr.log"

    def _stderr_tail(self, session_id: str) -> str:
        try:
            lines = self._stderr_path(session_id).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        lines = [ln.rstrip() for ln in lines if ln.strip()][-STDERR_TAIL_LINES:]
        return ("; its last output:\n" + "\n".join(lines)) if lines else ""

    def _launch(self, ctx: RunContext) -> AgentLaunch:
        binary = self.agent.find()
        if binary is None:
            raise AgentUnavailable(
                f"{self.agent.label} is not installed ({self.agent.program!r} is not on PATH)"
            )
        base = self.agent.base
        chain = check_recursion(self.agent.name)
        allowed = self.agent.env_allow()
        env = scrubbed_env(allow=allowed, invoked_by=chain)
        env[SESSION_ENV] = ctx.session_id
        env["CORRAL_HOME"] = str(self.state_dir)
        env[AGENT_SOCKET_ENV] = str(agent_socket_path(self.state_dir, ctx.session_id))
        session_dir = self.session_dir(ctx.session_id)
        session_dir.mkdir(parents=True, exist_ok=True)
        dirs, files = base.own_paths(env)
        # its own config home, never the operator's (provider_home)
        home = isolate(base.name, session_dir, env, os.environ)
        if home is not None:
            dirs, files = [home], base.writable_paths(env)
        sockets = ensure_private_dir(agent_socket_dir(self.state_dir, ctx.session_id))
        launch = launch_agent(
            self.agent.argv(binary),
            ctx.worktree,
            env,
            policy=active_policy(),
            choice=base.sandbox,
            own_dirs=dirs,
            own_files=files,
            hooks_file=session_dir / "hooks.jsonl",
            python=self.python,
            agent_socket_dir=sockets,
            inside=self.agent.inside_sandbox,
            env_files=allowed,
            agent=base.name,
            network_allow=base.network_allow,
            network_hosts=base.network_hosts,
        )
        return launch

    async def _start(self, ctx: RunContext) -> _Conversation:
        launch = await asyncio.to_thread(self._launch, ctx)
        argv, env, confined, account = launch.argv, launch.env, launch.confined, launch.account
        if launch.network is not None and launch.proxy_socket is not None:
            # the owner's allow-list proxy (one per process) lives on the owner's loop
            assert self._outbox is not None and self._owner_emit is not None
            await on_owner(
                self._outbox.owner,
                serve_agent(ctx.session_id, launch.network, launch.proxy_socket, self._owner_emit),
            )
        stderr = open(self._stderr_path(ctx.session_id), "ab")  # noqa: SIM115 (the child holds it)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(ctx.worktree),
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                limit=50 * 1024 * 1024,
            )
        finally:
            stderr.close()
        assert proc.stdin is not None and proc.stdout is not None
        announced: dict[str, Any] = {}

        def on_result(method: str, result: Any) -> None:
            if method in ("session/new", "session/load") and isinstance(result, dict):
                announced["models"] = result.get("models")

        quiet_unrecorded_spans()
        wire = StdioWire(
            proc.stdout,
            proc.stdin,
            on_malformed=self._on_malformed,
            on_sent=self._on_sent,
            on_result=on_result,
        )
        files = WorktreeFiles(ctx.worktree)
        terminals = Terminals(files, network=self.shell_network)
        client = CorralClient(
            files,
            terminals,
            self._emit,
            self._permission,
            on_mode=self._on_mode,
            on_options=self._on_options,
            contained=contained_check(proc.pid, ctx.worktree, env.get("HOME"))
            if confined
            else None,
        )
        terminals.on_contained = client.report_contained
        wire.on_chunk = client.chunk
        # the SDK's `Client` protocol also lists unstable methods corral does not
        # serve; the router answers those "method not found"
        conn = ClientSideConnection(cast(Client, client), wire)
        conv = _Conversation(proc, conn, wire)
        conv.client, conv.terminals, conv.announced = client, terminals, announced
        ctx.note_pane(
            {"agent": self.agent.name, "state": "live", "backend": "acp", "pid": proc.pid}
        )
        ctx.emit(
            AgentStartedData(
                agent=self.agent.name,
                pane="acp",
                incarnation=proc.pid,
                started=" ".join(self.agent.argv(self.agent.program)),
                confined=confined,
                sandbox=account,
            )
        )
        try:
            await self._handshake(ctx, conv)
        except BaseException:
            await self._stop(conv)
            raise
        return conv

    async def _until_exit(
        self, conv: _Conversation, step: Any, what: str, timeout: float | None
    ) -> Any:
        """Await `step`, unless the agent exits first or `timeout` passes."""
        task = asyncio.ensure_future(step)
        exited = asyncio.ensure_future(conv.proc.wait())
        try:
            done, _ = await asyncio.wait(
                {task, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            if not exited.done():
                exited.cancel()
        if task in done:
            try:
                return task.result()
            except ConnectionError:
                pass  # the agent closed its stdout: it is going or gone
        else:
            task.cancel()
            if not done:
                raise TimeoutError(what)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(conv.proc.wait(), STOP_GRACE_SECS)
        code = conv.proc.returncode
        how = "closed its output" if code is None else f"exited with status {code}"
        raise AgentGone(f"{how} {what}")

    async def _handshake(self, ctx: RunContext, conv: _Conversation) -> None:
        label = self.agent.label
        try:
            init = await self._until_exit(
                conv,
                conv.conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(
                            read_text_file=self.agent.serve_files,
                            write_text_file=self.agent.serve_files,
                        ),
                        terminal=True,
                    ),
                    client_info=Implementation(name="corral", title="corral", version="1"),
                ),
                "before answering `initialize`",
                self.start_timeout,
            )
        except TimeoutError:
            raise AgentGone(
                f"did not answer `initialize` within {self.start_timeout:g}s: it may not speak "
                "ACP on stdio (check its command line, e.g. an --acp flag)"
            ) from None
        caps = init.agent_capabilities
        conv.can_load = bool(caps and caps.load_session)
        resume = ctx.resume_id() if conv.can_load else None
        client = conv.client
        loaded = None
        if resume:
            ctx.emit(PlanTextData(text=f"Loading {label}'s conversation {resume} (session/load)."))
            if client is not None:
                client.replaying = True
            try:
                loaded = await self._until_exit(
                    conv,
                    conv.conn.load_session(
                        cwd=str(ctx.worktree), session_id=resume, mcp_servers=[]
                    ),
                    "while loading its conversation",
                    self.start_timeout,
                )
            except RequestError as exc:  # Gemini CLI: "No previous sessions found"
                # said, then a fresh conversation: the agent gets the task again
                ctx.emit(
                    PlanTextData(
                        text=f"{label} could not load its conversation {resume} "
                        f"({agent_error(exc)}): starting a fresh conversation. The agent "
                        "does not see its earlier turns; its edits in the worktree are kept."
                    )
                )
                resume = None
            finally:
                if client is not None:
                    client.replaying = False
        if resume:
            if client is not None and client.replayed:
                count = f"{client.replayed} update" + ("s" if client.replayed != 1 else "")
                ctx.emit(
                    PlanTextData(
                        text=f"{label} replayed its conversation ({count}); this session's "
                        "log already holds it."
                    )
                )
            conv.session_id, conv.loaded = resume, True
            modes = loaded.modes if loaded else None
            options = loaded.config_options if loaded else None
        else:
            created = await self._until_exit(
                conv,
                conv.conn.new_session(cwd=str(ctx.worktree), mcp_servers=[]),
                "before answering `session/new`",
                self.start_timeout,
            )
            conv.session_id = created.session_id
            modes = created.modes
            options = created.config_options
            ctx.note_agent_session(created.session_id, None)
        if conv.client is not None:
            conv.client.flush()  # what it said while starting
        offers = conv.offers
        read_modes(offers, modes)
        read_models(offers, conv.announced.get("models"))
        read_options(offers, options)
        if not offers.is_empty():  # kept on the session, then told
            ctx.note_offers(offers.model_copy(deep=True))
        for part, text in describe(offers):
            ctx.emit(ConversationData(part=part, text=text))  # type: ignore[arg-type]
        await self._pin_model(ctx, conv)
        self._status(AgentStatus.IDLE, "session ready")

    async def _pin_model(self, ctx: RunContext, conv: _Conversation) -> None:
        """Ask for the session's pinned model, where the agent offers it."""
        wanted = ctx.model_id or ctx.model
        if not wanted:
            return
        try:
            chosen = choose_model(conv.offers, wanted, self.agent.label)
        except CorralError as exc:
            if ctx.model and ctx.model != wanted:  # the configured name, as the operator said it
                try:
                    chosen = choose_model(conv.offers, ctx.model, self.agent.label)
                except CorralError:
                    raise ModelRefused(str(exc)) from None
            else:
                raise ModelRefused(str(exc)) from None
        if chosen != conv.offers.model:
            await self._until_exit(
                conv,
                self._model_request(conv, chosen),
                "while setting its model",
                self.start_timeout,
            )
        conv.offers.model = chosen
        ctx.note_offers(conv.offers.model_copy(deep=True))
        ctx.emit(ConversationData(part="model", text=f"{chosen} (the session's pinned model)"))

    # -- the run ---------------------------------------------------------------------------

    async def run(self, ctx: RunContext) -> EngineOutcome:
        """The round, run on the ACP loop (`acp.loop`): the owner's loop only
        receives what it says, a tick's worth at a time."""
        return await on_acp_loop(self._shipped(self._run(self._off_loop(ctx))))

    async def _shipped(self, step: Any) -> Any:
        """`step`, with everything it told the owner sent before its result."""
        try:
            return await step
        finally:
            if self._outbox is not None:
                self._outbox.ship()

    def _off_loop(self, ctx: RunContext) -> RunContext:
        """`ctx` as the ACP loop uses it: what it tells the owner goes through
        the run's outbox, in order (a status at once); what it asks of the
        owner (a question, the guidance queued for the next prompt) is asked
        on the owner's loop after what waits in the outbox."""
        owner = asyncio.get_running_loop()
        outbox = self._outbox = Outbox(owner, ctx.emit)
        self._owner_emit = ctx.emit

        def told(fn: Callable[..., Any], now: bool = False) -> Callable[..., None]:
            return lambda *args: outbox.post(fn, *args, now=now)

        def asked(fn: Callable[..., Any]) -> Callable[..., Any]:
            def ask(*args: Any) -> Any:
                outbox.ship()
                return call_owner(owner, fn, *args)

            return ask

        async def ask_user(prompt: str, options: list[str]) -> str:
            outbox.ship()

            async def there() -> str:
                return await ctx.ask_user(prompt, options)

            return await on_owner(owner, there())

        return dataclasses.replace(
            ctx,
            emit=outbox.emit,
            ask_user=ask_user,
            take_guidance=asked(ctx.take_guidance),
            take_messages=asked(ctx.take_messages),
            resume_id=asked(ctx.resume_id),
            iteration_started=told(ctx.iteration_started),
            withdraw_question=told(ctx.withdraw_question),
            note_pane=told(ctx.note_pane),
            note_status=told(ctx.note_status, now=True),
            note_offers=told(ctx.note_offers),
            note_agent_session=told(ctx.note_agent_session),
            note_usage=told(ctx.note_usage),
            messages_ended=told(ctx.messages_ended),
        )

    async def _run(self, ctx: RunContext) -> EngineOutcome:
        self._ctx = ctx
        try:
            conv = self._conv
            fresh = conv is None or conv.proc.returncode is not None
            if fresh:
                if conv is not None:
                    await self._stop(conv)
                conv = self._conv = await self._start(ctx)
            assert conv is not None
            if fresh and conv.loaded:
                text = RESUMED
                if ctx.round > 1 and ctx.failing_checks:
                    text += "\n\n" + repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
            elif fresh:
                text = task_prompt(ctx.intent, ctx.contract)
                if ctx.round > 1 and ctx.failing_checks:
                    text += "\n\n" + repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
            else:
                text = repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
            parts = [text]
            while True:
                notes, messages = ctx.take_guidance(), ctx.take_messages()
                if notes:
                    parts.append(guidance_prompt(notes))
                if messages:
                    parts.append(message_prompt(messages))
                if not parts:  # nothing arrived during the turn: the round is over
                    return EngineOutcome(iterations=1, authored_by=[self.agent.name])
                await self._prompt(ctx, conv, "\n\n".join(parts), notes, messages)
                parts = []  # guidance that arrived during the turn is the next turn
        except AgentUnavailable as exc:
            return EngineOutcome(failure=LoopFailure.ENGINE_UNAVAILABLE, error=str(exc))
        except ModelRefused as exc:
            ctx.emit(PlanTextData(text=str(exc)))
            return EngineOutcome(failure=LoopFailure.CONFIGURATION, error=str(exc))
        except AgentGone as exc:
            return self._gone(ctx, str(exc))
        except RequestError as exc:  # the agent answered a request with an error
            reason = agent_error(exc)
            error = (
                f"ACP agent '{self.agent.name}' answered with an error: {reason}"
                f"{self._stderr_tail(ctx.session_id)}"
            )
            if refused_by_provider(exc, reason):  # a quota, a rate limit, a request refused
                ctx.emit(
                    BlockedData(
                        what=f"{self.agent.label}'s prompt",
                        why=reason[:300],
                        by=BLOCKED_BY_PROVIDER,
                    )
                )
            ctx.emit(PlanTextData(text=error))
            return EngineOutcome(
                failure=LoopFailure.EXECUTION, error=error, iterations=1, keep_worktree=True
            )
        except OSError as exc:
            return EngineOutcome(
                failure=LoopFailure.INFRASTRUCTURE,
                error=f"ACP agent '{self.agent.name}' could not start: {exc}",
            )
        except asyncio.CancelledError:
            if not ctx.detaching() and self._conv is not None:
                await asyncio.shield(self._cancel(self._conv))
            raise

    async def _prompt(
        self, ctx: RunContext, conv: _Conversation, text: str, notes: list[str], messages: list[Any]
    ) -> None:
        async with self._turn:
            ctx.emit(ConversationData(part="prompt", text=text))
            self._status(AgentStatus.RUNNING, "prompt in flight")
            if conv.client is not None:
                conv.client.in_turn = True
                conv.client.spoken = 0
                conv.client.turn_began = time.time()
                conv.client.reported.clear()
            try:
                await self._turn_of(ctx, conv, text, notes, messages)
            finally:
                if conv.client is not None:
                    conv.client.in_turn = False
                    conv.client.flush()

    async def _turn_of(
        self, ctx: RunContext, conv: _Conversation, text: str, notes: list[str], messages: list[Any]
    ) -> None:
        """One `session/prompt`, from sending it to its `stopReason`."""
        sending = conv.conn.prompt(session_id=conv.session_id, prompt=[text_block(text)])
        self._prompt_sent.clear()
        reply = asyncio.ensure_future(
            self._until_exit(conv, sending, "during its turn (the prompt got no answer)", None)
        )
        # guidance is delivered once the request was written to the agent's stdin
        sent = asyncio.ensure_future(self._prompt_sent.wait())
        self._inflight = reply  # a cancel waits for the agent to end this turn
        try:
            await asyncio.wait({reply, sent}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sent.cancel()
        if not self._prompt_sent.is_set():
            await reply  # raises how the agent went
        for note in notes:
            ctx.emit(OperatorGuidanceData(text=note, status=GUIDANCE_DELIVERED))
        if messages:
            ctx.messages_ended(messages, MESSAGE_ACCEPTED, None)
        response = await asyncio.shield(reply)
        self._inflight = None
        if conv.client is not None:
            conv.client.flush()
        stop = str(response.stop_reason)
        used = reported_usage(response.usage)
        if used is not None:
            ctx.note_usage(f"acp:{self.agent.name}", used)
        ctx.emit(ConversationData(part="turn_end", text=stop))
        if stop == REFUSAL:  # typed by the protocol: the agent's side refused the turn
            ctx.emit(
                BlockedData(
                    what="its turn",
                    why=f"the agent ended its turn with stopReason: {stop}",
                    by=BLOCKED_BY_PROVIDER,
                )
            )
        elif stop == "end_turn" and conv.client is not None and not conv.client.spoken:
            # Gemini CLI ends a turn whose answer its model blocked (safety,
            # recitation, …) as `end_turn` with nothing said and no reason sent
            ctx.emit(
                BlockedData(
                    what="its turn",
                    why=f"{self.agent.label} ended its turn without a word or a tool call "
                    "(stopReason end_turn): its model's answer was likely blocked (a safety "
                    "or recitation block), and the agent does not send the reason over ACP",
                    by=BLOCKED_BY_PROVIDER,
                )
            )
        self._status(AgentStatus.IDLE, f"turn ended: {stop}")

    def _gone(self, ctx: RunContext, how: str) -> EngineOutcome:
        conv = self._conv
        if conv is not None and conv.client is not None:
            conv.client.flush()  # what it said before it went is kept
        tail = self._stderr_tail(ctx.session_id)
        error = f"ACP agent '{self.agent.name}' {how}{tail}"
        ctx.emit(PlanTextData(text=error))
        self._status(AgentStatus.EXITED, how)
        if conv is not None and conv.can_load and conv.session_id:
            with swallowed(log, "noting the ACP agent's session for a later resume"):
                ctx.note_agent_session(conv.session_id, None)
            if "initialize" not in how:
                return EngineOutcome(dormant=True, error=error, iterations=1)
        return EngineOutcome(
            failure=LoopFailure.EXECUTION, error=error, iterations=1, keep_worktree=True
        )

    # -- permission ------------------------------------------------------------------------

    async def _permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        ctx = self._ctx
        assert ctx is not None
        async with self._asking:
            title = tool_call.title or "a tool call"
            kind = f" ({tool_call.kind})" if tool_call.kind else ""
            detail = tool_detail(tool_call)
            prompt = f"{title}{kind}" + (f"\n{detail}" if detail else "")
            texts = [option_text(o) for o in options]
            self._status(
                AgentStatus.WAITING, f"permission: {title}", Question(prompt, tuple(texts))
            )
            while True:
                try:
                    answer = await ctx.ask_user(prompt, texts)
                except QuestionCleared:  # the run is stopping: the request is cancelled
                    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
                except CorralError as exc:  # no answer in time: the agent is told "cancelled"
                    ctx.emit(BlockedData(what=title, why=str(exc), by=BLOCKED_BY_OPERATOR))
                    self._status(AgentStatus.RUNNING, "prompt in flight")
                    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
                option = choose_option(answer, options)
                if option is not None:
                    break
                ctx.emit(
                    PlanTextData(
                        text=f"{answer!r} is none of the agent's options; answer with one of: "
                        + ", ".join(o.option_id for o in options)
                    )
                )
            self._answers[tool_call.tool_call_id] = (prompt, option_text(option), option.option_id)
            if option.kind.startswith("reject"):
                ctx.emit(
                    BlockedData(
                        what=title,
                        why=f"the operator chose {option.name!r}",
                        by=BLOCKED_BY_OPERATOR,
                    )
                )
            self._status(AgentStatus.RUNNING, "prompt in flight")
            return RequestPermissionResponse(
                outcome=AllowedOutcome(option_id=option.option_id, outcome="selected")
            )

    def _on_sent(self, message: dict[str, Any], request: dict[str, Any] | None) -> None:
        """A message reached the agent's stdin: a prompt went out, or (the
        response to `request`) an answer to a permission landed."""
        if message.get("method") == "session/prompt":
            self._prompt_sent.set()
            return
        if request is None or request.get("method") != "session/request_permission":
            return
        call = (request.get("params") or {}).get("toolCall") or {}
        entry = self._answers.pop(str(call.get("toolCallId")), None)
        if entry is None:
            return
        question, answer, option_id = entry
        self._emit(
            PaneAnswerData(
                question=question,
                answer=answer,
                action=f"sent option {option_id} to the agent (session/request_permission)",
            )
        )

    def _on_malformed(self, line: bytes) -> None:
        self._malformed += 1
        if self._malformed <= 5:
            shown = line[:200].decode("utf-8", errors="replace")
            self._emit(
                PlanTextData(
                    text=f"{self.agent.label} wrote a line that is not JSON-RPC; corral "
                    f"ignored it: {shown!r}"
                )
            )

    def _on_mode(self, mode: str) -> None:
        """The agent switched mode itself (`current_mode_update`)."""
        if self._conv is not None:
            self._conv.offers.mode = mode
            self._note_offers(self._conv)
        self._emit(ConversationData(part="mode", text=mode))
        if self._conv is not None:
            self._say_mode_model(self._conv)

    def _on_options(self, options: list[Any]) -> None:
        """The agent announced its config options again (`config_option_update`)."""
        if self._conv is None:
            return
        read_options(self._conv.offers, options)
        self._note_offers(self._conv)
        self._emit(ConversationData(part="config", text=settings_text(self._conv.offers)))

    def _note_offers(self, conv: _Conversation) -> None:
        if self._ctx is not None:
            self._ctx.note_offers(conv.offers.model_copy(deep=True))

    # -- modes, models, config options -------------------------------------------------------

    def _live(self, what: str) -> _Conversation:
        conv = self._conv
        if conv is None or conv.proc.returncode is not None or not conv.session_id:
            raise CorralError(f"the ACP agent is not running: its {what} cannot be set now")
        return conv

    async def _ask(self, conv: _Conversation, what: str, step: Any) -> Any:
        """A setting request; the agent's refusal is said as it gave it."""
        try:
            return await self._until_exit(conv, step, f"while setting its {what}", 30.0)
        except RequestError as exc:
            raise CorralError(f"{self.agent.label} refused to set its {what}: {exc}") from None
        except (AgentGone, TimeoutError) as exc:
            raise CorralError(f"{self.agent.label} did not set its {what}: {exc}") from None

    async def set_mode(self, mode: str) -> str:
        """Ask the agent to switch to `mode` (`session/set_mode`)."""
        result: str = await on_acp_loop(self._shipped(self._set_mode(mode)))
        return result

    async def _set_mode(self, mode: str) -> str:
        conv = self._live("mode")
        chosen = choose_mode(conv.offers, mode, self.agent.label)
        await self._ask(
            conv, "mode", conv.conn.set_session_mode(session_id=conv.session_id, mode_id=chosen)
        )
        conv.offers.mode = chosen
        self._note_offers(conv)
        self._emit(ConversationData(part="mode", text=f"{chosen} (set by the operator)"))
        self._say_mode_model(conv)
        return chosen

    def _say_mode_model(self, conv: _Conversation) -> None:
        """Say when the agent's mode makes another model answer than the one
        it reports (Claude Code's haiku in plan mode)."""
        note = mode_model_note(self.agent.name, conv.offers.mode, conv.offers.model)
        if note is not None:
            self._emit(PlanTextData(text=note))

    async def set_model(self, model: str) -> str:
        """Ask the agent to switch to `model`, one it offers (`session/set_model`)."""
        result: str = await on_acp_loop(self._shipped(self._set_model(model)))
        return result

    async def _set_model(self, model: str) -> str:
        conv = self._live("model")
        chosen = choose_model(conv.offers, model, self.agent.label)
        await self._ask(conv, "model", self._model_request(conv, chosen))
        conv.offers.model = chosen
        self._note_offers(conv)
        self._emit(ConversationData(part="model", text=f"{chosen} (set by the operator)"))
        self._say_mode_model(conv)
        return chosen

    async def _model_request(self, conv: _Conversation, model: str) -> None:
        """`session/set_model`, or the config option that carries the model."""
        option = conv.offers.model_option
        if option is None:
            params = {"sessionId": conv.session_id, "modelId": model}
            await conv.wire.request("session/set_model", params)
            return
        answer = await conv.conn.set_config_option(
            config_id=option, session_id=conv.session_id, value=model
        )
        read_options(conv.offers, answer.config_options if answer is not None else None)

    async def set_option(self, key: str, value: str) -> str:
        """Set one of the agent's config options to a value it offers
        (`session/set_config_option`); the agent answers with all of them."""
        result: str = await on_acp_loop(self._shipped(self._set_option(key, value)))
        return result

    async def _set_option(self, key: str, value: str) -> str:
        conv = self._live("config option")
        config_id, chosen = choose_setting(conv.offers, key, value, self.agent.label)
        answer = await self._ask(
            conv,
            f"option {config_id!r}",
            conv.conn.set_config_option(
                config_id=config_id, session_id=conv.session_id, value=chosen
            ),
        )
        read_options(conv.offers, answer.config_options if answer is not None else None)
        now = conv.offers.option_values().get(config_id)
        if now is None:  # an answer without the options: the value asked is the value
            now = str(chosen).lower() if isinstance(chosen, bool) else chosen
        self._note_offers(conv)
        self._emit(
            ConversationData(part="config", text=f"{config_id} = {now} (set by the operator)")
        )
        return now

    # -- stopping --------------------------------------------------------------------------

    async def _cancel(self, conv: _Conversation) -> None:
        """`session/cancel` for the turn in flight, then stop the agent."""
        inflight, self._inflight = self._inflight, None
        if conv.session_id and conv.proc.returncode is None and inflight is not None:
            with swallowed(log, "cancelling the ACP agent's turn in flight"):
                await asyncio.wait_for(conv.conn.cancel(session_id=conv.session_id), 1.0)
                self._emit(PlanTextData(text="Sent session/cancel to the agent."))
                response = await asyncio.wait_for(asyncio.shield(inflight), STOP_GRACE_SECS)
                self._emit(ConversationData(part="turn_end", text=str(response.stop_reason)))
        if inflight is not None and not inflight.done():
            inflight.cancel()
        await self._stop(conv)

    async def _stop(self, conv: _Conversation) -> None:
        if self._ctx is not None and self._outbox is not None:
            # its proxy socket ends with it (the proxy lives on the owner's loop)
            self._outbox.post(forget_agent, self._ctx.session_id, now=True)
        inflight, self._inflight = self._inflight, None
        if inflight is not None:  # a turn left behind (corral closing): its end is no news
            inflight.add_done_callback(_retrieved)
        if conv.terminals is not None:
            with swallowed(log, "closing the ACP agent's terminals"):
                await conv.terminals.close()
        with swallowed(log, "closing the ACP connection"):
            await asyncio.wait_for(conv.conn.close(), 1.0)
        proc = conv.proc
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE_SECS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()

    async def aclose(self) -> None:
        """The session's run is over: the agent process ends with it."""
        if self._conv is not None:
            await on_acp_loop(self._shipped(self._aclose()))

    async def _aclose(self) -> None:
        conv, self._conv = self._conv, None
        if conv is not None:
            await self._stop(conv)
            self._status(AgentStatus.EXITED, "the session's run ended")


def _api_error(found: Any) -> tuple[str, Any] | None:
    """A model API's error body (`{"error": {"code", "message", "status"}}`,
    as Gemini CLI passes it on, or as a JSON string of it): its message with
    its code and status, and the code."""
    if isinstance(found, str) and found.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            found = json.loads(found)
    if isinstance(found, dict) and isinstance(found.get("error"), dict):
        found = found["error"]
    if not isinstance(found, dict) or not isinstance(found.get("message"), str):
        return None
    code, status = found.get("code"), found.get("status")
    said = " ".join(str(w) for w in (code, status) if w not in (None, ""))
    return (f"{found['message']} ({said})" if said else found["message"]), code


def _api_of(exc: RequestError) -> tuple[str, Any] | None:
    """The model API's error body an agent's error carries, if any: as its
    message, its data, or its data's `details`."""
    data = exc.data
    api = _api_error(str(exc)) or _api_error(data)
    if api is None and isinstance(data, dict):
        api = _api_error(data.get("details"))
    return api


def agent_error(exc: RequestError) -> str:
    """An agent's error as it gave it, the reason first: its message, the
    details it attached (Gemini CLI says why under a bare "Internal error",
    in `data.details` or as the model API's own error body), never a bare
    "Internal error" when it sent more."""
    message, data = str(exc), exc.data
    api = _api_of(exc)
    if api is not None:
        return api[0][:500]
    if isinstance(data, dict):
        details = data.get("details") or data.get("message")
        if isinstance(details, str) and details:
            return f"{message}: {details}"[:500]
    return (f"{message} ({json.dumps(data, default=str)})" if data else message)[:500]


def refused_by_provider(exc: RequestError, reason: str) -> bool:
    """Whether an agent's error is its model provider refusing the request:
    a rate limit or used-up quota, or an HTTP 4xx status it passed on as the
    error's code (Gemini CLI does) or inside the API's error body."""
    if limit_refusal(exc.code, reason):
        return True
    api = _api_of(exc)
    codes = [exc.code, api[1] if api is not None else None]
    return any(isinstance(c, int) and 400 <= c < 500 for c in codes)


def contained_check(
    pid: int, worktree: Path, home: str | None
) -> Callable[[str, str, float], list[Contained]]:
    """What the client asks after each of the confined agent's own shell
    calls: the writes its sandbox (under process `pid`) kept or refused."""

    def check(command: str, output: str, since: float) -> list[Contained]:
        return contained_writes(
            command, output, worktree=worktree, since=since, roots=sandbox_roots(pid), home=home
        )

    return check


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def option_text(option: PermissionOption) -> str:
    """How an option is offered: its name and its kind (`allow_once`, …)."""
    return f"{option.name} [{option.kind}]"


def choose_option(answer: str, options: list[PermissionOption]) -> PermissionOption | None:
    """The option an answer names: by its id, its text, its name or its kind."""
    said = answer.strip()
    for match in (
        lambda o: o.option_id == said,
        lambda o: option_text(o) == said,
        lambda o: o.name.casefold() == said.casefold(),
        lambda o: o.kind == said,
    ):
        found = [o for o in options if match(o)]
        if found:
            return found[0]
    return None
