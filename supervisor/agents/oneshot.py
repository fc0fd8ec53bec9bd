"""One-shot agents: a command that takes the task, does the work and exits.

    oneshot:<command line>

The line is split into words the way a shell would (quotes, backslashes) but
no shell ever runs it. The prompt reaches the command

- as one argument where a word holds `{prompt}` (`aider --message {prompt}`;
  `--message={prompt}` works too: the word stays one argument);
- as a file where a word holds `{prompt_file}` (a private file in the
  session's state dir, never in the worktree);
- on standard input when the line has neither placeholder.

Named presets run the usual CLIs' non-interactive modes: `claude-p`,
`codex-exec`, `gemini-p`, `aider-msg` (offered only where the CLI is
installed), each stated in its agent's profile (`one_shot`). Exit 0 ends the turn and the runtime verifies; any other status
fails the session with that status and the output tail.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import agent_env
from .base import AgentProfile, AgentUnavailable, LaunchPlan, OneShotForm
from .profiles import PROFILES

PREFIX = "oneshot:"
PROMPT = "{prompt}"
PROMPT_FILE = "{prompt_file}"
PROMPT_FILE_NAME = "oneshot-prompt.md"
LAUNCHER = Path(__file__).with_name("oneshot_exec.py")


@dataclass(frozen=True)
class OneShotProfile(AgentProfile):
    """A one-shot command line (see the module docstring)."""

    command: str = ""
    settings_key: str = "custom"  # whose `[agents.<name>]` env_allow applies

    def words(self) -> list[str]:
        try:
            words = shlex.split(self.command)
        except ValueError as exc:
            raise AgentUnavailable(f"cannot read the one-shot command line: {exc}") from None
        if not words:
            raise AgentUnavailable("the one-shot agent has no command line")
        if PROMPT in words[0] or PROMPT_FILE in words[0]:
            raise AgentUnavailable("the one-shot command must start with a program, not {prompt}")
        return words

    @property
    def prompt_mode(self) -> str:
        """`argument`, `file` or `stdin`: how the prompt reaches the command."""
        text = " ".join(self.words()[1:])
        if PROMPT_FILE in text:
            return "file"
        return "argument" if PROMPT in text else "stdin"

    def find(self, path: str | None = None) -> str | None:
        try:
            program = self.words()[0]
        except AgentUnavailable:
            return None
        if os.sep in program:
            found = Path(program).expanduser()
            ok = found.is_file() and os.access(found, os.X_OK)
            return str(found.absolute()) if ok else None
        return shutil.which(program, path=path)

    def version(self, binary: str) -> str | None:
        return f"one-shot: {self.command}"

    def agent(self) -> AgentProfile | None:
        """The agent profile whose one-shot preset this is (None: a
        `oneshot:` command line)."""
        found = preset_forms().get(self.name)
        return found[1] if found is not None else None

    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """A preset's agent keeps its config where its interactive self does
        (Codex's `$CODEX_HOME`, Claude Code's `~/.claude`); the operator's
        `writable` entries come on top."""
        dirs, files = super().own_paths(env)
        agent = self.agent()
        if agent is not None:
            own_dirs, own_files = agent.own_paths(env)
            dirs, files = [*own_dirs, *dirs], [*own_files, *files]
        return dirs, files

    def inside_sandbox(self, argv: list[str]) -> list[str]:
        """A preset's agent with its own sandbox off inside corral's, as its
        profile says (Codex's); the program follows the launcher's `--`."""
        agent = self.agent()
        if agent is None or "--" not in argv:
            return argv
        return agent.without_own_sandbox(argv, argv.index("--") + 1)

    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """The launcher (`oneshot_exec.py`) runs first: it puts the prompt in
        place and execs the command, so a long prompt never goes through
        tmux's command line."""
        words = self.words()
        session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        prompt_file = session_dir / PROMPT_FILE_NAME
        fd = os.open(prompt_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(prompt.encode("utf-8"))
        args = [w.replace(PROMPT_FILE, str(prompt_file)) for w in words[1:]]
        mode = ["--stdin"] if self.prompt_mode == "stdin" else []
        return LaunchPlan(
            argv=[
                sys.executable,
                "-I",
                str(LAUNCHER),
                str(prompt_file),
                *mode,
                "--",
                binary,
                *args,
            ],
            env_extra={"CORRAL_HOOK_CMD": hook_cmd},
            env_allow=self.env_allow,
            shown=binary,
        )


def preset_forms() -> dict[str, tuple[OneShotForm, AgentProfile]]:
    """The one-shot presets, by engine name: each registered agent profile's
    one-shot form (`agents/profiles.py`), with the profile it borrows the rest
    from. Nothing else defines a preset."""
    return {p.one_shot.name: (p.one_shot, p) for p in PROFILES.values() if p.one_shot is not None}


def is_oneshot(spec: str) -> bool:
    """True for `oneshot:<command>` and the presets' names."""
    spec = spec.strip().removeprefix("external:")
    return spec.startswith(PREFIX) or spec in preset_forms()


def oneshot_profile(spec: str) -> OneShotProfile:
    """The profile for `oneshot:<command line>` or a preset's name."""
    spec = spec.strip().removeprefix("external:")
    found = preset_forms().get(spec)
    if found is not None:
        form, agent = found
        return OneShotProfile(
            name=form.name,
            label=form.label,
            binaries=(shlex.split(form.command)[0],),
            # its agent's, and what its agent's own config names (Codex's providers)
            env_allow=(*agent.env_allow, *agent.provider_env()),
            prompt_in_argv=False,
            command=form.command,
            settings_key=agent.name,
            # a preset (`claude-p`) reaches what its agent does
            network_hosts=agent.network_hosts,
        )
    if not spec.startswith(PREFIX):
        raise AgentUnavailable(f"{spec!r} is not a one-shot agent (oneshot:<command line>)")
    command = spec.removeprefix(PREFIX).strip()
    program = command.split(maxsplit=1)[0] if command else ""
    return OneShotProfile(
        name="oneshot",
        label=f"one-shot: {command}",
        binaries=(program,) if program else (),
        env_allow=agent_env.CUSTOM,
        prompt_in_argv=False,
        command=command,
    )
