"""What a session allows now: one table, decided by the supervisor, read by
every client (the board, the session screen, the palette, the command line).

`why_not(action, facts)` is None when the action applies to the session as it
stands, else the one sentence that says why not (shown when its key is
pressed anyway). The facts are what every client has of a session: its state,
what it needs of the operator, whether it is dormant or live, its worktree and
its delivered branch."""

from __future__ import annotations

from dataclasses import dataclass

from .states import CoderState as S
from .states import label

RETRYABLE = frozenset({S.FAILED, S.ABANDONED})
STATE_WORDS: dict[S, str] = {
    S.CREATED: "still drafting its contract",
    S.CONTRACT_PROPOSED: "waiting at gate 1 for its contract to be confirmed",
    S.CONTRACT_CONFIRMED: "starting",
    S.RUNNING: "still working",
    S.NEEDS_APPROVAL: "waiting for your approval",
    S.MERGED: "already delivered",
    S.REPORTED: "already reported",
    S.FAILED: "failed",
    S.ABANDONED: "rejected or cancelled",
}


@dataclass(frozen=True)
class SessionFacts:
    """What the table decides from (a board row or a session's detail)."""

    session_id: str
    state: S
    needs_you: str | None = None
    dormant: bool = False
    live: bool = True
    worktree: str | None = None
    result_branch: str | None = None
    # where its agent runs: a pane's backend (`tmux`, `pty`, …), `acp` for an
    # agent driven over the protocol, None before an agent started (or none will)
    transport: str | None = None
    # what the agent announced it can switch: "modes", "models" (empty: nothing)
    offers: tuple[str, ...] = ()


def why_not(action: str, f: SessionFacts) -> str | None:
    """None when `action` applies to the session now; else why not."""
    name = label(f.session_id)
    now = STATE_WORDS.get(f.state, f.state.value)
    if f.dormant:
        now = "dormant (its agent stopped; R revives it)"
    if action == "confirm":
        if f.needs_you == "contract":
            return None
        return f"nothing to confirm: {name} is {now}"
    if action in ("approve", "reject"):
        if f.needs_you in ("merge", "finding"):
            return None
        return f"nothing waits for approval: {name} is {now}"
    if action in ("approve_checkout", "review_diff", "reverify"):
        if f.needs_you == "merge":
            return None
        return f"no verified diff waits: {name} is {now}"
    if action == "retry":
        if f.state in RETRYABLE or f.dormant:
            return None
        return f"only a failed, rejected or cancelled session is retried: {name} is {now}"
    if action in ("archive", "delete"):
        if f.state.is_terminal:
            return None
        verb = "archived" if action == "archive" else "deleted"
        return f"only a finished session is {verb}: {name} is {now} (cancel it first)"
    if action in ("push", "pull_request"):
        if f.state is S.MERGED and f.result_branch:
            return None
        if f.state is S.MERGED:
            return f"{name} was delivered to your checkout, not to a branch: nothing to push"
        return f"only a delivered branch is pushed: {name} is {now}"
    if action == "open_worktree":
        return None if f.worktree else f"{name} has no worktree any more"
    if action == "agent_settings":
        return _settings_refusal(f, name, now)
    if action == "cancel":
        return f"{name} has already ended ({f.state.value})" if f.state.is_terminal else None
    return None  # rename and what only looks: always


def _settings_refusal(f: SessionFacts, name: str, now: str) -> str | None:
    """Modes and models are an ACP agent's, set while it runs."""
    if f.transport is not None and f.transport != "acp":
        return (
            f"{name}'s agent runs in a {f.transport} pane, not over ACP: only ACP agents "
            "announce modes and models to switch"
        )
    if f.state is not S.RUNNING or not f.live or f.dormant:
        return f"{name}'s agent is not running ({now}): its mode and model are set while it runs"
    if f.transport is None:
        return f"{name}'s engine does not speak ACP: only ACP agents announce modes and models"
    if not f.offers:
        return f"{name}'s agent announced no modes or models to switch"
    return None
