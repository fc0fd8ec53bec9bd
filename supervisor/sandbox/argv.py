"""A command and a policy -> the `bwrap` command line that confines it.

Mount order matters (a later mount covers an earlier one): the whole
filesystem read-only, a private /tmp, credentials and corral's state dir
covered, then the repository's git dir read-only (it may sit in the private
/tmp or the state dir), then what the run may write: the worktree, the object
store, the worktree's admin dir, the declared caches."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .layout import git_layout
from .policy import SandboxPolicy
from .secrets import hidden_paths


def _real(path: Path) -> str:
    return os.path.realpath(path)


def confined_argv(
    command: Sequence[str],
    cwd: Path,
    policy: SandboxPolicy,
    env: Mapping[str, str],
    *,
    network: bool = False,
    bwrap: str = "bwrap",
) -> list[str]:
    layout = git_layout(cwd)
    argv = [
        bwrap,
        "--die-with-parent",  # the sandbox dies with corral's child
        "--new-session",  # no controlling terminal to inject keystrokes into
        "--unshare-pid",  # everything started inside dies with the command
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    hide = list(policy.hidden)
    if policy.state_dir is not None:
        hide.append(policy.state_dir)
    for path in hidden_paths(env, hide):
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    if layout.common is not None:
        argv += ["--ro-bind", str(layout.common), str(layout.common)]
    writable: list[str] = [str(layout.top), _real(cwd)]
    if layout.common is not None and (layout.common / "objects").is_dir():
        writable.append(str(layout.common / "objects"))
    if layout.admin is not None:
        writable.append(str(layout.admin))
    writable += [_real(p) for p in policy.writable if os.path.isdir(p)]
    seen: set[str] = set()
    for place in writable:
        if place not in seen:
            seen.add(place)
            argv += ["--bind", place, place]
    argv += ["--chdir", _real(cwd), "--", *command]
    return argv


def confined_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment inside: temporary files go to the private /tmp."""
    out = dict(env)
    for key in ("TMPDIR", "TMP", "TEMP"):
        if key in out:
            out[key] = "/tmp"
    return out
