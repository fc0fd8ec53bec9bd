"""The `shell` tool: `bash -c` in the worktree with the scrubbed environment,
inside the sandbox (as the contract checks; no network unless the operator's
`[sandbox] shell_network` says so), in its own process group that is killed
on timeout or cancel. Whether the
command changed the worktree is read from git before and after."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ...contracts.checks import run_command
from ...git.run import GitError, WorktreeMetadataChanged, git_bytes
from ...sandbox import active_policy
from .results import ToolError, ToolResult, clip
from .state import ToolState, text_arg

MAX_SHELL_CHARS = 16_000
SHELL_DEFAULT_TIMEOUT = 120.0
SHELL_MAX_TIMEOUT = 600.0
SHELL_MIN_TIMEOUT = 1.0


def cap_output(text: str, limit: int = MAX_SHELL_CHARS) -> str:
    """The head and the tail of a long output, with the gap marked."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n…[{omitted} characters omitted]…\n{text[-tail:]}"


def worktree_fingerprint(state: ToolState) -> str | None:
    """HEAD and `git status` of the worktree (None when git cannot tell),
    through corral's hardened git: a worktree whose git pointers were
    changed raises `WorktreeMetadataChanged` and the run fails."""
    try:
        head = git_bytes(state.root, "rev-parse", "HEAD", timeout=60)
        status = git_bytes(
            state.root, "status", "--porcelain=v1", "-z", "--untracked-files=all", timeout=60
        )
    except WorktreeMetadataChanged:
        raise
    except GitError:
        return None
    return os.fsdecode(head + b"\n" + status)


async def shell(state: ToolState, args: dict[str, Any]) -> ToolResult:
    command = text_arg(args, "command")
    if not command.strip():
        raise ToolError("the command is empty")
    raw = args.get("timeout_secs", args.get("timeout"))
    try:
        timeout = SHELL_DEFAULT_TIMEOUT if raw is None else float(raw)
    except (TypeError, ValueError):
        raise ToolError("timeout_secs must be a number of seconds") from None
    timeout = min(max(timeout, SHELL_MIN_TIMEOUT), SHELL_MAX_TIMEOUT)
    left = state.seconds_left()
    if left is not None:
        timeout = max(0.1, min(timeout, left))
    before = await asyncio.to_thread(worktree_fingerprint, state)
    code, output, timed_out = await run_command(
        command, state.root, timeout, state.env, network=active_policy().shell_network
    )
    after = await asyncio.to_thread(worktree_fingerprint, state)
    changed = before is not None and after is not None and before != after
    if changed:
        state.mutations.append(f"`{clip(command, 80)}` changed the worktree")
    lines = output.count("\n") + (1 if output and not output.endswith("\n") else 0)
    if timed_out:
        head = f"timed out after {timeout:g}s; the command and everything it started were killed"
        summary = f"timed out after {timeout:g}s"
    else:
        head = f"exit code {code}"
        summary = f"exit {code}, {lines} line(s) of output"
    body = cap_output(output) if output.strip() else "(no output)"
    return ToolResult(f"{head}\n{body}", summary=summary, ok=not timed_out, mutated=changed)
