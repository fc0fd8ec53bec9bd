"""`corral worktrees [--json]` and `corral worktrees prune [--dry-run] [--force]`.

Listing reads the database read-only (a running console is fine). Pruning
changes things, so it needs the state dir: close the console first. What may
be removed is the supervisor's decision (`worktree_pruning.prune_worktrees`);
this module prints it.
"""

from __future__ import annotations

import json

from corral.supervisor.paths import default_state_dir
from corral.supervisor.states import said
from corral.supervisor.worktree_pruning import PruneOutcome, PruneStep, prune_worktrees, worktrees


def list_worktrees(*, as_json: bool) -> int:
    state_dir = default_state_dir()
    rows = worktrees(state_dir)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no worktrees in {state_dir}")
    for r in rows:
        dirty = "" if r.clean in (True, None) else "  (uncommitted changes)"
        note = f"  — {r.note}" if r.note else ""
        state = said(r.session_state) if r.session_state else "unknown"
        print(f"{r.session or '?':<16} {state:<17} {r.lease.value:<17} {r.path}{dirty}{note}")
    return 0


LINES = {
    PruneOutcome.KEPT_SESSION_LIVE: "keep   {path}: its session is still {detail}",
    PruneOutcome.WOULD_REMOVE: "remove {path}",
    PruneOutcome.WOULD_KEEP_DIRTY: "keep   {path} (uncommitted changes; --force to remove)",
    PruneOutcome.REMOVED: "removed {path}",
    PruneOutcome.KEPT_UNSAFE: "kept    {path}: {detail}",
    PruneOutcome.KEPT_UNKNOWN: "keep   {path}: no lease records it (unknown); --force removes it",
    PruneOutcome.REMOVED_UNKNOWN: "removed {path} (no lease; --force)",
    PruneOutcome.KEPT_UNKNOWN_FAILED: "kept    {path}: {detail}",
}


def print_step(step: PruneStep) -> None:
    print(LINES[step.outcome].format(path=step.path, detail=step.detail))


def prune(*, dry_run: bool, force: bool) -> int:
    state_dir = default_state_dir()
    report = prune_worktrees(state_dir, dry_run=dry_run, force=force, on_step=print_step)
    if not report.has_store:
        print(f"no worktrees in {state_dir}")
    elif not dry_run:
        print(f"{report.removed} removed, {report.kept} kept")
    return 0
