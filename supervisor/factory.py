"""Assemble a Supervisor for the console, the demo and `corral run`: the
drafter, the pane backend (tmux on a private socket, or pty), the pane
manager and the agent engines."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .agents.settings import load_agent_settings
from .api import Supervisor
from .config import SupervisorConfig, load_config
from .contracts.drafting import ContractDrafter
from .engines.registry import AgentEngines
from .errors import CorralError
from .llm.config import load_llm_config, make_provider
from .panes.base import PaneBackend
from .panes.manager import PaneManager


def make_backend(kind: str, *, socket_dir: Path | None = None) -> PaneBackend:
    """`tmux` (default; a private server, `-L corral`, or a socket in
    `socket_dir`) or `pty` (no tmux needed; panes end with the process)."""
    if kind == "tmux":
        if shutil.which("tmux") is None:
            raise CorralError("tmux is not installed: install tmux 3.2+, or pass --backend pty")
        from .panes.tmux import TmuxBackend

        return TmuxBackend(socket_dir=socket_dir)
    if kind == "pty":
        from .panes.pty import PtyBackend

        return PtyBackend()
    raise CorralError(f"unknown pane backend {kind!r}; use tmux or pty")


def build_supervisor(
    state_dir: Path,
    drafter: ContractDrafter,
    *,
    backend: str = "tmux",
    socket_dir: Path | None = None,
    default_engine: str | None = None,
    demo_pace: float = 1.0,
    config: SupervisorConfig | None = None,
) -> Supervisor:
    config = config or load_config()
    provider = make_provider(load_llm_config())
    env_dir = os.environ.get("CORRAL_TMUX_SOCKET_DIR", "").strip()
    if socket_dir is None and env_dir:
        socket_dir = Path(env_dir)
    panes = PaneManager(make_backend(backend, socket_dir=socket_dir), state_dir / "agents")
    engines = AgentEngines(
        panes,
        session_dir=lambda sid: state_dir / "agents" / sid,
        default=default_engine,
        demo_pace=demo_pace,
        provider=provider,
        agent_settings=load_agent_settings(),
    )
    return Supervisor(state_dir, drafter=drafter, engines=engines, config=config, panes=panes)


def default_drafter(config: SupervisorConfig | None = None) -> ContractDrafter:
    """A model drafter when a model is configured, else the conventions lane."""
    from .contracts.model_drafter import build_drafter

    config = config or load_config()
    return build_drafter(max_timeout_secs=config.max_check_timeout_secs)
