"""Hermetic launch recipes for the real agent CLIs (Claude Code, Codex, Gemini
CLI, Aider, OpenCode) against the fake model server, as established in
docs/agent-clis.md.

Each `*_launch` builds, under a private directory, everything one interactive
run needs — a temp HOME (and CODEX_HOME), the CLI's config files, a recorder
for its hook / notify events — and returns an `AgentLaunch`:

    launch = claude_launch(tmp_path / "claude", server.url, repo, "Write hello.txt")
    argv, env = launch                      # unpacks as (argv, env)
    tmux new-session ... launch.shell_command()   # `env -i K=V ... argv`
    launch.events()                         # hook payloads recorded so far

Nothing here reads or writes the real user's ~/.claude, ~/.claude.json,
~/.codex, ~/.gemini, ~/.aider*, ~/.config/opencode or ~/.local/share/opencode:
every path is inside the given directory.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.supervisor.agents.profiles import opencode_config_content

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = REPO_ROOT / "e2e"
BIN_DIR = E2E_DIR / "node_modules" / ".bin"

# The key is fake; Claude Code remembers approved keys by their last 20 chars.
FAKE_ANTHROPIC_KEY = "sk-ant-api03-corral-offline-fake-key-0000000000"
FAKE_OPENAI_KEY = "sk-corral-offline-fake-openai-key"
FAKE_GEMINI_KEY = "corral-offline-fake-gemini-key"
CODEX_KEY_ENV = "CORRAL_FAKE_OPENAI_KEY"
CODEX_PROVIDER = "corralfake"
# Not in Codex's model catalogue: no "Meet GPT-…" upgrade dialog, but a
# "Model metadata for `gpt-fake` not found" startup warning (harmless).
CODEX_MODEL = "gpt-fake"

CLAUDE_HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "Notification",
    "Stop",
    "StopFailure",
    "SessionEnd",
)
# Codex 0.171 reads Claude-style hooks from $CODEX_HOME/hooks.json.
CODEX_HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
    "Interrupt",
    "SessionEnd",
)
_MATCHER_EVENTS = {"PreToolUse", "PostToolUse", "PermissionRequest", "PermissionDenied"}


def claude_bin() -> Path:
    return BIN_DIR / "claude"


def codex_bin() -> Path:
    return BIN_DIR / "codex"


def gemini_bin() -> Path:
    return BIN_DIR / "gemini"


AIDER_VENV = E2E_DIR / "aider-venv"
# "openai/<name>": LiteLLM's OpenAI-compatible provider, Chat Completions at
# OPENAI_API_BASE. Unknown to LiteLLM, so Aider uses the "whole" edit format.
AIDER_MODEL = "openai/fake-model"


def aider_bin() -> Path:
    return AIDER_VENV / "bin" / "aider"


def missing_cli(binary: Path, install: str) -> str | None:
    """Why one CLI cannot run here (None when it is installed)."""
    if binary.exists():
        return None
    return f"{binary.name} not installed ({binary} missing); run `{install}`"


def missing_clis() -> str | None:
    """Why the real CLIs cannot run here (None when both are installed)."""
    missing = [p.name for p in (claude_bin(), codex_bin()) if not p.exists()]
    if missing:
        return (
            f"agent CLIs not installed ({', '.join(missing)} missing from {BIN_DIR}); "
            "run `npm ci --prefix e2e`"
        )
    return None


@dataclass
class AgentLaunch:
    """Everything needed to start one CLI run, plus where its events land."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    home: Path
    events_file: Path  # Claude Code: hook payloads; Codex: notify payloads
    config_dir: Path  # ~/.claude for Claude Code, CODEX_HOME for Codex
    hooks_file: Path | None = None  # hook payloads (Claude Code: = events_file)
    extra: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        yield self.argv
        yield self.env

    def shell_command(self) -> str:
        """One shell command line (`exec env -i K=V ... argv`) for tmux."""
        assigns = [f"{k}={v}" for k, v in sorted(self.env.items())]
        return "exec " + shlex.join(["env", "-i", *assigns, *self.argv])

    def events(self) -> list[dict[str, Any]]:
        """Hook (Claude Code) or notify (Codex) payloads recorded so far."""
        return read_jsonl(self.events_file)

    def hook_events(self) -> list[dict[str, Any]]:
        """Hook payloads recorded so far (both CLIs)."""
        return read_jsonl(self.hooks_file) if self.hooks_file else []

    def event_names(self) -> list[str]:
        return [
            str(e.get("hook_event_name") or e.get("type") or "")
            for e in self.events()
            if isinstance(e, dict)
        ]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (missing file: none)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a payload still being written
    return out


def base_env(home: Path) -> dict[str, str]:
    """A minimal, hermetic process environment (no inherited secrets). TMPDIR
    is private too (Claude Code's scratch dirs follow CLAUDE_CODE_TMPDIR,
    set by `claude_launch`)."""
    tmp = home.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    path = os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    node = shutil.which("node")
    if node and str(Path(node).parent) not in path.split(os.pathsep):
        path = f"{Path(node).parent}{os.pathsep}{path}"
    return {
        "HOME": str(home),
        "PATH": path,
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        "USER": os.environ.get("USER", "corral"),
        "TMPDIR": str(tmp),
    }


def _write_recorder(root: Path) -> Path:
    """A tiny shell script appending its stdin (hooks) or its last argument
    (Codex notify) as one line to the file named by its first argument."""
    script = root / "record-event.sh"
    script.write_text(
        "#!/bin/sh\n"
        '# record-event.sh FILE [PAYLOAD]: append PAYLOAD (or stdin) + "\\n" to FILE\n'
        'out="$1"; shift\n'
        'if [ "$#" -gt 0 ]; then\n'
        "  for last; do :; done\n"
        '  printf \'%s\\n\' "$last" >> "$out"\n'
        "else\n"
        "  payload=$(cat)\n"
        '  printf \'%s\\n\' "$payload" >> "$out"\n'
        "fi\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


# --------------------------------------------------------------------------- Claude Code


def hooks_document(
    events_file: Path, recorder: Path, events: Iterable[str] = CLAUDE_HOOK_EVENTS
) -> dict[str, Any]:
    """A hooks document (Claude Code `--settings`, Codex hooks.json) whose
    hooks append every payload to events_file."""
    command = f"{shlex.quote(str(recorder))} {shlex.quote(str(events_file))}"
    hooks: dict[str, Any] = {}
    for event in events:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event in _MATCHER_EVENTS:
            entry["matcher"] = "*"
        hooks[event] = [entry]
    return {"hooks": hooks}


def claude_settings(events_file: Path, recorder: Path) -> dict[str, Any]:
    """A `--settings` document whose hooks append every payload to events_file."""
    return hooks_document(events_file, recorder, CLAUDE_HOOK_EVENTS)


def claude_launch(
    root: Path,
    base_url: str,
    workdir: Path,
    prompt: str | None,
    *,
    trusted: bool = False,
    permission_mode: str | None = None,
    skip_permissions: bool = False,
    hooks: bool = True,
    max_retries: int | None = 0,
    api_key: str = FAKE_ANTHROPIC_KEY,
    approve_key: bool = True,
    extra_args: Iterable[str] = (),
) -> AgentLaunch:
    """Interactive `claude [--settings S] [--permission-mode M] PROMPT` in workdir.

    * `trusted=False` leaves the workspace trust dialog to be answered;
      `True` pre-accepts it in .claude.json (`projects[dir].hasTrustDialogAccepted`).
    * The fake API key is pre-approved (`customApiKeyResponses.approved`), so
      the "Detected a custom API key" dialog never shows; `approve_key=False`
      leaves .claude.json as fresh as offline allows (`hasCompletedOnboarding`
      only: without it Claude Code's onboarding tries api.anthropic.com) and
      the dialog shows.
    * The default permission mode of 2.1.332 is `auto` (no prompts against the
      fake server); pass `permission_mode="manual"` to get permission prompts.
    * `skip_permissions` adds `--dangerously-skip-permissions`, pre-accepts its
      warning dialog (`skipDangerousModePermissionPrompt` in ~/.claude/settings.json)
      and sets IS_SANDBOX=1 (needed when running as root).
    * `max_retries=0` makes API errors show at once instead of after ten
      backed-off retries (CLAUDE_CODE_MAX_RETRIES)."""
    root = Path(root)
    home = root / "home"
    config_dir = home / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir)
    state: dict[str, Any] = {"hasCompletedOnboarding": True}
    if approve_key:
        state["customApiKeyResponses"] = {"approved": [api_key[-20:]], "rejected": []}
    if trusted:
        state["projects"] = {str(workdir): {"hasTrustDialogAccepted": True}}
    (home / ".claude.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    user_settings: dict[str, Any] = {}
    if skip_permissions:
        user_settings["skipDangerousModePermissionPrompt"] = True
    (config_dir / "settings.json").write_text(json.dumps(user_settings, indent=2), encoding="utf-8")

    events_file = root / "hooks.jsonl"
    argv = [str(claude_bin())]
    settings_file = None
    if hooks:
        recorder = _write_recorder(root)
        settings_file = root / "claude-settings.json"
        settings_file.write_text(
            json.dumps(claude_settings(events_file, recorder), indent=2), encoding="utf-8"
        )
        argv += ["--settings", str(settings_file)]
    if permission_mode:
        argv += ["--permission-mode", permission_mode]
    if skip_permissions:
        argv.append("--dangerously-skip-permissions")
    argv += list(extra_args)
    if prompt is not None:
        argv.append(prompt)

    env = base_env(home)
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=api_key,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        # its scratch dirs ($X/claude-<uid>/...); it ignores TMPDIR for them
        CLAUDE_CODE_TMPDIR=env["TMPDIR"],
    )
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    if skip_permissions and hasattr(os, "getuid") and os.getuid() == 0:
        env["IS_SANDBOX"] = "1"
    return AgentLaunch(
        argv=argv,
        env=env,
        cwd=workdir,
        home=home,
        events_file=events_file,
        config_dir=config_dir,
        hooks_file=events_file if hooks else None,
        extra={"settings_file": settings_file},
    )


# --------------------------------------------------------------------------- Codex


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_config(
    base_url: str,
    *,
    notify: list[str] | None,
    trusted_dirs: Iterable[Path] = (),
    model: str = CODEX_MODEL,
    max_retries: int = 0,
) -> str:
    """config.toml for a fake `[model_providers.corralfake]` (Responses API)."""
    lines = [
        f"model = {_toml_str(model)}",
        f"model_provider = {_toml_str(CODEX_PROVIDER)}",
        "check_for_update_on_startup = false",
    ]
    if notify:
        lines.append("notify = [" + ", ".join(_toml_str(a) for a in notify) + "]")
    lines += [
        "",
        f"[model_providers.{CODEX_PROVIDER}]",
        'name = "Corral fake model server"',
        f"base_url = {_toml_str(base_url)}",
        f"env_key = {_toml_str(CODEX_KEY_ENV)}",
        'wire_api = "responses"',
        f"request_max_retries = {max_retries}",
        f"stream_max_retries = {max_retries}",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[tui]",
        "screen_reader_detection_done = true",
        "",
        "[tui.model_availability_nux]",
        '"gpt-6.1-sol" = 1',
    ]
    for d in trusted_dirs:
        lines += ["", f"[projects.{_toml_str(str(d))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"


def codex_launch(
    root: Path,
    base_url: str,
    workdir: Path,
    prompt: str | None,
    *,
    trusted: bool = False,
    notify: bool = True,
    hooks: bool = False,
    sandbox: str | None = None,
    approval: str | None = None,
    daemon: bool = False,
    model: str = CODEX_MODEL,
    max_retries: int = 0,
    extra_args: Iterable[str] = (),
) -> AgentLaunch:
    """Interactive `codex --no-daemon [-s S] [-a A] PROMPT` in workdir.

    `base_url` is the fake server's OpenAI base (`server.openai_base_url`,
    ending in /v1). `trusted=False` leaves the "Trust this folder?" screen to
    be answered; `True` writes `[projects."dir"] trust_level = "trusted"`.
    Codex 0.171 otherwise starts a shared background app-server daemon that
    outlives the TUI, hence `--no-daemon` unless `daemon=True`.

    `notify` records Codex's `notify` program payloads (agent-turn-complete)
    in `events_file`; `hooks` writes $CODEX_HOME/hooks.json (Claude-style
    hooks, recorded in `hooks_file`) and passes `--dangerously-bypass-hook-trust`
    so the "Hooks need review" screen does not show."""
    root = Path(root)
    home = root / "home"
    codex_home = root / "codex-home"
    home.mkdir(parents=True, exist_ok=True)
    codex_home.mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir)
    events_file = root / "notify.jsonl"
    notify_argv = None
    if notify:
        recorder = _write_recorder(root)
        notify_argv = [str(recorder), str(events_file)]
    (codex_home / "config.toml").write_text(
        codex_config(
            base_url,
            notify=notify_argv,
            trusted_dirs=[workdir] if trusted else [],
            model=model,
            max_retries=max_retries,
        ),
        encoding="utf-8",
    )
    hooks_file = None
    if hooks:
        hooks_file = root / "hooks.jsonl"
        doc = hooks_document(hooks_file, _write_recorder(root), CODEX_HOOK_EVENTS)
        (codex_home / "hooks.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    argv = [str(codex_bin())]
    if not daemon:
        argv.append("--no-daemon")
    if hooks:
        argv.append("--dangerously-bypass-hook-trust")
    if sandbox:
        argv += ["--sandbox", sandbox]
    if approval:
        argv += ["--ask-for-approval", approval]
    argv += list(extra_args)
    if prompt is not None:
        argv.append(prompt)
    env = base_env(home)
    env.update({"CODEX_HOME": str(codex_home), CODEX_KEY_ENV: FAKE_OPENAI_KEY})
    return AgentLaunch(
        argv=argv,
        env=env,
        cwd=workdir,
        home=home,
        events_file=events_file,
        config_dir=codex_home,
        hooks_file=hooks_file,
    )


# --------------------------------------------------------------------------- Gemini CLI


def gemini_settings(approval_mode: str | None = None) -> dict[str, Any]:
    """~/.gemini/settings.json for the fake server: API-key auth chosen (no
    "How would you like to authenticate" dialog), no update checks, usage
    statistics or telemetry. `approval_mode` (`auto_edit`: edits run without
    asking) is the operator's own setting, `general.defaultApprovalMode`."""
    general: dict[str, Any] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    if approval_mode:
        general["defaultApprovalMode"] = approval_mode
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": general,
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }


def gemini_launch(
    root: Path,
    base_url: str,
    workdir: Path,
    prompt: str | None,
    *,
    approval_mode: str | None = None,
    skip_trust: bool = True,
    extra_args: Iterable[str] = (),
) -> AgentLaunch:
    """Interactive `gemini [--skip-trust] [-i PROMPT]` in workdir, talking the
    Gemini API to `base_url` (the fake server's `url`) with a fake key.

    `skip_trust=False` leaves the "Do you trust the files in this folder?"
    dialog up (answering it relaunches the CLI). Hooks are not used here: a
    per-run hook file needs root-owned system settings (docs/agent-clis.md)."""
    root = Path(root)
    home = root / "home"
    config_dir = home / ".gemini"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "settings.json").write_text(
        json.dumps(gemini_settings(approval_mode), indent=2), encoding="utf-8"
    )
    argv = [str(gemini_bin())]
    if skip_trust:
        argv.append("--skip-trust")
    argv += list(extra_args)
    if prompt is not None:
        argv += ["--prompt-interactive", prompt]
    env = base_env(home)
    env.update(GEMINI_API_KEY=FAKE_GEMINI_KEY, GOOGLE_GEMINI_BASE_URL=base_url)
    return AgentLaunch(
        argv=argv,
        env=env,
        cwd=Path(workdir),
        home=home,
        events_file=root / "events.jsonl",
        config_dir=config_dir,
    )


# --------------------------------------------------------------------------- Aider


def aider_whole_file(path: str, content: str, text: str = "Here it is.") -> str:
    """A model reply in Aider's "whole" edit format: the file's path on its
    own line, then its complete new content in a fence. Aider applies it."""
    if not content.endswith("\n"):
        content += "\n"
    return f"{text}\n\n{path}\n```\n{content}```\n"


def aider_launch(
    root: Path,
    openai_base_url: str,
    workdir: Path,
    *,
    yes_always: bool = False,
    extra_args: Iterable[str] = (),
) -> AgentLaunch:
    """Interactive `aider` in workdir on the fake server's Chat Completions
    (`openai_base_url` = `server.openai_base_url`). Settings go through
    Aider's own AIDER_* variables (what an operator would set), so the same
    env drives corral's profile: the model, no analytics, no model-warnings
    prompt (the fake model has no known context size), no update check;
    `yes_always` answers every confirmation itself. The argv adds the flags
    corral's profile passes (no commits, no .gitignore edit, history files
    and no tag cache outside the worktree). The task is typed at its prompt."""
    root = Path(root)
    home = root / "home"
    state = root / "aider-state"
    home.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    argv = [
        str(aider_bin()),
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--chat-history-file",
        str(state / "chat.history.md"),
        "--input-history-file",
        str(state / "input.history"),
        "--map-tokens",
        "0",
        *extra_args,
    ]
    # Known metadata for the fake model: otherwise Aider downloads LiteLLM's
    # price list from GitHub at every start (offline: an error printed after
    # a DNS failure or a 5 s timeout) and warns about an unknown context size.
    metadata = root / "model-metadata.json"
    metadata.write_text(
        json.dumps(
            {
                AIDER_MODEL: {
                    "max_input_tokens": 128000,
                    "max_output_tokens": 8192,
                    "input_cost_per_token": 0,
                    "output_cost_per_token": 0,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    env = base_env(home)
    env.update(
        OPENAI_API_KEY=FAKE_OPENAI_KEY,
        OPENAI_API_BASE=openai_base_url,
        AIDER_MODEL=AIDER_MODEL,
        AIDER_MODEL_METADATA_FILE=str(metadata),
        AIDER_ANALYTICS="false",
        AIDER_CHECK_UPDATE="false",
        AIDER_SHOW_RELEASE_NOTES="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    if yes_always:
        env["AIDER_YES_ALWAYS"] = "true"
    return AgentLaunch(
        argv=argv,
        env=env,
        cwd=Path(workdir),
        home=home,
        events_file=root / "events.jsonl",
        config_dir=state,
    )


def codex_exec_argv(
    launch: AgentLaunch, prompt: str, *, sandbox: str = "workspace-write"
) -> list[str]:
    """`codex exec --json` (one-shot, JSONL events on stdout), to be run with
    `launch.env` in `launch.cwd` (config and notify come from its CODEX_HOME)."""
    return [str(codex_bin()), "exec", "--json", "--sandbox", sandbox, prompt]


def claude_print_argv(launch: AgentLaunch, prompt: str, *extra: str) -> list[str]:
    """`claude -p --output-format json` (one-shot, one JSON result on stdout)
    with the same settings as `launch` (use `launch.env`, cwd=`launch.cwd`)."""
    argv = [str(claude_bin()), "-p", "--output-format", "json"]
    if launch.extra.get("settings_file"):
        argv += ["--settings", str(launch.extra["settings_file"])]
    return [*argv, *extra, prompt]


# --------------------------------------------------------------------------- OpenCode

OPENCODE_PROVIDER = "corralfake"
OPENCODE_MODEL = "fake-model"


# e2e/package.json pins OpenCode's native linux-x64 package itself (optional:
# other platforms skip it): the `opencode-ai` wrapper lists a dozen platform
# packages, not all of them on every registry mirror, and `npm ci` refuses a
# lockfile missing any of them. The binary is the same one the wrapper links.
OPENCODE_PACKAGE = "opencode-linux-x64"


def opencode_bin() -> Path:
    return E2E_DIR / "node_modules" / OPENCODE_PACKAGE / "bin" / "opencode"


def missing_opencode() -> str | None:
    """Why the real OpenCode cannot run here (None when it is installed)."""
    if not opencode_bin().exists():
        return (
            f"{opencode_bin()} is missing: run `npm ci --prefix e2e` "
            f"({OPENCODE_PACKAGE} installs on Linux x86-64 only)"
        )
    return None


def opencode_config(
    base_url: str, *, permission: dict[str, Any] | None = None, model: str = OPENCODE_MODEL
) -> dict[str, Any]:
    """opencode.json with one provider on the fake server's Anthropic Messages
    API: the `@ai-sdk/anthropic` SDK is bundled in the binary, so nothing is
    installed at run time. Every download and upload OpenCode could start
    (autoupdate, share, LSP servers, formatters) is off."""
    config: dict[str, Any] = {
        "autoupdate": False,
        "share": "disabled",
        "lsp": False,
        "formatter": False,
        "model": f"{OPENCODE_PROVIDER}/{model}",
        "small_model": f"{OPENCODE_PROVIDER}/{model}",
        "provider": {
            OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/anthropic",
                "name": "Corral fake",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "{env:ANTHROPIC_API_KEY}"},
                "models": {model: {"name": "Fake Model"}},
            }
        },
    }
    if permission is not None:
        config["permission"] = permission
    return config


def opencode_launch(
    root: Path,
    base_url: str,
    workdir: Path,
    prompt: str | None,
    *,
    permission: dict[str, Any] | None = None,
    hooks: bool = True,
    extra_args: Iterable[str] = (),
) -> AgentLaunch:
    """Interactive `opencode [--prompt PROMPT]` in workdir.

    `base_url` is the fake server's root (`server.url`; the provider's
    `baseURL` adds /v1). The config goes in through OPENCODE_CONFIG; HOME and
    the XDG dirs are private, so OpenCode's data (sessions database,
    snapshots, logs) stays in `root`. `permission` is OpenCode's permission
    block (`{"edit": "ask", "bash": "ask"}` for prompts; its default allows
    both). `hooks` records corral's plugin events in `hooks_file` (the plugin
    runs CORRAL_HOOK_CMD, here the recorder)."""
    root = Path(root)
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    config_file = root / "opencode.json"
    config_file.write_text(
        json.dumps(opencode_config(base_url, permission=permission), indent=2), encoding="utf-8"
    )
    argv = [str(opencode_bin()), *extra_args]
    if prompt is not None:
        argv += ["--prompt", prompt]
    env = base_env(home)
    env.update(opencode_env(home, config_file))
    hooks_file = None
    if hooks:
        hooks_file = root / "hooks.jsonl"
        recorder = _write_stdin_recorder(root)
        env["CORRAL_HOOK_CMD"] = f"{shlex.quote(str(recorder))} {shlex.quote(str(hooks_file))}"
        env["OPENCODE_CONFIG_CONTENT"] = opencode_config_content(None) or "{}"
    return AgentLaunch(
        argv=argv,
        env=env,
        cwd=Path(workdir),
        home=home,
        events_file=hooks_file or root / "hooks.jsonl",
        config_dir=home / ".config" / "opencode",
        hooks_file=hooks_file,
        extra={"config_file": config_file},
    )


def _write_stdin_recorder(root: Path) -> Path:
    """Like `_write_recorder`, for corral's OpenCode plugin, which runs
    `$CORRAL_HOOK_CMD <EventName>`: the payload (stdin) already names the
    event, so the argument after FILE is ignored."""
    script = root / "record-stdin.sh"
    script.write_text(
        "#!/bin/sh\n"
        '# record-stdin.sh FILE [EVENT]: append stdin + "\\n" to FILE\n'
        "payload=$(cat)\n"
        'printf \'%s\\n\' "$payload" >> "$1"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def opencode_env(home: Path, config_file: Path) -> dict[str, str]:
    """The variables that point OpenCode at its config and keep it offline."""
    return {
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENCODE_CONFIG": str(config_file),
        "ANTHROPIC_API_KEY": FAKE_ANTHROPIC_KEY,
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        # With a plugin configured (corral's), OpenCode waits at start for an
        # npm install of `@opencode-ai/plugin` into each config dir; offline,
        # npm's retries make that ~70 s. Offline mode fails it at once.
        "npm_config_offline": "true",
    }
