"""Hardened git invocation: no external diff drivers or textconv, no pager,
no prompts, no hooks, no fsmonitor, bounded output and a timeout. Blocking:
call it from a thread (`asyncio.to_thread`), never on the UI loop.

A call whose `cwd` is a worktree corral made (see `pins`) runs with the git
dirs corral recorded for it, passed explicitly (`GIT_DIR`, `GIT_COMMON_DIR`,
`GIT_WORK_TREE`): git never discovers them through the worktree's `.git`
file or the admin dir's `commondir`, which code in the worktree could have
rewritten. The three pointers are compared with the record first; a changed
one raises `WorktreeMetadataChanged` and nothing runs. Such calls also skip
the untracked cache and system attributes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import GitError
from .pins import WorktreeMetadataChanged, WorktreePins, pins_for

__all__ = [
    "GitError",
    "WorktreeMetadataChanged",
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
    )
    return env


def worktree_env(pins: WorktreePins) -> dict[str, str]:
    """The environment of a git call on a pinned worktree (pointers checked)."""
    pins.check()
    env = git_env()
    env.update(pins.env, GIT_ATTR_NOSYSTEM="1")
    return env


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
    return prefix, run_env


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
