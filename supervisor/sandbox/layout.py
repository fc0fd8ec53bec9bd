"""Where a run's repository lives: the checkout, the shared git dir and the
worktree's admin dir (`<common>/worktrees/<name>`). For a worktree corral
made, these are the dirs it recorded at creation (`git.pins`), checked
against the pointers on disk; a changed pointer raises
`WorktreeMetadataChanged` and nothing is mounted. Otherwise they are read
from the `.git` file (no subprocess: this runs before every check)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..git.pins import pins_for


@dataclass(frozen=True)
class GitLayout:
    top: Path  # the checkout a run may write
    common: Path | None  # the repository's common git dir (read-only inside)
    admin: Path | None  # this worktree's admin dir (None: `top` is a main checkout)
    dotgit: bytes | None = None  # the `.git` file corral recorded (None: not corral's)


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
        pins = pins_for(top)
        if pins is not None:
            pins.check()
            return GitLayout(top=top, common=pins.common, admin=pins.admin, dotgit=pins.dotgit)
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
