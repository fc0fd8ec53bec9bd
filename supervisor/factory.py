"""Assemble a Supervisor for the console, the demo and `corral run`: the
drafter, the pane backend (tmux on a private socket, or pty), the pane
manager and the agent engines; and the console's discussions.

Part of the public surface: this is how a client gets the facade, so the
console and the command line may import it (see `interface`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .agents.settings import load_agent_settings
from .api import Supervisor
from .config import SupervisorConfig, load_config
from .contracts.drafting import ContractDrafter, DrafterOnFirstUse
from .engines.registry import AgentEngines
from .errors import CorralError
from .hosts.configured import Hosts
from .llm.base import ModelProvider
from .llm.catalog import load_catalog
from .llm.chain import make_chain
from .panes.base import PaneBackend
from .panes.manager import PaneManager
from .panes.stop_mark import agents_dir

if TYPE_CHECKING:
    from .discuss import Discussions


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
    provider: ModelProvider | None = None,
    hosts: Hosts | None = None,
) -> Supervisor:
    """The supervisor a client owns a state dir with: agents in panes on
    `backend`, and the built-in engine on `provider` (by default the chain
    of the configured models)."""
    config = config or load_config()
    if provider is None:
        provider = make_chain(load_catalog())
    env_dir = os.environ.get("CORRAL_TMUX_SOCKET_DIR", "").strip()
    if socket_dir is None and env_dir:
        socket_dir = Path(env_dir)
    panes = PaneManager(make_backend(backend, socket_dir=socket_dir), agents_dir(state_dir))
    engines = AgentEngines(
        panes,
        session_dir=lambda sid: agents_dir(state_dir) / sid,
        default=default_engine,
        demo_pace=demo_pace,
        provider=provider,
        agent_settings=load_agent_settings(),
        idle_quiet_secs=config.idle_quiet_secs,
        acp_start_timeout=config.acp_start_timeout_secs,
        state_dir=state_dir,
        shell_network=config.sandbox.shell_network,
    )
    return Supervisor(
        state_dir, drafter=drafter, engines=engines, config=config, panes=panes, hosts=hosts
    )


def default_drafter(config: SupervisorConfig | None = None) -> ContractDrafter:
    """A model drafter when a model is configured, else the conventions lane;
    built at the first draft. The models' configuration is read now: a
    broken one is refused at start, not at the first contract."""
    config = config or load_config()
    catalog = load_catalog()
    timeout = config.max_check_timeout_secs

    def build() -> ContractDrafter:
        from .contracts.model_drafter import build_drafter

        return build_drafter(catalog, max_timeout_secs=timeout)

    return DrafterOnFirstUse(build)


def make_discussions(state_dir: Path) -> tuple[Discussions, str | None]:
    """Discussions share the supervisor's state dir and the configured model.
    A broken model configuration leaves them without a model; the second
    value says why (None when the configuration is fine)."""
    from .discuss import Discussions

    try:
        provider = make_chain(load_catalog())
    except CorralError as exc:
        return Discussions(state_dir, None), str(exc)
    return Discussions(state_dir, provider), None


@dataclass(frozen=True)
class DemoSite:
    """Where `corral demo` runs: a generated repository, with its own state
    dir and tmux sockets beside it (the operator's own are never touched)."""

    repo: Path
    state_dir: Path
    socket_dir: Path


def make_demo_site(workdir: Path) -> DemoSite:
    from .demo import make_demo_repo

    return DemoSite(make_demo_repo(workdir), workdir / "state", workdir / "tmux")


def build_demo_supervisor(
    site: DemoSite, *, backend: str = "tmux", pace: float = 1.0
) -> Supervisor:
    """The demo drafter, and the scripted demo agent as the default engine."""
    from .demo import DemoDrafter

    return build_supervisor(
        site.state_dir,
        DemoDrafter(),
        backend=backend,
        socket_dir=site.socket_dir,
        default_engine="external:demo",
        demo_pace=pace,
    )


def stop_demo_site(site: DemoSite) -> int:
    """Stop every agent a demo started and its private tmux server (the demo
    cleans up after itself on any exit). Returns how many agent panes were
    stopped. Never touches any other tmux server: only the sockets in the
    demo's own socket dir."""
    import contextlib

    from .panes.base import PaneError

    if shutil.which("tmux") is None or not site.socket_dir.is_dir():
        return 0
    from .panes.tmux import TmuxBackend

    stopped = 0
    for sock in sorted(site.socket_dir.iterdir()):
        try:
            backend = TmuxBackend(socket_name=sock.name, socket_dir=site.socket_dir)
            infos = backend.sweep()
        except PaneError:
            continue
        for info in infos.values():
            with contextlib.suppress(PaneError):
                backend.kill(info.handle, 3.0)
                stopped += info.alive
        backend.kill_server()
    return stopped
