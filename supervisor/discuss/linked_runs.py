"""The coding runs a discussion started, and what they decide at its next start.

Two rules read them:

- **One run at a time.** While a run started from a discussion is unfinished
  (any state but merged, reported, failed or abandoned), the discussion
  starts no other: two builds of the same conversation would race each other.
- **Where a follow-up starts** (only when the caller names no base). The
  newest decisive run decides: a delivery to a branch continues from the
  commit it delivered (the SHA, never the branch, which may have moved); a
  delivery to the checkout continues from the checkout's current files, which
  hold that delivery plus any later edits; a delivery whose commit was never
  recorded, or two deliveries that cannot be ordered, refuse instead of
  guessing; a failed or abandoned run that left changes in its worktree
  refuses until they are reviewed. Nothing delivered means the checkout.
  Never does a follow-up silently start from repository HEAD when known work
  exists elsewhere.

The supervisor records each linked run in `<discussions>/runs/<id>.json`
when it starts and again when it finishes, so a delivered commit outlives the
session row (retention may forget that). The discussion's chat record is
written only by the discussion itself; this file only by the supervisor.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import CorralError
from ..models import CoderSession
from ..states import TERMINAL_STATES, label
from .common import _ID, DISCUSSIONS_DIR

log = logging.getLogger("corral.supervisor")

__all__ = [
    "DISCUSSIONS_DIR",
    "REPO_DIFFERS",
    "SAME_TIMESTAMP",
    "UNKNOWN_DELIVERY",
    "DiscussionRuns",
    "coding_context",
    "decisive_run",
    "first_unfinished",
    "followup_base_from",
    "linked_rows",
    "run_row",
    "unfinished_changes",
    "unfinished_work",
    "unknown_discussion",
]

FINISHED = frozenset(s.value for s in TERMINAL_STATES)

REPO_DIFFERS = "The task repository differs from this conversation's repository."

SAME_TIMESTAMP = (
    "Multiple deliveries have the same recorded timestamp. Choose an explicit base revision; "
    "corral cannot safely infer their order."
)

UNKNOWN_DELIVERY = (
    "The previous run predates saved result revisions. Choose an explicit base revision before "
    "continuing; corral will not silently start again from repository HEAD."
)


def unknown_discussion(discussion_id: str) -> str:
    return (
        f"there is no discussion '{discussion_id}' in this corral, so nothing was started. "
        "Start from an open or saved discussion, or start without one"
    )


def unfinished_work(session_id: str, state: str) -> str:
    return (
        f"Conversation already has unfinished work in {label(session_id)} ({state}). Open it "
        "from the board to continue or cancel it before starting another task."
    )


def unfinished_changes(worktree: str) -> str:
    return (
        f"The previous run has unfinished changes at {worktree}. Review that work before "
        "starting over; resuming that worktree is not yet supported. To start over anyway, "
        "name a base revision."
    )


NOT_CONFIRMED_STOPPED = (
    "The previous task's execution has not been confirmed stopped. Its work is retained; "
    "automatic recovery cannot safely reopen it yet. Review it, or name a base revision to "
    "start over."
)

MULTIPLE_UNFINISHED = (
    "Multiple unfinished worktrees belong to this conversation. Review them before choosing "
    "work to continue, or name a base revision to start over."
)


def resumed_guidance(previous: CoderSession) -> list[str]:
    """What the agent carrying on from `previous` is told: its edits are here,
    and what the operator said to it (the new run's own guidance budget is
    fresh)."""
    lines = [
        "- This worktree starts with the previous attempt's edits, uncommitted: carry on from "
        "them (git diff shows them) rather than starting over."
    ]
    if previous.error:
        lines.append(f"- The previous attempt ended: {previous.error}")
    lines += [
        f"- Operator guidance to the previous attempt: {m}" for m in previous.steering_messages
    ]
    return lines


def resuming(who: str, worktree: str) -> str:
    return (
        f"This follow-up carries on from the unfinished work {who} left at {worktree}: its "
        "edits are in this worktree, uncommitted (that worktree stays as it was)."
    )


# --- the rules -----------------------------------------------------------------------


def linked_rows(
    recorded: Iterable[dict[str, Any]],
    sessions: Iterable[CoderSession],
    worktrees: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The discussion's runs, newest first: what the supervisor recorded,
    overridden by the session itself while it is still known. `worktrees`
    maps a session id to the worktree still holding its unfinished changes.
    A run another run resumed is left out (its successor speaks for it), and
    so is a recorded run this corral no longer knows that never finished: a
    session that is gone cannot hold the discussion back."""
    rows: dict[str, dict[str, Any]] = {}
    for row in recorded:
        sid = row.get("session_id")
        if isinstance(sid, str) and row.get("state") in FINISHED:
            rows[sid] = {**row, "worktree": None}
    for session in sessions:
        rows[session.id] = run_row(session) | {"worktree": None}
    for sid, path in (worktrees or {}).items():
        if sid in rows:
            rows[sid]["worktree"] = path
    superseded = {r.get("resumed_from") for r in rows.values()}
    kept = [r for sid, r in rows.items() if sid not in superseded]
    kept.sort(key=lambda r: float(r.get("updated_at") or 0), reverse=True)
    return kept


def first_unfinished(rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The first run that has not reached a final state."""
    return next((r for r in rows if r.get("state") not in FINISHED), None)


def resumable_run(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failed or abandoned run (rows newest first) whose kept worktree a
    follow-up carries on from: the newest one with unfinished changes, newer
    than any delivery. Raises when more than one is left to choose from."""
    left: list[dict[str, Any]] = []
    for run in rows:
        if run.get("state") == "merged":
            break
        if run.get("state") in ("failed", "abandoned") and run.get("worktree"):
            left.append(run)
    if len(left) > 1:
        raise CorralError(MULTIPLE_UNFINISHED)
    return left[0] if left else None


def decisive_run(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run a follow-up continues from (rows newest first): the newest
    delivery, unless a newer failed or abandoned run left changes behind.
    Raises `CorralError` when the answer cannot be known."""
    for run in rows:
        state = run.get("state")
        if state == "merged":
            if any(
                other.get("state") == "merged"
                and other.get("updated_at") == run.get("updated_at")
                and other.get("result_commit") != run.get("result_commit")
                for other in rows
            ):
                raise CorralError(SAME_TIMESTAMP)
            if not run.get("result_commit"):
                raise CorralError(UNKNOWN_DELIVERY)
            return run
        if state in ("failed", "abandoned") and run.get("worktree"):
            raise CorralError(unfinished_changes(str(run["worktree"])))
    return None


def followup_base_from(rows: list[dict[str, Any]]) -> str | None:
    """The commit a follow-up starts from. None means the checkout's current
    files: nothing was delivered, or the delivery went to the checkout (its
    files already hold it; the old tree would erase later edits)."""
    run = decisive_run(rows)
    if run is None or run.get("result_delivery") == "checkout":
        return None
    return str(run["result_commit"])


# --- the record ----------------------------------------------------------------------


CODING_CONTEXT_ROWS = 8
CODING_CONTEXT_HEADER = (
    "Linked coding runs (current observations; older observations may be stale):"
)
CODING_CONTEXT_GUIDANCE = (
    "About these runs: each ran in its own git worktree; your read tools read this "
    "conversation's repository, not those worktrees. A run in state merged delivered its "
    "result (result_delivery: to a branch, result_branch at result_commit, or into the "
    "checkout); passing checks or a delivered branch do not mean the work is merged upstream "
    "or deployed. A failed or abandoned run keeps its worktree and its work: suggest "
    "reviewing it before starting over. A new task from this conversation starts from the "
    "checkout's current files after a checkout delivery, and from the delivered commit after "
    "a branch delivery; only one run from this conversation may be unfinished at a time."
)


def coding_context(recorded: Iterable[dict[str, Any]]) -> str:
    """What the model is told at each turn about the runs this discussion
    started, so it answers from what happened to them (delivered, failed,
    still running) rather than from the conversation alone: the newest
    `CODING_CONTEXT_ROWS`, a run another resumed left out, then fixed
    guidance. Empty when there are none. The rows are corral's own record
    (states, ids, commits), never an agent's text; they are not kept in the
    transcript, so each turn reads them afresh."""
    rows = [dict(r) for r in recorded if isinstance(r.get("session_id"), str)]
    superseded = {r.get("resumed_from") for r in rows}
    kept = [r for r in rows if r["session_id"] not in superseded]
    kept.sort(key=lambda r: float(r.get("updated_at") or 0), reverse=True)
    if not kept:
        return ""
    fields = ("session_id", "state", "updated_at", "result_delivery", "result_branch")
    shown = [
        {k: r.get(k) for k in (*fields, "result_commit", "resumed_from")}
        for r in kept[:CODING_CONTEXT_ROWS]
    ]
    lines = [CODING_CONTEXT_HEADER, *(json.dumps(r, sort_keys=True) for r in shown)]
    if len(kept) > CODING_CONTEXT_ROWS:
        lines.append(f"({len(kept) - CODING_CONTEXT_ROWS} older runs not shown)")
    return "\n".join([*lines, CODING_CONTEXT_GUIDANCE])


def run_row(session: CoderSession) -> dict[str, Any]:
    """What a discussion keeps about one of its runs."""
    return {
        "session_id": session.id,
        "state": session.state.value,
        "updated_at": session.updated_at,
        "result_commit": session.result_commit,
        "result_delivery": session.result_delivery,
        "result_branch": session.result_branch,
        "resumed_from": session.resumed_from,
    }


class DiscussionRuns:
    """The discussions under `store_dir` (`<state>/discussions`) as the
    supervisor sees them: whether one exists, its repository, and its runs."""

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = Path(store_dir)

    def ledger_path(self, discussion_id: str) -> Path:
        return self.store_dir / "runs" / f"{discussion_id}.json"

    def repo_of(self, discussion_id: str) -> Path:
        """The repository a saved discussion is grounded in; an unknown id is
        refused (an ungrounded run must not start under its name)."""
        path = self.store_dir / f"{discussion_id}.json"
        if not _ID.match(discussion_id) or not path.is_file():
            raise CorralError(unknown_discussion(discussion_id))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Path(data["repo"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorralError(
                f"discussion '{discussion_id}' is unreadable ({exc}), so nothing was started; "
                f"{path} was left in place"
            ) from exc

    def model_of(self, discussion_id: str) -> str | None:
        """The model the discussion pinned (None: none, or unreadable — then
        the start itself says what is wrong with the discussion)."""
        path = self.store_dir / f"{discussion_id}.json"
        if not _ID.match(discussion_id):
            return None
        try:
            model = json.loads(path.read_text(encoding="utf-8")).get("model")
        except (OSError, ValueError, AttributeError):
            return None
        return model if isinstance(model, str) and model else None

    def runs(self, discussion_id: str) -> list[dict[str, Any]]:
        """The recorded runs, oldest first (an unreadable ledger reads as an
        error, never as "no runs": that would start from HEAD)."""
        path = self.ledger_path(discussion_id)
        if not _ID.match(discussion_id) or not path.exists():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rows = data["runs"]
            if not isinstance(rows, list):
                raise TypeError("runs is not a list")
            return [dict(r) for r in rows if isinstance(r, dict)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorralError(
                f"the runs of discussion '{discussion_id}' are unreadable ({exc}); fix or "
                f"remove {path}, or name a base revision"
            ) from exc

    def record(self, session: CoderSession) -> None:
        """Save (or update) the row of a run started from a discussion."""
        did = session.discussion_id
        if not did or not _ID.match(did):
            return
        rows = self.runs(did)
        row = run_row(session)
        for i, old in enumerate(rows):
            if old.get("session_id") == session.id:
                rows[i] = {**old, **row}
                break
        else:
            rows.append(row)
        path = self.ledger_path(did)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"discussion_id": did, "runs": rows}, indent=1), encoding="utf-8")
        os.replace(tmp, path)

    def record_safely(self, session: CoderSession) -> None:
        """`record`, where the session is already stored and must go on (the
        registry's finished-session hook, a registered start): a failure to
        save is logged, never raised into what the session was doing."""
        try:
            self.record(session)
        except (OSError, CorralError) as exc:
            log.warning("could not record %s on its discussion: %s", session.id, exc)
