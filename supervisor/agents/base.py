"""What corral knows about one agent CLI.

A profile says how to find the binary, how to start it interactively on a
task (argv, or a paste after start), which of its own settings pass the
environment scrub (`agent_env`), which first-run dialogs to answer and with
which option (chosen by its text, never a blind Enter), the screen markers
for status heuristics, and the agent's own config and credential paths, which
stay writable when it runs in the sandbox.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..status import GENERIC, Markers

INVOKED_BY = "CORRAL_INVOKED_BY"
# Every agent pane gets the command that reports a hook event (`<cmd> Stop`).
HOOK_CMD = "CORRAL_HOOK_CMD"
SESSION_ENV = "CORRAL_SESSION_ID"  # the corral session an agent pane belongs to


class AgentUnavailable(Exception):
    """The agent cannot be started here (not installed, or the recursion guard)."""


@dataclass(frozen=True)
class Dialog:
    """A screen the agent shows before it works. With `choose`, corral
    answers it by picking the option whose text matches (a trust dialog);
    without, it is the operator's decision (whether to use an API key) and
    becomes a question like any other — known to the profile so that a hook's
    permission request is never paired with it."""

    name: str
    detect: re.Pattern[str]
    choose: re.Pattern[str] | None


@dataclass(frozen=True)
class AcpForm:
    """The agent run over ACP (a preset `corral agents` lists): by its own
    flag (Gemini CLI) or an adapter program (Zed's for Claude Code and Codex),
    borrowing the rest of what its profile knows (env, config paths)."""

    name: str  # the engine name: `gemini-acp`
    label: str
    program: str  # looked up on PATH
    flags: tuple[str, ...] = ()  # the program must accept one of these (the first it does)
    serve_files: bool = True  # corral serves it `fs/*` (else it writes itself, confined)
    confined_args: tuple[str, ...] = ()  # added when corral confines it
    install: str = ""  # how its program is installed


@dataclass(frozen=True)
class OneShotForm:
    """The agent's non-interactive mode as a one-shot preset (`corral run
    --agent claude-p`, see `agents.oneshot`): its command line, `{prompt}`
    where the task goes. The rest — the variables it may see, its
    `[agents.<name>]` settings, its network hosts, its provider home — is its
    profile's."""

    name: str  # the preset's engine name: `claude-p`
    label: str
    command: str


@dataclass
class LaunchPlan:
    argv: list[str]
    env_extra: dict[str, str] = field(default_factory=dict)
    env_allow: tuple[str, ...] = ()
    paste_prompt: str | None = None  # delivered once the agent shows its prompt
    hooks_file: Path | None = None
    shown: str | None = None  # what the event log names as started (default: argv[0])
    # The agent's own session, when corral names it at launch (`gemini
    # --session-id`, Aider's per-session chat history) rather than hearing
    # it from a hook; and the file it keeps the conversation in.
    agent_session: str | None = None
    transcript: str | None = None


@dataclass(frozen=True)
class AgentProfile:
    name: str
    label: str
    binaries: tuple[str, ...]
    markers: Markers = GENERIC
    dialogs: tuple[Dialog, ...] = ()
    env_allow: tuple[str, ...] = ()
    version_args: tuple[str, ...] = ("--version",)
    prompt_in_argv: bool = True
    hooks: bool = False  # structured end-of-turn signal available
    # exit status 0 ends the turn (the runtime verifies) instead of counting
    # as a crash: a `custom:` command may do its work and exit
    exit_ends_turn: bool = False
    # The flag this agent's CLI takes a model with (`--model`, `-m`); None:
    # corral cannot choose its model (a `custom:` command, the demo agent).
    model_flag: str | None = None
    # Its own config and credentials, relative to HOME: directories (created
    # when missing, so a confined agent can write there) and files or globs.
    own_dirs: tuple[str, ...] = ()
    own_files: tuple[str, ...] = ()
    # it writes files of its own in corral's session dir (Aider's chat history,
    # which its resume and the transcript view read): writable when confined
    writes_session_dir: bool = False
    writable: tuple[str, ...] = ()  # the operator's additions (`[agents.<name>] writable`)
    sandbox: bool | None = None  # the operator's `[agents.<name>] sandbox` (None: the global)
    network_allow: tuple[str, ...] = ()  # the operator's `[agents.<name>] network_allow`
    # Without hooks: seconds a screen must stay unchanged at a prompt-like
    # last line before the agent reads idle (the quiet rule, status.py).
    quiet_secs: float = 3.0
    # What corral reads of the agent's own files, by name of the reader
    # (None: nothing): its transcript (`session/transcripts.py` FORMATS) and
    # its token records (`usage_records.py` RecordKind), kept in `usage_dir`
    # under each of its own directories.
    transcript_format: str | None = None
    usage_format: str | None = None
    usage_dir: str | None = None
    install: str = ""  # the command that installs it (`corral agents`, `corral doctor`)
    acp: AcpForm | None = None  # its ACP preset, when it has one
    one_shot: OneShotForm | None = None  # its one-shot preset, when it has one
    # its own API and sign-in hosts (a subscription login talks to these):
    # what it may reach when confined, with its endpoints (`sandbox/network.py`)
    network_hosts: tuple[str, ...] = ()

    def find(self, path: str | None = None) -> str | None:
        for name in self.binaries:
            found = shutil.which(name, path=path)
            if found:
                return found
        return None

    def version(self, binary: str) -> str | None:
        try:
            out = subprocess.run(
                [binary, *self.version_args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0][:80] if text else None

    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """(directories, files) the agent keeps its config and credentials in,
        under the HOME its pane gets; the operator's `writable` entries count
        as files (bound only when they exist)."""
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        dirs = [home / rel for rel in self.own_dirs]
        files: list[Path] = []
        for rel in self.own_files:
            pattern = str(home / rel)
            files += (
                [Path(p) for p in sorted(glob.glob(pattern))]
                if glob.has_magic(rel)
                else [Path(pattern)]
            )
        return dirs, [*files, *self.writable_paths(env)]

    def writable_paths(self, env: Mapping[str, str]) -> list[Path]:
        """The operator's `[agents.<name>] writable` entries, as paths."""
        home = str(env.get("HOME") or os.path.expanduser("~"))
        return [Path(os.path.expanduser(raw.replace("$HOME", home))) for raw in self.writable]

    def in_home(self, plan: LaunchPlan, home: Path) -> LaunchPlan:
        """`plan` once the agent's config home is the session's own `home`
        (`provider_home`): where it keeps its conversation moves with it."""
        return plan

    def inside_sandbox(self, argv: list[str]) -> list[str]:
        """The command line when corral confines the agent: an agent whose
        own sandbox cannot nest in bubblewrap (it needs a user namespace and
        a fresh /proc) is told to rely on corral's instead."""
        return self.without_own_sandbox(argv, 0)

    def without_own_sandbox(self, argv: list[str], at: int) -> list[str]:
        """`argv`, whose program (this agent) is at index `at`, with the
        agent's own sandbox off (a one-shot form runs it behind a launcher)."""
        return argv

    def provider_env(self) -> tuple[str, ...]:
        """The variables the agent's own config names for its providers (read
        now): they pass the scrub too, in every form it runs in."""
        return ()

    def with_model(self, plan: LaunchPlan, model: str | None) -> LaunchPlan:
        """`plan` with the pinned model passed by this agent's own flag."""
        if not model:
            return plan
        if self.model_flag is None:
            raise AgentUnavailable(
                f"{self.label} takes no model from corral: name the model in its own command "
                "line or settings, or start the session with model auto"
            )
        argv = [plan.argv[0], self.model_flag, model, *plan.argv[1:]]
        return replace(plan, argv=argv)

    def resume_args(self, agent_session: str) -> list[str] | None:
        """The arguments that make this agent's CLI continue its own session
        `agent_session` (None: it cannot be resumed by id)."""
        return None

    def conversation_file(self, agent_session: str, env: Mapping[str, str]) -> Path | None:
        """Where this agent saved conversation `agent_session`, for agents whose
        hooks do not say (None: not found, or this agent does not tell)."""
        return None

    def conversations(self, env: Mapping[str, str]) -> dict[str, Path]:
        """Every conversation this agent saved, by its id, in one listing (the
        search looks at a thousand sessions' at once); empty for an agent whose
        hooks name the file."""
        return {}

    def launch_transcripts(self, agent_session: str, home: Path | None) -> set[str]:
        """The transcript patterns corral itself made at launch for
        `agent_session` (under the session's provider home `home`, or the
        operator's): the only patterns the usage watch searches."""
        return set()

    @property
    def locates_conversations(self) -> bool:
        """Whether `conversation_file` can find this agent's conversations: then
        an id with no saved conversation is a helper thread of the agent's own
        (a title, a summary), not the conversation to resume."""
        return type(self).conversation_file is not AgentProfile.conversation_file

    @property
    def resumable(self) -> bool:
        """Whether this agent's CLI can continue a session of its own by id."""
        return type(self).resume_args is not AgentProfile.resume_args

    def with_resume(self, plan: LaunchPlan, agent_session: str) -> LaunchPlan | None:
        """`plan` continuing the agent's earlier conversation (the prompt stays
        last), or None when this agent cannot resume."""
        args = self.resume_args(agent_session)
        if args is None or plan.paste_prompt is not None or len(plan.argv) < 2:
            return None
        return replace(plan, argv=[*plan.argv[:-1], *args, plan.argv[-1]])

    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """How to start this agent on `prompt` (overridden per agent)."""
        hook = {HOOK_CMD: hook_cmd}  # so a wrapper script can signal the agent's turns
        if self.prompt_in_argv:
            return LaunchPlan(argv=[binary, prompt], env_extra=hook, env_allow=self.env_allow)
        return LaunchPlan(
            argv=[binary], env_extra=hook, env_allow=self.env_allow, paste_prompt=prompt
        )


def check_recursion(agent: str, env: dict[str, str] | None = None) -> str:
    """The `CORRAL_INVOKED_BY` chain for a child agent; refuses an agent that
    is already in the chain (corral running inside an agent corral started)."""
    chain = (env if env is not None else os.environ).get(INVOKED_BY, "")
    links = [link for link in chain.split(">") if link]
    if f"agent:{agent}" in links:
        raise AgentUnavailable(
            f"refusing to start {agent}: this corral already runs inside a {agent} session "
            f"that corral started ({INVOKED_BY}={chain})"
        )
    return ">".join([*links, "corral", f"agent:{agent}"])


def hook_command(python: str, hooks_file: Path, incarnation: int | None = None) -> str:
    """The shell command agents run for a hook; the event name is appended.
    With `incarnation`, every line it writes names the pane it came from, so
    a late line from an agent corral already replaced is dropped."""
    parts = [python, "-m", "corral.tui.cli", "hook", "--file", str(hooks_file)]
    if incarnation is not None:
        parts += ["--incarnation", str(incarnation)]
    return " ".join(shlex.quote(part) for part in parts)


def write_json(path: Path, data: object) -> Path:
    """`path` replaced whole (by rename): an agent that can write where it
    lives (its own config home) cannot make corral write through a link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".corral-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, indent=2))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
