"""Which ACP agents corral knows: `acp:<command line>` for any agent that
speaks the protocol on stdio, and presets for the CLIs that do (Gemini CLI
with its ACP flag, Claude Code and Codex through Zed's adapters), each the
`acp` form of its agent's profile (`agents/profiles.py`).

A preset borrows what corral already knows about the agent behind it (the
variables that pass the environment scrub, its own config paths that stay
writable when confined); `acp:` gets what a `custom:` command gets."""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
from dataclasses import dataclass

from ..agents import agent_env
from ..agents.base import AcpForm, AgentProfile, AgentUnavailable
from ..agents.profiles import PROFILES, profile_for

ACP_PREFIX = "acp:"


@dataclass(frozen=True)
class AcpAgent:
    name: str  # the engine label: `gemini-acp`, `acp:<command line>`
    label: str
    program: str  # looked up on PATH (or a path)
    args: tuple[str, ...]
    base: AgentProfile  # its environment, config paths and sandbox choice
    # flags of which the installed program must accept one (the first it accepts wins)
    one_of: tuple[str, ...] = ()
    # whether corral offers it `fs/*` (else it edits with its own tools, in
    # its sandbox, which shows it the worktree alone)
    serve_files: bool = True
    # added to its command line when corral confines it: an agent whose own
    # sandbox cannot nest in bubblewrap is told to rely on corral's
    confined_args: tuple[str, ...] = ()

    def inside_sandbox(self, argv: list[str]) -> list[str]:
        """Its command line inside corral's sandbox (its own speaks for the
        adapter, not for the CLI whose profile it borrows)."""
        return [*argv, *self.confined_args]

    def env_allow(self) -> tuple[str, ...]:
        """The variables that pass the environment scrub: its agent's, and the
        key variables its agent's own config names (Codex's providers)."""
        return (*self.base.env_allow, *self.base.provider_env())

    def find(self) -> str | None:
        return shutil.which(self.program)

    def argv(self, binary: str) -> list[str]:
        flag = [_accepted_flag(binary, self.one_of)] if self.one_of else []
        return [binary, *flag, *self.args]


@functools.lru_cache(maxsize=8)
def _accepted_flag(binary: str, flags: tuple[str, ...]) -> str:
    """The first of `flags` the program's `--help` lists (else the first)."""
    try:
        out = subprocess.run(
            [binary, "--help"], capture_output=True, text=True, timeout=30, check=False
        )
        shown = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired):
        return flags[0]
    return next((f for f in flags if f in shown.split()), flags[0])


def preset_forms() -> dict[str, tuple[AcpForm, AgentProfile]]:
    """The ACP presets, by engine name: each registered agent profile's ACP
    form (`agents/profiles.py`), with the profile it borrows the rest from."""
    return {p.acp.name: (p.acp, p) for p in PROFILES.values() if p.acp is not None}


# Claude Code's own rule, seen on the wire (tests/e2e/test_real_claude_acp.py):
# in plan mode the `haiku` model answers with Sonnet; haiku answers again once
# the mode leaves plan. The adapter still reports haiku as the session's model.
PLAN_MODE_MODEL: dict[str, tuple[str, str, str]] = {
    # preset: (mode, model chosen, the model that answers instead)
    "claude-acp": ("plan", "haiku", "Sonnet"),
}


def mode_model_note(agent: str, mode: str | None, model: str | None) -> str | None:
    """What the operator must know when the agent's mode overrides its chosen
    model (the agent reports the model it was given, not the one it uses)."""
    rule = PLAN_MODE_MODEL.get(agent)
    if rule is None or mode != rule[0] or model != rule[1]:
        return None
    plan, chosen, instead = rule
    return (
        f"{chosen} is the session's model, but in {plan} mode Claude Code answers with "
        f"{instead} instead (its own rule for {chosen}); {chosen} answers again once the mode "
        f"leaves {plan}."
    )


@dataclass(frozen=True)
class AcpPreset:
    """An ACP preset as found here: its program on PATH (None: not
    installed) and the command that installs it."""

    name: str
    label: str
    program: str
    binary: str | None
    install: str


def presets() -> list[AcpPreset]:
    """The ACP presets, each with its program looked up on PATH (nothing is
    run: `corral agents` and `corral doctor` stay instant)."""
    return [
        AcpPreset(name, form.label, form.program, shutil.which(form.program), form.install)
        for name, (form, _profile) in preset_forms().items()
    ]


def is_acp(name: str) -> bool:
    name = name.removeprefix("external:")
    return name.startswith(ACP_PREFIX) or name in preset_forms()


def acp_agent(name: str) -> AcpAgent:
    """The agent for an engine name; raises `AgentUnavailable` with the fix."""
    name = name.removeprefix("external:").strip()
    if name.startswith(ACP_PREFIX):
        command = name.removeprefix(ACP_PREFIX).strip()
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise AgentUnavailable(f"the ACP command {command!r} does not parse: {exc}") from None
        if not words:
            raise AgentUnavailable(
                "the ACP command is empty: give the command line of an agent that speaks ACP "
                "on stdio, e.g. acp:my-agent --acp"
            )
        base = profile_for(f"custom:{command}")
        return AcpAgent(
            name=f"{ACP_PREFIX}{command}",
            label=f"ACP: {command}",
            program=words[0],
            args=tuple(words[1:]),
            base=_with_env(base, agent_env.CUSTOM),
        )
    forms = preset_forms()
    if name not in forms:
        known = ", ".join([*forms, "acp:<command>"])
        raise AgentUnavailable(f"unknown ACP agent {name!r}; known: {known}")
    form, profile = forms[name]
    return AcpAgent(
        name=name,
        label=form.label,
        program=form.program,
        args=(),
        base=profile,
        one_of=form.flags,
        serve_files=form.serve_files,
        confined_args=form.confined_args,
    )


def _with_env(profile: AgentProfile, allow: tuple[str, ...]) -> AgentProfile:
    from dataclasses import replace

    return replace(profile, env_allow=allow)
