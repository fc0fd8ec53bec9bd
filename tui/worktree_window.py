"""`w` / `E`: a session's worktree in a new window of the operator's own tmux,
with a shell or with `$EDITOR`. This is the operator's tmux (the one the
console runs in, named by `$TMUX`), not corral's private server where agents
run. Outside tmux there is no window to open: the operator is told the exact
`cd` command instead. A window is reported only once tmux named it."""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Opened:
    message: str  # one sentence for the operator
    window: str | None = None  # tmux's id of the new window ("@7") when one opened


async def open_worktree(
    path: str | None, name: str, *, editor: bool, env: Mapping[str, str] | None = None
) -> Opened:
    """Open `path` (the worktree of session `name`) in a new tmux window."""
    env = dict(os.environ if env is None else env)
    if not path or not os.path.isdir(path):
        return Opened(f"{name} has no worktree on disk (removed, or never made).")
    cd = f"cd {shlex.quote(path)}"
    program = (env.get("VISUAL") or env.get("EDITOR") or "").strip() if editor else ""
    if editor and not program:
        return Opened(f"Set $EDITOR to open {name}'s worktree in your editor; or run: {cd}")
    if not env.get("TMUX"):
        then = f" && {program} ." if editor else ""
        return Opened(f"Not inside tmux, so no window to open: run {cd}{then}")
    command = [f"{program} ."] if editor else ([env["SHELL"]] if env.get("SHELL") else [])
    argv = ["tmux", "new-window", "-P", "-F", "#{window_id}", "-c", path, "-n", name, *command]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=10)
    except (OSError, TimeoutError) as exc:
        return Opened(f"tmux could not open a window ({exc}); run: {cd}")
    window = out.decode(errors="replace").strip()
    if proc.returncode != 0 or not window:
        reason = err.decode(errors="replace").strip().splitlines()
        why = reason[-1] if reason else f"exit {proc.returncode}"
        return Opened(f"tmux could not open a window ({why}); run: {cd}")
    what = f"{program.split()[0]}" if editor else "a shell"
    return Opened(f"{name}'s worktree is open in tmux window {window} ({what}).", window)
