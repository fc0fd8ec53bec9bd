"""Delivery of a verified change.

- What is delivered is the verified tree (see `trees`), never the live
  worktree: the patch is taken between the start commit and that tree.
- A branch is built on the checkout's *current* HEAD through a private index:
  the operator's uncommitted work never ships and their checkout is untouched.
- Checkout delivery applies the change to working files only (HEAD and index
  untouched), refusing any file the operator changed since the task started.
- Delivery is idempotent: a branch that already holds this session's result
  (written before corral could record it) counts as delivered; a checkout
  that already holds it reports `already_applied`.

Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorralError
from .patches import FilePatch
from .run import GitError, git
from .snapshot import PrivateIndex, identity_env

_PATCH_FAILED = re.compile(
    r"(?:patch failed|does not exist in index|already exists in index|"
    r"does not match index|No such file or directory):?\s*(.+?)(?::\d+)?$"
)
_QP = ["-c", "core.quotePath=false"]


class DeliveryRefused(CorralError):
    """Delivery would lose or overwrite something; nothing was changed."""


def _failed_paths(stderr: str) -> list[str]:
    paths: list[str] = []
    for line in stderr.splitlines():
        m = _PATCH_FAILED.search(line.strip())
        if m and m.group(1) not in paths:
            paths.append(m.group(1).strip())
    return paths


def _apply(cwd: Path, patch: str, *args: str, env: dict[str, str] | None = None) -> None:
    if not patch.strip():
        return
    try:
        git(
            cwd,
            "apply",
            "--binary",
            "--whitespace=nowarn",
            *args,
            "-",
            input_text=patch,
            env=env,
            timeout=300,
        )
    except GitError as exc:
        raise DeliveryRefused(str(exc)) from exc


def patch_tree(repo: Path, parent: str, patch: str) -> str:
    """The tree of `parent` plus `patch`, built in a private index (no
    checkout is touched). Raises DeliveryRefused naming conflicting files."""
    with PrivateIndex(repo, seed_from_repo=False) as index:
        git(repo, "read-tree", parent, env=index.env)
        try:
            git(
                repo,
                "apply",
                "--cached",
                "--binary",
                "--whitespace=nowarn",
                "-",
                input_text=patch,
                env=index.env,
                timeout=300,
            )
        except GitError as exc:
            files = _failed_paths(exc.stderr) or ["(see git's message)"]
            raise DeliveryRefused(
                "the change does not apply cleanly on "
                f"{parent[:12]}: conflicting file(s): {', '.join(files)}"
            ) from exc
        return git(repo, "write-tree", env=index.env).strip()


def commit_patch(repo: Path, parent: str, patch: str, message: str) -> str:
    """A commit with `parent` plus `patch` (see `patch_tree`)."""
    tree = patch_tree(repo, parent, patch)
    env = identity_env(repo)
    return git(repo, "commit-tree", tree, "-p", parent, input_text=message, env=env).strip()


def create_branch(repo: Path, branch: str, commit: str) -> None:
    """Create refs/heads/<branch>; never moves an existing branch."""
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", branch) or branch.startswith("-"):
        raise CorralError(f"refusing the branch name {branch!r}")
    try:
        git(repo, "update-ref", f"refs/heads/{branch}", commit, "0" * 40)
    except GitError as exc:
        raise DeliveryRefused(
            f"branch {branch} already exists in {repo}; delete or rename it, then approve again"
        ) from exc


def delivered_commit(repo: Path, branch: str, session_id: str, patch: str) -> str | None:
    """The commit of `branch` when it already holds this session's result: a
    commit naming the session (`Corral-Session:`) whose tree is its parent plus
    `patch`. A delivery cut short after writing the branch (a crash before the
    state was saved) is then complete; anything else is not ours."""
    commit = git(
        repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False
    ).strip()
    if not commit:
        return None
    message = git(repo, "log", "-1", "--format=%B", commit)
    if f"Corral-Session: {session_id}" not in message.splitlines():
        return None
    parent = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^", check=False).strip()
    if not parent:
        return None
    try:
        expected = patch_tree(repo, parent, patch)
    except DeliveryRefused:
        return None
    actual = git(repo, "rev-parse", f"{commit}^{{tree}}").strip()
    return commit if expected == actual else None


def changed_paths(repo: Path, a: str, b: str) -> set[str]:
    out = git(repo, *_QP, "diff", "--name-only", "-z", "--no-renames", a, b, "--")
    return {p for p in out.split("\0") if p}


def touched_paths(files: list[FilePatch]) -> set[str]:
    paths: set[str] = set()
    for f in files:
        paths.add(f.path)
        if f.old_path:
            paths.add(f.old_path)
    return paths


Entry = tuple[str, str] | None
"""(mode, blob id) of a path, None when absent: what a checkout must match."""


def _entry(repo: Path, commit: str, path: str) -> Entry:
    out = git(repo, *_QP, "ls-tree", "-z", commit, "--", path).split("\0")[0]
    if not out:
        return None
    meta, _, _name = out.partition("\t")
    mode, kind, sha = meta.split(" ")
    return (mode, sha) if kind == "blob" else (mode, kind)


def _working_entry(repo: Path, path: str, filemode: bool) -> Entry:
    """The working file as git would store it: a symlink by its target, a
    file by its content and executable bit (compared only where the checkout
    tracks modes, `core.fileMode`)."""
    target = repo / path
    if target.is_symlink():
        link = os.readlink(target)
        return "120000", git(repo, "hash-object", "--stdin", input_text=link).strip()
    if target.is_file():
        sha = git(repo, "hash-object", "--no-filters", "--", path).strip()
        executable = filemode and bool(target.stat().st_mode & 0o100)
        return ("100755" if executable else "100644"), sha
    if target.is_dir() and any(target.iterdir()):
        return "040000", "tree"  # a directory now stands where a file would go
    return None


def _same(now: Entry, want: Entry, filemode: bool) -> bool:
    if now is None or want is None:
        return now == want
    if not filemode and now[0] != "120000" and want[0] in ("100644", "100755"):
        return now[1] == want[1]
    return now == want


@dataclass
class CheckoutPlan:
    to_apply: list[str]
    already: list[str]
    conflicts: list[str]


def plan_checkout(repo: Path, base: str, result: str, paths: set[str]) -> CheckoutPlan:
    """For each touched path: already as delivered, still as the task saw it
    (apply), or changed by the operator since (conflict). A path is compared
    as git stores it: content, executable bit, symlink target, absence."""
    filemode = git(repo, "config", "--bool", "core.fileMode", check=False).strip() != "false"
    plan = CheckoutPlan([], [], [])
    for path in sorted(paths):
        now = _working_entry(repo, path, filemode)
        if _same(now, _entry(repo, result, path), filemode):
            plan.already.append(path)
        elif _same(now, _entry(repo, base, path), filemode):
            plan.to_apply.append(path)
        else:
            plan.conflicts.append(path)
    return plan


def apply_to_checkout(repo: Path, base: str, result: str, files: list[FilePatch]) -> bool:
    """Apply the delivered change to the working files. Returns
    `already_applied` (every file already matched the delivered content)."""
    plan = plan_checkout(repo, base, result, touched_paths(files))
    if plan.conflicts:
        raise DeliveryRefused(
            "you changed " + ", ".join(plan.conflicts) + " since the task started, so its "
            "change was not applied to your checkout (nothing was modified); deliver to a "
            "branch instead, or revert those files and approve again"
        )
    if not plan.to_apply:
        return True
    pending = set(plan.to_apply)
    patch = "".join(
        f.text() for f in files if f.path in pending or (f.old_path and f.old_path in pending)
    )
    _apply(repo, patch)
    return False
