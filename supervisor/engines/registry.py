"""Which engine runs a session: `auto`, `external:<agent>` (or just the
agent's name), `custom:<command line>`, `demo`, or `native` (the built-in
model loop, a later issue).

`auto` prefers an installed agent CLI in the operator's preference order; the
demo console sets the demo agent as its default. An explicitly named agent
that is not installed is refused at start with a sentence that says so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from ..agents.base import AgentUnavailable
from ..agents.profiles import PREFERENCE, profile_for
from ..agents.settings import AgentSettings, with_settings
from ..errors import CorralError
from ..llm.base import ModelProvider
from ..panes.manager import PaneManager
from .base import Engine
from .external import ExternalEngine

NO_AGENT = (
    "no agent CLI is installed ({names}): install one (e.g. npm i -g "
    "@anthropic-ai/claude-code), pick external:demo for the demo agent, or configure a model "
    "for the built-in engine (see `corral doctor`)"
)


class AgentEngines:
    def __init__(
        self,
        panes: PaneManager | None,
        *,
        session_dir: Callable[[str], Path],
        default: str | None = None,
        preference: tuple[str, ...] = PREFERENCE,
        demo_pace: float = 1.0,
        transient_retries: int = 1,
        python: str = sys.executable,
        provider: ModelProvider | None = None,
        agent_settings: Mapping[str, AgentSettings] | None = None,
        idle_quiet_secs: float | None = None,
    ) -> None:
        self.panes = panes
        self.session_dir = session_dir
        self.default = default
        self.preference = preference
        self.demo_pace = demo_pace
        self.transient_retries = transient_retries
        self.python = python
        self.provider = provider
        self.agent_settings = dict(agent_settings or {})
        self.idle_quiet_secs = idle_quiet_secs

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
        if requested == "native":
            if self.provider is None:
                raise CorralError(
                    "the built-in engine needs a model: set CORRAL_LLM_PROVIDER (openai, "
                    "anthropic, cli:claude) or [llm] in ~/.config/corral/config.toml — see "
                    "`corral doctor`; or choose an agent with external:<agent>"
                )
            return "native", f"native → built-in engine ({self.provider.model})"
        name = requested.removeprefix("external:")
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
        return choices

    def native(self) -> Engine | None:
        """The built-in engine, when a model is configured (fallback target)."""
        if self.provider is None:
            return None
        from .native import NativeEngine

        return NativeEngine(self.provider)

    def create(self, label: str) -> Engine:
        if label == "native":
            engine = self.native()
            if engine is None:
                raise CorralError("the built-in engine needs a model (see `corral doctor`)")
            return engine
        name = label.removeprefix("external:")
        if self.panes is None:
            raise CorralError("agent panes are not available")
        return ExternalEngine(
            with_settings(
                profile_for(name, demo_pace=self.demo_pace),
                self.agent_settings,
                quiet_secs=self.idle_quiet_secs,
            ),
            self.panes,
            session_dir=self.session_dir,
            transient_retries=self.transient_retries,
            python=self.python,
        )
