"""Notifications: when a session starts needing you, finishes without you
having done it, or goes over its `[budget]`, say so once, outside the board.

The owner watches its own board feed and notices edges, never levels: a
session whose row already needed you when the owner opened (a restart, a
replay) is the baseline, and a repaint of the same row is no edge. A finish
the operator caused (approve, reject, cancel) is theirs and is not announced,
nor is a need they decided ahead (`corral run --yes` confirms the contract the
moment it is proposed, `--deliver` approves the diff, the demo confirms its own).
But when the approval gate then refuses that decided approve (the work changed
how it is judged, or its checks passed only on a re-run), the session needs a
person after all, about something nobody decided: that hold is announced once,
with the gate's sentence as the reason (what is held, the command that
accepts it). A hold on a diff the operator was already told about is their
own refused approve, not news.

Each notice goes to the operator's hook commands (`[notify] on_needs_you`,
`on_finished`, `on_over_budget`), to `notify-send` where a desktop runs, and to listeners in the
same process (the console writes OSC 9 / OSC 777 to its terminal). Text an
agent or a model may have written never reaches a command line or a shell: a
hook learns the session from `CORRAL_*` environment variables, and the words
shown are corral's own plus the session's label and name, stripped of control
characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import os
import shutil
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .cancelling import cancel_and_wait
from .config import NotifySettings
from .models import SessionSummary
from .session.board import WatchDropped, Watcher
from .states import NeedsYou

log = logging.getLogger(__name__)

NoticeKind = Literal["needs_you", "finished", "over_budget"]
NEEDS_YOU: NoticeKind = "needs_you"
FINISHED: NoticeKind = "finished"
OVER_BUDGET: NoticeKind = "over_budget"
MAX_TEXT = 120  # characters of a name shown in a desktop notification
MAX_BODY = 240  # a notification's body: room for a hold's sentence (it holds a command)
MAX_ENV_TEXT = 2000  # characters of one value a hook gets in its environment


def plain(text: str, limit: int = MAX_TEXT, *, keep: str = "") -> str:
    """`text` with no control characters (no escape sequence, no BEL, no
    newline; no bidi, zero-width or unassigned character either: category C)
    and no `;` (OSC 777's field separator) unless kept, cut with an ellipsis."""
    text = text if ";" in keep else text.replace(";", ",")
    kept = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)
    kept = " ".join(kept.split())
    return kept if len(kept) <= limit else kept[: limit - 1] + "…"


@dataclass(frozen=True)
class Notice:
    """One edge of one session, as the operator hears about it."""

    kind: NoticeKind
    session_id: str
    label: str
    name: str  # the operator's name for it, else its intent
    state: str
    needs_you: str | None  # contract | question | auth | merge | finding
    needs_you_label: str | None
    repo: str
    over_budget: str | None = None  # corral's own sentence: what was crossed

    @property
    def title(self) -> str:
        if self.kind == NEEDS_YOU:
            return f"corral: {self.label} needs you"
        if self.kind == OVER_BUDGET:
            return f"corral: {self.label} is over budget"
        return f"corral: {self.label} {self.state}"

    @property
    def body(self) -> str:
        if self.kind == NEEDS_YOU:
            what = self.needs_you_label
        elif self.kind == OVER_BUDGET:
            what = self.over_budget
        else:
            what = f"finished ({self.state})"
        return plain(f"{what} — {plain(self.name)}", MAX_BODY)

    def environment(self) -> dict[str, str]:
        """What a hook learns about the session (values, never code). The
        name is often an intent an agent wrote: a hook that echoes it to a
        terminal must not carry an escape sequence there, so every value is
        `plain` (no control, bidi or zero-width character)."""
        values = {
            "CORRAL_EVENT": self.kind,
            "CORRAL_SESSION_ID": self.session_id,
            "CORRAL_SESSION_LABEL": self.label,
            "CORRAL_SESSION_NAME": self.name,
            "CORRAL_STATE": self.state,
            "CORRAL_NEEDS_YOU": self.needs_you or "",
            # corral's sentence for the need (a hold: what is held, the command that accepts it)
            "CORRAL_NEEDS_YOU_REASON": self.needs_you_label or "",
            "CORRAL_OVER_BUDGET": self.over_budget or "",
            "CORRAL_REPO": self.repo,
        }
        return {key: plain(value, MAX_ENV_TEXT, keep=";") for key, value in values.items()}


def _notice(kind: NoticeKind, row: SessionSummary) -> Notice:
    return Notice(
        kind=kind,
        session_id=row.session_id,
        label=row.label,
        name=row.name or row.intent,
        state=row.state.value,
        needs_you=row.needs_you.value if row.needs_you else None,
        needs_you_label=row.needs_you_label,
        repo=row.repo,
        over_budget=row.over_budget,
    )


class Edges:
    """The rule: which board rows are news. Pure, so it is tested directly."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str | None, bool]] = {}
        self._reminders: dict[str, int] = {}  # a pending question's reminders heard
        self._over: set[str] = set()  # rows over budget, heard of once
        self._operator_acted: set[str] = set()
        # needs the operator answers at once by a decision made ahead
        # (`corral run --yes`, `--deliver`, the demo's own confirm): not news
        self._decided: dict[str, set[str]] = {}
        # needs silenced by such a decision: the operator was never told of them
        self._untold: dict[str, set[str]] = {}
        self._held: dict[str, str] = {}  # the approval gate's hold last seen

    def baseline(self, rows: list[SessionSummary]) -> None:
        """What is already so when watching starts is no news."""
        for row in rows:
            self._seen[row.session_id] = (_needs(row), row.state.is_terminal)
            self._reminders[row.session_id] = row.question_reminders
            if row.approval_held:
                self._held[row.session_id] = row.approval_held
            if row.over_budget:
                self._over.add(row.session_id)

    def operator_acts(self, session_id: str) -> None:
        """The operator approved, rejected or cancelled: the finish that
        follows is theirs."""
        self._operator_acted.add(session_id)

    def decided_ahead(self, session_id: str, needs: set[str]) -> None:
        """The operator decided these needs of the session before they came
        (each is silent once; a question, every time: `corral run
        --on-question approve` answers each itself). A question the caller
        could not answer is still said again by its reminders."""
        self._decided.setdefault(session_id, set()).update(needs)

    def observe(self, row: SessionSummary) -> Notice | None:
        """The row's edge, if any; going over budget is heard once (a
        finish or a need in the same row is said first)."""
        sid = row.session_id
        stored = sid not in self._seen and row.state.is_terminal  # not a transition
        notice = self._state_edge(row)
        if not row.over_budget:
            self._over.discard(sid)
        elif stored:
            self._over.add(sid)
        elif sid not in self._over and notice is None:
            self._over.add(sid)
            return _notice(OVER_BUDGET, row)
        return notice

    def _state_edge(self, row: SessionSummary) -> Notice | None:
        sid = row.session_id
        needs, terminal = _needs(row), row.state.is_terminal
        before = self._seen.get(sid)
        self._seen[sid] = (needs, terminal)
        if before is None and terminal:
            return None  # first seen finished: a stored row, not a transition
        was_needs, was_terminal = before or (None, False)
        reminders = row.question_reminders
        reminded = reminders > self._reminders.get(sid, 0)
        self._reminders[sid] = reminders
        held = row.approval_held
        new_hold = held is not None and held != self._held.get(sid)
        if held is None:
            self._held.pop(sid, None)
        else:
            self._held[sid] = held
        if terminal and not was_terminal:
            if sid in self._operator_acted:
                self._operator_acted.discard(sid)
                return None
            return _notice(FINISHED, row)
        if needs is not None and needs != was_needs:
            decided = self._decided.get(sid, set())
            if needs in decided:
                if needs != NeedsYou.QUESTION:  # a caller that answers questions answers each one
                    decided.discard(needs)
                self._untold.setdefault(sid, set()).add(needs)
                return self._hold_edge(row, new_hold)
            return _notice(NEEDS_YOU, row)
        if needs is not None and reminded:  # a question still unanswered: said again
            return _notice(NEEDS_YOU, row)
        return self._hold_edge(row, new_hold)

    def _hold_edge(self, row: SessionSummary, new_hold: bool) -> Notice | None:
        """The gate refused an approve decided ahead: the need it answered is
        the operator's after all, said once (they are told now)."""
        untold = self._untold.get(row.session_id, set())
        if not new_hold or row.needs_you is None or row.needs_you.value not in untold:
            return None
        untold.discard(row.needs_you.value)
        return _notice(NEEDS_YOU, row)

    def forget(self, session_id: str) -> None:
        self._seen.pop(session_id, None)
        self._over.discard(session_id)
        self._operator_acted.discard(session_id)
        self._reminders.pop(session_id, None)
        self._decided.pop(session_id, None)
        self._untold.pop(session_id, None)
        self._held.pop(session_id, None)


def _needs(row: SessionSummary) -> str | None:
    return row.needs_you.value if row.needs_you is not None else None


def desktop_available() -> bool:
    """`notify-send` is installed and a desktop session can show it."""
    if shutil.which("notify-send") is None:
        return False
    env = os.environ
    return bool(
        env.get("DISPLAY") or env.get("WAYLAND_DISPLAY") or env.get("DBUS_SESSION_BUS_ADDRESS")
    )


class Notifier:
    """Watches the owner's board and hands each notice to hooks, the desktop
    and in-process listeners."""

    def __init__(
        self,
        settings: NotifySettings,
        watch: Callable[[], tuple[list[SessionSummary], Watcher]],
    ) -> None:
        self.settings = settings
        self._watch = watch
        self.edges = Edges()
        self._listeners: list[Callable[[Notice], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._runs: set[asyncio.Task[None]] = set()

    def add_listener(self, listener: Callable[[Notice], None]) -> Callable[[], None]:
        """Call `listener` with every notice from now on; returns its removal."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def operator_acts(self, session_id: str) -> None:
        self.edges.operator_acts(session_id)

    def decided_ahead(self, session_id: str, needs: set[str]) -> None:
        self.edges.decided_ahead(session_id, needs)

    def start(self) -> None:
        rows, watcher = self._watch()
        self.edges.baseline(rows)
        self._task = asyncio.get_running_loop().create_task(self._follow(watcher))

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="the notifier")
            self._task = None
        if self._runs:
            await asyncio.wait(set(self._runs), timeout=self.settings.hook_timeout_secs)

    async def _follow(self, watcher: Watcher) -> None:
        try:
            while True:
                try:
                    rows = await watcher.get()
                except WatchDropped:
                    # shed or resynced: the fresh snapshot is read as news, so
                    # an edge that happened while dropped is still heard once
                    rows, watcher = self._watch()
                for row in rows:
                    notice = self.edges.observe(row)
                    if notice is not None:
                        self.announce(notice)
        finally:
            watcher.close()

    def announce(self, notice: Notice) -> None:
        for listener in list(self._listeners):
            try:
                listener(notice)
            except Exception:  # a listener's fault is its own; the others still hear
                log.exception("a notification listener failed")
        hook = {
            NEEDS_YOU: self.settings.on_needs_you,
            FINISHED: self.settings.on_finished,
            OVER_BUDGET: self.settings.on_over_budget,
        }[notice.kind]
        if hook:
            argv = hook if isinstance(hook, list) else [hook]
            self._spawn(argv, notice)
        if self.settings.desktop and desktop_available():
            # `--`: a body is words, never an option; daemons read it as markup: escaped
            body = html.escape(notice.body, quote=False)
            self._spawn(
                ["notify-send", "--app-name=corral", "--", plain(notice.title), body], notice
            )

    def _spawn(self, argv: list[str], notice: Notice) -> None:
        task = asyncio.get_running_loop().create_task(self._run(argv, notice))
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _run(self, argv: list[str], notice: Notice) -> None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env={**os.environ, **notice.environment()},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            log.warning("notification command %s could not start: %s", argv[0], exc)
            return
        try:
            await asyncio.wait_for(proc.wait(), self.settings.hook_timeout_secs)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            log.warning(
                "notification command %s was stopped after %ss",
                argv[0],
                self.settings.hook_timeout_secs,
            )
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
