"""A command and a policy -> the `bwrap` command line that confines it.

Mount order matters (a later mount covers an earlier one): the whole
filesystem read-only, a private /tmp, (for an agent) HOME's top level as
private scratch, credentials and corral's state dir covered, then the repository's git dir read-only (it may sit in the private
/tmp or the state dir) with the worktree's private git dir over its admin dir
(`gitview.git_mounts(...).shared`), then what the run is granted to read where
the hiding covered it (corral's own hook program, an agent's session dir),
then what the run may write: the worktree (and right after it, its `.git`
file read-only again: `.pointer`), the declared caches, the grant's own paths
(an agent's config dirs, its hooks file). Nothing of the real repository is
writable: not its objects, refs or admin dir.

An agent keeps its pane's terminal (`Grant.terminal`: no `--new-session`, or
it would lose its controlling tty). Keystrokes it could push into that
terminal reach only itself: the pane runs bwrap directly, no shell waits
behind it. `--die-with-parent` plus the PID namespace still end everything
inside when the pane's process is killed."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .gitview import git_mounts
from .layout import git_layout
from .policy import Grant, SandboxPolicy
from .secrets import hidden_paths


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _within(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _readable(grant: Grant, covered: list[str]) -> list[str]:
    """The grant's readable paths that the hiding covered, never one that
    would show a covered path again (an ancestor of it)."""
    out: list[str] = []
    for path in grant.readable:
        real = _real(path)
        if not os.path.exists(real) or not _within(real, covered):
            continue
        if any(_within(c, [real]) for c in covered):
            continue
        out.append(real)
    return out


def _home_view(env: Mapping[str, str]) -> list[str]:
    """HOME as scratch over its real entries (links kept as links); the
    credentials among them are covered right after, like everywhere."""
    raw = env.get("HOME", "")
    home = _real(Path(raw)) if raw and os.path.isabs(raw) else ""
    if not home or home == "/" or not os.path.isdir(home):
        return []
    args = ["--tmpfs", home]
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return []
    for name in names:
        path = os.path.join(home, name)
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind-try", path, path]
    return args


def confined_argv(
    command: Sequence[str],
    cwd: Path,
    policy: SandboxPolicy,
    env: Mapping[str, str],
    *,
    network: bool = False,
    bwrap: str = "bwrap",
    grant: Grant | None = None,
) -> list[str]:
    grant = grant or Grant()
    layout = git_layout(cwd)
    argv = [bwrap, "--die-with-parent"]  # the sandbox dies with its parent
    if not grant.terminal:
        argv.append("--new-session")  # no controlling terminal to inject keystrokes into
    argv += [
        "--unshare-pid",  # everything started inside dies with the command
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if grant.scratch_home:
        argv += _home_view(env)
    hide = list(policy.hidden)
    if policy.state_dir is not None:
        hide.append(policy.state_dir)
    covered = ["/tmp"]
    for path in hidden_paths(env, hide):
        covered.append(str(path))
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    repository = git_mounts(layout, policy.state_dir)
    argv += repository.shared  # nothing of the real repository is writable (gitview)
    for shown in _readable(grant, covered):
        argv += ["--ro-bind", shown, shown]
    writable: list[str] = [str(layout.top), _real(cwd)]
    writable += [_real(p) for p in policy.writable if os.path.isdir(p)]
    writable += [_real(p) for p in grant.writable if os.path.exists(p)]
    seen: list[str] = []
    for n, place in enumerate(writable):
        if place not in seen:
            seen.append(place)
            argv += ["--bind", place, place]
        if n == 1:
            argv += repository.pointer  # the worktree's `.git` as corral wrote it, read-only
    for again in covered[1:]:  # a writable place holding a credential still hides it
        if _within(again, seen) and again not in seen:
            argv += (
                ["--tmpfs", again] if os.path.isdir(again) else ["--ro-bind", "/dev/null", again]
            )
    argv += ["--chdir", _real(cwd), "--", *command]
    return argv


def confined_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment inside: temporary files go to the private /tmp."""
    out = dict(env)
    for key in ("TMPDIR", "TMP", "TEMP"):
        if key in out:
            out[key] = "/tmp"
    return out
