"""Start a task from exactly what the operator sees.

A dirty checkout (staged, unstaged and untracked files, minus ignored ones) is
captured as a private commit on top of HEAD, built through a private copy of
the index: the operator's HEAD, index and files are never touched. The commit
is kept alive by `refs/corral/snapshots/<session id>`.

The checkout identity records HEAD and that snapshot, so checkout delivery is
offered only while the task's base is still the operator's checkout.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import CorralError
from ..models import CheckoutIdentity
from .repo import head_commit
from .run import git


def identity_env(cwd: Path) -> dict[str, str]:
    """Author/committer for commits corral makes, when git has none configured."""
    name = git(cwd, "config", "user.name", check=False).strip()
    email = git(cwd, "config", "user.email", check=False).strip()
    env: dict[str, str] = {}
    if not name:
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "corral"
    if not email:
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "corral@localhost"
    return env


class PrivateIndex:
    """A throwaway index file (GIT_INDEX_FILE) seeded from the repo's own index
    (mtime included) so unchanged files keep their stat data and need no
    re-hashing."""

    def __init__(self, repo: Path, seed_from_repo: bool = True) -> None:
        self.repo = repo
        fd, name = tempfile.mkstemp(prefix="corral-index-")
        os.close(fd)
        self.path = Path(name)
        real = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "index").strip())
        if seed_from_repo and real.exists():
            # copy2 keeps the index's mtime: git then still treats entries
            # written in the same second as the index as "racily clean" and
            # re-reads them. A fresh mtime would make it trust the stat data
            # and miss a same-size rewrite made in that second.
            shutil.copy2(real, self.path)
        else:
            self.path.unlink()

    @property
    def env(self) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(self.path)}

    def __enter__(self) -> PrivateIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)
        Path(str(self.path) + ".lock").unlink(missing_ok=True)


def is_dirty(root: Path) -> bool:
    out = git(root, "status", "--porcelain", "--untracked-files=all", "-z")
    return bool(out.strip("\0").strip())


def snapshot_checkout(root: Path, session_id: str) -> CheckoutIdentity:
    """Capture the checkout. Clean → its HEAD; dirty → a private snapshot commit."""
    head = head_commit(root)
    if head is None:
        raise CorralError(
            f"{root} has no commits yet; make a first commit, then start the task again"
        )
    if not is_dirty(root):
        return CheckoutIdentity(head=head)
    with PrivateIndex(root) as index:
        git(root, "add", "-A", "--", ".", env=index.env, timeout=300)
        tree = git(root, "write-tree", env=index.env).strip()
    head_tree = git(root, "rev-parse", f"{head}^{{tree}}").strip()
    if tree == head_tree:  # only ignored or mode-only noise: nothing to carry
        return CheckoutIdentity(head=head)
    message = f"corral: snapshot of uncommitted files for session {session_id}\n"
    commit = git(
        root, "commit-tree", tree, "-p", head, input_text=message, env=identity_env(root)
    ).strip()
    git(root, "update-ref", f"refs/corral/snapshots/{session_id}", commit)
    return CheckoutIdentity(head=head, snapshot=commit)


def current_identity_matches(root: Path, identity: CheckoutIdentity) -> bool:
    """The checkout's HEAD is still the one the task started from."""
    return head_commit(root) == identity.head
