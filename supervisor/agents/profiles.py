"""The built-in agent profiles: claude, codex, gemini, aider, opencode,
custom (any command line) and demo (corral's scripted demo agent)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from corral.assets import path as asset_path

from ..status import InlineMenu, Markers, compile_all
from . import agent_env
from .base import AgentProfile, AgentUnavailable, Dialog, LaunchPlan, write_json

DEMO_AGENT = asset_path("demo_agent", "demo_agent.py")

CLAUDE_HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "Notification",
    "Stop",
    "SessionEnd",
)


def _dialog(name: str, detect: str, choose: str) -> Dialog:
    return Dialog(name, re.compile(detect, re.IGNORECASE), re.compile(choose, re.IGNORECASE))


@dataclass(frozen=True)
class ClaudeProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """A generated settings file (`--settings`) adds our hooks for this run
        only; the operator's own settings files are never modified."""
        hooks = {
            event: [{"hooks": [{"type": "command", "command": f"{hook_cmd} {event}"}]}]
            for event in CLAUDE_HOOK_EVENTS
        }
        settings = write_json(session_dir / "claude-settings.json", {"hooks": hooks})
        mode = os.environ.get("CORRAL_CLAUDE_PERMISSION_MODE", "").strip()
        extra = ["--permission-mode", mode] if mode else []
        return LaunchPlan(
            argv=[binary, "--settings", str(settings), *extra, prompt],
            env_allow=self.env_allow,
        )


@dataclass(frozen=True)
class CodexProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """`notify` set for this run only (`-c` override; config.toml untouched).
        Codex passes the payload as the program's last argument. The key
        variables its config names for its providers pass the scrub."""
        notify = [*shlex.split(hook_cmd), "--argv-payload", "agent-turn-complete"]
        value = "[" + ", ".join('"' + p.replace('"', '\\"') + '"' for p in notify) + "]"
        return LaunchPlan(
            argv=[binary, "--no-daemon", "-c", f"notify={value}", prompt],
            env_allow=(*self.env_allow, *agent_env.codex_provider_env()),
        )


OPENCODE_PLUGIN = asset_path("opencode", "corral_hooks.js")


@dataclass(frozen=True)
class OpenCodeProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """The task goes in `--prompt` (submitted as soon as the TUI is up).
        corral's plugin is added for this run only, through
        OPENCODE_CONFIG_CONTENT (merged over the operator's config files, which
        stay untouched); it runs CORRAL_HOOK_CMD on each turn edge. The key
        variables its config names (`{env:NAME}`) pass the scrub."""
        env = {"CORRAL_HOOK_CMD": hook_cmd}
        content = opencode_config_content(os.environ.get("OPENCODE_CONFIG_CONTENT"))
        if content is not None:
            env["OPENCODE_CONFIG_CONTENT"] = content
        return LaunchPlan(
            argv=[binary, "--prompt", prompt],
            env_extra=env,
            env_allow=(*self.env_allow, *agent_env.opencode_config_env()),
        )


def opencode_config_content(current: str | None, plugin: Path = OPENCODE_PLUGIN) -> str | None:
    """OPENCODE_CONFIG_CONTENT with corral's plugin added to the operator's
    own inline config, if any. None (leave it alone, hooks off; the screen
    still tells the status) when theirs is not a JSON object we can extend."""
    data: object = {}
    if current and current.strip():
        try:
            data = json.loads(current)
        except ValueError:
            return None
    if not isinstance(data, dict) or not isinstance(data.get("plugin", []), list):
        return None
    url = plugin.resolve().as_uri()
    plugins = [p for p in data.get("plugin", []) if p != url]
    return json.dumps({**data, "plugin": [*plugins, url]})


@dataclass(frozen=True)
class DemoProfile(AgentProfile):
    pace: float = 1.0

    def find(self, path: str | None = None) -> str | None:
        return str(DEMO_AGENT) if DEMO_AGENT.exists() else None

    def version(self, binary: str) -> str | None:
        return "scripted demo agent (not a model)"

    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        return LaunchPlan(
            argv=[sys.executable, binary, "--pace", str(self.pace), prompt],
            env_extra={"CORRAL_HOOK_CMD": hook_cmd},
            env_allow=self.env_allow,
        )


@dataclass(frozen=True)
class CustomProfile(AgentProfile):
    """Any command line; the task is pasted once it is running."""

    command: str = ""

    def find(self, path: str | None = None) -> str | None:
        import shutil

        argv = shlex.split(self.command)
        return shutil.which(argv[0], path=path) if argv else None

    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        argv = shlex.split(self.command)
        if not argv:
            raise AgentUnavailable("the custom agent has no command line")
        return LaunchPlan(
            argv=[binary, *argv[1:]],
            paste_prompt=prompt,
            env_extra={"CORRAL_HOOK_CMD": hook_cmd},
            env_allow=self.env_allow,
        )


CLAUDE = ClaudeProfile(
    name="claude",
    label="Claude Code",
    binaries=("claude",),
    markers=Markers(
        # the input box `❯` is on screen busy or not: busy is "esc to interrupt"
        busy=compile_all(r"esc to interrupt", r"^\s*[✻✽✶✳✢·*]\s+\w+…"),
        waiting=compile_all(
            r"^\s*do you want to", r"^\s*❯\s*1\.\s+yes", r"auto mode can't check actions"
        ),
        idle=compile_all(r"\? for shortcuts", r"\(shift\+tab to cycle\)", r"← for agents"),
    ),
    dialogs=(
        # the cursor starts on "No, exit": a blind Enter would quit
        _dialog(
            "trust",
            r"(do you trust the files in this folder|is this a project you created or one you trust)",
            r"^yes, i trust this folder|^yes, proceed",
        ),
    ),
    env_allow=agent_env.CLAUDE,
    hooks=True,
)

CODEX = CodexProfile(
    name="codex",
    label="Codex",
    binaries=("codex",),
    markers=Markers(
        busy=compile_all(r"esc to interrupt", r"^\s*[•◦]\s+working"),
        waiting=compile_all(
            r"would you like to run", r"^\s*›\s*1\.\s+yes", r"press enter to confirm"
        ),
        # the composer `› Ask Codex to do anything` shows busy or not
        idle=compile_all(r"\? for shortcuts", r"← for agents"),
    ),
    dialogs=(_dialog("trust", r"trust this folder\?", r"^trust and continue"),),
    env_allow=agent_env.CODEX,
    hooks=True,
)

GEMINI = AgentProfile(
    name="gemini",
    label="Gemini CLI",
    binaries=("gemini",),
    markers=Markers(
        busy=compile_all(r"esc to cancel", r"^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"),
        waiting=compile_all(r"yes, allow once", r"allow execution", r"apply this change\?"),
        idle=compile_all(r"^\s*>\s+type your message", r"^\s*>\s*$"),
    ),
    dialogs=(_dialog("trust", r"do you trust this folder", r"^trust folder"),),
    env_allow=agent_env.GEMINI,
    prompt_in_argv=False,
)

AIDER = AgentProfile(
    name="aider",
    label="Aider",
    binaries=("aider",),
    markers=Markers(
        busy=compile_all(r"^\s*[░█▒]+\s*(waiting|thinking)", r"tokens: .* sent"),
        waiting=compile_all(r"\(y\)es/\(n\)o", r"\[yes\]:\s*$"),
        idle=compile_all(r"^\s*>\s*$", r"^\w*>\s*$"),
    ),
    env_allow=agent_env.AIDER,
    prompt_in_argv=False,
)

# From OpenCode 1.18.33's screens (docs/agent-clis.md): no first-run or trust
# dialog; the footer says `esc interrupt` while a turn runs (`esc again to
# interrupt` after one Esc) and ends in `ctrl+p commands` otherwise; the
# permission prompt is one row of options under `△ Permission required`.
OPENCODE = OpenCodeProfile(
    name="opencode",
    label="OpenCode",
    binaries=("opencode",),
    markers=Markers(
        busy=compile_all(r"\besc (again to )?interrupt\b"),
        waiting=compile_all(
            r"^\W*△\s*(permission required|always allow)\b",
            r"⇆ select\s+enter confirm",
        ),
        # session footer `<cwd>  …  ctrl+p commands` (then `• OpenCode 1.18.33`
        # when the sidebar shows, 200 columns); the home screen's
        # `<cwd>:<branch>  <version>`
        idle=compile_all(r"\bctrl\+p commands\b", r"^\s*/\S*\s{2,}\d+\.\d+\.\d+\s*$"),
        menu=InlineMenu(
            title=re.compile(r"^\W*△\s*(permission required|always allow)\b", re.IGNORECASE),
            row=re.compile(
                r"^\W*(?P<options>allow once\s{2,}allow always\s{2,}reject|confirm\s{2,}cancel)\b",
                re.IGNORECASE,
            ),
        ),
    ),
    env_allow=agent_env.OPENCODE,
    hooks=True,
)

DEMO = DemoProfile(
    name="demo",
    label="demo agent (scripted)",
    binaries=("demo_agent.py",),
    markers=Markers(
        busy=compile_all(r"esc to interrupt"),
        waiting=compile_all(r"^\s*do you want to make this edit"),
        idle=compile_all(r"^\s*>\s*$"),
    ),
    hooks=True,
)

PROFILES: dict[str, AgentProfile] = {
    p.name: p for p in (CLAUDE, CODEX, GEMINI, AIDER, OPENCODE, DEMO)
}
PREFERENCE = ("claude", "codex", "gemini", "opencode", "aider")


def profile_for(name: str, *, demo_pace: float = 1.0) -> AgentProfile:
    """`claude`, `codex`, …, `demo`, or `custom:<command line>`."""
    if name.startswith("custom:"):
        command = name.removeprefix("custom:").strip()
        return CustomProfile(
            name="custom",
            label=f"custom: {command}",
            binaries=(),
            command=command,
            env_allow=agent_env.CUSTOM,
            prompt_in_argv=False,
        )
    profile = PROFILES.get(name)
    if profile is None:
        known = ", ".join([*PROFILES, "custom:<command>"])
        raise AgentUnavailable(f"unknown agent {name!r}; known agents: {known}")
    if isinstance(profile, DemoProfile):
        return replace(profile, pace=demo_pace)
    return profile
