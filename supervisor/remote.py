"""How a process that does not own a state dir reaches the one that does,
and how an owner serves: the public face of `control/` for the console and
the command line (which may import only the supervisor's public modules).

The protocol is in `control/protocol.py` (and the README): JSON-RPC 2.0 over
`<state dir>/control.sock`, one JSON object per line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .control import protocol as params
    from .control.attached import AttachedSupervisor
    from .control.callers import Caller
    from .control.client import (
        AsyncControlClient,
        ControlClient,
        NoOwner,
        OwnerGone,
        OwnerStalled,
        owner_running,
    )
    from .control.discussions import (
        AttachedDiscussions,
        DiscussionHandle,
        DiscussionsSurface,
        OwnedDiscussions,
    )
    from .control.handles import AssistantTools, CallerPolicy, RunBounds
    from .control.owner import OwnerServices
    from .control.protocol import (
        MAX_MESSAGE_BYTES,
        PROTOCOL,
        ControlError,
        socket_path,
    )
    from .control.surface import Calls, OwnerSurface

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PROTOCOL",
    "AssistantTools",
    "AsyncControlClient",
    "AttachedDiscussions",
    "AttachedSupervisor",
    "CallerPolicy",
    "Calls",
    "ControlClient",
    "ControlError",
    "DiscussionHandle",
    "DiscussionsSurface",
    "NoOwner",
    "OwnedDiscussions",
    "OwnerGone",
    "OwnerServices",
    "OwnerStalled",
    "OwnerSurface",
    "RunBounds",
    "bridge_tools",
    "mcp_endpoint",
    "owner_running",
    "params",
    "serve_mcp_stdio",
    "socket_path",
]

_ON_FIRST_USE = {  # name → the control module that defines it
    "AttachedSupervisor": "attached",
    "Caller": "callers",
    "AsyncControlClient": "client",
    "ControlClient": "client",
    "NoOwner": "client",
    "OwnerGone": "client",
    "OwnerStalled": "client",
    "owner_running": "client",
    # a console's discussions, the owner's whichever process owns
    "AttachedDiscussions": "discussions",
    "DiscussionHandle": "discussions",
    "DiscussionsSurface": "discussions",
    "OwnedDiscussions": "discussions",
    "AssistantTools": "handles",
    "CallerPolicy": "handles",
    "RunBounds": "handles",
    "OwnerServices": "owner",
    "MAX_MESSAGE_BYTES": "protocol",
    "PROTOCOL": "protocol",
    "ControlError": "protocol",
    "socket_path": "protocol",
    "OwnerSurface": "surface",
    "Calls": "surface",  # every method's record: a client calls by it
}


def __getattr__(name: str) -> Any:
    """Each name loads its module when a caller first asks: an owner serves
    without the clients' modules (the attached console's, the socket
    client's), and a client runs without the server's."""
    from importlib import import_module

    if name == "params":  # the records' params models: `params.ApproveParams(...)`
        value: Any = import_module(".control.protocol", __package__)
        globals()[name] = value
        return value
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".control.{module}", __package__), name)
    globals()[name] = value
    return value


def mcp_endpoint(state_dir: Path) -> tuple[str, str] | None:
    """The owner's MCP URL and bearer token, or None when it serves none."""
    from .control.mcp import read_mcp_endpoint

    return read_mcp_endpoint(state_dir)


async def serve_mcp_stdio(tools: AssistantTools, caller: Caller | None = None) -> None:
    """The MCP tools on stdin/stdout over `tools`: the owner's handle table
    (`OwnerServices.handles`, served as `caller`) or `bridge_tools(client)`
    (the owner classifies the bridge's connection)."""
    from .control.mcp import run_stdio

    await run_stdio(tools, caller)


def bridge_tools(client: AsyncControlClient) -> AssistantTools:
    """Tools that forward each call to the owner over the control socket."""
    from .control.mcp import BridgeTools

    return BridgeTools(client)
