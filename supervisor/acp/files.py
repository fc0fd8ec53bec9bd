"""`fs/read_text_file` and `fs/write_text_file` served inside one worktree.

A path is taken only when it is absolute and, with every symlink resolved,
lies inside the worktree and outside its git metadata (`.git`): anything
else is refused with the sentence the agent and the session log get. The
file itself is opened without following a final symlink, so a link swapped
in after the check still cannot lead out."""

from __future__ import annotations

import os
from pathlib import Path

MAX_READ_BYTES = 8 * 1024 * 1024
MAX_WRITE_BYTES = 8 * 1024 * 1024


class Refused(Exception):
    """The request is not served; the message says why, in one sentence."""


class Missing(Exception):
    """The file does not exist (not a refusal: the protocol's "not found")."""


class WorktreeFiles:
    def __init__(self, worktree: Path) -> None:
        self.root = Path(os.path.realpath(worktree))

    def resolve(self, path: str) -> Path:
        """The real path inside the worktree, or `Refused`."""
        if not path or not os.path.isabs(path):
            raise Refused(f"{path!r} is not an absolute path (ACP paths are absolute)")
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise Refused(f"{path} is outside the session's worktree {self.root}")
        if ".git" in real.relative_to(self.root).parts:
            raise Refused(f"{path} is git metadata, which agents may not touch")
        return real

    def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        real = self.resolve(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise Missing(path) from None
        except OSError as exc:
            raise Refused(f"{path} cannot be read: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:
            raise Refused(f"{path} is larger than {MAX_READ_BYTES} bytes")
        text = data.decode("utf-8", errors="replace")
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    def write(self, path: str, content: str) -> None:
        real = self.resolve(path)
        data = content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise Refused(f"the content for {path} is larger than {MAX_WRITE_BYTES} bytes")
        real.parent.mkdir(parents=True, exist_ok=True)
        if self.resolve(str(real.parent)) != real.parent:  # a directory swapped for a link
            raise Refused(f"{path} moved outside the session's worktree")
        try:
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise Refused(f"{path} cannot be written: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
