"""Which engine runs a session: `auto`, `external:<agent>` (or just the
agent's name), `custom:<command line>`, `oneshot:<command line>` or a
one-shot preset (`claude-p`, …; see `agents.oneshot`), `acp:<command line>`
or an ACP preset (`gemini-acp`, `claude-acp`, `codex-acp`; see `acp.agents`),
`demo`, or `native` (the built-in model loop).

`auto` prefers an installed agent CLI in the operator's preference order; the
demo console sets the demo agent as its default. An explicitly named agent
that is not installed is refused at start with a sentence that says so.

Each engine's module loads when a session of its kind is first created
(`create`): an owner with no session running loads none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..acp.agents import acp_agent, is_acp
from ..acp.agents import preset_forms as acp_preset_forms
from ..agents.base import AgentProfile, AgentUnavailable
from ..agents.oneshot import is_oneshot, oneshot_profile, preset_forms
from ..agents.profiles import preference, profile_for
from ..agents.settings import AgentSettings, with_settings
from ..errors import CorralError
from ..llm.base import ModelProvider
from ..llm.chain import ModelChain
from ..panes.manager import PaneManager
from .base import Engine
from .pins import Pin, resolve_pin

if TYPE_CHECKING:
    from .external import ExternalEngine

NO_AGENT = (
    "no agent CLI is installed ({names}): install one (e.g. npm i -g "
    "@anthropic-ai/claude-code), pick external:demo for the demo agent, or configure a model "
    "for the built-in engine (see `corral doctor`)"
)


# Engines given as a command line: (prefix, what to call it, an example line)
COMMAND_ENGINES: tuple[tuple[str, str, str], ...] = (
    ("custom:", "custom command…", "an interactive agent, e.g. my-agent --model x"),
    ("oneshot:", "one-shot command…", "e.g. my-tool --task {prompt}  ({prompt_file}; else stdin)"),
    ("acp:", "ACP agent command…", "an agent speaking ACP on stdio, e.g. my-agent --acp"),
)


class AgentEngines:
    def __init__(
        self,
        panes: PaneManager | None,
        *,
        session_dir: Callable[[str], Path],
        default: str | None = None,
        preference: tuple[str, ...] | None = None,
        demo_pace: float = 1.0,
        transient_retries: int = 1,
        python: str = sys.executable,
        provider: ModelProvider | None = None,
        agent_settings: Mapping[str, AgentSettings] | None = None,
        idle_quiet_secs: float | None = None,
        acp_start_timeout: float = 60.0,
        shell_network: bool = False,
        state_dir: Path | None = None,
    ) -> None:
        self.panes = panes
        self.session_dir = session_dir
        self.default = default
        self._preference = preference
        self.demo_pace = demo_pace
        self.transient_retries = transient_retries
        self.python = python
        self.provider = provider
        self.agent_settings = dict(agent_settings or {})
        self.idle_quiet_secs = idle_quiet_secs
        self.acp_start_timeout = acp_start_timeout
        self.shell_network = shell_network
        self.state_dir = state_dir

    @property
    def preference(self) -> tuple[str, ...]:
        """The order `auto` tries agent CLIs in: the one given, else every
        registered agent's (`agents/profiles.py`), as it is now."""
        return self._preference if self._preference is not None else preference()

    def resolve(self, requested: str) -> tuple[str, str]:
        requested = (requested or "auto").strip()
        if requested == "auto":
            if self.default:
                return self.default, f"auto → {self.default} (this console's default)"
            for name in self.preference:
                if profile_for(name).find():
                    return f"external:{name}", f"auto → {name} (first installed in preference)"
            if self.provider is not None:
                return "native", f"auto → built-in engine ({self.provider.model}; no agent CLI)"
            raise CorralError(NO_AGENT.format(names=", ".join(self.preference)))
        if requested.startswith("foreman:"):
            return self._resolve_foreman(requested)
        if requested == "native":
            if self.provider is None:
                raise CorralError(
                    "the built-in engine needs a model: set CORRAL_LLM_PROVIDER (openai, "
                    "anthropic, cli:claude) or [llm] in ~/.config/corral/config.toml — see "
                    "`corral doctor`; or choose an agent with external:<agent>"
                )
            return "native", f"native → built-in engine ({self.provider.model})"
        if is_oneshot(requested):
            return self._resolve_oneshot(requested)
        if is_acp(requested):
            return self._resolve_acp(requested)
        name = requested.removeprefix("external:")
        if name.startswith("custom:") and not name.removeprefix("custom:").strip():
            raise CorralError("the custom command is empty: type the command line of your agent")
        try:
            profile = profile_for(name, demo_pace=self.demo_pace)
        except AgentUnavailable as exc:
            raise CorralError(str(exc)) from None
        if profile.find() is None:
            raise CorralError(
                f"{profile.label} is not installed here (engine {requested!r} was asked for "
                "explicitly, so corral will not substitute another); install it or choose "
                "another engine"
            )
        if self.panes is None:
            raise CorralError(
                "agent panes are not available: install tmux 3.2+ or use --backend pty"
            )
        return f"external:{name}", f"{requested} → {profile.label}"

    def _resolve_foreman(self, requested: str) -> tuple[str, str]:
        """`foreman:<agent>`: the task split among several `<agent>` runs."""
        agent = requested.removeprefix("foreman:").strip()
        if not agent or agent == "auto" or agent.startswith("foreman:"):
            raise CorralError(
                "the foreman needs the agent its subtasks run: foreman:claude, foreman:codex, "
                "foreman:demo, foreman:native or foreman:custom:<command line>"
            )
        inner, why = self.resolve(agent)
        return f"foreman:{inner}", f"{requested} → subtasks in parallel, each run by {why}"

    def _resolve_oneshot(self, requested: str) -> tuple[str, str]:
        spec = requested.removeprefix("external:")
        try:
            profile = oneshot_profile(spec)
            program = profile.words()[0]
        except AgentUnavailable as exc:
            raise CorralError(str(exc)) from None
        if profile.find() is None:
            raise CorralError(
                f"{program!r} is not installed here (not found on PATH, or not an executable "
                f"file), so the one-shot agent {profile.command!r} cannot run"
            )
        if self.panes is None:
            raise CorralError(
                "agent panes are not available: install tmux 3.2+ or use --backend pty"
            )
        return spec, f"{requested} → {profile.label}"

    def _resolve_acp(self, requested: str) -> tuple[str, str]:
        try:
            agent = acp_agent(requested)
        except AgentUnavailable as exc:
            raise CorralError(str(exc)) from None
        if agent.find() is None:
            raise CorralError(
                f"{agent.program!r} is not installed here (not found on PATH), so the ACP "
                f'agent {agent.label} cannot run; see README "Agents over ACP" for its adapter'
            )
        return agent.name, f"{requested} → {agent.label} over ACP"

    def pin(self, model: str | None, engine: str) -> Pin | None:
        """The session's pinned model checked against its resolved engine."""
        chain = self.provider if isinstance(self.provider, ModelChain) else None
        return resolve_pin(model, engine, chain)

    def models(self) -> list[tuple[str, bool]]:
        """(name, can call tools) of each configured model, in default order."""
        if not isinstance(self.provider, ModelChain):
            return []
        return [(e.name, e.tools) for e in self.provider.entries]

    def available(self) -> list[tuple[str, str]]:
        """(engine, description) the new-session form offers: auto, then each
        installed agent. Only what can run here is listed."""
        choices = [("auto", "auto — " + (self.default or "the first installed agent"))]
        if self.provider is not None:
            choices.append(("native", f"built-in engine ({self.provider.model})"))
        for name in (*self.preference, "demo"):
            profile = profile_for(name, demo_pace=self.demo_pace)
            if profile.find():
                choices.append((f"external:{name}", profile.label))
        for name in preset_forms():
            preset = oneshot_profile(name)
            if preset.find():
                choices.append((name, preset.label))
        for name in acp_preset_forms():
            agent = acp_agent(name)
            if agent.find():
                choices.append((name, agent.label))
        return choices

    def native(self) -> Engine | None:
        """The built-in engine, when a model is configured (fallback target)."""
        if self.provider is None:
            return None
        from .native import NativeEngine

        return NativeEngine(self.provider)

    def create(self, label: str) -> Engine:
        if label.startswith("foreman:"):
            raise CorralError("a foreman session's engine is built by the foreman service")
        if label == "native":
            engine = self.native()
            if engine is None:
                raise CorralError("the built-in engine needs a model (see `corral doctor`)")
            return engine
        name = label.removeprefix("external:")
        if is_acp(name):
            return self._acp(name)
        if self.panes is None:
            raise CorralError("agent panes are not available")
        if is_oneshot(name):
            oneshot = oneshot_profile(name)
            own = self.agent_settings.get(oneshot.settings_key)
            if own is not None and own.env_allow:
                oneshot = replace(oneshot, env_allow=(*oneshot.env_allow, *own.env_allow))
            if own is not None and own.network_allow:
                oneshot = replace(oneshot, network_allow=own.network_allow)
            from .oneshot import OneShotEngine

            return OneShotEngine(self._external(oneshot), label)
        return self._external(
            with_settings(
                profile_for(name, demo_pace=self.demo_pace),
                self.agent_settings,
                quiet_secs=self.idle_quiet_secs,
            )
        )

    def _acp(self, name: str) -> Engine:
        from .acp import AcpEngine

        agent = acp_agent(name)
        own = self.agent_settings.get(agent.base.name)
        if own is not None:
            agent = replace(agent, base=with_settings(agent.base, self.agent_settings))
        state_dir = self.state_dir
        if state_dir is None:
            if self.panes is None:
                raise CorralError("an ACP agent needs corral's state dir")
            state_dir = self.panes.hooks_root.parent
        return AcpEngine(
            agent,
            session_dir=self.session_dir,
            state_dir=state_dir,
            python=self.python,
            start_timeout=self.acp_start_timeout,
            shell_network=self.shell_network,
        )

    def _external(self, profile: AgentProfile) -> ExternalEngine:
        from .external import ExternalEngine

        assert self.panes is not None
        return ExternalEngine(
            profile,
            self.panes,
            session_dir=self.session_dir,
            transient_retries=self.transient_retries,
            python=self.python,
        )
