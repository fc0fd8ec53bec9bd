"""`corral mcp`: an MCP server on stdio, for clients that launch one
(`claude mcp add corral -- corral mcp`). With an owner running it bridges
each tool call to it over the control socket; with none it becomes the
owner for as long as it runs (serving the control socket and MCP over HTTP
too), and stops like `corral serve` when its client closes stdin.

stdout carries the protocol: nothing else may print there."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path


def main_mcp(backend: str = "tmux") -> int:
    from corral.supervisor.paths import default_state_dir

    from .serve import _log_to

    state_dir = default_state_dir()
    _log_to(state_dir)
    return asyncio.run(_mcp(state_dir, backend))


async def _mcp(state_dir: Path, backend: str) -> int:
    from corral.supervisor.errors import StateDirError
    from corral.supervisor.remote import (
        AsyncControlClient,
        NoOwner,
        bridge_tools,
        owner_running,
        serve_mcp_stdio,
    )

    for _attempt in range(3):
        if owner_running(state_dir):
            try:
                client = await AsyncControlClient.connect(state_dir)
            except NoOwner:
                continue
            try:
                await serve_mcp_stdio(bridge_tools(client))
            finally:
                await client.close()
            return 0
        try:
            return await _own(state_dir, backend)
        except StateDirError:
            await asyncio.sleep(0.5)  # another corral took it first: bridge to it
    return 2


async def _own(state_dir: Path, backend: str) -> int:
    from corral.supervisor.factory import build_supervisor, default_drafter
    from corral.supervisor.remote import OwnerServices, serve_mcp_stdio

    log = logging.getLogger("corral.mcp")
    sup = build_supervisor(state_dir, default_drafter(), backend=backend)
    await sup.open()
    services = OwnerServices(sup)
    try:
        await services.start()
        log.info("corral mcp owns %s (MCP over HTTP: %s)", state_dir, services.mcp_url)
        await serve_mcp_stdio(services.handles, services.parent_caller())
    finally:
        await services.close()
        await sup.close()
    return 0
