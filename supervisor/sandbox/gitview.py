"""A confined run's private view of the repository's shared git dir, so that
`git stash` works inside the sandbox without the sandbox writing the user's
refs.

`git stash` writes `refs/stash` and its reflog in the shared (common) git dir,
and dropping the last entry takes `packed-refs.lock` there too; the common dir
is read-only inside the sandbox. So each worktree gets a directory of its own
under corral's state dir (`<state>/sandbox-git/<key>/common`), bound
read-write over the common dir, and inside it, read-only, the live entries of
the real one: `config`, `HEAD`, `packed-refs`, `hooks`, `info`, …, each
subdirectory of `refs/` (`heads`, `tags`, `remotes`, …) and of `logs/refs/`,
and `logs/HEAD`. What git creates beside them — `refs/stash`, its reflog, lock
files — lands in the private directory and persists across sandboxed runs in
that worktree (a long-lived agent, and the built-in engine's shell commands
one after another). Reads see the user's branches as they are now, because
they are the real directories, not copies; the user's own `refs/stash` is not
shown as the sandbox's (it has a stash of its own) but as
`refs/corral-user/stash` with its reflog, read-only copies taken when the run
starts: the sandbox may write the object store, and a `git gc` in it must
still count the user's stashes as reachable. The object store and the
worktree's admin dir are bound read-write on top (`argv`), so commits on the
detached HEAD still land where corral reads them.

Nothing of this is ever written into the user's repository: the private
directory lives in the state dir, which the sandbox cannot see, so a run
cannot swap it for a link to the real refs; corral only creates it and removes
it (once its worktree is gone), never reads what a run left in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from .layout import GitLayout

VIEWS = "sandbox-git"
USER_STASH = "corral-user"  # refs/corral-user/stash: the user's stash, read-only
OWN = frozenset({"refs", "logs", "objects", "worktrees"})  # mounted one by one (or by `argv`)


def _key(admin: Path) -> str:
    """Stable for one worktree; a worktree re-made at the same path gets a
    fresh view (its admin dir is a new inode), so an old stash never shows."""
    try:
        inode = os.stat(admin).st_ino
    except OSError:
        inode = 0
    return hashlib.sha256(f"{admin}\0{inode}".encode()).hexdigest()[:20]


def prune_views(state_dir: Path) -> list[Path]:
    """Remove the views of worktrees that are gone; returns what was removed."""
    root = state_dir / VIEWS
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            try:
                admin = Path((entry / "admin").read_text(encoding="utf-8").strip())
            except (OSError, UnicodeDecodeError):
                admin = None
            if admin is None or not admin.is_dir() or _key(admin) != entry.name:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def _copy_user_stash(common: Path, home: Path) -> None:
    """The user's stash tip and reflog, copied into corral-owned dirs that are
    shown read-only inside (an empty dir when the user has no stash)."""
    for real, kept in (
        (common / "refs" / "stash", home / "user-stash" / "refs" / "stash"),
        (common / "logs" / "refs" / "stash", home / "user-stash" / "logs" / "stash"),
    ):
        kept.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = real.read_bytes() if real.is_file() and not real.is_symlink() else None
        except OSError:
            data = None
        if data is None:
            kept.unlink(missing_ok=True)
            continue
        fresh = kept.with_name(f".{kept.name}.{os.getpid()}")
        fresh.write_bytes(data)
        os.replace(fresh, kept)


def private_view(layout: GitLayout, state_dir: Path | None) -> Path | None:
    """The directory bound over the common dir for runs in this worktree,
    created on first use; None for a main checkout or without a state dir
    (then the common dir stays read-only and `git stash` cannot write)."""
    if layout.admin is None or layout.common is None or state_dir is None:
        return None
    home = state_dir / VIEWS / _key(layout.admin)
    view = home / "common"
    if not (home / "admin").is_file():
        prune_views(state_dir)
        (view / "refs").mkdir(parents=True, exist_ok=True)
        (view / "logs" / "refs").mkdir(parents=True, exist_ok=True)
        (home / "admin").write_text(str(layout.admin), encoding="utf-8")
    _copy_user_stash(layout.common, home)
    return view


def _entries(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def view_mounts(layout: GitLayout, view: Path) -> list[str]:
    """bwrap arguments that put `view` over the common dir and show the real
    entries in it read-only (`-try`: a lock file may vanish meanwhile)."""
    assert layout.common is not None
    common = layout.common
    args = ["--bind", str(view), str(common)]

    def show(rel: str) -> None:
        args.extend(["--ro-bind-try", str(common / rel), str(common / rel)])

    for name in _entries(common):
        if name not in OWN:
            show(name)
    if (common / "worktrees").is_dir():
        show("worktrees")  # other worktrees read-only; this one's admin dir goes rw later
    for name in _entries(common / "refs"):
        if (common / "refs" / name).is_dir():
            show(f"refs/{name}")
    for name in _entries(common / "logs"):
        if name != "refs":
            show(f"logs/{name}")
    for name in _entries(common / "logs" / "refs"):
        if (common / "logs" / "refs" / name).is_dir():
            show(f"logs/refs/{name}")
    kept = view.parent / "user-stash"
    args += ["--ro-bind", str(kept / "refs"), str(common / "refs" / USER_STASH)]
    args += ["--ro-bind", str(kept / "logs"), str(common / "logs" / "refs" / USER_STASH)]
    return args
