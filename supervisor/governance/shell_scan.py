"""Where a shell command's words point: paths resolved from the command's
current directory (which `cd` moves), and whether they leave the worktree.

The temp directories and the harmless `/dev` sinks are scratch space: writing
there is allowed, removing or changing files there is not.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .confinement import is_inside, real_path

DEV_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})


@dataclass
class ShellScan:
    """The paths one command line touches, seen from its current directory."""

    worktree: Path
    cwd: Path
    home: Path
    scratch: tuple[Path, ...]

    def resolve(self, token: str) -> Path | None:
        """The real path a shell word names (None when it cannot be known)."""
        text = token
        if text == "~" or text.startswith("~/"):
            text = str(self.home) + text[1:]
        elif text.startswith("~"):
            return None
        text = text.replace("${HOME}", str(self.home)).replace("$HOME", str(self.home))
        if "$" in text or not text:
            return None
        path = Path(text) if os.path.isabs(text) else self.cwd / text
        return real_path(os.path.normpath(path))

    def inside(self, path: Path) -> bool:
        return is_inside(path, self.worktree)

    def is_scratch(self, path: Path) -> bool:
        text = str(path)
        if text in DEV_SINKS or text.startswith("/dev/fd/"):
            return True
        return any(is_inside(path, d) for d in self.scratch)

    def outside(self, token: str, *, scratch_ok: bool = False) -> Path | None:
        """The path when `token` names one outside the worktree (and, when
        `scratch_ok`, not in the temp dir or a /dev sink)."""
        path = self.resolve(token)
        if path is None or self.inside(path):
            return None
        if scratch_ok and self.is_scratch(path):
            return None
        return path


def scratch_dirs() -> tuple[Path, ...]:
    """The temp directories, where commands may write outside the worktree."""
    dirs = {real_path(tempfile.gettempdir()), real_path("/tmp"), real_path("/var/tmp")}
    return tuple(sorted(dirs))


def outside_sentence(verb: str, path: Path) -> str:
    """The denial for a command that changes `path` outside the worktree."""
    return (
        f"the command {verb} {path}, outside this worktree; corral only lets the engine "
        "change files inside the worktree"
    )
