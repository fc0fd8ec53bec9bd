"""What git needs to commit inside a worktree: the worktree itself, the
repository's object store, and the worktree's own admin dir
(`<common>/worktrees/<name>`: its HEAD, index, logs). The user's refs, HEAD,
index, config, hooks and other worktrees are not in the list. Read from the
`.git` file (no subprocess: this runs before every check)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitLayout:
    top: Path  # the checkout a run may write
    common: Path | None  # the repository's common git dir (read-only but for objects)
    admin: Path | None  # this worktree's admin dir (None: `top` is a main checkout)


def _gitdir_from_file(dotgit: Path) -> Path | None:
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    raw = text[len("gitdir:") :].strip()
    path = Path(raw) if os.path.isabs(raw) else dotgit.parent / raw
    return Path(os.path.realpath(path))


def git_layout(cwd: Path) -> GitLayout:
    start = Path(os.path.realpath(cwd))
    for top in (start, *start.parents):
        dotgit = top / ".git"
        if dotgit.is_dir():
            return GitLayout(top=top, common=dotgit, admin=None)
        if dotgit.is_file():
            admin = _gitdir_from_file(dotgit)
            if admin is None:
                break
            try:
                common_raw = (admin / "commondir").read_text(encoding="utf-8").strip()
            except OSError:
                return GitLayout(top=top, common=admin, admin=None)
            common = Path(common_raw) if os.path.isabs(common_raw) else admin / common_raw
            return GitLayout(top=top, common=Path(os.path.realpath(common)), admin=admin)
    return GitLayout(top=start, common=None, admin=None)
