"""Each session's own provider home: the config directory an agent CLI keeps
its settings, history, conversations and login state in (Claude Code's
`CLAUDE_CONFIG_DIR`, Codex's `CODEX_HOME`, Gemini CLI's `GEMINI_CLI_HOME`,
OpenCode's XDG base dirs, Aider's HOME; the one-shot presets share their
CLI's layout).

Sessions sharing the operator's `~/.claude` or `~/.codex` share everything in
it: one agent's trust answers, prompt history and settings leak into the
next, and a confined agent could rewrite the operator's own config. So each
session gets `agents/<session>/provider-home/`, made at its first launch:

- credentials: a fresh copy of the operator's credential file(s) at every
  launch (the operator's file stays the authority; the agent's copy may be
  refreshed by the agent, never written back), mode 0600;
- settings: a copy of the operator's user settings and global instructions,
  once (the session's own changes, like a folder it trusted, stay its own);
- Claude Code's global state file (`.claude.json`: onboarding, approved key
  suffixes, account) without its `projects` table (the operator's per-project
  history and trust answers);
- nothing else: no history, no conversations, no other session's files.

The home is kept with the session (its conversation lives there: `corral
resume` and revive find it) and removed with the session's directory.

Every write replaces a file by rename, never through what is at the name:
a confined agent can write in its home and may leave a symlink where corral
writes a credential next time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

HOME_DIR = "provider-home"


@dataclass(frozen=True)
class HomeLayout:
    """Where one CLI keeps its home and what of the operator's it needs."""

    variable: str  # the environment variable naming the home
    default: str  # the home under $HOME when the variable is not set
    credentials: tuple[str, ...]  # copied fresh at every launch
    settings: tuple[str, ...]  # copied once, at the session's first launch
    # a state file kept next to (not in) the default home; with the
    # variable set, the CLI looks for it inside the home
    global_state: str | None = None
    # keys of the global state that are the operator's history, never copied
    private_keys: tuple[str, ...] = ()
    # a CLI following the XDG base directories (OpenCode) keeps its files
    # under several variables: each (variable, its folder under HOME) names
    # that folder of the session's home, and the entries above are paths
    # under HOME (`.local/share/opencode/auth.json`)
    xdg: tuple[tuple[str, str], ...] = ()


CLAUDE_HOME = HomeLayout(
    variable="CLAUDE_CONFIG_DIR",
    default=".claude",
    credentials=(".credentials.json",),
    settings=("settings.json", "CLAUDE.md"),
    global_state=".claude.json",
    private_keys=("projects", "history"),
)
CODEX_HOME = HomeLayout(
    variable="CODEX_HOME",
    default=".codex",
    credentials=("auth.json",),
    settings=("config.toml", "AGENTS.md"),
)
# Gemini CLI keeps `.gemini/` under GEMINI_CLI_HOME instead of HOME (its
# `homedir()`); `.gemini/.env` is where it reads a key from last.
GEMINI_HOME = HomeLayout(
    variable="GEMINI_CLI_HOME",
    default="",
    credentials=(".gemini/oauth_creds.json", ".gemini/google_accounts.json", ".gemini/.env"),
    settings=(".gemini/settings.json", ".gemini/GEMINI.md"),
)
# OpenCode follows the XDG base dirs (no variable of its own moves them): its
# sign-ins in `auth.json` / `mcp-auth.json` under the data dir, settings under
# the config dir; its sessions, snapshots, logs, state and caches are the
# session's own. Inside the session the pane's XDG dirs are its home's
# (`git` there reads `~/.gitconfig`, not `$XDG_CONFIG_HOME/git`).
OPENCODE_XDG_HOME = HomeLayout(
    variable="XDG_DATA_HOME",
    default=".local/share",
    credentials=(".local/share/opencode/auth.json", ".local/share/opencode/mcp-auth.json"),
    settings=(
        ".config/opencode/opencode.json",
        ".config/opencode/opencode.jsonc",
        ".config/opencode/config.json",
        ".config/opencode/AGENTS.md",
        # the models.dev catalogue it fetched last: a confined session may not reach it
        ".cache/opencode/models.json",
    ),
    xdg=(
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ),
)
# Aider has no variable for its `~/.aider` (analytics, caches, version
# checks, OpenRouter sign-in) nor for its `~/.aider*.yml` settings: its home
# is HOME itself. Its git reads the copies of the operator's git config; a
# `pip install --user` Aider still imports (PYTHONUSERBASE stays the
# operator's). `~/.env`, which may hold anyone's keys, is not carried over:
# Aider's keys come from the environment (`AIDER_*`, `*_API_KEY`) or
# `~/.aider/oauth-keys.env`.
AIDER_HOME = HomeLayout(
    variable="HOME",
    default="",
    credentials=(".aider/oauth-keys.env",),
    settings=(
        ".aider.conf.yml",
        ".aider.model.settings.yml",
        ".aider.model.metadata.json",
        ".gitconfig",
        ".config/git/config",
    ),
)
LAYOUTS: dict[str, HomeLayout] = {
    "claude": CLAUDE_HOME,
    "codex": CODEX_HOME,
    "gemini": GEMINI_HOME,
    "opencode": OPENCODE_XDG_HOME,
    "aider": AIDER_HOME,
}
# engines that run an agent's CLI under another name (its one-shot preset,
# named in its profile): that agent's home (`profiles` says which)
_SHARED: dict[str, str] = {}


def share_home(name: str, agent: str) -> None:
    """Engine `name` runs agent `agent`'s CLI: it gets that agent's home."""
    _SHARED[name] = agent


def layout_for(agent: str) -> HomeLayout | None:
    """The home layout of agent `agent` (a profile name, or an engine that
    runs one's CLI: a one-shot preset), if it has one."""
    return LAYOUTS.get(agent) or LAYOUTS.get(_SHARED.get(agent, ""))


def session_home(session_dir: Path) -> Path:
    """Where a session's provider home is."""
    return session_dir / HOME_DIR


def operator_home(layout: HomeLayout, env: Mapping[str, str]) -> Path:
    """The operator's own home for this CLI (`$VAR`, else under `$HOME`)."""
    named = env.get(layout.variable, "").strip()
    if named:
        return Path(os.path.expanduser(named))
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    return home / layout.default if layout.default else home


def _operator_file(layout: HomeLayout, rel: str, env: Mapping[str, str]) -> Path:
    """Where the operator keeps entry `rel` of `layout`."""
    if not layout.xdg:
        return operator_home(layout, env) / rel
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    for variable, folder in layout.xdg:
        if rel.startswith(folder + "/"):
            named = env.get(variable, "").strip()
            base = Path(os.path.expanduser(named)) if named else home / folder
            return base / rel[len(folder) + 1 :]
    return home / rel


def home_variables(layout: HomeLayout, home: Path) -> dict[str, str]:
    """The variables that point the CLI at the session's home `home`."""
    if layout.xdg:
        return {variable: str(home / folder) for variable, folder in layout.xdg}
    return {layout.variable: str(home)}


def _global_state_source(layout: HomeLayout, env: Mapping[str, str]) -> Path | None:
    if layout.global_state is None:
        return None
    named = env.get(layout.variable, "").strip()
    base = Path(os.path.expanduser(named)) if named else Path(env.get("HOME") or "~").expanduser()
    return base / layout.global_state


def _own_folder(home: Path, folder: Path) -> None:
    """`folder` (inside `home`) made a real directory all the way down: a
    link the agent left on the way (`.gemini` -> a folder of the
    operator's) is removed, so nothing is written where it points."""
    current = home
    for part in folder.relative_to(home).parts:
        current = current / part
        if current.is_symlink() or (os.path.lexists(current) and not current.is_dir()):
            current.unlink()
        current.mkdir(exist_ok=True, mode=0o700)


def _write(path: Path, data: bytes, home: Path | None = None) -> None:
    """`path` replaced whole by `data` (0600), never written through a link
    (nor through a linked folder between `home` and it)."""
    if home is not None:
        _own_folder(home, path.parent)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".corral-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _state_without_history(raw: bytes, private: tuple[str, ...]) -> bytes | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return json.dumps({k: v for k, v in data.items() if k not in private}, indent=2).encode()


def prepare(layout: HomeLayout, session_dir: Path, operator_env: Mapping[str, str]) -> Path:
    """Make (or refresh) the session's provider home from the operator's and
    return it: credentials copied anew, settings and global state only when
    the session has none yet."""
    home = session_home(session_dir)
    if home.is_symlink():
        home.unlink()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in layout.credentials:
        data = _read(_operator_file(layout, name, operator_env))
        if data is not None:
            _write(home / name, data, home)
    for name in layout.settings:
        if os.path.lexists(home / name) and not _linked_on_the_way(home, home / name):
            continue
        data = _read(_operator_file(layout, name, operator_env))
        if data is not None:
            _write(home / name, data, home)
    state = _global_state_source(layout, operator_env)
    if state is not None and layout.global_state is not None:
        target = home / layout.global_state
        raw = None if os.path.lexists(target) else _read(state)
        if raw is not None:
            kept = _state_without_history(raw, layout.private_keys)
            if kept is not None:
                _write(target, kept)
    return home


def _linked_on_the_way(home: Path, path: Path) -> bool:
    """Whether a folder between `home` and `path` is a link (what is found
    there is not the session's own)."""
    current = home
    for part in path.parent.relative_to(home).parts:
        current = current / part
        if current.is_symlink():
            return True
    return False


def isolate(
    agent: str,
    session_dir: Path,
    env: MutableMapping[str, str],
    operator_env: Mapping[str, str],
    *,
    resuming: bool = False,
) -> Path | None:
    """Point `env` (a pane's) at the session's own provider home, made from
    the operator's (`operator_env`). None: this agent has no home to give,
    or the session resumes a conversation begun before it had a home of its
    own (by an older corral): that conversation is in the operator's home,
    so the agent keeps using it rather than losing it."""
    layout = layout_for(agent)
    if layout is None or (resuming and not session_home(session_dir).is_dir()):
        return None
    home = prepare(layout, session_dir, operator_env)
    if layout.variable == "HOME" and not env.get("PYTHONUSERBASE"):
        # a `pip install --user` CLI finds its packages under the operator's HOME
        home_base = Path(operator_env.get("HOME") or os.path.expanduser("~")) / ".local"
        env["PYTHONUSERBASE"] = operator_env.get("PYTHONUSERBASE") or str(home_base)
    env.update(home_variables(layout, home))
    return home


def in_own_home(agent: str, session_dir: Path, env: Mapping[str, str]) -> bool:
    """Whether `env` (a pane's) points agent `agent` at the session's own
    home: then that home is all of its config it may write."""
    layout = layout_for(agent)
    if layout is None:
        return False
    wanted = home_variables(layout, session_home(session_dir))
    return all(env.get(name) == value for name, value in wanted.items())


def session_env(agent: str, session_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """`env` as the session's agent saw it: its config home variable naming
    the session's own home when it has one (where its conversations are)."""
    out = dict(env)
    layout = layout_for(agent)
    if layout is not None and session_home(session_dir).is_dir():
        out.update(home_variables(layout, session_home(session_dir)))
    return out
