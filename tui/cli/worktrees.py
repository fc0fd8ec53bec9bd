"""`corral worktrees [--json]` and `corral worktrees prune [--dry-run] [--force] [--yes]`.

Listing reads the database read-only (a running console is fine). Pruning
changes things, so it needs the state dir: close the console first. What may
be removed is the supervisor's decision (`worktree_pruning.prune_worktrees`);
this module prints it. A worktree may hold an agent's work nobody decided to
throw away (a failed session keeps its worktree), so pruning first lists what
it would remove and asks on a terminal; elsewhere it needs `--yes`.
"""

from __future__ import annotations

import sys

from corral.supervisor.errors import CorralError
from corral.supervisor.paths import default_state_dir
from corral.supervisor.states import said
from corral.supervisor.worktree_pruning import PruneOutcome, PruneStep, prune_worktrees, worktrees

from .output import say, say_json


def list_worktrees(*, as_json: bool) -> int:
    state_dir = default_state_dir()
    rows = worktrees(state_dir)
    if as_json:
        say_json([r.model_dump(mode="json") for r in rows])
        return 0
    if not rows:
        say(f"no worktrees in {state_dir}")
    for r in rows:
        dirty = "" if r.clean in (True, None) else "  (uncommitted changes)"
        note = f"  — {r.note}" if r.note else ""
        state = said(r.session_state) if r.session_state else "unknown"
        say(f"{r.session or '?':<16} {state:<17} {r.lease.value:<17} {r.path}{dirty}{note}")
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
    line = LINES[step.outcome].format(path=step.path, detail=step.detail)
    if step.outcome is PruneOutcome.WOULD_REMOVE and step.detail:
        line += f" (its session {step.detail})"
    say(line)


def prune(*, dry_run: bool, force: bool, yes: bool = False) -> int:
    state_dir = default_state_dir()
    if not dry_run and not yes:
        plan = prune_worktrees(state_dir, dry_run=True, force=force, on_step=print_step)
        doomed = sum(step.outcome is PruneOutcome.WOULD_REMOVE for step in plan.steps)
        if not plan.has_store:
            say(f"no worktrees in {state_dir}")
            return 0
        if doomed == 0:
            say(f"0 removed, {len(plan.steps)} kept")
            return 0
        _ask_before_removing(doomed)
    report = prune_worktrees(state_dir, dry_run=dry_run, force=force, on_step=print_step)
    if not report.has_store:
        say(f"no worktrees in {state_dir}")
    elif not dry_run:
        say(f"{report.removed} removed, {report.kept} kept")
    return 0


def _ask_before_removing(count: int) -> None:
    """Removing a worktree cannot be undone: asked once on a terminal, else
    `--yes` is needed (what would go is listed above the question)."""
    what = f"{count} worktree{'s' if count != 1 else ''}"
    if not sys.stdin.isatty():
        raise CorralError(
            f"corral worktrees prune asks before removing {what} (listed above): add --yes to "
            "remove them without asking"
        )
    answer = input(f"Remove {what} listed above, with everything in them? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise CorralError(f"nothing was removed (the {what} are kept)")
