"""Verification trees: the checks run on a fresh checkout of exactly the tree
a delivery would produce, never on a worktree an agent used.

A tree is materialized as a detached git worktree of a commit holding it
(`git worktree add` checks out from objects, in parallel), so only what the
tree holds is there: no ignored file (`__pycache__`, `node_modules`, `build/`,
a `.venv`) and nothing else an agent left behind, and none of the operator's
files a delivery will not carry. It is a real worktree with a `.git`, so
tools that read git metadata (setuptools-scm, hatch-vcs, `git describe`) work
in it as in a clone. Checks and the setup write into it freely; what they
write never reaches the agent's worktree and is gone with the scratch.

Each scratch is leased (see `Workspaces.scratch`): removed when the work is
done, and by the start-up reconcile when corral died before that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from ..git.trees import commit_tree
from ..workspaces import Workspaces

MATERIALIZED_MESSAGE = "corral: a tree under verification\n"


@contextlib.asynccontextmanager
async def materialized(
    workspaces: Workspaces, repo: Path, tree: str, parent: str, owner: str
) -> AsyncIterator[Path]:
    """A fresh checkout of `tree` (as a commit on `parent`) for `owner`'s
    checks; removed afterwards, also when the work is cancelled."""
    commit = await asyncio.to_thread(commit_tree, repo, tree, parent, MATERIALIZED_MESSAGE)
    cm = workspaces.scratch(repo, commit, owner)
    path = await asyncio.to_thread(cm.__enter__)
    try:
        yield path
    finally:
        await asyncio.shield(asyncio.to_thread(cm.__exit__, None, None, None))
