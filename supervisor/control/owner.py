"""What an owner serves beside its own work: the control socket, the run
handles of MCP callers, and MCP over HTTP. The console, `corral serve`,
`corral mcp` and `corral run` (when nothing else owns the state dir) all
start the same services, so every client finds the same owner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorralError
from .handles import CallerPolicy, HandleTable, RunBounds
from .server import ControlServer

if TYPE_CHECKING:
    from ..api import Supervisor
    from ..discuss import Discussions
    from .mcp import McpHttp

log = logging.getLogger("corral.supervisor.control")


def _import_mcp() -> None:
    from importlib import import_module

    for name in ("mcp.server.mcpserver", "mcp_types", "uvicorn", f"{__package__}.mcp"):
        import_module(name)


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
        settings = supervisor.config.mcp
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
                # the SDK and uvicorn take a second to import: not on the caller's loop
                await asyncio.to_thread(_import_mcp)
                from .mcp import McpHttp

                self.http = McpHttp(self.handles, self.supervisor.state_dir)
                self.mcp_url = await self.http.start()
            except (CorralError, OSError, ImportError) as exc:
                self.http = None
                self.problems.append(f"MCP over HTTP is not served: {exc}")
                log.warning("mcp: %s", exc)

    async def close(self) -> None:
        await self.handles.close()
        if self.http is not None:
            await self.http.close()
        await self.control.close()
