"""An external agent's pane command: confined unless the operator opted out.

The agent gets the same policy as checks plus what it cannot work without:
the network by allow-list (its model and what the operator allows, through
corral's proxy: `network`), its terminal (it is interactive), its own
config and credential paths (listed by its profile, created when a directory
is missing so the agent can write there; HOME is a private tmpfs so a config
file rewritten by temp file and rename still lands, see `Grant`), git's own
user config read-only (never git's credentials), its program's install
prefix and the files its command line names, the hooks file corral reads for its session (the rest of corral's
state dir stays hidden), the session's own files read-only (Claude Code's
generated settings) and the Python that `corral hook` runs from.

An agent that runs unconfined — opted out, or no sandbox can run here, and
the account says why — runs under the pane keeper (`keeper`): whatever it
starts still ends when it exits."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .allowlist import corral_runtime
from .argv import confined_argv, confined_env
from .netstart import can_watch, relay_argv, watch_flags
from .network import (
    HOST,
    PROXY_SOCKET_NAME,
    NetworkAllow,
    agent_allow,
    proxy_env,
)
from .policy import Grant, SandboxPolicy
from .status import sandbox_status

KEEPER = Path(__file__).resolve().with_name("keeper.py")
GIT_CONFIG = (".gitconfig", ".config/git/config")  # never .config/git/credentials


@dataclass(frozen=True)
class AgentLaunch:
    argv: list[str]
    env: dict[str, str]
    confined: bool
    account: str  # one line for the session's event log
    # in its own network namespace: what it may reach, and the unix socket
    # corral's proxy must serve for it (`netproxy.AllowListProxy.serve`)
    # before it starts; None: the host's network (unconfined, or `network = "host"`)
    network: NetworkAllow | None = None
    proxy_socket: Path | None = None


def reach(allow: NetworkAllow | None, proxied: bool = True) -> str:
    """What an agent may reach on the network, in a few words (`proxied`:
    corral's proxy serves it; else its namespace has no way out at all)."""
    if allow is None:
        return "the host's (its loopback services and abstract sockets too)"
    if not proxied:
        return "none (a network namespace of its own, no way out)"
    if not allow.entries:
        return "nothing: corral's proxy refuses every host ([sandbox] network_allow widens it)"
    return f"only {allow.describe()}, through corral's proxy"


def hook_runtime(python: str) -> tuple[Path, ...]:
    """What `corral hook` reads: the interpreter, its prefix, corral itself."""
    return corral_runtime(python)


def kept_argv(argv: Sequence[str], python: str, keeper: str | Path = KEEPER) -> list[str]:
    """`argv` under the pane keeper: its leftovers end when it exits."""
    return [python, "-I", "-S", str(keeper), "--", *argv]


def git_config(env: Mapping[str, str]) -> tuple[Path, ...]:
    """git's user config files under the agent's HOME (read-only inside)."""
    home = env.get("HOME") or os.path.expanduser("~")
    return tuple(Path(home) / rel for rel in GIT_CONFIG)


def _programs(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[Path, ...]:
    """The agent's program as the pane would find it, and every executable
    the command line names by absolute path (a launcher's program): their
    install prefixes are shown."""
    if not argv:
        return ()
    first = argv[0]
    found = str(cwd / first) if "/" in first else shutil.which(first, path=env.get("PATH"))
    named = [w for w in argv[1:] if os.path.isabs(w) and os.path.isfile(w) and _executable(w)]
    return tuple(Path(p) for p in [*([found] if found else []), *named])


def _executable(path: str) -> bool:
    return os.access(path, os.X_OK)


def _named_files(argv: Sequence[str]) -> tuple[Path, ...]:
    """Other files the command line names by absolute path (a `custom:`
    agent's script run by an interpreter): shown read-only, each alone."""
    return tuple(
        Path(w) for w in argv[1:] if os.path.isabs(w) and os.path.isfile(w) and not _executable(w)
    )


def env_named_files(env: Mapping[str, str], names: Sequence[str]) -> tuple[Path, ...]:
    """Files the agent's own variables name (Aider's `AIDER_MODEL_METADATA_FILE`,
    a profile's `*_CONFIG`): only variables its profile passes on by name or
    pattern (`AIDER_*`), values that are absolute paths of regular files;
    shown read-only, each alone."""
    import fnmatch

    out: list[Path] = []
    for key, value in env.items():
        if not any(fnmatch.fnmatchcase(key, pattern) for pattern in names):
            continue
        if os.path.isabs(value) and os.path.isfile(value):
            out.append(Path(value))
    return tuple(out)


def _short(path: Path, home: str) -> str:
    text = str(path)
    if home and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")) :]
    return text


def launch_agent(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    policy: SandboxPolicy,
    choice: bool | None,
    own_dirs: Sequence[Path],
    own_files: Sequence[Path],
    hooks_file: Path,
    python: str,
    agent_socket_dir: Path | None = None,
    inside: Callable[[list[str]], list[str]] | None = None,
    env_files: Sequence[str] = (),
    agent: str = "",
    network_allow: Sequence[str] = (),
    network_hosts: Sequence[str] = (),
) -> AgentLaunch:
    """`argv` as the pane runs it: inside bwrap when this agent is to be
    confined and a sandbox can run here (`inside` adapts the command line
    to that: `AgentProfile.inside_sandbox`), else under the pane keeper.
    Confined, it has its own network namespace and reaches only what
    `network.agent_allow` lists for `agent` (its profile's name, and its
    profile's `network_hosts`), through
    the proxy corral serves on `<agent_socket_dir>/net.sock` (no socket
    dir: nothing at all) — unless the operator chose `[sandbox] network = "host"`."""
    kept = kept_argv(argv, python)
    if not policy.confines_agent(choice):
        if not policy.enabled:
            why = "[sandbox] enabled = false"
        elif choice is False:
            why = "sandbox = false for this agent"
        else:
            why = "[sandbox] agents = false"
        return AgentLaunch(kept, dict(env), False, f"unconfined ({why})")
    status = sandbox_status()
    if not status.available or status.bwrap is None:
        return AgentLaunch(
            kept, dict(env), False, f"unconfined: no sandbox can run here ({status.detail})"
        )
    for directory in own_dirs:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue  # not writable for us either: the agent runs without it
    hooks_file.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(hooks_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    if inside is not None:
        argv = inside(list(argv))
    grant = Grant(
        writable=(*own_dirs, *own_files, hooks_file),
        # its agent socket's directory: the one way it reaches the owner
        readable=(
            hooks_file.parent,
            *hook_runtime(python),
            *git_config(env),
            *_named_files(argv),
            *env_named_files(env, env_files),
            *((agent_socket_dir,) if agent_socket_dir is not None else ()),
        ),
        terminal=True,
        programs=_programs(argv, cwd, env),
    )
    inner_env = confined_env(env)
    allow: NetworkAllow | None = None
    proxy_socket: Path | None = None
    watch = False
    if policy.network != HOST and agent_socket_dir is None:
        allow = NetworkAllow()  # no socket for a proxy: its own namespace, and nothing out
    elif policy.network != HOST and agent_socket_dir is not None:
        extra = [*policy.network_allow, *network_allow]  # `[sandbox]`'s, then this agent's own
        allow = agent_allow(
            agent, env, extra, names=env_files, state_dir=policy.state_dir, hosts=network_hosts
        )
        proxy_socket = agent_socket_dir / PROXY_SOCKET_NAME
        watch = can_watch(status.bwrap, python)
        argv = relay_argv(python, proxy_socket, allow, list(argv), watch=watch, env=inner_env)
        inner_env.update(proxy_env(allow))
    wrapped = confined_argv(
        argv,
        cwd,
        policy,
        env,
        network=allow is None,
        bwrap=status.bwrap,
        grant=grant,
        privileges=watch_flags() if watch else (),
    )
    home = env.get("HOME", "")
    own = [_short(p, home) for p in (*own_dirs, *own_files) if p.exists()]
    writes = ", ".join(["its worktree", *own])
    net = "network: " + reach(allow, proxied=proxy_socket is not None)
    if proxy_socket is not None and not watch:
        net += " (direct connections it tries are not recorded here)"
    if allow is None:
        net += ' ([sandbox] network = "host")'
    account = f"confined (bubblewrap); {net}; writes {writes}"  # the network first: it is clipped
    return AgentLaunch(wrapped, inner_env, True, account, allow, proxy_socket)
