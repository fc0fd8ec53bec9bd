"""The repository a session works on: canonical root and base revision."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import CorralError
from .run import GitError, git


def not_a_repo_message(path: Path | str) -> str:
    return (
        f"{path} is not a git repository (or inside one) — corral works in git worktrees; "
        "cd into a repository, pass --repo PATH, or run `git init` there"
    )


class NotAProject(CorralError):
    """A repository was found, but at $HOME or `/`: said as it is, never
    reworded into "not a git repository" by a caller."""


def not_a_project_message(path: Path, top: Path) -> str:
    where = "the filesystem root" if top == Path("/") else "your home directory"
    held = "is" if path == top else f"lies in the git repository at {top}, which is"
    return (
        f"{path} {held} {where}, and corral will not take {where} as a project (its worktrees, "
        "checks and deliveries would span every file under it): run `git init` in the "
        "project's own folder, or pass --repo with it"
    )


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except RuntimeError:  # no $HOME and no passwd entry: nothing to compare with
        return None


def repo_root(path: Path | str) -> Path:
    """The canonical top level (`git rev-parse --show-toplevel`): a
    subdirectory works on the whole repository. A repository whose top
    level is $HOME or `/` (a dotfiles repository, a stray `git init`) is
    refused: a folder under it that is not its own repository would
    otherwise silently make the whole home the project, its worktree a copy
    of every tracked dotfile and a checkout delivery a write into $HOME."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CorralError(f"{p} is not a directory; pass --repo with a git repository path")
    try:
        out = git(p, "rev-parse", "--show-toplevel", timeout=15).strip()
    except GitError:
        raise CorralError(not_a_repo_message(p)) from None
    if not out:
        raise CorralError(not_a_repo_message(p))
    top = Path(out).resolve()
    if top == Path("/") or top == _home():
        raise NotAProject(not_a_project_message(p, top))
    return top


def head_commit(root: Path) -> str | None:
    out = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).strip()
    return out or None


BASE_MUST_BE = "a base must be one branch, tag or commit"


def resolve_base(root: Path, base: str | None) -> str | None:
    """None means the checkout's current state. Anything given must name a
    single commit (tags are peeled): an empty value, a value starting with
    `-`, a range, a tree or an unknown name is refused, naming the value,
    before anything is created."""
    if base is None:
        return None
    value = base.strip()
    if not value:
        raise CorralError(
            f"the base revision {base!r} is empty: {BASE_MUST_BE} "
            "(leave the base out to start from your checkout as it is)"
        )
    if value.startswith("-"):
        raise CorralError(
            f"invalid base revision {value!r}: {BASE_MUST_BE}, and cannot start with '-'"
        )
    out = git(root, "rev-parse", "--verify", "--quiet", f"{value}^{{commit}}", check=False)
    lines = out.split()
    if len(lines) != 1 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", lines[0]):
        raise CorralError(
            f"base revision {value!r} does not name a single commit in {root}: "
            f"{BASE_MUST_BE} (not a range, a tree or an unknown name)"
        )
    return lines[0]


def gitlinks(cwd: Path, rev: str | None = None) -> list[str]:
    """Paths of submodules (gitlinks) in `rev`, or in the index when None."""
    if rev is None:
        out = git(cwd, "-c", "core.quotePath=false", "ls-files", "-s", "-z")
    else:
        out = git(cwd, "-c", "core.quotePath=false", "ls-tree", "-r", "-z", rev)
    paths: list[str] = []
    for row in out.split("\0"):
        meta, _, path = row.partition("\t")
        if path and meta.startswith("160000 "):
            paths.append(path)
    return paths


def initialised_submodules(root: Path) -> list[str]:
    """Submodules checked out in `root` (their directory holds a `.git`)."""
    return [p for p in gitlinks(root) if (root / p / ".git").exists()]


def refuse_initialised_submodules(root: Path) -> None:
    """Corral cannot show or deliver work inside a submodule (a worktree gets
    it as an empty directory), so a checkout that uses its submodules is
    refused before any worktree exists."""
    found = initialised_submodules(root)
    if found:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise CorralError(
            f"{root} has initialised submodules ({shown}), and corral cannot show or deliver "
            "changes inside a submodule, so no task was started: run corral in the "
            "submodule's own repository for work there, or `git submodule deinit --all` "
            "here if the task does not need them"
        )


def work_outside_tree(worktree: Path, tree: str) -> list[str]:
    """Submodule directories of `tree` that hold files in `worktree`: a worktree
    gets them empty, so anything there was written by the task and is in
    neither the diff nor any delivery."""
    found: list[str] = []
    for path in gitlinks(worktree, tree):
        d = worktree / path
        if d.is_dir() and not d.is_symlink() and any(d.iterdir()):
            found.append(path)
    return found
