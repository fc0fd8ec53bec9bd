"""What an owner serves beside its own work: the control socket, the run
handles of MCP callers, and MCP over HTTP. The console, `corral serve`,
`corral mcp` and `corral run` (when nothing else owns the state dir) all
start the same services, so every client finds the same owner."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorralError
from ..paths import AGENT_SOCKET_ENV
from . import rules
from .callers import Agent, Caller
from .handles import CallerPolicy, HandleTable, RunBounds, chain_links
from .server import ControlServer

if TYPE_CHECKING:
    from ..api import Supervisor
    from ..discuss import Discussions
    from .mcp import McpHttp

log = logging.getLogger("corral.supervisor.control")


class OwnerServices:
    """Start after `Supervisor.open()`, close before `Supervisor.close()`."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        discussions: Discussions | Callable[[], Discussions] | None = None,
        mcp_http: bool | None = None,
        clock: Callable[[], float] = time.time,
        bounds: RunBounds | None = None,
        policy: CallerPolicy | None = None,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        settings = supervisor.mcp_settings()
        self.supervisor = supervisor
        self.handles = HandleTable(
            supervisor,
            policy=policy
            or CallerPolicy(
                callers_may_confirm=settings.callers_may_confirm,
                agents_may_start=settings.agents_may_start,
            ),
            bounds=bounds,
            clock=clock,
            run_ids=run_ids,
        )
        self.control = ControlServer(supervisor, discussions=discussions, tools=self.handles)
        self.serve_http = settings.http if mcp_http is None else mcp_http
        self.http: McpHttp | None = None
        self.socket_path: Path | None = None
        self.mcp_url: str | None = None
        self.problems: list[str] = []  # what could not be served, in a sentence each

    async def start(self) -> None:
        """Serve what can be served; a part that cannot start is named in
        `problems` (the owner keeps working without it)."""
        try:
            self.socket_path = await self.control.start()
        except (CorralError, OSError) as exc:
            self.problems.append(f"the control socket is not served: {exc}")
            log.warning("control: %s", exc)
        self.handles.start_reaper()
        if self.serve_http:
            try:
                from .mcp import McpHttp  # the SDK itself loads at the first call

                self.http = McpHttp(
                    self.handles, self.supervisor.state_dir, self.control.classifier
                )
                self.mcp_url = await self.http.start()
            except (CorralError, OSError, ImportError) as exc:
                self.http = None
                self.problems.append(f"MCP over HTTP is not served: {exc}")
                log.warning("mcp: %s", exc)

    def caller_of(self, pid: int) -> Caller:
        """Who process `pid` (this one, or the one that started it) is, when
        this process is itself the owner: classified like any peer, against
        the panes it took over. A corral agent named in this process's own
        environment makes it an agent too (an agent can drop the variables,
        never become the operator by keeping them)."""
        session = os.environ.get("CORRAL_SESSION_ID", "").strip() or None
        chain = chain_links(os.environ.get("CORRAL_INVOKED_BY"))
        if session or os.environ.get(AGENT_SOCKET_ENV) or "corral" in chain:
            return Agent(session, pid, "its environment names a corral agent")
        return self.control.classify(pid)

    def start_refusal(self, caller: Caller) -> str | None:
        """Why `caller` may not start a session here (None: it may): the
        operator's `[mcp] agents_may_start`, decided in `rules.py`."""
        return rules.start_refusal(caller, self.handles.policy.agents_may_start)

    def passes_gates(self, caller: Caller) -> bool:
        """Whether `caller` may pass a person's gate itself (`rules.py`)."""
        return rules.passes_gates(caller)

    def parent_caller(self) -> Caller:
        """Who started this process (`corral mcp` on stdio, as the owner)."""
        return self.caller_of(os.getppid())

    async def close(self) -> None:
        await self.handles.close()
        if self.http is not None:
            await self.http.close()
        await self.control.close()
