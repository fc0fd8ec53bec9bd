"""Which ACP agents corral knows: `acp:<command line>` for any agent that
speaks the protocol on stdio, and presets for the CLIs that do (Gemini CLI
with its ACP flag, Claude Code and Codex through Zed's adapters).

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
from ..agents.base import AgentProfile, AgentUnavailable
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
        """The variables that pass the environment scrub: its agent's, and
        for Codex's adapter the key variables Codex's own config names."""
        if self.name == "codex-acp":
            return (*self.base.env_allow, *agent_env.codex_provider_env())
        return self.base.env_allow

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


PRESETS: dict[str, tuple[str, str, tuple[str, ...], str, bool]] = {
    # name: (label, program, one of these flags, the agent it speaks for, corral serves fs/*)
    # Gemini CLI reads a file before it writes it and takes a client's
    # "not found" error for a failure (0.61 matches the error's message only
    # on an Error object, and a JSON-RPC error reaches it as a plain one), so
    # it could never create a file through corral's fs/*: it writes itself.
    "gemini-acp": ("Gemini CLI (ACP)", "gemini", ("--acp", "--experimental-acp"), "gemini", False),
    "claude-acp": ("Claude Code (ACP adapter)", "claude-code-acp", (), "claude", True),
    "codex-acp": ("Codex (ACP adapter)", "codex-acp", (), "codex", True),
}


# Codex's own command sandbox is bubblewrap too and cannot start inside
# corral's; its adapter takes Codex's settings as `-c key=value`
CONFINED_ARGS: dict[str, tuple[str, ...]] = {
    "codex-acp": ("-c", 'sandbox_mode="danger-full-access"'),
}


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


INSTALL: dict[str, str] = {  # how a preset's program is installed (`corral agents`, README)
    "gemini-acp": "npm i -g @google/gemini-cli",
    "claude-acp": "npm i -g @zed-industries/claude-code-acp",
    "codex-acp": "npm i -g @zed-industries/codex-acp",
}


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
        AcpPreset(name, label, program, shutil.which(program), INSTALL.get(name, ""))
        for name, (label, program, _flags, _speaks_for, _fs) in PRESETS.items()
    ]


def is_acp(name: str) -> bool:
    name = name.removeprefix("external:")
    return name.startswith(ACP_PREFIX) or name in PRESETS


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
    preset = PRESETS.get(name)
    if preset is None:
        known = ", ".join([*PRESETS, "acp:<command>"])
        raise AgentUnavailable(f"unknown ACP agent {name!r}; known: {known}")
    label, program, one_of, speaks_for, serve_files = preset
    return AcpAgent(
        name=name,
        label=label,
        program=program,
        args=(),
        base=PROFILES[speaks_for],
        one_of=one_of,
        serve_files=serve_files,
        confined_args=CONFINED_ARGS.get(name, ()),
    )


def _with_env(profile: AgentProfile, allow: tuple[str, ...]) -> AgentProfile:
    from dataclasses import replace

    return replace(profile, env_allow=allow)
