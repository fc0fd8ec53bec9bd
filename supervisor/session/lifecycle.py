"""What an operator may do to a session besides its gates: name it, archive or
delete it when it is finished, and retry it after a failure or a rejection.

Rules only (who may, what a retry tells the agent); the registry stores the
change and the facade starts the retry through gate 1 like any new session.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import CorralError
from ..models import CoderSession
from ..states import CoderState, label, said

S = CoderState

NAME_MAX = 40  # cells: a name sits beside the intent on an 80-column board
RETRYABLE = frozenset({S.FAILED, S.ABANDONED})
TAIL_LINES = 30  # of each failing check's output carried into a retry's prompt


def clean_name(name: str | None) -> str | None:
    """One line, at most NAME_MAX characters; empty clears the name."""
    words = " ".join((name or "").split())
    if len(words) > NAME_MAX:
        raise CorralError(f"a session name has at most {NAME_MAX} characters ({len(words)} given)")
    return words or None


def refuse_archive(session: CoderSession) -> None:
    """Only a finished session leaves the board: an unfinished one still has
    work (or a gate) that someone must see."""
    if not session.state.is_terminal:
        raise CorralError(
            f"{label(session.id)} is {session.state.value}: only a finished session can be "
            "archived (cancel it first)"
        )


def refuse_delete(session: CoderSession, *, busy: bool) -> None:
    """Only a finished session is deleted: a running or gated one still has
    an agent or a decision attached (cancel it first)."""
    if not session.state.is_terminal:
        raise CorralError(
            f"{label(session.id)} is {session.state.value}: only a finished session can be "
            f"deleted (cancel it first: x on the board, or corral cancel {label(session.id)})"
        )
    if busy:
        raise CorralError(
            f"{label(session.id)} is still finishing (delivery or clean-up): delete it again "
            "in a moment"
        )


def refuse_retry(session: CoderSession) -> None:
    if session.engine.startswith("adopted:"):
        raise CorralError(
            f"{label(session.id)} was a pane you started: adopt it again instead of retrying"
        )
    if session.state not in RETRYABLE:
        raise CorralError(
            f"{label(session.id)} is {said(session.state)}: only a failed, rejected or "
            "cancelled session can be retried"
        )


KEPT_EDITS = (
    "- This worktree starts with the previous attempt's edits, uncommitted: carry on from "
    "them (git diff shows them) rather than starting over."
)


def refuse_keeping_edits(session: CoderSession) -> None:
    """A retry keeps edits only from a worktree that is still there, on this machine."""
    if session.host:
        raise CorralError(
            f"{label(session.id)} ran on host {session.host}: a retry there starts afresh "
            f"(corral retry {label(session.id)})"
        )
    worktree = session.worktree
    if not worktree or session.start_commit is None or not Path(worktree).is_dir():
        raise CorralError(
            f"{label(session.id)}'s worktree is gone, so there are no edits to keep: retry "
            f"it afresh (corral retry {label(session.id)})"
        )


def retry_guidance(session: CoderSession) -> list[str]:
    """What went wrong in `session`, as lines for the retry's first prompt: the
    reject comment, the failure, and each failing check with its output tail."""
    lines: list[str] = []
    if session.state is S.ABANDONED:
        if session.reject_comment:
            lines.append(f"- The operator rejected the result: {session.reject_comment.strip()}")
        elif session.no_change_finding is not None and session.no_change_finding.resolver_comment:
            comment = session.no_change_finding.resolver_comment.strip()
            lines.append(f"- The operator rejected the no-change finding: {comment}")
        elif session.diff is not None or session.no_change_finding is not None:
            lines.append("- The operator rejected the result (no comment given).")
        else:
            lines.append("- The operator cancelled the attempt before it finished.")
    elif session.error:
        lines.append(f"- It failed: {session.error.strip()}")
    for result in session.last_check_results:
        if result.passed:
            continue
        status = "timed out" if result.timed_out else f"exit {result.exit_code}"
        tail = "\n".join(result.output_tail.strip().splitlines()[-TAIL_LINES:])
        lines.append(f"- Check {result.name} failed ({status}):\n{tail}".rstrip())
    return lines
