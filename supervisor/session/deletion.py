"""Deleting a finished session for good, and what deliberately survives it.

Goes: the session's worktree (through its lease, uncommitted changes and
all: the operator confirmed), the worktrees of a foreman's subtasks, its copy
on a host, the stored row, the journal, the foreman's split and placements,
the agent's settings dir and the lease rows of what was removed.

Stays: the delivered branch `corral/<id>` (the result, now the operator's;
`git branch -D` removes it). Worktrees are detached, so an undelivered
session has no branch of its own to remove. A worktree git no longer sees as
corral left it (a branch checked out there, its HEAD moved) is not removed,
and then nothing is deleted: the sentence says how to clear it by hand.

Blocking parts run in threads; the caller has checked the session may go.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from ..errors import CorralError
from ..hosts.configured import Hosts
from ..models import CoderSession, DeleteResult
from ..panes.manager import PaneManager
from ..states import label
from ..store.placements import PlacementStore
from ..workspaces import Workspaces
from .registry import SessionRegistry


async def delete_session(
    session: CoderSession,
    *,
    registry: SessionRegistry,
    workspaces: Workspaces,
    placements: PlacementStore,
    hosts: Hosts,
    panes: PaneManager | None,
    agents_dir: Path,
) -> DeleteResult:
    sid = session.id
    if panes is not None:  # normally stopped when it finished; its files go next
        await panes.stop_agent(sid, session.pane)
    trees = [p for p in (session.worktree,) if p]
    owners = {sid}  # the subtasks' worktrees are leased to their own ids
    for placement in placements.placements(sid):
        trees += [p for p in (placement.worktree, placement.first_worktree) if p]
        owners.add(placement.child_id)
    removed: list[str] = []
    for path in dict.fromkeys(trees):
        existed = Path(path).exists()
        ok, why = await asyncio.to_thread(workspaces.remove, path, force=True)
        if not ok and existed:
            raise CorralError(
                f"{label(sid)} was not deleted: its worktree {path} is not as corral left it "
                f"({why}); keep what you need, run `git worktree remove --force {path}`, "
                "then delete again"
            )
        if existed:
            removed.append(path)
    if session.host and session.remote_worktree:
        await asyncio.to_thread(hosts.discard, session)
    await asyncio.to_thread(workspaces.forget, owners)
    placements.forget(sid)
    registry.forget(sid)
    shutil.rmtree(agents_dir / sid, ignore_errors=True)
    branch = session.result_branch if session.result_delivery == "branch" else None
    return DeleteResult(session_id=sid, worktrees_removed=removed, branch_kept=branch)
