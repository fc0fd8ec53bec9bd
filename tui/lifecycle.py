"""Name, archive, delete and retry a session, or open its worktree, from any screen:
the questions asked and the toasts shown. The rules (who may) are the supervisor's; this module only
asks and reports, so the board and the session screen say the same words."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral.supervisor.errors import CorralError
from corral.supervisor.states import label

if TYPE_CHECKING:
    from corral.supervisor.models import (
        DeleteResult,
        PullRequestResult,
        PushResult,
        StartResult,
    )

    from .app import CorralApp


def rename(app: CorralApp, session_id: str, then: Callable[[], object] | None = None) -> None:
    """Asks for the name (the current one pre-filled); empty clears it.
    `then` runs once it is stored."""
    current = app.supervisor.get(session_id).session.name or ""

    def go(name: str) -> None:
        try:
            row = app.supervisor.rename(session_id, name)
        except CorralError as exc:
            app.notify(str(exc), title="Rename refused", severity="error", timeout=8)
            return
        app.notify(f"{label(session_id)} is now “{row.name}”" if row.name else "Name cleared.")
        if then is not None:
            then()

    app.ask(
        f"Name {label(session_id)}?\n\n{app._what(session_id)}\n\n"
        "A short name shown on the board beside the intent (empty clears it).",
        go,
        go="Rename",
        comment="a short name — enter saves, escape keeps the old one",
        value=current,
    )


def toggle_archive(app: CorralApp, session_id: str) -> None:
    """Archive a finished session, or bring an archived one back. Nothing is
    deleted either way, so it does not ask."""
    archived = app.supervisor.get(session_id).session.archived_at is not None
    try:
        app.supervisor.archive(session_id, archived=not archived)
    except CorralError as exc:
        app.notify(str(exc), title="Archive refused", severity="error", timeout=8)
        return
    if archived:
        app.notify(f"{label(session_id)} is back on the board.", title="Unarchived")
    else:
        app.notify(
            f"{label(session_id)} left the board (kept in the store). f → archived shows it; "
            "h there brings it back.",
            title="Archived",
        )


def delete(app: CorralApp, session_id: str) -> None:
    """Asks once (it cannot be undone), then deletes; the toast comes once
    the supervisor reports it gone (the board drops the row itself)."""
    session = app.supervisor.get(session_id).session
    branch = session.result_branch if session.result_delivery == "branch" else None
    question = (
        f"Delete this {session.state.value} session for good?\n\n{app._what(session_id)}\n\n"
        "Its worktree (with any changes left in it), its events and its record are removed; "
        "this cannot be undone." + (f" Branch {branch} stays in your repo." if branch else "")
    )

    def deleted(result: DeleteResult) -> str:
        kept = f" Branch {result.branch_kept} stays." if result.branch_kept else ""
        return f"{label(session_id)} is deleted.{kept}"

    app.ask(
        question,
        lambda _: app.run_supervisor_call(
            "Delete", app.supervisor.delete(session_id), outcome=deleted
        ),
        go="Delete",
    )


REMOTE = "origin"  # the board pushes there; `corral push --remote` names another


def push(app: CorralApp, session_id: str) -> None:
    """Asks once, then pushes the delivered branch; the toast comes once git
    reported the push done (a refusal is git's own words)."""
    branch = app.supervisor.get(session_id).session.result_branch

    def pushed(result: PushResult) -> str:
        return f"Branch {result.branch} pushed to {result.remote} ({result.url})."

    app.ask(
        f"Push branch {branch} to {REMOTE}?\n\n{app._what(session_id)}\n\n"
        "It runs git push with your credentials and hooks; others can see it afterwards.",
        lambda _: app.run_supervisor_call(
            "Push", app.supervisor.push(session_id, REMOTE), outcome=pushed
        ),
        go="Push",
    )


def pull_request(app: CorralApp, session_id: str) -> None:
    """Asks once, then pushes the branch and opens a pull request with gh
    (without gh: the toast says so and gives the push command)."""
    branch = app.supervisor.get(session_id).session.result_branch

    def opened(result: PullRequestResult) -> str:
        return result.message

    app.ask(
        f"Open a pull request for {branch}?\n\n{app._what(session_id)}\n\n"
        f"The branch is pushed to {REMOTE}, then gh pr create opens the pull request: the "
        "intent as its title, the contract and how its checks came out as its body.",
        lambda _: app.run_supervisor_call(
            "Pull request", app.supervisor.pull_request(session_id, REMOTE), outcome=opened
        ),
        go="Open pull request",
    )


def retry(
    app: CorralApp, session_id: str, then: Callable[[StartResult], object] | None = None
) -> None:
    """Asks once, then starts the retry; `then(result)` runs once it exists."""
    session = app.supervisor.get(session_id).session
    why = "rejected" if session.reject_comment else session.state.value
    # the old worktree's edits can be carried over while it is still here
    worktree = session.worktree
    keepable = worktree is not None and not session.host and Path(worktree).is_dir()
    question = (
        f"Retry this {why} session?\n\n{app._what(session_id)}\n\n"
        "A new session with the same intent, repo, engine and contract starts in a fresh "
        "worktree (its contract is proposed for you to confirm). Its agent is told what went "
        "wrong: the reject comment, the error, the failing checks' output."
        + (
            "\n\nWith its edits (e): the new worktree starts from this one's files, "
            "uncommitted, and its agent carries on from them."
            if keepable
            else ""
        )
    )

    def started(result: StartResult) -> str:
        if then is not None:
            then(result)
        return f"Retrying as {label(result.session_id)}: review its contract, then c."

    def with_edits() -> None:
        app.run_supervisor_call(
            "Retry", app.supervisor.retry(session_id, keep_edits=True), outcome=started
        )

    app.ask(
        question,
        lambda _: app.run_supervisor_call(
            "Retry", app.supervisor.retry(session_id), outcome=started
        ),
        go="Retry afresh" if keepable else "Retry",
        other=("With its edits", with_edits) if keepable else None,
    )


def open_worktree(app: CorralApp, session_id: str, path: str | None, *, editor: bool) -> None:
    """`w` (a shell) / `E` (`$EDITOR`): the worktree in a new window of the
    operator's tmux, or the `cd` command to run; said in one toast."""
    from .worktree_window import open_worktree as open_window

    async def go() -> None:
        opened = await open_window(path, label(session_id), editor=editor)
        app.notify(opened.message, title="Worktree", timeout=12, markup=False)

    app.run_worker(go(), group="worktree-window")
