"""Hardened git invocation: no external diff drivers or textconv, no pager,
no prompts, no hooks, no fsmonitor, bounded output and a timeout. Blocking:
call it from a thread (`asyncio.to_thread`), never on the UI loop.

A call whose `cwd` is a worktree corral made (see `pins`) runs with the git
dirs corral recorded for it, passed explicitly (`GIT_DIR`, `GIT_COMMON_DIR`,
`GIT_WORK_TREE`): git never discovers them through the worktree's `.git`
file or the admin dir's `commondir`, which code in the worktree could have
rewritten. The three pointers are compared with the record first; a changed
one raises `WorktreeMetadataChanged` and nothing runs. Such calls also skip
the untracked cache and system attributes.

Every call also runs with every filter (clean, smudge, process), textconv,
external diff command and merge driver that the operator's git config defines
switched off (`driver_overrides`): a `.gitattributes` is content the agent
wrote, and naming `filter=x` there must not make corral's trusted process run
the operator's command `x` on that content outside the sandbox. Drivers the
operator trusts with agent-written content are named in
`CORRAL_GIT_TRUSTED_DRIVERS` (e.g. `lfs`), and only those stay on."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from .errors import GitError
from .pins import WorktreeMetadataChanged, WorktreePins, pins_for

__all__ = [
    "GitError",
    "WorktreeMetadataChanged",
    "driver_overrides",
    "git",
    "git_bytes",
    "git_env",
    "invocation",
    "worktree_env",
]

MAX_OUTPUT_BYTES = 32 * 1024 * 1024
_HARDENING = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.pager=cat",
    "-c",
    "diff.external=",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "credential.helper=",
]
_WORKTREE_HARDENING = [
    "-c",
    "core.untrackedCache=false",
]


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_ATTR_NOSYSTEM="1",  # the system's attributes name drivers too
    )
    return env


def worktree_env(pins: WorktreePins) -> dict[str, str]:
    """The environment of a git call on a pinned worktree (pointers checked)."""
    pins.check()
    env = git_env()
    env.update(pins.env, GIT_ATTR_NOSYSTEM="1")
    return env


# what each kind of driver runs: all of it is switched off
_DRIVER_COMMANDS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("textconv", "command"),
    "merge": ("driver",),
}
TRUSTED_DRIVERS_ENV = "CORRAL_GIT_TRUSTED_DRIVERS"
_DRIVERS_TTL = 5.0  # seconds a directory's list of configured drivers is reused
_drivers_seen: dict[tuple[str, str, str, str], tuple[float, tuple[str, ...]]] = {}
_drivers_lock = threading.Lock()


def configured_drivers(cwd: Path | str, env: dict[str, str]) -> list[tuple[str, str]]:
    """(kind, name) of every filter, diff and merge driver git's config
    defines for a call in `cwd` (global, repository and included files)."""
    try:
        proc = subprocess.run(
            ["git", "config", "--null", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
            cwd=str(cwd),
            env=env,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found: set[tuple[str, str]] = set()
    for key in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        kind, _, rest = key.partition(".")
        name, _, _variable = rest.rpartition(".")
        if kind in _DRIVER_COMMANDS and name:
            found.add((kind, name))
    return sorted(found)


def driver_overrides(cwd: Path | str, env: dict[str, str]) -> list[str]:
    """`-c` pairs that switch off every configured driver but the trusted ones."""
    trusted_names = os.environ.get(TRUSTED_DRIVERS_ENV, "")
    key = (str(cwd), env.get("GIT_DIR", ""), env.get("GIT_COMMON_DIR", ""), trusted_names)
    now = time.monotonic()
    with _drivers_lock:
        seen = _drivers_seen.get(key)
    if seen is not None and now - seen[0] < _DRIVERS_TTL:
        return list(seen[1])
    trusted = {n.strip() for n in trusted_names.split(",") if n.strip()}
    args: list[str] = []
    for kind, name in configured_drivers(cwd, env):
        if name in trusted:
            continue
        for command in _DRIVER_COMMANDS[kind]:
            args += ["-c", f"{kind}.{name}.{command}="]
        if kind == "filter":  # a required filter that does not run would fail the call
            args += ["-c", f"filter.{name}.required=false"]
    with _drivers_lock:
        if len(_drivers_seen) > 512:
            _drivers_seen.clear()
        _drivers_seen[key] = (now, tuple(args))
    return args


def invocation(
    cwd: Path | str, env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The hardened `git ...` prefix and environment for a call in `cwd`."""
    pins = pins_for(cwd)
    if pins is None:
        run_env, prefix = git_env(), ["git", *_HARDENING]
    else:
        run_env, prefix = worktree_env(pins), ["git", *_HARDENING, *_WORKTREE_HARDENING]
    if env:
        run_env.update(env)
    return [*prefix, *driver_overrides(cwd, run_env)], run_env


def _failed(args: tuple[str, ...], code: int, stderr: str, stdout: str) -> GitError:
    detail = (stderr or stdout).strip().splitlines()
    return GitError(f"git {args[0]} failed: {detail[-1] if detail else code}", stderr)


def git(
    cwd: Path | str,
    *args: str,
    timeout: float = 60,
    check: bool = True,
    input_text: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run `git <args>` in `cwd` and return stdout (text). `env` adds variables
    (e.g. GIT_INDEX_FILE for a private index)."""
    prefix, run_env = invocation(cwd, env)
    try:
        proc = subprocess.run(
            [*prefix, *args],
            cwd=str(cwd),
            env=run_env,
            input=input_text,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} timed out after {timeout:.0f}s in {cwd}") from exc
    except FileNotFoundError as exc:
        raise GitError("git is not installed; install git 2.30 or newer") from exc
    if check and proc.returncode != 0:
        raise _failed(args, proc.returncode, proc.stderr, proc.stdout)
    out = proc.stdout
    if len(out) > MAX_OUTPUT_BYTES:
        out = out[:MAX_OUTPUT_BYTES]
    return out


def git_bytes(
    cwd: Path | str,
    *args: str,
    timeout: float = 300,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
) -> bytes:
    """`git` for byte-exact input and output (paths as bytes, blob data)."""
    prefix, run_env = invocation(cwd, env)
    try:
        proc = subprocess.run(
            [*prefix, *args],
            cwd=str(cwd),
            env=run_env,
            input=input_bytes,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} timed out after {timeout:.0f}s in {cwd}") from exc
    except FileNotFoundError as exc:
        raise GitError("git is not installed; install git 2.30 or newer") from exc
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        raise _failed(args, proc.returncode, stderr, proc.stdout.decode("utf-8", "replace"))
    return proc.stdout
