"""What a session allows now: one table, decided by the supervisor, read by
every client (the board, the session screen, the palette, the command line).

`ACTIONS` holds each action's guard; `why_not(action, facts)` is None when the action applies to the session as it
stands, else the one sentence that says why not (shown when its key is
pressed anyway). The facts are what every client has of a session: its state,
what it needs of the operator, whether it is dormant or live, its worktree and
its delivered branch. An action name the table does not hold is an error
(`UnknownAction`), never "allowed"."""

from __future__ import annotations

from collections.abc import Callable
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


class UnknownAction(KeyError):
    """An action name the table does not hold: a client's mistake, never "allowed"."""


def _confirm(f: SessionFacts, name: str, now: str) -> str | None:
    return None if f.needs_you == "contract" else f"nothing to confirm: {name} is {now}"


def _decide(f: SessionFacts, name: str, now: str) -> str | None:
    if f.needs_you in ("merge", "finding"):
        return None
    return f"nothing waits for approval: {name} is {now}"


def _verified_diff(f: SessionFacts, name: str, now: str) -> str | None:
    return None if f.needs_you == "merge" else f"no verified diff waits: {name} is {now}"


def _retry(f: SessionFacts, name: str, now: str) -> str | None:
    if f.state in RETRYABLE or f.dormant:
        return None
    return f"only a failed, rejected or cancelled session is retried: {name} is {now}"


def _finished(verb: str) -> Guard:
    def guard(f: SessionFacts, name: str, now: str) -> str | None:
        if f.state.is_terminal:
            return None
        return f"only a finished session is {verb}: {name} is {now} (cancel it first)"

    return guard


def _delivered_branch(f: SessionFacts, name: str, now: str) -> str | None:
    if f.state is S.MERGED and f.result_branch:
        return None
    if f.state is S.MERGED:
        return f"{name} was delivered to your checkout, not to a branch: nothing to push"
    return f"only a delivered branch is pushed: {name} is {now}"


def _worktree(f: SessionFacts, name: str, now: str) -> str | None:
    return None if f.worktree else f"{name} has no worktree any more"


def _cancel(f: SessionFacts, name: str, now: str) -> str | None:
    return f"{name} has already ended ({f.state.value})" if f.state.is_terminal else None


def _always(f: SessionFacts, name: str, now: str) -> str | None:
    return None


Guard = Callable[[SessionFacts, str, str], "str | None"]

# Every session action a client may offer, with its guard: the one table.
ACTIONS: dict[str, Guard] = {
    "confirm": _confirm,
    "approve": _decide,
    "reject": _decide,
    "approve_checkout": _verified_diff,
    "review_diff": _verified_diff,
    "reverify": _verified_diff,
    "retry": _retry,
    "archive": _finished("archived"),
    "delete": _finished("deleted"),
    "push": _delivered_branch,
    "pull_request": _delivered_branch,
    "open_worktree": _worktree,
    "agent_settings": lambda f, name, now: _settings_refusal(f, name, now),
    "cancel": _cancel,
    "rename": _always,
}


def why_not(action: str, f: SessionFacts) -> str | None:
    """None when `action` applies to the session now; else why not. An
    action the table does not hold raises `UnknownAction`."""
    guard = ACTIONS.get(action)
    if guard is None:
        raise UnknownAction(f"no session action {action!r}; the actions are {', '.join(ACTIONS)}")
    now = STATE_WORDS.get(f.state, f.state.value)
    if f.dormant:
        now = "dormant (its agent stopped; R revives it)"
    return guard(f, label(f.session_id), now)


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
