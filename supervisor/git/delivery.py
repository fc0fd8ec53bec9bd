"""Delivery of a verified change.

- What is delivered is the verified tree (see `trees`), never the live
  worktree: the change is the entries that differ between the start commit
  and that tree, put in place from git objects (`result_tree`), with no patch
  text in between (no size cap, no encoding, exact bytes of every name).
- A branch is built on the checkout's *current* HEAD through a private index:
  the operator's uncommitted work never ships and their checkout is untouched.
- Checkout delivery writes the change's entries into the working files only
  (HEAD and index untouched), refusing any file the operator changed since
  the task started.
- Delivery is idempotent: a branch that already holds this session's result
  (written before corral could record it) counts as delivered; a checkout
  that already holds it reports `already_applied`.

Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorralError
from .patches import FilePatch
from .result_tree import (
    Change,
    changes_between,
    checkout_filemode,
    compose,
    entries_of,
    object_format,
    same_entry,
    shown,
    working_entry,
    write_entries,
)
from .run import GitError, git
from .snapshot import PrivateIndex, identity_env
from .type_changes import refuse_symlinks_in_the_way

_PATCH_FAILED = re.compile(
    r"(?:patch failed|does not exist in index|already exists in index|"
    r"does not match index|No such file or directory):?\s*(.+?)(?::\d+)?$"
)


class DeliveryRefused(CorralError):
    """Delivery would lose or overwrite something; nothing was changed."""


def _failed_paths(stderr: str) -> list[str]:
    paths: list[str] = []
    for line in stderr.splitlines():
        m = _PATCH_FAILED.search(line.strip())
        if m and m.group(1) not in paths:
            paths.append(m.group(1).strip())
    return paths


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


def delivered_commit(
    repo: Path, branch: str, session_id: str, start: str, changes: list[Change]
) -> str | None:
    """The commit of `branch` when it already holds this session's result: a
    commit naming the session (`Corral-Session:`) whose tree is its parent with
    `changes` in place. A delivery cut short after writing the branch (a crash
    before the state was saved) is then complete; anything else is not ours."""
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
    composed = compose(repo, parent, start, changes)
    if composed.conflicts:
        return None
    actual = git(repo, "rev-parse", f"{commit}^{{tree}}").strip()
    return commit if composed.tree == actual else None


def changed_paths(repo: Path, a: str, b: str) -> set[str]:
    """The paths whose entries differ between two trees or commits (exact names)."""
    return {c.path for c in changes_between(repo, a, b)}


def touched_paths(files: list[FilePatch]) -> set[str]:
    paths: set[str] = set()
    for f in files:
        paths.add(f.path)
        if f.old_path:
            paths.add(f.old_path)
    return paths


@dataclass
class CheckoutPlan:
    to_apply: list[str]
    already: list[str]
    conflicts: list[str]


def plan_checkout(repo: Path, base: str, result: str, paths: Iterable[str]) -> CheckoutPlan:
    """For each path: already as delivered, still as `base` holds it (apply),
    or changed by the operator since (conflict). A path is compared as git
    stores it: content, executable bit, symlink target, absence."""
    wanted = sorted(set(paths))
    filemode = checkout_filemode(repo)
    fmt = object_format(repo)
    want = entries_of(repo, result, wanted)
    was = entries_of(repo, base, wanted)
    plan = CheckoutPlan([], [], [])
    for path in wanted:
        now = working_entry(repo, path, filemode=filemode, object_format=fmt)
        if same_entry(now, want.get(path), filemode=filemode):
            plan.already.append(path)
        elif same_entry(now, was.get(path), filemode=filemode):
            plan.to_apply.append(path)
        else:
            plan.conflicts.append(path)
    return plan


def apply_to_checkout(repo: Path, base: str, result: str, paths: Iterable[str]) -> bool:
    """Make the checkout's working files at `paths` hold `result`'s entries,
    where they still hold `base`'s (HEAD and index untouched). Returns
    `already_applied` (every file already matched the delivered content)."""
    paths = list(paths)
    refuse_symlinks_in_the_way(repo, paths)
    plan = plan_checkout(repo, base, result, paths)
    if plan.conflicts:
        raise DeliveryRefused(
            "you changed " + ", ".join(shown(p) for p in plan.conflicts) + " since the task "
            "started, so its change was not applied to your checkout (nothing was modified); "
            "deliver to a branch instead, or revert those files and approve again"
        )
    if not plan.to_apply:
        return True
    entries = entries_of(repo, result, plan.to_apply)
    write_entries(repo, [Change(p, None, entries.get(p)) for p in plan.to_apply])
    return False
