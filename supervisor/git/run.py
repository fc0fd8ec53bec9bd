"""Hardened git invocation: no external diff drivers or textconv, no pager,
no prompts, bounded output and a timeout. Blocking: call it from a thread
(`asyncio.to_thread`), never on the UI loop."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..errors import CorralError

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


class GitError(CorralError):
    """A git command failed; the message carries git's own words."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


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
    run_env = git_env()
    if env:
        run_env.update(env)
    try:
        proc = subprocess.run(
            ["git", *_HARDENING, *args],
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
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(
            f"git {args[0]} failed: {detail[-1] if detail else proc.returncode}", proc.stderr
        )
    out = proc.stdout
    if len(out) > MAX_OUTPUT_BYTES:
        out = out[:MAX_OUTPUT_BYTES]
    return out
