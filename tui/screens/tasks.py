"""The tasks screen: scheduled tasks (what corral does on its own at set
times), with their last runs; add, pause or resume, delete, run now — each
through the supervisor, the table reloaded from it after every change."""

from __future__ import annotations

from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Select, Static

from corral.supervisor.errors import CorralError
from corral.supervisor.models import ScheduledTask, TaskRun

from ..console_app import ConsoleApp
from ..safe_text import safe_text
from ..task_words import WHEN_HINT, action_text, parse_when, rule_text, stamp, state_text

ACTIONS = [("start a session", "start"), ("send a message", "send"), ("revive a session", "revive")]
WHAT = {"start": "intent", "send": "text", "revive": "session"}
WHERE = {"start": "repo", "send": "target"}


class TasksScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("n", "add", "Add"),
        Binding("space", "pause", "Pause/resume"),
        Binding("g", "run_now", "Run now"),
        Binding("x,delete", "delete", "Delete"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[ScheduledTask] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Scheduled tasks", id="tasks-title")
            yield DataTable(id="tasks", cursor_type="row", zebra_stripes=True)
            yield Static("", id="tasks-runs", markup=False)
        yield Footer()

    async def on_mount(self) -> None:
        table = self.query_one("#tasks", DataTable)
        table.add_columns("Id", "Name", "When", "Does", "State")
        await self.reload()

    async def reload(self, keep: str | None = None) -> None:
        """Show the supervisor's tasks (the cursor stays on `keep`)."""
        try:
            tasks = await self.app.supervisor.tasks()
        except CorralError as exc:
            self.app.notify(str(exc), severity="error")
            return
        # what runs next first; paused and finished ones last
        self.tasks = sorted(
            tasks,
            key=lambda t: (t.paused, not t.enabled, t.next_run or float("inf"), t.name),
        )
        table = self.query_one("#tasks", DataTable)
        table.clear()
        for t in self.tasks:
            cells = (t.id, t.name, rule_text(t), action_text(t), state_text(t))
            table.add_row(*(safe_text(c) for c in cells), key=t.id)
        if not self.tasks:
            self.query_one("#tasks-runs", Static).update(
                "No scheduled tasks: n adds one (or `corral tasks add` on the command line)."
            )
        ids = [t.id for t in self.tasks]
        if keep in ids:
            table.move_cursor(row=ids.index(keep))
        await self.show_runs()

    def selected(self) -> ScheduledTask | None:
        table = self.query_one("#tasks", DataTable)
        if not self.tasks or table.cursor_row < 0 or table.cursor_row >= len(self.tasks):
            return None
        return self.tasks[table.cursor_row]

    @on(DataTable.RowHighlighted)
    async def show_runs(self) -> None:
        task = self.selected()
        if task is None:
            return
        runs: list[TaskRun] = await self.app.supervisor.task_runs(task.id)
        lines = [f"Last runs of {task.name} ({len(runs)} kept, newest first):"]
        lines += [f"  {stamp(r.at)}  {'ok  ' if r.ok else 'FAIL'}  {r.detail}" for r in runs[:8]]
        if not runs:
            lines.append("  none yet")
        self.query_one("#tasks-runs", Static).update(safe_text("\n".join(lines), multiline=True))

    async def _act(self, what: str, call: object) -> None:
        try:
            await call  # type: ignore[misc]
        except CorralError as exc:
            self.app.bell()
            self.app.notify(str(exc), title=f"{what} refused", severity="error", timeout=8)
        task = self.selected()
        await self.reload(keep=task.id if task else None)

    async def action_pause(self) -> None:
        task = self.selected()
        if task is not None:
            await self._act("Pause", self.app.supervisor.pause_task(task.id, not task.paused))

    async def action_run_now(self) -> None:
        task = self.selected()
        if task is None:
            return
        try:
            run = await self.app.supervisor.run_task_now(task.id)
        except CorralError as exc:
            self.app.notify(str(exc), title="Run refused", severity="error")
            return
        self.app.notify(run.detail, title="Ran" if run.ok else "Run failed", timeout=8)
        await self.reload(keep=task.id)

    def action_delete(self) -> None:
        task = self.selected()
        if task is None:
            return

        async def delete(_comment: str) -> None:
            await self._act("Delete", self.app.supervisor.remove_task(task.id))

        self.app.actions.ask(
            f"Delete the task {task.name!r} and its runs?",
            lambda c: self.run_worker(delete(c)),
            go="Delete",
        )

    def action_add(self) -> None:
        async def added(form: dict[str, str] | None) -> None:
            if form is None:
                return
            await self._add(form)

        self.app.push_screen(TaskFormScreen(str(self.app.default_repo or "")), added)

    async def _add(self, form: dict[str, str]) -> None:
        action = form["action"]
        params = {WHAT[action]: form["what"]}
        if action in WHERE:
            params[WHERE[action]] = form["where"]
        if action == "start":
            params["engine"] = "auto"
        try:
            at, every, cron = parse_when(form["when"])
            task = await self.app.supervisor.add_task(
                form["name"], action=action, params=params, at=at, every=every, cron=cron
            )
        except CorralError as exc:
            self.app.bell()
            self.app.notify(str(exc), title="Task refused", severity="error", timeout=10)
            return
        self.app.notify(f"{task.name}: {state_text(task)}", title="Task added")
        await self.reload(keep=task.id)


class TaskFormScreen(ModalScreen[dict[str, str] | None]):
    """Name, schedule, action and its words; enter adds, escape keeps nothing."""

    BINDINGS = [Binding("escape", "keep", "Cancel")]

    def __init__(self, repo: str) -> None:
        super().__init__()
        self.repo = repo

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Schedule a task", classes="dialog-text")
            yield Input(placeholder="name", id="task-name")
            yield Input(placeholder=WHEN_HINT, id="task-when")
            yield Select(ACTIONS, value="start", allow_blank=False, id="task-action")
            yield Input(
                placeholder="intent (start) · text (send) · session (revive)", id="task-what"
            )
            yield Input(self.repo, placeholder="repo (start) · session (send)", id="task-where")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Add (enter)", id="add", variant="primary")
                yield Button("Cancel (escape)", id="keep")

    def on_mount(self) -> None:
        self.query_one("#task-name", Input).focus()

    @on(Select.Changed, "#task-action")
    def _action_changed(self, event: Select.Changed) -> None:
        where = self.query_one("#task-where", Input)
        where.value = self.repo if event.value == "start" else ""
        where.disabled = event.value == "revive"

    @on(Input.Submitted)
    @on(Button.Pressed, "#add")
    def action_add(self) -> None:
        def value(wid: str) -> str:
            return self.query_one(f"#{wid}", Input).value.strip()

        self.dismiss(
            {
                "name": value("task-name"),
                "when": value("task-when"),
                "action": str(self.query_one("#task-action", Select).value),
                "what": value("task-what"),
                "where": value("task-where"),
            }
        )

    @on(Button.Pressed, "#keep")
    def action_keep(self) -> None:
        self.dismiss(None)
