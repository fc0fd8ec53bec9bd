"""One session: header, contract and baseline, verified diff, event log,
and the question / guidance input. Fed by `subscribe` from seq 0."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, getters, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, RichLog, Static

from corral.supervisor.actions import SessionFacts, why_not
from corral.supervisor.errors import CorralError
from corral.supervisor.events import (
    CoderEvent,
    ConversationData,
    ModelFallbackData,
    ToolDeniedData,
)
from corral.supervisor.interface import (
    SubscriptionClosed,
    SubscriptionDropped,
    unseen_regressions,
)
from corral.supervisor.models import (
    CheckResult,
    CheckVerdict,
    CoderSession,
    ContractCheck,
    EventKind,
    OutcomeContract,
    SessionDetail,
    StartResult,
)
from corral.supervisor.states import CoderState, said
from corral.supervisor.states import label as session_label

from .. import rows as R
from ..console_app import ConsoleApp
from ..event_text import clip, describe
from ..guard import guarded
from ..key_actions import SESSION_KEYS, bindings, by_handler, check_handlers, named
from ..keymap import typed
from ..safe_text import safe_content, safe_markup, safe_text
from ..widgets.terminal import TerminalView

log = logging.getLogger("corral.tui.screens.session")

if TYPE_CHECKING:
    from corral.supervisor.remote import OwnerSurface

REFRESH_KINDS = {
    EventKind.STATE_CHANGED,
    EventKind.CONTRACT_PROPOSED,
    EventKind.CONTRACT_BASELINE,
    EventKind.SETUP_COMPLETED,
    EventKind.DIFF_READY,
    EventKind.FINDING_PROPOSED,
    EventKind.USER_INPUT_REQUESTED,
    EventKind.USER_INPUT_EXPIRED,
    EventKind.ITERATION_STARTED,
    EventKind.CONTRACT_EVALUATED,
    EventKind.AGENT_STATUS,
    EventKind.AUTH_REQUIRED,
}


LOG_FILTERS = {
    "all": "everything",
    "agent": "the agent: plan, tool calls, status, questions",
    "checks": "contract and checks",
    "problems": "errors, refusals and budget",
}
_AGENT = {
    EventKind.PLAN_TEXT,
    EventKind.TOOL_CALL,
    EventKind.AGENT_STATUS,
    EventKind.USER_INPUT_REQUESTED,
    EventKind.USER_INPUT_EXPIRED,
    EventKind.OPERATOR_GUIDANCE,
    EventKind.ITERATION_STARTED,
    EventKind.EXTERNAL_EVENT,
    EventKind.CONVERSATION,
    EventKind.BLOCKED,
}
_CHECKS = {
    EventKind.CONTRACT_PROPOSED,
    EventKind.CONTRACT_BASELINE,
    EventKind.CONTRACT_REVISION_REJECTED,
    EventKind.CHECK_COMPLETED,
    EventKind.CONTRACT_EVALUATED,
    EventKind.DIFF_READY,
    EventKind.FINDING_PROPOSED,
}
_PROBLEMS = {
    EventKind.BOUNDARY,
    EventKind.BLOCKED,
    EventKind.ERROR,
    EventKind.AUTH_REQUIRED,
    EventKind.BUDGET_EXHAUSTED,
    EventKind.ENGINE_FALLBACK,
    EventKind.CONTRACT_REVISION_REJECTED,
}


def log_filter_matches(name: str, event: CoderEvent) -> bool:
    if isinstance(event.data, ModelFallbackData) and not event.data.notice:
        return False  # journaled only: a timeout or a retry on another model needs no one
    if name == "agent":
        return event.kind in _AGENT
    if name == "checks":
        return event.kind in _CHECKS
    if name == "problems":
        return (
            event.kind in _PROBLEMS
            or isinstance(event.data, ToolDeniedData)
            or (event.kind is EventKind.CHECK_COMPLETED and not event.data.result.passed)
        )
    return True


FOREMAN_NEWS = ("Subtask ", "Split ", "Foreman: ", "Verified union: ")


def _settings_news(event: CoderEvent) -> bool:
    """An ACP agent's mode, model or config options changed (the header shows them)."""
    return isinstance(event.data, ConversationData) and event.data.part in (
        "mode",
        "model",
        "config",
    )


def _foreman_news(event: CoderEvent) -> bool:
    """Narration that changes a foreman session's tree (a subtask placed, verified…)."""
    text = getattr(event, "text", None)
    return isinstance(text, str) and text.startswith(FOREMAN_NEWS)


def _tail(output: str, n: int) -> list[str]:
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    return [clip(line, 160) for line in lines[-n:]]


#: How each verdict reads and looks; the verdict itself is the supervisor's.
VERDICT_STYLE: dict[CheckVerdict, tuple[str, str]] = {
    CheckVerdict.PASSES: ("green (passes already)", "green"),
    CheckVerdict.FAILS: ("red (proves the work)", "red"),
    CheckVerdict.CANNOT_RUN: ("cannot run", "bold magenta"),
}


#: how a run after the work reads (the baseline's words would say "already")
LAST_RUN_STYLE: dict[CheckVerdict, tuple[str, str]] = {
    CheckVerdict.PASSES: ("PASS", "green"),
    CheckVerdict.FAILS: ("FAIL", "red"),
    CheckVerdict.CANNOT_RUN: ("CANNOT RUN", "bold magenta"),
}


def _verdict(result: CheckResult) -> CheckVerdict:
    return result.verdict or (CheckVerdict.PASSES if result.passed else CheckVerdict.FAILS)


def _baseline_cell(result: CheckResult | None, preview: int = 40) -> Text:
    """The verdict in its colour and a preview of why (`preview` characters,
    none when 0): the reason for a check that cannot run, else the output's
    last line."""
    if result is None:
        return Text("—")
    verdict = _verdict(result)
    word, style = VERDICT_STYLE[verdict]
    cell = Text(word, style=style)
    if not preview:
        return cell
    if verdict is CheckVerdict.CANNOT_RUN:
        return cell.append_text(safe_text(f": {clip(result.reason, preview + 8)}"))
    last = _tail(result.output_tail, 1)
    return cell.append_text(safe_text(f": {clip(last[0], preview)}")) if last else cell


#: how the checks table gives way on a narrow terminal, step by step: the
#: columns kept (in display order), how much of the command and of the
#: baseline's preview a row keeps. The check's name and its baseline verdict
#: (the point of gate 1) are never dropped; the whole command and output stay
#: in the detail under the table.
CHECK_LAYOUTS: tuple[tuple[tuple[str, ...], int, int], ...] = (
    (("Check", "Command", "Timeout", "Baseline", "Last run"), 60, 40),
    (("Check", "Command", "Baseline", "Last run"), 60, 40),
    (("Check", "Command", "Baseline", "Last run"), 30, 24),
    (("Check", "Baseline", "Last run"), 0, 24),
    (("Check", "Baseline", "Last run"), 0, 0),
    (("Check", "Baseline"), 0, 0),
)


def check_rows(
    checks: list[tuple[ContractCheck, CheckResult | None, CheckResult | None]], width: int
) -> tuple[tuple[str, ...], list[list[Text]]]:
    """The first layout whose columns fit `width` cells (the last one if none)."""
    for columns, command_room, preview in CHECK_LAYOUTS:
        rows = []
        for check, base, last in checks:
            cells = {  # Text, not str: DataTable reads str cells as markup
                "Check": safe_text(check.name),
                "Command": safe_text(clip(check.command, command_room)),
                "Timeout": Text(f"{check.timeout_secs}s"),
                "Baseline": _baseline_cell(base, preview),
                "Last run": _last_run_cell(last),
            }
            rows.append([cells[c] for c in columns])
        widths = [
            max([len(name), *(row[i].cell_len for row in rows)]) + 2  # a cell's padding
            for i, name in enumerate(columns)
        ]
        if sum(widths) <= width:
            break
    return columns, rows


def _last_run_cell(result: CheckResult | None) -> Text:
    """The runtime's last verdict on a check, in the verdict's colour."""
    if result is None:
        return Text("—")
    word, style = LAST_RUN_STYLE[_verdict(result)]
    return Text(word, style=style)


def _setup_lines(s: CoderSession) -> list[Content]:
    """The contract's setup as gate 1 shows it: what runs, with what access,
    and how its last run went."""
    if s.contract is None or not s.contract.setup:
        return []
    commands = " && ".join(s.contract.setup)
    lines = [
        safe_markup(
            "[b]Setup[/b] (runs first, [bold yellow]with the network[/bold yellow]; writes only "
            "its environment dir, which checks then use without the network): {}",
            commands,
        )
    ]
    outcome = s.setup_outcome
    if outcome is None:
        return lines
    if outcome.ok:
        how = "reused a cached environment" if outcome.cached else "built the environment"
        scope = "shared by this repository's worktrees" if outcome.shared else "this worktree's own"
        lines.append(safe_markup(f"[green]Setup ready[/green]: {how} ({scope})"))
    else:
        why = "timed out" if outcome.timed_out else f"exited {outcome.exit_code}"
        tail = _tail(outcome.output_tail, 3)
        lines.append(
            safe_markup(
                "[bold magenta]Setup failed[/bold magenta]: `{}` "
                f"{why}, so no check could run. Fix it with [b]/setup command[/b] ([b]s[/b])."
                + "\n  │ {}"
                * len(tail),
                outcome.failed_command,
                *tail,
            )
        )
    return lines


# what passes a gate: on control keys, so they also act from the input (key_actions)
GATE_KEYS = named(SESSION_KEYS, "confirm", "approve", "approve_checkout", "reject")

# this screen's keys by handler and action name (`key_actions.py`): the
# supervisor's rule (`guard`), or this screen's own and its sentence (`refused`)
KEYS = by_handler(SESSION_KEYS)


def foreman_tree(detail: SessionDetail) -> Content:
    """A foreman session's split (gate 1) or its placements, as a small tree."""
    view = detail.foreman
    if view is None:
        return Content()
    s = detail.session
    if view.placements:
        head = safe_markup("[b]Foreman[/b]: {}", s.foreman_progress or "subtasks placed")
        lines = [p.line() for p in view.placements]
    elif view.split is not None:
        head = safe_markup(
            "[b]Split[/b] ({}): runs in parallel once the "
            f"contract is confirmed; replace it with `corral split {s.id[-8:]} FILE`",
            view.split.proposed_by,
        )
        lines = []
        for sub in view.split.subtasks:
            first = sub.intent.strip().splitlines()[0] if sub.intent.strip() else ""
            checks = ", ".join(c if isinstance(c, str) else c.name for c in sub.checks)
            owns = f" [{', '.join(sub.files)}]" if sub.files else ""
            lines.append(f"{sub.id} — {clip(first, 60)}{owns} · checks: {checks}")
    else:
        proposing = s.state.value == "contract_proposed"
        return safe_markup("[b]Split[/b]: being proposed…") if proposing else Content()
    branches = [
        safe_content(f"{'└─' if i == len(lines) - 1 else '├─'} {line}")
        for i, line in enumerate(lines)
    ]
    return Content("\n").join([head, *branches])


class ReplyInput(Input):
    """The session's text input. While it has focus every printable key is
    typed (no screen key acts, and the footer offers none); escape leaves it."""

    TAKES_KEYS = True
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "leave", "Leave input")]

    def action_leave(self) -> None:
        screen = self.screen
        if isinstance(screen, SessionScreen):
            screen.leave_input()


class SessionScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS: ClassVar[list[BindingType]] = bindings(SESSION_KEYS)

    GATE1_ACTIONS = named(SESSION_KEYS, "edit_check", "add_check", "remove_check", "edit_setup")

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.events: list[CoderEvent] = []
        self.log_filter = "all"
        self.revision_note = Content()  # the last revision's outcome, shown under gate 1
        self._text_gate: object = None  # the gate (or question) the input was last focused for
        self._failing_selected = False  # a failed session opens on its (first) failing check
        self._loaded = False  # an attached console's detail has come (see `loaded`)
        self._known_seq = 0  # events before this one are in the loaded detail

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="session-header")
            with VerticalScroll(id="session-body"):
                yield Static("", id="contract-title")
                yield DataTable(id="checks", cursor_type="row")
                yield Static("", id="check-detail")
                foreman = Static("", id="foreman")
                foreman.display = False  # a foreman session's split or placements only
                yield foreman
                yield Static("", id="diff")
                yield TerminalView(self.session_id, id="terminal")
                yield RichLog(id="log", wrap=True, markup=False, max_lines=5000)
                transcript = RichLog(id="transcript", wrap=True, markup=False, max_lines=5000)
                transcript.display = False
                yield transcript
            yield Static("", id="question")
            yield ReplyInput(placeholder="", id="reply", select_on_focus=False)
        yield Footer()

    @property
    def supervisor(self) -> OwnerSurface:
        return self.app.supervisor

    @property
    def _remote(self) -> bool:
        """Attached to another process's owner: what the screen shows is the
        console's mirror, loaded and refreshed off the UI loop (`fresh`)."""
        return bool(getattr(self.supervisor, "remote", False))

    @property
    def loaded(self) -> bool:
        """The detail is at hand: at once in-process; an attached console's
        once its first request came back (until then only back and help act)."""
        return self._loaded or not self._remote

    def on_mount(self) -> None:
        if self._remote:
            self.load_view()  # one request; until it lands only back and help act
            return
        self._loaded = True
        self._label_terminal_key()
        self.refresh_view()
        self.follow_events()
        self.show_transcript()

    def _label_terminal_key(self) -> None:
        """An ACP session has no terminal: its `t` opens the conversation,
        and the footer (and help) say "Conversation", not "Terminal"."""
        try:
            if not self._is_acp():
                return
        except CorralError:
            return
        bindings = self._bindings.key_to_bindings  # this screen's own copy
        for key, held in bindings.items():
            bindings[key] = [
                replace(b, description="Conversation") if b.action == "focus_terminal" else b
                for b in held
            ]
        self.refresh_bindings()

    @work(group="session-load")
    @guarded("The session view")
    async def load_view(self) -> None:
        """An attached console's session: its detail from the owner (one
        request), then the view draws it and follows its events (the second)."""
        try:
            detail = await self.supervisor.fresh(self.session_id)
        except CorralError as exc:  # gone, stalled, or no such session: said where it shows
            self.query_one("#session-header", Static).update(safe_text(str(exc)))
            return
        self._known_seq = detail.next_seq or 0
        self._loaded = True
        self._label_terminal_key()
        self.refresh_view()
        self.follow_events()
        self.show_transcript()

    @work(exclusive=True, group="session-refetch")
    @guarded("The session view")
    async def refetch_view(self) -> None:
        """An event says the session changed: the mirror asks the owner again
        (off the UI loop), then the view redraws what came back."""
        with contextlib.suppress(CorralError):  # stalled or gone: the app says so
            await self.supervisor.fresh(self.session_id)
        self.refresh_view()

    def _news(self, event: CoderEvent) -> None:
        if not self._remote:
            self.refresh_view()
        elif event.seq >= self._known_seq:  # a replayed event: the loaded detail has it
            self.refetch_view()

    @work(exclusive=True, group="session-transcript")
    @guarded("The transcript")
    async def show_transcript(self) -> None:
        """The agent's own transcript under the log, for agents that keep one
        (read again with T: a running agent adds to it)."""
        view = self.query_one("#transcript", RichLog)
        try:
            turns = await self.supervisor.transcript(self.session_id)
        except CorralError:
            turns = []
        view.clear()
        view.display = bool(turns)
        if not turns:
            return
        view.write(f"The agent's own transcript: its last {len(turns)} turns (T reads it again).")
        for turn in turns:
            mark = "›" if turn.role == "user" else "●"
            who = "you/corral" if turn.role == "user" else "agent"
            view.write(Text(f"{mark} {who}: ", style="bold") + safe_text(turn.text, multiline=True))

    def action_transcript(self) -> None:
        self.show_transcript()

    @work(exclusive=True, group="session-events")
    @guarded("The session view")
    async def follow_events(self) -> None:
        cursor = 0
        log = self.query_one("#log", RichLog)
        while True:
            result, sub = self.supervisor.subscribe(self.session_id, cursor)
            if sub is None:
                await self._show_history(log)
                return
            if result.events_skipped:
                log.write(f"({result.events_skipped} earlier events are no longer buffered)")
            try:
                async for event in sub:
                    cursor = event.seq + 1
                    self.events.append(event)
                    if log_filter_matches(self.log_filter, event):
                        log.write(describe(event))
                    if event.kind in REFRESH_KINDS or _foreman_news(event) or _settings_news(event):
                        self._news(event)
                return
            except SubscriptionDropped:
                continue
            except SubscriptionClosed:
                return
            finally:
                sub.close()

    async def _show_history(self, log: RichLog) -> None:
        """A session this console is not running: its journal, as stored."""
        try:
            events = await self.supervisor.history(self.session_id)
        except CorralError as exc:
            log.write(safe_text(f"This session is not running in this console; its journal: {exc}"))
            return
        if not events:
            log.write("This session is not running in this console and its journal is empty.")
            return
        log.write(
            f"This session is not running in this console: its journal ({len(events)} events)."
        )
        self.events.extend(events)
        for event in events:
            if log_filter_matches(self.log_filter, event):
                log.write(describe(event))

    def refresh_view(self) -> None:
        detail = self.supervisor.get(self.session_id)
        s = detail.session
        needs = f"  ·  NEEDS YOU: {detail.needs_you_label}" if detail.needs_you_label else ""
        iters = f"  ·  iteration {s.iterations}/{s.max_iterations}" if s.iterations else ""
        intent = s.intent.splitlines()[0] if s.intent else ""
        extra = f"  ·  retry of {session_label(s.retry_of)}" if s.retry_of else ""
        if s.archived_at is not None:
            extra += "  ·  archived"
        lines = [
            safe_markup("[b]{}[/b]  {}", s.name, intent)
            if s.name
            else safe_markup("[b]{}[/b]", intent),
            safe_content(f"session {s.id}  ({session_label(s.id)}){extra}"),
            safe_content(
                f"state {said(s.state)}{needs}  ·  engine {s.engine}"
                f"{' (ran ' + s.engine_ran + ')' if s.engine_ran else ''}{iters}"
            ),
            safe_content(
                (
                    f"worktree on host {s.host}: {s.remote_worktree or '—'}"
                    f"  ·  home copy …/{Path(s.worktree).name if s.worktree else '—'}"
                    if s.host
                    else f"worktree …/{Path(s.worktree).name if s.worktree else '—'}"
                    f"{'' if s.worktree and Path(s.worktree).is_dir() else ' (removed)'}"
                )
                + f"  ·  base {(s.base or s.start_commit or '—')[:12]}"
                f"{'  ·  branch ' + s.result_branch if s.result_branch else ''}"
            ),
        ]
        if s.attestation:  # the delivery's note beside its commit (corral verify re-runs it)
            lines.append(safe_content(s.attestation))
        use = s.model_use_lines()  # drafting, revisions, the built-in engine
        if use:
            lines.append(safe_content("models: " + "; ".join(use)))
        recorded = R.agent_usage_line(s)  # the agent's own transcript or rollout
        if recorded:
            lines.append(safe_content(recorded))
        if s.over_budget:
            lines.append(safe_markup("[bold red]⚠ {}[/bold red]", s.over_budget))
        agent = R.agent_words(detail.agent_status, detail.agent_reason, detail.agent_source)
        if agent and not s.state.is_terminal:
            lines.append(safe_content(agent))
        offered = R.offers_words(s.agent_offers)
        if offered:
            lines.append(safe_content(offered + ("  (m to switch)" if detail.live else "")))
        if detail.needs_you == "auth" and detail.auth_message:
            lines.append(
                safe_markup(
                    "[bold yellow]Sign-in needed:[/bold yellow] {} — "
                    "attach to the agent (A) and sign in, then resend; or cancel",
                    detail.auth_message,
                )
            )
        if s.error:
            lines.append(safe_markup("[red]{}[/red]", s.error))
        if not detail.live and not s.state.is_terminal:
            lines.append(
                safe_markup("[yellow]Not running in this console (stored state only).[/yellow]")
            )
        self.query_one("#session-header", Static).update(Content("\n").join(lines))
        self._render_contract(s)
        tree = foreman_tree(detail)
        foreman = self.query_one("#foreman", Static)
        if tree or foreman.display:
            foreman.update(tree)
            foreman.display = bool(tree)
        self._render_diff(s)
        self._render_question(detail)
        self.refresh_bindings()  # the gate-1 keys come and go with the state

    def _render_contract(self, s: CoderSession) -> None:
        title = self.query_one("#contract-title", Static)
        table = self.query_one("#checks", DataTable)
        cursor = table.cursor_row
        table.clear()
        if s.contract is None:
            title.update("Contract: drafting…" if s.state.value == "created" else "No contract.")
            self.query_one("#check-detail", Static).update("")
            return
        text = safe_markup("[b]Contract[/b]: {}", s.contract.description)
        networked = [c.name for c in s.contract.checks if c.network]
        if networked:
            text += safe_markup(
                "\n[bold yellow]Network allowed (outside the sandbox's no-network "
                "default) for: {}[/bold yellow]",
                ", ".join(networked),
            )
        for line in _setup_lines(s):
            text += Content("\n") + line
        text += _hidden_line(s)
        if s.baseline_gates_nothing:
            text += safe_markup(
                "\n[bold yellow]Every check already passes before any edit: this "
                "contract proves nothing yet.[/bold yellow]"
            )
        for r in s.baseline:
            if r.already_failing:  # shown, never blocking
                shown = ", ".join(r.already_failing[:5])
                more = (
                    f" and {len(r.already_failing) - 5} more" if len(r.already_failing) > 5 else ""
                )
                text += safe_markup(
                    "\n[yellow]{}: already failing on the untouched tree "
                    f"({len(r.already_failing)}): not this task's work[/yellow] "
                    "({}); {}",
                    r.name,
                    shown + more,
                    unseen_regressions(
                        len(r.already_failing),
                        sum(1 for t in r.already_failing if r.tests and t in r.tests.failed_at),
                    ),
                )
        blocked = [r for r in s.baseline if r.cannot_run]
        if blocked:
            text += safe_markup(
                f"\n[bold magenta]{len(blocked)} check(s) cannot run here[/bold magenta] "
                "(the environment, not the work): they prove nothing until the setup "
                "provides what they need — {}",
                blocked[0].fix,
            )
        title.update(text)
        base = {r.name: r for r in s.baseline}
        last = {r.name: r for r in s.last_check_results}
        columns, rows = check_rows(
            [(c, base.get(c.name), last.get(c.name)) for c in s.contract.checks],
            self.app.size.width - 2,  # the body's scrollbar
        )
        if tuple(str(c.label) for c in table.columns.values()) != columns:
            table.clear(columns=True)
            table.add_columns(*columns)
        for row in rows:
            table.add_row(*row)
        if s.contract.checks:
            if s.state is CoderState.FAILED and not self._failing_selected:
                self._failing_selected = True  # once: the operator's cursor stays theirs
                failing = [
                    i
                    for i, check in enumerate(s.contract.checks)
                    if check.name in last and not last[check.name].passed
                ]
                cursor = failing[0] if failing else cursor
            table.move_cursor(row=min(max(cursor, 0), len(s.contract.checks) - 1))
        self._render_check_detail(s)

    def _render_check_detail(self, s: CoderSession) -> None:
        """The highlighted check in full: its whole command (the table cuts
        it), and the tail of its baseline and last-run output."""
        detail = self.query_one("#check-detail", Static)
        check = self._selected_check(s.contract)
        if check is None:
            detail.update("")
            return
        base = next((r for r in s.baseline if r.name == check.name), None)
        last = next((r for r in s.last_check_results if r.name == check.name), None)
        parts = [safe_markup("[b]{}[/b] runs: {}", check.name, check.command.strip())]
        for label, result in (("baseline", base), ("last run", last)):
            if result is None:
                continue
            # the baseline's words say what a result on the untouched tree means;
            # a later run only passes or fails (green after the work is no "already")
            words = VERDICT_STYLE if label == "baseline" else LAST_RUN_STYLE
            word, style = words[_verdict(result)]
            how = "timed out" if result.timed_out else f"exit {result.exit_code}"
            if result.cannot_run:
                how = f"{result.reason}; fix: {result.fix}"
            tail = _tail(result.output_tail, 4)
            parts.append(
                safe_markup(
                    f"{label}: [{style}]{word}[/{style}]" + " ({})" + "\n  │ {}" * len(tail),
                    how,
                    *tail,
                )
            )
        detail.update(Content("\n").join(parts))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "checks" and self.loaded:
            self._render_check_detail(self.supervisor.get(self.session_id).session)

    def on_resize(self, event: events.Resize) -> None:
        """The checks table gives way by priority at the new width."""
        if self.is_mounted and self.loaded:
            self._render_contract(self.supervisor.get(self.session_id).session)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a check at gate 1 edits it (in the input, sent by enter)."""
        if event.data_table.id == "checks" and self._text_gate == "contract":
            event.stop()
            self.action_edit_check()

    def on_key(self, event: events.Key) -> None:
        """At gate 1 every printable key is typed into the revision input,
        wherever the focus is: typed text never reaches a key that acts (the
        checks table's letters, the board's letters after escape). A key
        of this screen that cannot act on the session now says why."""
        if self._text_gate != "contract" or not event.is_printable or not event.character:
            self._say_why_not(event)
            return
        if getattr(self.focused, "TAKES_KEYS", False):
            return  # the input (or the agent terminal) takes it itself
        reply = self.query_one("#reply", ReplyInput)
        if not reply.display:
            return
        event.stop()
        event.prevent_default()
        reply.focus()
        reply.insert_text_at_cursor(event.character)

    def _render_diff(self, s: CoderSession) -> None:
        diff = self.query_one("#diff", Static)
        if s.no_change_finding is not None:
            f = s.no_change_finding
            diff.update(
                safe_markup(
                    "[b]No-change finding[/b]: {}\n{}\n"
                    "[b]ctrl+a[/b] accepts it (nothing is published) · [b]ctrl+r[/b] rejects it",
                    f.summary,
                    f.evidence,
                    multiline=True,
                )
            )
        elif s.diff is not None:
            note = " (patch truncated)" if s.diff.patch_truncated else ""
            text = safe_markup(f"[b]Verified diff[/b]{note}\n" + "{}", s.diff.stat, multiline=True)
            if s.changed_since_verification and s.state.value == "needs_approval":
                text += safe_markup(
                    "\n[yellow]The worktree changed since verification ({}): [b]ctrl+a[/b] delivers "
                    "the verified diff above, [b]v[/b] re-verifies the worktree as it is now."
                    "[/yellow]",
                    ", ".join(s.changed_since_verification[:5]),
                )
            if s.diff.type_changes:
                kinds = s.diff.type_changes
                text += safe_markup(
                    "\n[bold yellow]Paths that change kind:[/bold yellow]" + "\n  {}" * len(kinds),
                    *kinds,
                )
            if s.diff.attribute_drivers:
                lines = s.diff.attribute_drivers
                text += safe_markup(
                    "\n[bold yellow]{}[/bold yellow]" + "\n  {}" * len(lines),
                    R.ATTRIBUTE_DRIVERS_WORDS,
                    *lines,
                )
            diff.update(text)
        else:
            diff.update("")

    def _render_question(self, detail: SessionDetail) -> None:
        question = self.query_one("#question", Static)
        reply = self.query_one("#reply", Input)
        gate: object = None
        if detail.session.state.value == "contract_proposed" and detail.live:
            gate = "contract"
            compact = (  # 80×24: the checks and the log keep the room (? has the rest)
                "[b]Gate 1:[/b] revise the contract below (enter sends; [b]/check[/b], "
                "[b]/remove[/b], [b]/setup[/b]). [b]ctrl+y[/b] confirms · [b]escape[/b]: the "
                "checks table · [b]?[/b] every key"
            )
            question.update(
                (
                    safe_markup(compact)
                    if self.app.size.width < 110
                    else safe_markup(
                        "[b]Gate 1:[/b] revise the contract in the input below (enter sends): "
                        "free text, [b]/check name command[/b] (sets a check verbatim) or "
                        "[b]/remove name[/b] or [b]/setup command[/b] (sets the setup verbatim). "
                        "Whatever you type goes into the input. [b]ctrl+y[/b] confirms the "
                        "contract (asks first). [b]escape[/b] reaches the checks table: "
                        "[b]enter[/b] edits the selected check, [b]ctrl+n[/b] adds one, "
                        "[b]delete[/b] removes it, [b]ctrl+s[/b] edits the setup; [b]ctrl+e[/b] "
                        "returns to the input."
                    )
                )
                + (Content("\n") + self.revision_note if self.revision_note else Content())
            )
            reply.placeholder = (
                "Revise the contract (enter sends) · ctrl+y confirms (asks) · escape: the checks"
            )
            reply.display = True
        elif detail.question_prompt:
            gate = ("question", detail.question_prompt)
            options: list[str] = self.supervisor.question_options(self.session_id)
            opts = "  ".join(f"[b]{i}[/b] " + "{}" for i in range(1, len(options) + 1))
            question.update(
                safe_markup(
                    "[bold yellow]Question:[/bold yellow] {}" + (f"\n{opts}" if opts else ""),
                    detail.question_prompt,
                    *options,
                )
            )
            reply.placeholder = (
                "Type an answer"
                + (" or an option's number" if options else "")
                + " (enter sends) · escape for the keys"
            )
            reply.display = True
        elif detail.steering_available:
            question.update("")
            reply.placeholder = (
                "Guidance for the agent (pasted at its next idle prompt) · escape for the keys"
            )
            reply.display = True
        else:
            question.update("")
            reply.display = False
        if gate != self._text_gate:
            self._text_gate = gate
            # a gate that wants text gets the input (typing never fires a key),
            # unless the operator is typing into the agent's terminal
            if gate is not None and not isinstance(self.focused, TerminalView):
                reply.focus()

    def leave_input(self) -> None:
        """escape in the input: to the checks table at gate 1, else to no
        widget, so the screen's keys act (and the footer shows them)."""
        table = self.query_one("#checks", DataTable)
        if self._text_gate == "contract" and table.row_count:
            table.focus()
        else:
            self.set_focus(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        if not text.strip():
            return
        detail = self.supervisor.get(self.session_id)
        event.input.value = ""
        if detail.session.state.value == "contract_proposed":
            self.revise(text)
            return
        steer = detail.question_prompt is None
        options: list[str] = [] if steer else self.supervisor.question_options(self.session_id)
        if text.strip().isdigit() and 0 < int(text) <= len(options):
            text = options[int(text) - 1]  # an option's number picks that option
        self.app.actions.run(
            "Guidance" if steer else "Answer",
            self.supervisor.respond(self.session_id, text, steer=steer),
        )

    @work(group="revise")
    @guarded("Revising the contract")
    async def revise(self, text: str) -> None:
        """Revisions run on the supervisor; a soft rejection is shown as sent."""
        asked = clip(text.strip().splitlines()[0], 80)  # "…" when cut
        try:
            result = await self.supervisor.revise(self.session_id, text)
        except CorralError as exc:
            self.revision_note = safe_markup("[red]Not revised[/red] ({}): {}", asked, exc)
        else:
            if result.revised:
                self.revision_note = safe_markup(
                    "[green]Revised and re-baselined[/green] ({}).", asked
                )
            else:
                why = result.message or "the drafter kept the contract as it was"
                self.revision_note = safe_markup(
                    "[yellow]Not revised[/yellow] ({}): {}", asked, why
                )
        self.refresh_view()

    # -- gate 1: the checks table edits through the same revision path -------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows the keys that apply to this session now; the
        others are hidden (and do nothing) until the state allows them.
        While the input or the agent terminal has focus no screen key acts.
        `action` is the name (`open_worktree`), as Textual asks; a handler
        with its arguments (`open_worktree(True)`) answers as its name."""
        action = action.split("(", 1)[0]
        if not self.loaded:  # an attached console's first request is on its way
            return action in ("back", "help")
        try:
            detail = self.supervisor.get(self.session_id)
        except Exception as exc:  # the session went away: leave the keys as they are
            log.info("the session's keys are left as they are: %s", exc)
            return True
        if self._text_gate == "contract" and action in self._typed_actions():
            return False  # at gate 1 a printable key is typed into the input (on_key)
        if action == "focus_reply":  # back to the input, shown while it is away
            reply = self.query_one("#reply", ReplyInput)
            typing = getattr(self.focused, "TAKES_KEYS", False)  # the input or the terminal
            return reply.display and not typing
        if isinstance(self.focused, ReplyInput) and action in GATE_KEYS:
            pass  # a control key, typed by no one: it acts (and asks) from the input
        elif getattr(self.focused, "TAKES_KEYS", False):
            return False  # every key goes to the input or the agent terminal
        if action in self.GATE1_ACTIONS:  # editing the proposed contract: this screen's own
            return detail.session.state.value == "contract_proposed" and detail.live
        guard = KEYS[action].guard if action in KEYS else None
        if guard is not None:
            return why_not(guard, self._facts(detail)) is None
        if action == "open_worktree":
            worktree = detail.session.worktree
            return worktree is not None and os.path.isdir(worktree)
        try:
            if action == "attach":  # the pty backend has no terminal to attach
                if self._remote:  # the mirror knows its pane; the command is asked on the key
                    return detail.live and (detail.session.pane or {}).get("backend") == "tmux"
                return bool(self.supervisor.attach_argv(self.session_id))
            if action == "focus_terminal":
                return self._is_acp() or self.supervisor.agent_screen(self.session_id) is not None
        except CorralError:  # an attached console whose owner went away: the app says so
            return False
        return True

    def _say_why_not(self, event: events.Key) -> None:
        """The supervisor's sentence for a session key that does nothing now
        (approve before a diff waits, retry while it works …): a key never
        fails silently. Keys typed into the input or the terminal are theirs."""
        focused = self.focused
        if getattr(focused, "TAKES_KEYS", False) and not isinstance(focused, ReplyInput):
            return
        if focused is not None and event.key in focused._bindings.key_to_bindings:
            return  # the focused widget's own key (ctrl+a: the input's start of line)
        for binding in self._bindings.key_to_bindings.get(event.key, []):
            key = KEYS.get(binding.action)
            if key is None or (key.guard is None and not key.refused):
                continue
            if self.check_action(binding.action, ()):
                continue
            if isinstance(self.focused, ReplyInput) and binding.action not in GATE_KEYS:
                return  # a letter typed into the input
            try:
                detail = self.supervisor.get(self.session_id)
                why = (
                    why_not(key.guard, self._facts(detail))
                    if key.guard is not None
                    else key.refused
                )
            except CorralError:
                return
            if why is not None:
                event.stop()
                self.app.bell()
                self.notify(why, severity="warning", timeout=4, markup=False)
            return

    def _typed_actions(self) -> set[str]:
        """The actions on keys a person types in prose (after `[keys]`)."""
        return {
            binding.action
            for key, bindings in self._bindings.key_to_bindings.items()
            if typed(key)
            for binding in bindings
        }

    def _facts(self, detail: SessionDetail) -> SessionFacts:
        s = detail.session
        return SessionFacts(
            session_id=s.id,
            state=s.state,
            needs_you=detail.needs_you,
            dormant=s.state is CoderState.RUNNING
            and s.agent_identity is not None
            and s.agent_identity.state == "dormant",
            live=detail.live,
            worktree=s.worktree,
            result_branch=s.result_branch,
            transport=(s.pane or {}).get("backend"),
            offers=tuple(
                kind
                for kind, items in (
                    ("modes", s.agent_offers.modes if s.agent_offers else []),
                    ("models", s.agent_offers.models if s.agent_offers else []),
                )
                if items
            ),
        )

    def _selected_check(self, contract: OutcomeContract | None = None) -> ContractCheck | None:
        """The check under the table's cursor (of `contract`, or the session's)."""
        if contract is None:
            contract = self.supervisor.get(self.session_id).session.contract
        row = self.query_one("#checks", DataTable).cursor_row
        if contract is None or not 0 <= row < len(contract.checks):
            return None
        return contract.checks[row]

    def _prefill(self, text: str) -> None:
        reply = self.query_one("#reply", Input)
        reply.value = text
        reply.focus()
        reply.cursor_position = len(text)

    def action_focus_reply(self) -> None:
        reply = self.query_one("#reply", ReplyInput)
        if reply.display:
            reply.focus()

    def action_edit_check(self) -> None:
        check = self._selected_check()
        if check is None:
            self.notify("Select a check in the table first.", severity="warning")
            return
        self._prefill(f"/check {check.name} {check.command.strip()}")

    def action_edit_setup(self) -> None:
        contract = self.supervisor.get(self.session_id).session.contract
        setup = contract.setup if contract is not None else []
        self._prefill("/setup " + " && ".join(setup))

    def action_add_check(self) -> None:
        self._prefill("/check ")

    def action_remove_check(self) -> None:
        check = self._selected_check()
        if check is None:
            self.notify("Select a check in the table first.", severity="warning")
            return
        self.app.actions.ask(
            f"Remove the check {check.name}?\n\n{check.command.strip()}",
            lambda _: self.revise(f"/remove {check.name}"),
            go="Remove",
        )

    def action_answer(self, n: int) -> None:
        options: list[str] = self.supervisor.question_options(self.session_id)
        if 0 < n <= len(options):
            self.app.actions.run("Answer", self.supervisor.respond(self.session_id, options[n - 1]))

    def action_cycle_log_filter(self) -> None:
        names = list(LOG_FILTERS)
        self.log_filter = names[(names.index(self.log_filter) + 1) % len(names)]
        log = self.query_one("#log", RichLog)
        log.clear()
        log.write(f"(log filter: {LOG_FILTERS[self.log_filter]} — l cycles)")
        for event in self.events:
            if log_filter_matches(self.log_filter, event):
                log.write(describe(event))

    def action_review_diff(self) -> None:
        detail = self.supervisor.get(self.session_id)
        if detail.needs_you != "merge":
            self.notify("There is no verified diff waiting for approval.", severity="warning")
            return
        from .diff import DiffScreen

        self.app.push_screen(DiffScreen(self.session_id))

    def _is_acp(self) -> bool:
        from corral.supervisor.interface import is_acp

        return is_acp(self.supervisor.get(self.session_id).session.engine)

    def action_focus_terminal(self) -> None:
        """The agent's terminal; for an ACP agent, which has none, its
        conversation (rendered, searchable, with a prompt)."""
        if self._is_acp():
            from .conversation import ConversationScreen

            self.app.push_screen(ConversationScreen(self.session_id))
            return
        terminal = self.query_one(TerminalView)
        if terminal.display:
            terminal.focus()
        else:
            self.notify("This session has no live agent pane.", severity="warning")

    @work(exclusive=True, group="session-attach")
    @guarded("Attaching")
    async def action_attach(self) -> None:
        """Suspend the console and attach the real terminal to the agent's
        tmux window; detaching (prefix d) returns here. The command is the
        owner's answer, asked off the UI loop (an attached console's owner
        may be slow)."""
        argv = await asyncio.to_thread(self.supervisor.attach_argv, self.session_id)
        if not argv:
            self.notify(
                "Nothing to attach: no live tmux pane for this session.", severity="warning"
            )
            return
        import shlex
        import subprocess

        with self.app.suspend():
            # the exact command (an agent on another host: `ssh -t … tmux -S … attach`)
            print(f"corral: attaching with: {shlex.join(argv)}", flush=True)
            subprocess.run(argv, check=False)
        self.refresh_view()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_agent_settings(self) -> None:
        """An ACP agent's modes and models, chosen from what it announced and
        set through the owner; any other session says why not in one line."""
        detail = self.supervisor.get(self.session_id)
        refusal = why_not("agent_settings", self._facts(detail))
        offers = detail.session.agent_offers
        if refusal is not None or offers is None:
            self.app.bell()
            self.notify(refusal or "nothing announced to switch", severity="warning")
            return
        sid = self.session_id

        def chosen(choice: tuple[str, str] | None) -> None:
            if choice is None:
                return
            kind, value = choice
            if kind == "mode":
                self.app.actions.run(
                    "Mode", self.supervisor.set_mode(sid, value), lambda r: f"mode → {r['mode']}"
                )
            else:
                self.app.actions.run(
                    "Model",
                    self.supervisor.set_model(sid, value),
                    lambda r: f"model → {r['model']}",
                )

        from .agent_settings import AgentSettingsScreen

        self.app.push_screen(AgentSettingsScreen(detail.session.engine, offers), chosen)

    def action_confirm(self) -> None:
        self.app.actions.confirm_contract(self.session_id)

    def action_approve(self) -> None:
        if self.supervisor.get(self.session_id).needs_you == "finding":
            self.app.actions.approve("Accept finding", self.session_id, accept_finding=True)
        elif self.app.actions.flaky_lines(self.session_id):
            self.action_review_diff()  # a flaky pass is decided on its review (see the board)
        else:
            self.app.actions.approve("Approve", self.session_id, delivery="branch")

    def action_approve_checkout(self) -> None:
        if self.app.actions.flaky_lines(self.session_id):
            self.action_review_diff()
        else:
            self.app.actions.approve("Apply to checkout", self.session_id, delivery="checkout")

    def action_reverify(self) -> None:
        self.app.actions.run("Re-verify", self.supervisor.reverify(self.session_id))

    def action_reject(self) -> None:
        self.app.actions.reject(self.session_id)

    def action_cancel_session(self) -> None:
        self.app.actions.cancel(self.session_id)

    def action_retry(self) -> None:
        """R as on the board: a dormant session's agent resumes its own
        conversation; a failed or cancelled one's retry opens in place of this
        session once it exists."""
        detail = self.supervisor.get(self.session_id)
        if self._facts(detail).dormant:
            self.app.actions.run("Revive", self.supervisor.revive(self.session_id))
            return

        def show(result: StartResult) -> None:
            if self.is_current:
                self.app.switch_screen(SessionScreen(result.session_id))

        self.app.actions.retry(self.session_id, then=show)

    def action_archive(self) -> None:
        self.app.actions.toggle_archive(self.session_id)
        self.refresh_view()

    def action_rename(self) -> None:
        self.app.actions.rename(self.session_id, then=self.refresh_view)

    def action_open_worktree(self, editor: bool = False) -> None:
        worktree = self.supervisor.get(self.session_id).session.worktree
        self.app.actions.open_worktree(self.session_id, worktree, editor=editor)


def _hidden_line(s: CoderSession) -> Content:
    """Gate 1's line about the hidden checks (empty without any):
    how many, their names and baseline verdicts (the operator's to see), and
    how to add one."""
    assert s.contract is not None
    hidden = s.contract.hidden_checks
    if not hidden:
        return Content("")  # the line costs the 80x24 screen a row; /hidden is in the README
    base = {r.name: r for r in s.baseline if r.hidden}
    parts = []
    for h in hidden:
        b = base.get(h.name)
        verdict = "" if b is None else (" passes now" if b.passed else " red now")
        parts.append(f"{h.name}{verdict}")
    return safe_markup(
        f"\n[b]{len(hidden)} hidden check(s)[/b], held back from the agent: "
        "{} [dim](add: /hidden PATH or PATH:WHERE, drop: /remove NAME)[/dim]",
        ", ".join(parts),
    )


check_handlers(SessionScreen, SESSION_KEYS)
