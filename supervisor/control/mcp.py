"""The MCP endpoint: tools over the owner's run handles (`handles.py`) —
start, poll and cancel a run, list and read sessions (hidden checks shown only
as held back), and an agent's report that its own task cannot be done as
specified —
served over streamable HTTP on 127.0.0.1 (bearer token) by the owner, and
over stdio by `corral mcp` (a bridge to the owner, or the owner itself).

The tools are registered with the official SDK (`mcp`, imported only here,
so a console that never serves MCP never loads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import json
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorralError, swallowed
from ..paths import ensure_private_dir
from . import rules
from .callers import Agent, Caller, CallerClassifier
from .handles import (
    EVENT_BUFFER_MAX,
    IDLE_TTL_SECS,
    MAX_OPEN_RUNS,
    NOT_AN_AGENT,
    AssistantTools,
    chain_links,
)
from .protocol import (
    LONE_SURROGATE,
    CancelArgs,
    ImpossibleParams,
    NoParams,
    PollArgs,
    SessionParams,
    StartArgs,
    holds_lone_surrogate,
)
from .start_keys import KEY_TTL_SECS
from .surface import Call, Calls

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .client import AsyncControlClient

log = logging.getLogger("corral.supervisor.control")

MCP_INFO = "mcp.json"  # {"url", "port", "pid"}: where the owner serves MCP
MCP_TOKEN = "mcp.token"  # the bearer token, 0600
MCP_PATH = "/mcp"

# the caller of the HTTP request being served, as the owner classified its peer
HTTP_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "corral_mcp_http_caller", default=None
)
UNCLASSIFIED = Agent(None, None, "an HTTP request nobody classified")


def http_caller() -> Caller:
    """The caller of the request being served; one nobody classified is an agent."""
    return HTTP_CALLER.get() or UNCLASSIFIED


GATES = (
    "Gates stay human: the run waits at gate 1 until the operator confirms its contract in "
    "the corral console (unless you give a contract and the operator's config allows MCP "
    "callers to confirm), and approving the verified diff is always the operator's, in the "
    "console: no tool here can approve or deliver."
)

START_DESCRIPTION = (
    "Start a corral coding session and return a run handle at once (never blocks: a run "
    "takes minutes). Poll it with assistant_poll, stop it with assistant_cancel. The session "
    "runs an agent in its own git worktree of `repo`; `contract` (an object with checks, or "
    "the path of a contract JSON file) says what 'done' means, else one is drafted. "
    f"{GATES} At most {MAX_OPEN_RUNS} runs started this way are open at once: the next is "
    "refused, never queued. A handle not polled for "
    f"{int(IDLE_TTL_SECS)} s is cancelled and dropped; it lives in the owner's memory and "
    "does not survive its restart. If you are an agent CLI, set invoked_by to your name "
    "(claude-code, codex, gemini). Send a fresh idempotency_key with each start and the same "
    "one when you retry it: a repeat answers with the first run (`replayed`: true) instead "
    f"of starting a second (keys live {int(KEY_TTL_SECS // 60)} minutes)."
)
POLL_DESCRIPTION = (
    "Events of a run since `since_seq` (pass next_seq from the previous poll; 0 for the "
    "whole buffer) and where it stands. `status` (running | ok | error | cancelled) is the "
    "handle's; `state` is the session's. `needs_you` says what the run waits for: the "
    "contract to confirm, a question and its options, or the diff to approve, each the "
    f"operator's to act on in the console. At most {EVENT_BUFFER_MAX} events are kept; "
    "`events_skipped` counts those trimmed before you read them. `result` (branch, commit) "
    "comes once the run ends. An unknown run_id means the owner restarted or the run was "
    "reaped."
)
IMPOSSIBLE_DESCRIPTION = (
    "For an agent corral runs: report that your task cannot be done as specified (its tests "
    "contradict its intent), with the reason. corral then verifies nothing and sends nothing "
    "back for repair: when you stop, the operator reads your reason and revises the "
    "contract, tells you to go on, or cancels. Do this instead of changing the tests, the "
    "test configuration or special-casing inputs."
)
CANCEL_DESCRIPTION = (
    "Stop a run: its session is cancelled (its worktree kept when it has work in it). "
    "Returns cancelled | already_terminal | unknown; cancelling a finished or unknown run "
    "is a successful no-op."
)


def build_mcp_server(
    tools: AssistantTools, caller: Callable[[], Caller | None] = lambda: None
) -> MCPServer:
    """The five tools over `tools` (the handle table, or a bridge to it);
    `caller` says who calls (None: whoever the bridge's owner finds)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    server: MCPServer = MCPServer(
        "corral",
        instructions="Start, poll and cancel corral coding sessions. " + GATES,
        log_level="WARNING",
    )

    async def answered(
        call: Call[Any, Any], work: Callable[[], Awaitable[Any]], target: str | None = None
    ) -> str:
        """Every tool: its record says who may call it (`rules.admit`, the
        same check the control socket runs), then the answer as JSON; a
        refusal is the tool's error (the owner's sentence, not a traceback)."""
        refusal = rules.admit(call, caller(), target)
        if refusal is not None:
            raise ToolError(refusal.sentence)
        try:
            return json.dumps(await work(), ensure_ascii=False)
        except CorralError as exc:
            raise ToolError(str(exc)) from None

    def tool(
        name: str,
        description: str,
        *,
        writes: bool = True,
        destroys: bool = False,
        repeats: bool = True,
        reaches_out: bool = False,
    ) -> Callable[[Callable[..., Awaitable[str]]], Any]:
        """One tool's registration: what it may do to the world, as the MCP
        annotations say it (`writes` False: read-only; `repeats`: idempotent)."""
        return server.tool(
            name=name,
            description=description,
            annotations=ToolAnnotations(
                read_only_hint=not writes,
                destructive_hint=destroys,
                idempotent_hint=repeats,
                open_world_hint=reaches_out,
            ),
            structured_output=False,
        )

    @tool("assistant_start", START_DESCRIPTION, destroys=True, repeats=False, reaches_out=True)
    async def assistant_start(
        intent: str,
        repo: str,
        contract: dict[str, Any] | str | None = None,
        engine: str = "auto",
        base: str | None = None,
        invoked_by: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        if holds_lone_surrogate(
            [intent, repo, contract, engine, base, invoked_by, idempotency_key]
        ):
            raise ToolError(LONE_SURROGATE)
        args = StartArgs(
            intent=intent,
            repo=repo,
            contract=contract,
            engine=engine,
            base=base,
            invoked_by=invoked_by,
            idempotency_key=idempotency_key,
        )
        return await answered(Calls.assistant_start, lambda: tools.start(args, caller()))

    @tool("assistant_poll", POLL_DESCRIPTION, writes=False)
    async def assistant_poll(run_id: str, since_seq: int = 0) -> str:
        args = PollArgs(run_id=run_id, since_seq=since_seq)
        return await answered(Calls.assistant_poll, lambda: tools.poll(args.run_id, args.since_seq))

    @tool("assistant_cancel", CANCEL_DESCRIPTION)
    async def assistant_cancel(run_id: str) -> str:
        args = CancelArgs(run_id=run_id)
        return await answered(Calls.assistant_cancel, lambda: tools.cancel(args.run_id, caller()))

    @tool(
        "sessions_list",
        "Every corral session on the owner's board (read-only), most recent first.",
        writes=False,
    )
    async def sessions_list() -> str:
        return await answered(Calls.list, tools.sessions_list)

    @tool(
        "session_get",
        "One corral session in full (read-only): its state, contract, checks, "
        "diff summary and what it needs from the operator.",
        writes=False,
    )
    async def session_get(session_id: str) -> str:
        return await answered(Calls.get, lambda: tools.session_get(session_id), session_id)

    @tool("report_impossible", IMPOSSIBLE_DESCRIPTION)
    async def report_impossible(reason: str) -> str:
        me = caller()
        own = me.session_id if isinstance(me, Agent) else None
        return await answered(
            Calls.report_impossible, lambda: tools.report_impossible(reason, me), own
        )

    return server


class BridgeTools:
    """The tools of a `corral mcp` that is not the owner: each call goes to
    the owner over the control socket, and the owner classifies the bridge's
    connection (an agent's bridge is an agent). The bridge's own
    `CORRAL_INVOKED_BY` (the agent that launched it) is put ahead of the
    caller's `invoked_by`, for the record."""

    def __init__(self, client: AsyncControlClient, chain: str | None = None) -> None:
        self.client = client
        self.chain = chain_links(os.environ.get("CORRAL_INVOKED_BY") if chain is None else chain)

    async def start(self, args: StartArgs, caller: Caller | None = None) -> dict[str, Any]:
        invoked = ">".join([*self.chain, *chain_links(args.invoked_by)]) or None
        forwarded = args.model_copy(update={"invoked_by": invoked})
        return await self.client.request(Calls.assistant_start, forwarded)

    async def poll(self, run_id: str, since_seq: int) -> dict[str, Any]:
        return await self.client.request(
            Calls.assistant_poll, PollArgs(run_id=run_id, since_seq=since_seq)
        )

    async def cancel(self, run_id: str, caller: Caller | None = None) -> dict[str, Any]:
        return await self.client.request(Calls.assistant_cancel, CancelArgs(run_id=run_id))

    async def sessions_list(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.client.answer(Calls.list, NoParams())
        return result

    async def session_get(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.answer(
            Calls.get, SessionParams(session_id=session_id)
        )
        return result

    async def report_impossible(self, reason: str, caller: Caller | None = None) -> str:
        """On the session the owner takes this bridge's connection for (its
        agent's own: the owner refuses any other)."""
        hello: dict[str, Any] = await self.client.request(Calls.hello, NoParams())
        session_id = (hello.get("caller") or {}).get("session_id")
        if not session_id:
            raise CorralError(NOT_AN_AGENT)
        answer: str = await self.client.request(
            Calls.report_impossible, ImpossibleParams(session_id=session_id, reason=reason)
        )
        return answer


class _BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`,
    and is served as the caller its TCP peer is (a token read from disk
    proves nothing about who holds it)."""

    def __init__(self, app: Any, token: str, classifier: CallerClassifier | None = None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.classifier = classifier

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps(
                    {
                        "error": "unauthorized: send the bearer token from the owner's "
                        f"{MCP_TOKEN} file in the state dir (Authorization: Bearer <token>)"
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            if self.classifier is not None:
                caller = await asyncio.to_thread(
                    _classify_http, self.classifier, scope.get("server"), scope.get("client")
                )
                token = HTTP_CALLER.set(caller)
                try:
                    await self.app(scope, receive, send)
                finally:
                    HTTP_CALLER.reset(token)
                return
        await self.app(scope, receive, send)


def _classify_http(classifier: CallerClassifier, server: Any, client: Any) -> Caller:
    """The process at the other end of a loopback request (unknown: an agent)."""
    try:
        local = (str(server[0]), int(server[1]))
        remote = (str(client[0]), int(client[1]))
    except (TypeError, IndexError, ValueError):
        return Agent(None, None, "the request's peer is unknown")
    return classifier.classify_tcp_peer(local, remote)


def read_mcp_endpoint(state_dir: Path) -> tuple[str, str] | None:
    """The owner's MCP URL and bearer token, or None when it serves none."""
    try:
        info = json.loads((Path(state_dir) / MCP_INFO).read_text(encoding="utf-8"))
        token = (Path(state_dir) / MCP_TOKEN).read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    return str(info["url"]), token


class McpHttp:
    """MCP over streamable HTTP on 127.0.0.1: a free port written to
    `<state dir>/mcp.json`, a fresh bearer token in `<state dir>/mcp.token`
    (0600). Stateless requests: the run id is the caller's state.

    The port listens from `start`, but the SDK and the HTTP server (about
    30 MB) are loaded only when the first client knocks: its connection waits
    in the listen backlog meanwhile and is then served as any other. An owner
    nobody calls over MCP never pays for them."""

    def __init__(
        self,
        tools: AssistantTools,
        state_dir: Path,
        classifier: CallerClassifier | None = None,
    ) -> None:
        self.tools = tools
        self.classifier = classifier
        self.state_dir = Path(state_dir)
        self.url: str | None = None
        self.token = secrets.token_urlsafe(32)
        self._sock: socket.socket | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def loaded(self) -> bool:
        """Whether the SDK serves the port yet (a client has called)."""
        return self._server is not None

    async def start(self) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        port = sock.getsockname()[1]
        loop = asyncio.get_running_loop()
        loop.add_reader(sock.fileno(), self._knocked)
        self.url = f"http://127.0.0.1:{port}{MCP_PATH}"
        ensure_private_dir(self.state_dir)
        _write_private(self.state_dir / MCP_TOKEN, self.token + "\n")
        _write_private(
            self.state_dir / MCP_INFO,
            json.dumps({"url": self.url, "port": port, "pid": os.getpid()}) + "\n",
        )
        return self.url

    def _knocked(self) -> None:
        """A first connection waits to be accepted: load the server for it."""
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._sock.fileno())
        self._task = loop.create_task(self._serve(self._sock))

    async def _serve(self, sock: socket.socket) -> None:
        try:
            await asyncio.to_thread(_import_sdk)  # a second of imports: off the loop
            import uvicorn

            app = build_mcp_server(self.tools, http_caller).streamable_http_app(
                streamable_http_path=MCP_PATH, stateless_http=True, json_response=True
            )
            config = uvicorn.Config(
                _BearerAuth(app, self.token, self.classifier),
                log_level="warning",
                lifespan="on",
                access_log=False,
            )
            server: Any = uvicorn.Server(config)
            server.install_signal_handlers = lambda: None  # the owner handles signals
            self._server = server
            await server.serve(sockets=[sock])
        except Exception:
            log.exception("mcp: the HTTP endpoint could not be served")
            sock.close()

    async def close(self) -> None:
        for name in (MCP_INFO, MCP_TOKEN):
            with contextlib.suppress(FileNotFoundError):
                (self.state_dir / name).unlink()
        if self._task is None and self._sock is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with swallowed(log, "stopping the MCP HTTP server"):
                await asyncio.wait_for(self._task, 5)


def _import_sdk() -> None:
    from importlib import import_module

    for name in ("mcp.server.mcpserver", "mcp_types", "uvicorn"):
        import_module(name)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)


async def run_stdio(tools: AssistantTools, caller: Caller | None = None) -> None:
    """Serve the tools on stdin/stdout until the client closes them, as
    `caller` (the process that started this one, when this is the owner)."""
    await build_mcp_server(tools, lambda: caller).run_stdio_async()
