"""The built-in agent profiles: claude, codex, gemini, aider, opencode,
custom (any command line) and demo (corral's scripted demo agent)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from corral.assets import path as asset_path

from ..sandbox.network import PROVIDERS
from ..status import InlineMenu, Markers, compile_all
from . import agent_env
from .base import (
    HOOK_CMD,
    AcpForm,
    AgentProfile,
    AgentUnavailable,
    Dialog,
    LaunchPlan,
    OneShotForm,
    write_json,
)
from .provider_home import session_home, share_home

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


def _dialog(name: str, detect: str, choose: str | None) -> Dialog:
    chosen = re.compile(choose, re.IGNORECASE) if choose is not None else None
    return Dialog(name, re.compile(detect, re.IGNORECASE), chosen)


@dataclass(frozen=True)
class ClaudeProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """A generated settings file (`--settings`) adds our hooks for this run
        only; the operator's own settings files are never modified."""
        hooks = {
            event: [{"hooks": [{"type": "command", "command": f"{hook_cmd} {event}"}]}]
            for event in CLAUDE_HOOK_EVENTS
        }
        # in the session's own config home (`provider_home`), with the rest of its settings
        settings = write_json(session_home(session_dir) / "corral-settings.json", {"hooks": hooks})
        mode = os.environ.get("CORRAL_CLAUDE_PERMISSION_MODE", "").strip()
        extra = ["--permission-mode", mode] if mode else []
        return LaunchPlan(
            argv=[binary, "--settings", str(settings), *extra, prompt],
            env_extra={HOOK_CMD: hook_cmd},
            env_allow=self.env_allow,
        )

    def resume_args(self, agent_session: str) -> list[str] | None:
        """`claude --resume <session id> [prompt]`."""
        return ["--resume", agent_session]

    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """`~/.claude` and `~/.claude.json`, plus `$CLAUDE_CONFIG_DIR` when set."""
        dirs, files = super().own_paths(env)
        config_dir = env.get("CLAUDE_CONFIG_DIR", "").strip()
        if config_dir:
            dirs.append(Path(os.path.expanduser(config_dir)))
        return dirs, files


CODEX_NO_SANDBOX = "danger-full-access"  # inside corral's sandbox, which confines it


def codex_without_own_sandbox(argv: list[str], at: int) -> list[str]:
    """`argv` (Codex's program at index `at`) with Codex's own sandbox off:
    a `--sandbox`/`-s` value replaced, else the option added after it."""
    out = list(argv)
    for i, word in enumerate(out[at + 1 :], start=at + 1):
        if word in ("--sandbox", "-s") and i + 1 < len(out):
            out[i + 1] = CODEX_NO_SANDBOX
            return out
        if word.startswith("--sandbox="):
            out[i] = f"--sandbox={CODEX_NO_SANDBOX}"
            return out
    return [*out[: at + 1], "--sandbox", CODEX_NO_SANDBOX, *out[at + 1 :]]


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
            env_extra={HOOK_CMD: hook_cmd},
            env_allow=(*self.env_allow, *self.provider_env()),
        )

    def resume_args(self, agent_session: str) -> list[str] | None:
        """`codex resume <thread id> [prompt]` (its options stay before the subcommand)."""
        return ["resume", agent_session]

    def without_own_sandbox(self, argv: list[str], at: int) -> list[str]:
        """Codex's own command sandbox is bubblewrap too and cannot start
        inside corral's: its commands run in corral's sandbox instead."""
        return codex_without_own_sandbox(argv, at)

    def provider_env(self) -> tuple[str, ...]:
        return agent_env.codex_provider_env()

    def conversation_file(self, agent_session: str, env: Mapping[str, str]) -> Path | None:
        """Codex saves each thread as `sessions/YYYY/MM/DD/rollout-…-<id>.jsonl`
        under its home. Its short-lived helper threads (the title it gives a
        task) report their turns through `notify` too, but are never saved."""
        if not _THREAD_ID.fullmatch(agent_session):
            return None
        home = env.get("CODEX_HOME", "").strip() or str(Path(env.get("HOME", "~")) / ".codex")
        sessions = Path(os.path.expanduser(home)) / "sessions"
        # newest day first: a resumed thread lives where it was started
        for day in sorted(sessions.glob("*/*/*"), reverse=True):
            found = next(day.glob(f"rollout-*-{agent_session}.jsonl"), None)
            if found is not None:
                return found
        return None

    def conversations(self, env: Mapping[str, str]) -> dict[str, Path]:
        """Every rollout Codex keeps, by thread id (its name ends in the id)."""
        home = env.get("CODEX_HOME", "").strip() or str(Path(env.get("HOME", "~")) / ".codex")
        found: dict[str, Path] = {}
        for path in sorted(
            (Path(os.path.expanduser(home)) / "sessions").glob("*/*/*/rollout-*.jsonl")
        ):
            found[path.stem[-36:]] = path  # a thread id is a 36-character UUID
        return found

    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """`$CODEX_HOME`, or `~/.codex` when it is not set."""
        dirs, files = super().own_paths(env)
        codex_home = env.get("CODEX_HOME", "").strip()
        if codex_home:
            dirs = [Path(os.path.expanduser(codex_home))]
        return dirs, files


_THREAD_ID = re.compile(r"[0-9a-fA-F-]{8,64}")  # a Codex thread id is a UUID

OPENCODE_PLUGIN = asset_path("opencode", "corral_hooks.js")


# OpenCode keeps its config, data, state and cache under the XDG base dirs.
OPENCODE_XDG = (
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
)


@dataclass(frozen=True)
class OpenCodeProfile(AgentProfile):
    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """`opencode` under each XDG base dir (`$XDG_*_HOME` when set, else
        its default under HOME), `$OPENCODE_CONFIG_DIR`, and the
        `$OPENCODE_CONFIG` file."""
        dirs, files = super().own_paths(env)
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        dirs = [
            Path(os.path.expanduser(env.get(var, "").strip() or str(home / rel))) / "opencode"
            for var, rel in OPENCODE_XDG
        ]
        config_dir = env.get("OPENCODE_CONFIG_DIR", "").strip()
        if config_dir:
            dirs.append(Path(os.path.expanduser(config_dir)))
        config = env.get("OPENCODE_CONFIG", "").strip()
        if config:
            files.append(Path(os.path.expanduser(config)))
        return dirs, files

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
            env_allow=(*self.env_allow, *self.provider_env()),
        )

    def provider_env(self) -> tuple[str, ...]:
        """The variables its config names (`{env:NAME}`)."""
        return agent_env.opencode_config_env()

    def resume_args(self, agent_session: str) -> list[str] | None:
        """`opencode --session <ses_…>` (its plugin's hooks name the session)."""
        return ["--session", agent_session]

    def with_resume(self, plan: LaunchPlan, agent_session: str) -> LaunchPlan | None:
        """`--session` goes before `--prompt`, whose value stays the prompt."""
        return replace(plan, argv=[plan.argv[0], "--session", agent_session, *plan.argv[1:]])


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
            env_extra={HOOK_CMD: hook_cmd},
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
            env_extra={HOOK_CMD: hook_cmd},
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
        auth=compile_all(
            r"not logged in",
            r"please run /login",
            r"invalid api key",
            r"\bapi error: 401\b",
            r"\b401\b.*\bunauthori[sz]ed\b",
            r"oauth token has expired",
        ),
    ),
    dialogs=(
        # the cursor starts on "No, exit": a blind Enter would quit
        _dialog(
            "trust",
            r"(do you trust the files in this folder|is this a project you created or one you trust)",
            r"^yes, i trust this folder|^yes, proceed",
        ),
        # "Detected a custom API key … Do you want to use this API key?" with
        # the cursor on "No (recommended)": whether to bill that key is the
        # operator's call, so it is asked, never answered by corral
        _dialog("api-key", r"detected a custom api key", None),
    ),
    env_allow=agent_env.CLAUDE,
    hooks=True,
    transcript_format="claude",
    usage_format="claude",
    usage_dir="projects",
    install="npm i -g @anthropic-ai/claude-code",
    network_hosts=(
        "api.anthropic.com",
        "console.anthropic.com",
        "claude.ai",
        "platform.claude.com",
    ),
    acp=AcpForm(
        "claude-acp",
        "Claude Code (ACP adapter)",
        "claude-code-acp",
        install="npm i -g @zed-industries/claude-code-acp",
    ),
    # acceptEdits: file edits need no approval; commands still would, and
    # with -p nobody is there to give it, so they are refused
    one_shot=OneShotForm(
        "claude-p",
        "Claude Code, one-shot (claude -p)",
        "claude -p --permission-mode acceptEdits {prompt}",
    ),
    own_dirs=(".claude",),
    model_flag="--model",
    own_files=(".claude.json",),
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
        auth=compile_all(r"unexpected status 401", r"incorrect api key provided"),
    ),
    dialogs=(_dialog("trust", r"trust this folder\?", r"^trust and continue"),),
    env_allow=agent_env.CODEX,
    hooks=True,
    transcript_format="codex",
    usage_format="codex",
    usage_dir="sessions",
    install="npm i -g @openai/codex",
    network_hosts=("api.openai.com", "auth.openai.com", "chatgpt.com"),
    # its adapter takes Codex's settings as `-c key=value`: Codex's own
    # sandbox off inside corral's, as in a pane
    acp=AcpForm(
        "codex-acp",
        "Codex (ACP adapter)",
        "codex-acp",
        confined_args=("-c", 'sandbox_mode="danger-full-access"'),
        install="npm i -g @zed-industries/codex-acp",
    ),
    one_shot=OneShotForm(
        "codex-exec",
        "Codex, one-shot (codex exec)",
        "codex exec --sandbox workspace-write {prompt}",
    ),
    own_dirs=(".codex",),
    model_flag="-m",
)


@dataclass(frozen=True)
class GeminiProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """`-i PROMPT` submits the task once the UI is up. `--skip-trust`
        trusts corral's worktree for this run only: answering the trust
        dialog instead makes Gemini CLI relaunch itself and submit the `-i`
        prompt a second time (it already ran once, untrusted). No hooks: they
        can be added per run only through root-owned system files or the
        worktree's `.gemini/settings.json` (docs/agent-clis.md), so the
        screen markers carry the status."""
        agent_session = str(uuid.uuid4())  # corral names the conversation: resumable by it
        return LaunchPlan(
            argv=[
                binary, "--skip-trust", "--session-id", agent_session,
                "--prompt-interactive", prompt,
            ],
            env_extra={HOOK_CMD: hook_cmd},
            env_allow=self.env_allow,
            agent_session=agent_session,
            transcript=gemini_chats(agent_session),
        )  # fmt: skip

    def resume_args(self, agent_session: str) -> list[str] | None:
        """`gemini --resume <session id>` (the id corral gave it with `--session-id`)."""
        return ["--resume", agent_session]

    def launch_transcripts(self, agent_session: str, home: Path | None) -> set[str]:
        """Its chat file's pattern, under the session's home or the operator's."""
        return {gemini_chats(agent_session), gemini_chats(agent_session, home)}

    def own_paths(self, env: dict[str, str]) -> tuple[list[Path], list[Path]]:
        """`~/.gemini`, or `$GEMINI_CLI_HOME/.gemini` when it is set."""
        dirs, files = super().own_paths(env)
        named = env.get("GEMINI_CLI_HOME", "").strip()
        if named:
            dirs = [Path(os.path.expanduser(named)) / ".gemini"]
        return dirs, files

    def in_home(self, plan: LaunchPlan, home: Path) -> LaunchPlan:
        """Its chats are kept under the session's own home (GEMINI_CLI_HOME)."""
        if plan.agent_session is None:
            return plan
        return replace(plan, transcript=gemini_chats(plan.agent_session, home))

    def with_resume(self, plan: LaunchPlan, agent_session: str) -> LaunchPlan | None:
        """The same launch continuing `agent_session` instead of naming a new one."""
        argv = list(plan.argv)
        if "--session-id" in argv:
            at = argv.index("--session-id")
            del argv[at : at + 2]
        return replace(
            plan,
            argv=[argv[0], "--resume", agent_session, *argv[1:]],
            agent_session=agent_session,
            transcript=gemini_chats(agent_session),
        )


def gemini_chats(agent_session: str, home: Path | None = None) -> str:
    """Where Gemini CLI keeps this conversation, as a pattern: its file name
    carries the start time and the session id's first 8 characters. `home`:
    the session's own (GEMINI_CLI_HOME), else the operator's."""
    root = str(home) if home is not None else (os.environ.get("HOME") or str(Path.home()))
    return f"{root}/.gemini/tmp/*/chats/session-*-{agent_session[:8]}.json*"


# Markers from Gemini CLI 0.61's real screens (docs/agent-clis.md#gemini-cli-0610).
GEMINI = GeminiProfile(
    name="gemini",
    label="Gemini CLI",
    binaries=("gemini",),
    markers=Markers(
        # `⠧ Thinking... (esc to cancel, 2s)`; "? for shortcuts" shows busy or not.
        # Not a bare "esc to cancel": the API-key dialog says "Esc to cancel" too.
        busy=compile_all(r"\(esc to cancel, \d+[smh]", r"^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\s+\S"),
        waiting=compile_all(
            r"^\s*apply this change\?",
            r"^\s*allow execution of\b",
            r"^\s*(?:●\s*)?1\.\s+allow once",
            r"how would you like to authenticate",
        ),
        # the last line: the footer (`<cwd>   no sandbox   <model>`; its sandbox
        # column reads `no sandbox`, `untrusted`, `current process` or `all
        # tools`, columns apart by spaces or ` · `), or the input line when the
        # operator hid the footer
        idle=compile_all(
            r"(\s{2,}|\s·\s)(no sandbox|untrusted|current process|all tools)(\s{2,}|\s·\s|$)",
            r"^\s*>\s+type your message",
        ),
    ),
    dialogs=(_dialog("trust", r"do you trust the files in this folder", r"^trust folder\b"),),
    env_allow=agent_env.GEMINI,
    transcript_format="gemini",
    usage_format="gemini",
    usage_dir="tmp",
    install="npm i -g @google/gemini-cli",
    network_hosts=(
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
        "www.googleapis.com",
    ),
    # Gemini CLI reads a file before it writes it and takes a client's
    # "not found" error for a failure (0.61 matches the error's message only
    # on an Error object, and a JSON-RPC error reaches it as a plain one), so
    # it could never create a file through corral's fs/*: it writes itself.
    acp=AcpForm(
        "gemini-acp",
        "Gemini CLI (ACP)",
        "gemini",
        flags=("--acp", "--experimental-acp"),
        serve_files=False,
        install="npm i -g @google/gemini-cli",
    ),
    model_flag="-m",
    one_shot=OneShotForm("gemini-p", "Gemini CLI, one-shot (gemini -p)", "gemini -p {prompt}"),
    own_dirs=(".gemini",),
)


@dataclass(frozen=True)
class AiderProfile(AgentProfile):
    def plan(self, binary: str, *, prompt: str, session_dir: Path, hook_cmd: str) -> LaunchPlan:
        """Aider takes no interactive first prompt on its command line: the
        task is pasted at its `>` prompt. Flags keep corral's review honest:
        no commits (auto or of dirty files; the operator delivers the diff),
        no `.gitignore` edit, its history files in the session directory,
        and no repo-map tag cache (`.aider.tags.cache.v4/`) in the worktree
        unless the operator sets AIDER_MAP_TOKENS. No update check or release
        notes prompt. `--notifications-command` is not an end-of-turn hook
        (it also fires for y/n questions), so the screen carries the status."""
        argv = [
            binary,
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-check-update",
            "--no-show-release-notes",
            "--chat-history-file",
            str(session_dir / "aider.chat.history.md"),
            "--input-history-file",
            str(session_dir / "aider.input.history"),
        ]
        if not os.environ.get("AIDER_MAP_TOKENS"):
            argv += ["--map-tokens", "0"]
        session_dir.mkdir(parents=True, exist_ok=True)
        history = str(session_dir / "aider.chat.history.md")
        return LaunchPlan(
            argv=argv,
            env_extra={HOOK_CMD: hook_cmd},
            env_allow=self.env_allow,
            paste_prompt=prompt,
            # no session id of its own: its chat history, one per corral session, is it
            agent_session=history,
            transcript=history,
        )

    def resume_args(self, agent_session: str) -> list[str] | None:
        """`--restore-chat-history`: Aider reads the session's chat history back."""
        return ["--restore-chat-history"]

    def with_resume(self, plan: LaunchPlan, agent_session: str) -> LaunchPlan | None:
        """The task (or the "continue" note) is still pasted at its prompt."""
        return replace(plan, argv=[*plan.argv, "--restore-chat-history"])


# Markers from Aider 0.86's real screens (docs/agent-clis.md#aider-0862).
AIDER = AiderProfile(
    name="aider",
    label="Aider",
    binaries=("aider",),
    markers=Markers(
        # `░█         Waiting for openai/fake-model` (the pair bounces; `=#` on
        # terminals without unicode); not the `Tokens: … sent, … received.`
        # report, which stays on screen when idle
        busy=compile_all(r"^\s*[░█=#]{2}\s*waiting for\s+\S"),
        # `Create new file? (Y)es/(N)o [Yes]:`, `… (Y)es/(N)o/(D)on't ask again [Yes]:`,
        # unanswered only: an answered one stays on screen as `… [Yes]: y`
        waiting=compile_all(r"\(y\)es/\(n\)o\b.*\[(yes|no)\]:\s*$"),
        # the input prompt: `>` (or `ask>`, `architect>`, `multi>` in other modes)
        idle=compile_all(r"^\s*(\w+\s*)?>\s*$"),
    ),
    env_allow=agent_env.AIDER,
    network_hosts=PROVIDERS,
    transcript_format="aider",
    model_flag="--model",
    prompt_in_argv=False,
    one_shot=OneShotForm(
        "aider-msg",
        "Aider, one-shot (aider --message)",
        "aider --yes-always --message {prompt}",
    ),
    own_dirs=(".aider",),  # its caches and analytics
    own_files=(".aider*",),  # .aider.conf.yml, .aider.model.settings.yml, …
    writes_session_dir=True,  # its chat and input history files
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
    network_hosts=(*PROVIDERS, "models.dev", "opencode.ai"),
    hooks=True,
    model_flag="--model",
    own_dirs=(
        ".config/opencode",
        ".local/share/opencode",
        ".local/state/opencode",
        ".cache/opencode",
    ),
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

# Every agent corral knows, by name: the one list `corral agents`, `corral
# doctor`, the host probe, the settings and the start path read. An agent is
# added by its profile alone (`register`); nothing else lists agents.
PROFILES: dict[str, AgentProfile] = {
    p.name: p for p in (CLAUDE, CODEX, GEMINI, AIDER, OPENCODE, DEMO)
}
# the order `auto` tries the agent CLIs in
_PREFERENCE: list[str] = ["claude", "codex", "gemini", "opencode", "aider"]


def _share_homes(profile: AgentProfile) -> None:
    """Its one-shot preset runs the same CLI: the same provider home."""
    if profile.one_shot is not None:
        share_home(profile.one_shot.name, profile.name)


for _known in PROFILES.values():
    _share_homes(_known)


def register(profile: AgentProfile, *, preferred: bool = True) -> None:
    """Make `profile` an agent corral knows (replacing one of its name);
    `preferred`: `auto` may pick it, after the agents already known."""
    if not profile.name or ":" in profile.name or profile.name == "custom":
        raise ValueError(f"an agent profile needs a plain name of its own, not {profile.name!r}")
    PROFILES[profile.name] = profile
    _share_homes(profile)
    if preferred and profile.name not in _PREFERENCE:
        _PREFERENCE.append(profile.name)


def unregister(name: str) -> None:
    """Forget agent `name` (a test's own profile, once the test is over)."""
    PROFILES.pop(name, None)
    if name in _PREFERENCE:
        _PREFERENCE.remove(name)


def preference() -> tuple[str, ...]:
    """The agent CLIs `auto` tries, in order."""
    return tuple(_PREFERENCE)


def registered_profiles() -> list[AgentProfile]:
    """Every agent CLI on a PATH to look for (not the demo agent), as known."""
    return [p for p in PROFILES.values() if p.binaries and not isinstance(p, DemoProfile)]


def known_profile(name: str) -> AgentProfile | None:
    """The profile of the agent a session names (`claude`, `custom:…`); None
    for an engine that is no agent CLI of corral's (an ACP agent, the built-in)."""
    try:
        return profile_for(name.removeprefix("external:"))
    except AgentUnavailable:
        return None


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
            exit_ends_turn=True,
        )
    profile = PROFILES.get(name)
    if profile is None:
        known = ", ".join([*PROFILES, "custom:<command>"])
        raise AgentUnavailable(f"unknown agent {name!r}; known agents: {known}")
    if isinstance(profile, DemoProfile):
        return replace(profile, pace=demo_pace)
    return profile
