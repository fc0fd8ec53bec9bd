"""Writes an ACP agent's own shell made outside the worktree, which corral's
sandbox contained: the agent believes they landed, the operator is told
they did not.

An agent such as Claude Code or Gemini CLI runs its shell tool itself,
inside the sandbox corral started it in. There /tmp, /var/tmp and the homes
are private tmpfs and the system is read-only, so `echo x > /tmp/out` (or
`../out`, a path in the operator's checkout's parent…) "succeeds" inside and
is gone outside, and `touch /usr/x` fails with "Read-only file system" in
output the model reads as any error. Neither passes through corral, so after
each of the agent's shell tool calls corral looks:

- every path the command names (absolute, `~/…`, or `../…` from the
  worktree) outside the worktree that is a regular file inside the sandbox
  (read through `/proc/<pid>/root` of a process in the agent's mount
  namespace), changed since the call began, and that is not the same file
  on the host (a granted path, such as the agent's own config home, is the
  host's file: that write landed);
- every path the call's output says is on a "Read-only file system".

The same look serves corral's own `terminal/*` commands (Claude Code's
adapter runs its Bash through them): their private /tmp and /var/tmp are a
host scratch dir (`terminals`), read as their sandbox's root when they end.

Each is a typed `blocked` event (by corral's `policy`). Not detected: a
path the command does not spell out (computed, or written by a program it
runs), a write into a private place that the command deletes again before
the call ends, and a terminal command's writes under its private home.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..sandbox.keeper import descendants

# an absolute path, `~/…` or `../…` as a shell command spells it (quotes and
# redirections around it are not part of it)
_PATH = re.compile(r"(?<![\w.$/-])((?:~|\.\.)?/[\w.@%+=,~/-]+)")
_READ_ONLY = re.compile(r"['\"`‘]?((?:~|\.\.)?/[^\s'\"`’:]+)['\"`’]?\s*:\s*Read-only file system")
MTIME_SLACK_SECS = 1.0  # a file system's timestamps are coarser than the clock


@dataclass(frozen=True)
class Contained:
    """One write that did not land: the path as the command named it and why."""

    path: str
    why: str


def named_paths(command: str, worktree: Path, home: str | None) -> list[Path]:
    """The paths `command` names outside `worktree`, absolute."""
    top = Path(os.path.realpath(worktree))
    found: list[Path] = []
    for raw in _PATH.findall(command):
        if raw.startswith("~"):
            if not home:
                continue
            path = Path(home) / raw[2:]
        elif raw.startswith(".."):
            path = top / raw
        else:
            path = Path(raw)
        path = Path(os.path.normpath(path))
        if path == top or top in path.parents or path in found:
            continue
        found.append(path)
    return found


def read_only_paths(output: str) -> list[str]:
    """The paths a shell's output says it could not write: read-only."""
    return list(dict.fromkeys(_READ_ONLY.findall(output)))


def sandbox_roots(pid: int) -> list[Path]:
    """`/proc/<pid>/root` of one process per mount namespace under `pid`
    other than corral's own: how the confined agent sees the file system."""
    try:
        ours = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return []
    seen = {ours}
    roots: list[Path] = []
    for child in [pid, *descendants(pid)]:
        try:
            space = os.readlink(f"/proc/{child}/ns/mnt")
        except OSError:
            continue
        if space in seen:
            continue
        seen.add(space)
        roots.append(Path(f"/proc/{child}/root"))
    return roots


def _same_file(a: os.stat_result, path: Path) -> bool:
    try:
        b = os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def contained_writes(
    command: str,
    output: str,
    *,
    worktree: Path,
    since: float,
    roots: Iterable[Path],
    home: str | None = None,
) -> list[Contained]:
    """What a finished shell call wrote outside `worktree` that stayed in
    the sandbox (files in its private places, changed since `since`, wall
    clock) or was refused (a read-only file system, as its output says)."""
    out: list[Contained] = []
    roots = list(roots)
    for path in named_paths(command, worktree, home):
        for root in roots:
            try:
                inside = os.stat(root / path.relative_to("/"))
            except (OSError, ValueError):
                continue
            if not stat.S_ISREG(inside.st_mode) or inside.st_mtime < since - MTIME_SLACK_SECS:
                continue
            if _same_file(inside, path):
                continue  # the host's own file (a granted place): the write landed
            out.append(
                Contained(
                    str(path),
                    "the agent's shell wrote it outside the session's worktree; corral's "
                    "sandbox kept it in the sandbox's private files: it is not on the host",
                )
            )
            break
    for path_text in read_only_paths(output):
        if any(c.path == path_text for c in out):
            continue
        out.append(
            Contained(
                path_text,
                "the agent's shell tried to write it outside the session's worktree; "
                "corral's sandbox shows that path read-only",
            )
        )
    return out
