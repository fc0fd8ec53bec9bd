"""A command and a policy -> the `bwrap` command line that confines it.

The sandbox starts empty and gets only what `allowlist` allows: the system
roots, the run's PATH prefixes and an agent's own install prefix read-only,
private /tmp, /var/tmp and homes (the passwd entry's and `$HOME`: empty
tmpfs). Mount order matters (a later mount covers an earlier one): after the
allowed dirs come the hidden ones among them (corral's state dirs, the
operator's checkout, the operator's `hidden` list and the credential paths of
`secrets`), then the repository's shared git dir read-only (it may sit in a
hidden place) with the worktree's private git dir over its admin dir
(`gitview.git_mounts(...).shared`), then what the run is granted to read
(corral's own hook program, an agent's session dir, a contract's environment),
then what it may write: the worktree (and right after it, its `.git` file
read-only again: `.pointer`), the declared caches, the grant's own paths (an
agent's config dirs, its hooks file). Nothing of the real repository is
writable: not its objects, refs or admin dir. Last, a credential path inside a
granted place is covered again: `secrets` is the second layer for what an
allowed dir may hold (`~/.cargo/credentials.toml` under `~/.cargo`).

The run holds no capabilities (`--cap-drop ALL`: run by root, bwrap would
keep them, and a root with CAP_SYS_ADMIN could remount its way out).

An agent keeps its pane's terminal (`Grant.terminal`: no `--new-session`, or
it would lose its controlling tty). Keystrokes it could push into that
terminal reach only itself: the pane runs bwrap directly, no shell waits
behind it. In its own PID namespace bwrap's init is PID 1: when the command
exits, bwrap exits and the kernel kills whatever the command left behind
(`setsid`, double-forked, `nohup`ed); `--die-with-parent` ends it all when
the pane's process is killed."""

from __future__ import annotations

import functools
import os
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import witness as fs
from .allowlist import (
    SYSTEM_ROOTS,
    homes,
    install_prefix,
    path_prefixes,
    real,
    runtime_dirs,
    system_mounts,
    within,
)
from .gitview import git_mounts
from .layout import GitLayout, git_layout
from .policy import Grant, SandboxPolicy
from .secrets import hidden_paths


def _real(path: Path) -> str:
    return real(path)


def _within(path: str, roots: Iterable[str]) -> bool:
    return within(path, roots)


def _state_dirs(policy: SandboxPolicy, env: Mapping[str, str]) -> list[str]:
    """Every corral state dir a run must not see: the policy's and the one
    `CORRAL_HOME` names (here and in the run's environment)."""
    out: list[str] = []
    raws = [policy.state_dir, fs.host_env("CORRAL_HOME"), env.get("CORRAL_HOME")]
    for raw in raws:
        if raw and os.path.isabs(str(raw)):
            path = real(str(raw))
            if path not in out:
                out.append(path)
    return out


def _operator_checkout(layout: GitLayout) -> str | None:
    """The checkout a linked worktree was made from (its `.git` holds the
    common dir), unless the run works in that checkout itself."""
    if layout.common is None or layout.admin is None or layout.common.name != ".git":
        return None
    top = real(layout.common.parent)
    return None if top == real(layout.top) else top


def _cover(path: str) -> list[str]:
    return ["--tmpfs", path] if fs.isdir(path) else ["--ro-bind", "/dev/null", path]


def _outermost(places: list[str]) -> list[str]:
    """`places` without those inside another one: an allowed dir bound
    read-only already shows what lies in it (a venv inside corral's own
    checkout), and every mount costs the sandbox's start."""
    unique = list(dict.fromkeys(places))
    return [p for p in unique if not any(q != p and _within(p, [q]) for q in unique)]


def _readable(grant: Grant, covered: tuple[str, ...]) -> list[str]:
    """The grant's readable paths that exist, never one that would show a
    covered path again (an ancestor of it)."""
    out: list[str] = []
    for path in grant.readable:
        shown = real(path)
        if not os.path.exists(shown) or shown in out:
            continue
        if any(_within(c, [shown]) for c in covered):
            continue
        out.append(shown)
    return out


@dataclass(frozen=True)
class Surroundings:
    """What a run sees of the host, whatever its worktree: the system roots,
    its private homes, the allowed dirs (read-only) and the hidden paths among
    them covered (`argv`); every hidden path that exists (`covered`), to be
    covered again inside a granted place."""

    argv: tuple[str, ...]
    covered: tuple[str, ...]


def surroundings(
    policy: SandboxPolicy,
    env: Mapping[str, str],
    programs: tuple[Path, ...] = (),
    checkout: str | None = None,
    scratch: Path | None = None,
) -> Surroundings:
    """The host part of the mount list (see `Surroundings`)."""
    argv = system_mounts(str(scratch) if scratch is not None else None)
    private_homes = homes(env)
    for home in private_homes:
        argv += ["--tmpfs", home]
    states = _state_dirs(policy, env)
    anchors = [*private_homes, *states, *([checkout] if checkout else [])]
    shown = path_prefixes(env, anchors)
    shown += [d for d in runtime_dirs(anchors) if not _within(d, shown)]
    for program in programs:
        prefix = install_prefix(str(program), anchors)
        if prefix is not None and not _within(prefix, shown):
            shown.append(prefix)
    shown = _outermost(shown)
    for place in shown:
        argv += ["--ro-bind", place, place]
    hide = [*states, *([checkout] if checkout else []), *(real(p) for p in policy.hidden)]
    hide += [str(p) for p in hidden_paths(env)]
    covered: list[str] = []
    for path in dict.fromkeys(hide):
        if fs.lexists(path):
            covered.append(path)
            if _within(path, [*SYSTEM_ROOTS, *shown]):
                argv += _cover(path)
    return Surroundings(tuple(argv), tuple(covered))


# Kept surroundings: (policy, programs, checkout) -> newest first, each with
# the witness of every path it looked at and the environment it read.
_KEPT: dict[tuple[object, ...], list[tuple[fs.Witness, fs.RecordedEnv, Surroundings]]] = {}
_KEPT_KEYS = 32
_KEPT_PER_KEY = 4
_kept_lock = threading.Lock()


def kept_surroundings(
    policy: SandboxPolicy,
    env: Mapping[str, str],
    programs: tuple[Path, ...] = (),
    checkout: str | None = None,
) -> Surroundings:
    """`surroundings`, made once and used again while every path it looked at
    (each component of each, links followed) and every variable it read is
    unchanged (`witness`): building it takes ~35 path resolutions, checking
    it one lstat per path. A swapped link or a newly made credential file
    changes a directory it looked at, and it is built again."""
    key = (policy, programs, checkout)
    with _kept_lock:
        entries = list(_KEPT.get(key, ()))
    for witness, reads, found in entries:
        if reads.same_reads(env) and witness.holds():
            return found
    witness = fs.Witness()
    reads = fs.RecordedEnv(env, witness)
    with fs.watching(witness):
        found = surroundings(policy, reads, programs, checkout)
    if not witness.racy():
        with _kept_lock:
            kept = [e for e in _KEPT.pop(key, []) if e[0] is not witness]
            _KEPT[key] = [(witness, reads, found), *kept][:_KEPT_PER_KEY]
            while len(_KEPT) > _KEPT_KEYS:
                _KEPT.pop(next(iter(_KEPT)))
    return found


def forget_kept() -> None:
    """Drop every kept mount list (tests; a process that changed its own
    view of the host)."""
    with _kept_lock:
        _KEPT.clear()


def confined_argv(
    command: Sequence[str],
    cwd: Path,
    policy: SandboxPolicy,
    env: Mapping[str, str],
    *,
    network: bool = False,
    bwrap: str = "bwrap",
    grant: Grant | None = None,
    privileges: Sequence[str] = (),
) -> list[str]:
    grant = grant or Grant()
    layout = git_layout(cwd)  # the worktree's pointers, checked on every call
    argv = [bwrap, "--die-with-parent", "--cap-drop", "ALL"]  # dies with its parent
    argv += privileges  # the network relay's (`netstart.watch_flags`), which it gives up
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
    checkout = _operator_checkout(layout)
    if grant.scratch is None:
        host = kept_surroundings(policy, env, grant.programs, checkout)
    else:  # makes the scratch dirs: never kept
        host = surroundings(policy, env, grant.programs, checkout, grant.scratch)
    argv += host.argv
    covered = host.covered
    repository = git_mounts(layout, policy.state_dir)
    argv += repository.shared  # nothing of the real repository is writable (gitview)
    readable = _readable(grant, covered)
    for place in readable:
        argv += ["--ro-bind", place, place]
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
    granted = [*readable, *seen]
    for again in covered:  # a granted place holding a hidden path still hides it
        if _within(again, granted) and again not in granted:
            argv += _cover(again)
    argv += ["--chdir", _real(cwd), "--", *command]
    return argv


def confined_env(env: Mapping[str, str], *, git_identity: bool = False) -> dict[str, str]:
    """The environment inside: temporary files go to the private /tmp. A run
    whose home is empty (a check, the built-in shell) gets the operator's git
    identity as variables so a commit in its worktree still works
    (`git_identity`); an agent reads git's user config itself."""
    out = dict(env)
    for key in ("TMPDIR", "TMP", "TEMP"):
        if key in out:
            out[key] = "/tmp"
    if git_identity:
        for key, value in identity(out.get("HOME", "")).items():
            out.setdefault(key, value)
    return out


@functools.cache
def identity(home: str) -> dict[str, str]:
    """`user.name` and `user.email` of git's global config under `home`, as
    author and committer variables (read once per home)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["HOME"] = home or env.get("HOME", "")
    try:
        out = subprocess.run(
            ["git", "config", "--global", "--includes", "--get-regexp", r"^user\.(name|email)$"],
            capture_output=True,
            text=True,
            env=env,
            timeout=5,
            check=False,
            stdin=subprocess.DEVNULL,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        field = key.rsplit(".", 1)[-1].upper()
        if value and field in ("NAME", "EMAIL"):
            found[f"GIT_AUTHOR_{field}"] = found[f"GIT_COMMITTER_{field}"] = value
    return found
