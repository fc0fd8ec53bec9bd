"""The repository a session works on: canonical root and base revision."""

from __future__ import annotations

from pathlib import Path

from ..errors import CorralError
from .run import GitError, git


def not_a_repo_message(path: Path | str) -> str:
    return (
        f"{path} is not a git repository (or inside one) — corral works in git worktrees; "
        "cd into a repository, pass --repo PATH, or run `git init` there"
    )


def repo_root(path: Path | str) -> Path:
    """The canonical top level (`git rev-parse --show-toplevel`): a
    subdirectory works on the whole repository."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CorralError(f"{p} is not a directory; pass --repo with a git repository path")
    try:
        out = git(p, "rev-parse", "--show-toplevel", timeout=15).strip()
    except GitError:
        raise CorralError(not_a_repo_message(p)) from None
    if not out:
        raise CorralError(not_a_repo_message(p))
    return Path(out).resolve()


def head_commit(root: Path) -> str | None:
    out = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).strip()
    return out or None


def resolve_base(root: Path, base: str | None) -> str | None:
    """Blank means the checkout's current state (None). A value starting with
    `-` is refused before git sees it; otherwise it must name a commit (tags
    are peeled)."""
    value = (base or "").strip()
    if not value:
        return None
    if value.startswith("-"):
        raise CorralError(f"invalid base revision {value!r}: a revision cannot start with '-'")
    out = git(root, "rev-parse", "--verify", "--quiet", f"{value}^{{commit}}", check=False)
    sha = out.strip()
    if not sha:
        raise CorralError(f"base revision {value!r} does not name a commit in {root}")
    return sha
