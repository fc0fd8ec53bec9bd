"""What the operator does to a session from any screen: confirm, approve,
reject, cancel, name, archive, delete, retry, push, open a pull request or
the worktree. Each asks the same question the same way (one confirm modal),
runs the owner's call in the background and says in one toast what came of
it. The rules (who may) are the supervisor's; this module asks and reports,
so the board, the session and the diff screens say the same words.

Screens call this module (through `ConsoleApp.actions`), never the app: the
app imports its screens, and nothing below it imports the app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen

from corral.supervisor.errors import CorralError, FlakyPassHeld
from corral.supervisor.states import label, said, short_id

from .confirm import ConfirmScreen

if TYPE_CHECKING:
    from corral.supervisor.models import (
        DeleteResult,
        PullRequestResult,
        PushResult,
        StartResult,
    )
    from corral.supervisor.remote import OwnerSurface

REMOTE = "origin"  # the board pushes there; `corral push --remote` names another


class ActionHost(Protocol):
    """What the actions use of the console app."""

    @property
    def supervisor(self) -> OwnerSurface: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def bell(self) -> None: ...

    def push_screen(self, screen: Screen[Any], callback: Any = None) -> Any: ...

    def report_unexpected(self, where: str, exc: BaseException) -> None: ...

    def run_worker(self, work: Any, *, group: str = "default") -> Any: ...


class SessionActions:
    """The console's actions on sessions, asked and reported the same way on
    every screen. Calls run as tasks of their own (never a screen's
    workers), so closing a screen never cancels a delivery or a run."""

    def __init__(self, app: ActionHost) -> None:
        self.app = app
        self._calls: set[asyncio.Task[Any]] = set()

    @property
    def supervisor(self) -> OwnerSurface:
        return self.app.supervisor

    def keep(self, task: asyncio.Task[Any]) -> None:
        """A task the console cancels when it closes (`cancel_all`)."""
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    def cancel_all(self) -> None:
        for task in list(self._calls):
            task.cancel()

    def run(
        self, label: str, call: Awaitable[Any], outcome: Callable[[Any], str] | None = None
    ) -> None:
        """Run an owner's call in the background; a refusal becomes a toast
        in its own words, and so does `outcome(result)` when given."""
        app = self.app

        async def runner() -> None:
            try:
                result = await call
            except CorralError as exc:
                app.bell()
                app.notify(str(exc), title=f"{label} refused", severity="error", timeout=8)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                app.report_unexpected(label, exc)
            else:
                if outcome is not None:
                    app.notify(outcome(result), title=label, timeout=8)

        self.keep(asyncio.get_running_loop().create_task(runner()))

    # -- what cannot be undone asks once, the same way on every screen ---------

    def ask(
        self,
        question: str,
        then: Callable[[str], object],
        *,
        go: str = "Yes",
        comment: str | None = None,
        value: str = "",
        other: tuple[str, Callable[[], object]] | None = None,
        strict: bool = True,
    ) -> None:
        """One confirm modal (ctrl+y goes; enter, escape and n keep: typing
        never answers it); `then(comment)` runs only when the operator goes
        ahead (`value` pre-fills the comment). `other` (a label and what it
        does) offers a second way to go, on ctrl+e. `strict=False` (a rename)
        lets enter / y go, as a form does."""

        def done(answer: str | None) -> None:
            if answer == ConfirmScreen.OTHER and other is not None:
                other[1]()
            elif answer is not None:
                then(answer)

        screen = ConfirmScreen(
            question,
            go=go,
            comment=comment,
            value=value,
            other=other[0] if other else None,
            strict=strict,
        )
        self.app.push_screen(screen, done)

    def what(self, session_id: str) -> str:
        """The session's intent, first line, as the questions name it."""
        try:
            intent = self.supervisor.get(session_id).session.intent
        except CorralError:
            return session_id
        return (intent.splitlines()[0] if intent else session_id)[:100]

    def checks_named(self, session_id: str) -> str:
        """The checks a confirmation agrees to, and a warning when none of
        them can prove the work (all already pass on the untouched tree)."""
        try:
            session = self.supervisor.get(session_id).session
        except CorralError:
            return ""
        names = [c.name for c in session.contract.checks] if session.contract else []
        if not names:
            return ""
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        text = f"\n\nChecks: {shown}."
        judged = [f.path for f in session.contract.judge_files] if session.contract else []
        if judged:  # how this work is judged: put back as they are now before each check run
            more = f" and {len(judged) - 4} more" if len(judged) > 4 else ""
            text += f"\nJudged by {len(judged)} file(s) fixed as they are now: "
            text += ", ".join(judged[:4]) + more + "."
        if session.baseline_gates_nothing:
            text += (
                "\nWarning: every check already passes on the untouched tree, so none "
                "of them proves the work. Revise the contract first?"
            )
        return text

    def files_named(
        self,
        session_id: str,
        selection: dict[str, Any] | None,
        clashes: list[str] | None = None,
    ) -> str:
        """The files a checkout delivery writes (the ticked ones of a part):
        the operator sees which of their working files change before going,
        and, named, those holding their own uncommitted lines (`clashes`, read
        from the checkout just before asking), which the delivery refuses."""
        try:
            diff = self.supervisor.get(session_id).session.diff
        except CorralError:
            return ""
        if diff is None:
            return ""
        lines = [line.strip() for line in diff.stat.splitlines() if "|" in line]
        paths = [line.split("|", 1)[0].strip() for line in lines]
        if selection is not None:
            paths = [p for p in paths if p in selection]
        if not paths:
            return ""
        shown = "\n".join(f"  {p}" for p in paths[:12])
        more = f"\n  and {len(paths) - 12} more" if len(paths) > 12 else ""
        text = f"\n\nWrites these files in your checkout:\n{shown}{more}\n"
        mine = [p for p in clashes or [] if p in paths]
        if mine:
            return text + (
                f"Warning: you have uncommitted lines in {', '.join(mine[:12])}"
                f"{f' and {len(mine) - 12} more' if len(mine) > 12 else ''}: nothing will be "
                "applied (your edits are never overwritten); commit or revert them first, "
                "or deliver to a branch (ctrl+a)."
            )
        return text + (
            "If you changed any of them since the task started, nothing is applied and "
            "corral names them (your edits are never overwritten)."
        )

    def confirm_contract(self, session_id: str) -> None:
        self.ask(
            f"Confirm the contract?\n\n{self.what(session_id)}{self.checks_named(session_id)}"
            "\n\nThe agent starts work; the checks define done.",
            lambda _: self.run("Confirm", self.supervisor.confirm(session_id)),
            go="Confirm",
        )

    def approve(
        self,
        label: str,
        session_id: str,
        then: Callable[[], object] | None = None,
        **choice: Any,
    ) -> None:
        """Gate 2 from any screen (approve, accept a finding): asks once, then
        a toast says where the change went. `then` runs once the owner has
        delivered it: after a refusal the screen that asked (the diff review,
        with its ticked files and hunks) is still there to change and retry.
        A check that passed only on its re-run is named in the question, and
        only going ahead on that question acknowledges it (`accept_flaky`)."""
        where = {
            "checkout": "Apply the verified diff to your checkout's working files?",
            "finding": "Accept the finding? Nothing is published.",
        }
        key = "finding" if choice.get("accept_finding") else choice.get("delivery", "branch")
        question = where.get(
            key, f"Deliver the verified diff to branch corral/{short_id(session_id)}?"
        )
        if choice.get("selection") is not None:
            question += " (only the ticked part; it is re-verified first)"
        if key == "checkout":  # the operator's own lines in those files, read before asking
            self.app.run_worker(
                self._approve_checkout(label, session_id, question, then, choice),
                group="ask",
            )
            return
        self._ask_approve(label, session_id, question, "", then, choice)

    def flaky_lines(self, session_id: str) -> list[str]:
        """The lines naming each check that passed only on its immediate
        re-run (empty: none, or a finding, which has no checks to deliver)."""
        try:
            detail = self.supervisor.get(session_id)
        except CorralError:
            return []
        if detail.needs_you == "finding":
            return []
        lines = []
        for r in detail.session.flaky_passes():
            tests = f"{len(r.flaky)} test(s)" if r.hidden else ", ".join(r.flaky[:8])
            more = f" and {len(r.flaky) - 8} more" if len(r.flaky) > 8 and not r.hidden else ""
            lines.append(f"  {'a hidden check' if r.hidden else r.name}: {tests}{more}")
        return lines

    def _flaky_words(self, session_id: str, choice: dict[str, Any]) -> str:
        """What the question says of a flaky pass; going ahead on it is the
        person's acknowledgement, for exactly the tests it named."""
        flaky = [] if choice.get("accept_finding") else self.flaky_lines(session_id)
        if not flaky:
            return ""
        choice["accept_flaky"] = flaky  # checked again, unchanged, when the person goes
        return (
            "\n\nWarning: these checks passed only on an immediate re-run (a test failed, then "
            "passed: a timing flake, or work rigged to fail once; corral cannot tell which):\n"
            + "\n".join(flaky)
            + "\nGoing ahead delivers it anyway, on your word."
        )

    async def _approve_checkout(
        self,
        label: str,
        session_id: str,
        question: str,
        then: Callable[[], object] | None,
        choice: dict[str, Any],
    ) -> None:
        try:
            clashes = await self.supervisor.checkout_clashes(session_id)
        except CorralError:
            clashes = []  # the delivery itself refuses them, named
        files = self.files_named(session_id, choice.get("selection"), clashes)
        self._ask_approve(label, session_id, question, files, then, choice)

    def _ask_approve(
        self,
        label: str,
        session_id: str,
        question: str,
        files: str,
        then: Callable[[], object] | None,
        choice: dict[str, Any],
    ) -> None:
        flaky = self._flaky_words(session_id, choice)

        def go(_: str) -> None:
            from .event_text import approval_outcome

            shown = choice.pop("accept_flaky", None)
            if shown is not None:
                if self.flaky_lines(session_id) != shown:  # re-verified meanwhile
                    self.app.notify(
                        "The flaky tests changed since this question was asked (it was "
                        "re-verified); nothing was delivered. Approve again to see them.",
                        title=label,
                        severity="warning",
                        timeout=8,
                    )
                    return
                choice["accept_flaky"] = True

            def delivered(result: Any) -> str:
                if result is None:
                    return "Not delivered: its checks passed only on their re-run (asked above)."
                if then is not None:
                    then()
                return approval_outcome(result)

            if choice.get("selection") is not None:
                self.app.notify(
                    "Delivering the ticked part: the contract is re-run on it first…",
                    title=label,
                    timeout=6,
                )
            self.run(label, self._approving(label, session_id, choice, delivered), delivered)

        self.ask(
            f"{question}\n\n{self.what(session_id)}{files}{self.kinds_changed(session_id)}{flaky}",
            go,
            go=label,
        )

    async def _approving(
        self,
        label: str,
        session_id: str,
        choice: dict[str, Any],
        delivered: Callable[[Any], str],
    ) -> Any:
        """The owner's approve. Where the tree this delivery writes (a part,
        a moved HEAD, the checkout) passed its checks only on their re-run,
        the gate's sentence is put to the person as a question of its own
        (default: keep); only going ahead on it acknowledges that (None:
        asked, nothing delivered)."""
        try:
            return await self.supervisor.approve(session_id, **choice)
        except FlakyPassHeld as held:
            if choice.get("accept_flaky"):
                raise
            accepted = dict(choice, accept_flaky=True)
            self.ask(
                f"Deliver anyway?\n\n{held}.\n\nGoing ahead delivers it on your word.",
                lambda _: self.run(
                    label, self.supervisor.approve(session_id, **accepted), delivered
                ),
                go=label,
            )
            return None

    def kinds_changed(self, session_id: str) -> str:
        """The paths whose kind the change alters, said before it is written
        (a symlink replaced by a directory, an executable bit, a submodule)."""
        try:
            diff = self.supervisor.get(session_id).session.diff
        except CorralError:
            return ""
        if diff is None or not diff.type_changes:
            return ""
        return "\n\nIt changes what kind of thing these paths are:\n" + "\n".join(
            f"  {line}" for line in diff.type_changes
        )

    def reject(self, session_id: str, then: Callable[[], object] | None = None) -> None:
        """Asks once, with an optional comment; escape changes nothing.
        `then` runs once the rejection is sent (the diff screen closes)."""

        def go(comment: str) -> None:
            from .event_text import approval_outcome

            call = self.supervisor.approve(session_id, approve=False, comment=comment or None)
            self.run("Reject", call, approval_outcome)
            if then is not None:
                then()

        self.ask(
            f"Reject?\n\n{self.what(session_id)}",
            go,
            go="Reject",
            comment="why? (optional) — ctrl+y rejects, escape keeps it",
        )

    def cancel(self, session_id: str) -> None:
        self.ask(
            f"Cancel this session?\n\n{self.what(session_id)}\n\nThe worktree is kept.",
            lambda _: self.run("Cancel", self.supervisor.cancel(session_id)),
            go="Cancel session",
        )

    def rename(self, session_id: str, then: Callable[[], object] | None = None) -> None:
        """Asks for the name (the current one pre-filled); empty clears it.
        `then` runs once it is stored."""
        current = self.supervisor.get(session_id).session.name or ""

        def go(name: str) -> None:
            try:
                row = self.supervisor.rename(session_id, name)
            except CorralError as exc:
                self.app.notify(str(exc), title="Rename refused", severity="error", timeout=8)
                return
            self.app.notify(
                f"{label(session_id)} is now “{row.name}”" if row.name else "Name cleared."
            )
            if then is not None:
                then()

        self.ask(
            f"Name {label(session_id)}?\n\n{self.what(session_id)}\n\n"
            "A short name shown on the board beside the intent (empty clears it).",
            go,
            go="Rename",
            comment="a short name — enter saves, escape keeps the old one",
            value=current,
            strict=False,
        )

    def toggle_archive(self, session_id: str) -> None:
        """Archive a finished session, or bring an archived one back. Nothing is
        deleted either way, so it does not ask."""
        archived = self.supervisor.get(session_id).session.archived_at is not None
        try:
            self.supervisor.archive(session_id, archived=not archived)
        except CorralError as exc:
            self.app.notify(str(exc), title="Archive refused", severity="error", timeout=8)
            return
        if archived:
            self.app.notify(f"{label(session_id)} is back on the board.", title="Unarchived")
        else:
            self.app.notify(
                f"{label(session_id)} left the board (kept in the store). f → archived shows it; "
                "h there brings it back.",
                title="Archived",
            )

    def delete(self, session_id: str) -> None:
        """Asks once (it cannot be undone), then deletes; the toast comes once
        the supervisor reports it gone (the board drops the row itself)."""
        session = self.supervisor.get(session_id).session
        branch = session.result_branch if session.result_delivery == "branch" else None
        name = f" “{session.name}”" if session.name else ""
        question = (
            f"Delete {label(session_id)}{name}, a {said(session.state)} session, for good?"
            f"\n\n{self.what(session_id)}\n\n"
            "Its worktree (with any changes left in it), its events and its record are removed; "
            "this cannot be undone." + (f" Branch {branch} stays in your repo." if branch else "")
        )

        def deleted(result: DeleteResult) -> str:
            kept = f" Branch {result.branch_kept} stays." if result.branch_kept else ""
            return f"{label(session_id)} is deleted.{kept}"

        self.ask(
            question,
            lambda _: self.run("Delete", self.supervisor.delete(session_id), outcome=deleted),
            go="Delete",
        )

    def push(self, session_id: str) -> None:
        """Asks once, then pushes the delivered branch; the toast comes once git
        reported the push done (a refusal is git's own words)."""
        branch = self.supervisor.get(session_id).session.result_branch

        def pushed(result: PushResult) -> str:
            return f"Branch {result.branch} pushed to {result.remote} ({result.url})."

        self.ask(
            f"Push branch {branch} to {REMOTE}?\n\n{self.what(session_id)}\n\n"
            "It runs git push with your credentials and hooks; others can see it afterwards.",
            lambda _: self.run("Push", self.supervisor.push(session_id, REMOTE), outcome=pushed),
            go="Push",
        )

    def pull_request(self, session_id: str) -> None:
        """Asks once, then pushes the branch and opens a pull request with gh
        (without gh: the toast says so and gives the push command)."""
        branch = self.supervisor.get(session_id).session.result_branch

        def opened(result: PullRequestResult) -> str:
            return result.message

        self.ask(
            f"Open a pull request for {branch}?\n\n{self.what(session_id)}\n\n"
            f"The branch is pushed to {REMOTE}, then gh pr create opens the pull request: the "
            "intent as its title, the contract and how its checks came out as its body.",
            lambda _: self.run(
                "Pull request", self.supervisor.pull_request(session_id, REMOTE), outcome=opened
            ),
            go="Open pull request",
        )

    def retry(self, session_id: str, then: Callable[[StartResult], object] | None = None) -> None:
        """Asks once, then starts the retry; `then(result)` runs once it exists."""
        session = self.supervisor.get(session_id).session
        why = "rejected" if session.reject_comment else said(session.state)
        # the old worktree's edits can be carried over while it is still here
        worktree = session.worktree
        keepable = worktree is not None and not session.host and Path(worktree).is_dir()
        question = (
            f"Retry this {why} session?\n\n{self.what(session_id)}\n\n"
            "A new session with the same intent, repo, engine and contract starts in a fresh "
            "worktree (its contract is proposed for you to confirm). Its agent is told what went "
            "wrong: the reject comment, the error, the failing checks' output."
            + (
                "\n\nWith its edits (ctrl+e): the new worktree starts from this one's files, "
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
            self.run("Retry", self.supervisor.retry(session_id, keep_edits=True), outcome=started)

        self.ask(
            question,
            lambda _: self.run("Retry", self.supervisor.retry(session_id), outcome=started),
            go="Retry afresh" if keepable else "Retry",
            other=("With its edits", with_edits) if keepable else None,
        )

    def open_worktree(self, session_id: str, path: str | None, *, editor: bool) -> None:
        """`w` (a shell) / `E` (`$EDITOR`): the worktree in a new window of the
        operator's tmux, or the `cd` command to run; said in one toast."""
        from .worktree_window import open_worktree as open_window

        async def go() -> None:
            opened = await open_window(path, label(session_id), editor=editor)
            self.app.notify(opened.message, title="Worktree", timeout=12, markup=False)

        self.app.run_worker(go(), group="worktree-window")
