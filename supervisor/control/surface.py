"""The owner's surface, defined once: every method a client may call, its
parameters, its answer's type, who may call it and whether it streams.

`Calls` lists one `Call` record per method. Everything else is derived from
it or checked against it:

- the server (`server.py`) builds its dispatch table from these records and
  refuses to import when a record has no handler or a handler no record;
- the socket clients (`client.py`) call by record: the name, the params
  model and the answer's type come from here, so a client cannot call a
  method the owner does not serve, nor read its answer as another type;
- who may call is the record's `agents` / `person` / `own_session`, read by
  `rules.admit` for the socket and the MCP tools alike; the rules that depend
  on a call's arguments or the operator's config live in `rules.py`;
- the command line calls by record (`client.request(Calls.approve,
  params.ApproveParams(...))`, `params` being `protocol`): mypy checks each
  parameter, and a test refuses a call by name in `tui/cli/` or `mcp.py`;
- `OwnerSurface` is what a client may ask of the owner in-process:
  `api.Supervisor` is it, and `attached.AttachedSupervisor` implements it
  over the socket (mypy checks both), so the console and `corral run` are
  typed against it and never cast one to the other.

Adding a method: one record in `Calls` (and its params model in
`protocol.py`), one handler in `server.py` with its `serve(Calls.<name>,
handler)` line in `_methods`, and, when the console or `corral run` need it,
one method in `OwnerSurface` with its implementation in `api.Supervisor` and
`attached.AttachedSupervisor` (which calls `self._request(Calls.<name>, ...)`).
`tests/integration/test_surface.py` drives every record through the socket
and every `OwnerSurface` method both in-process and attached.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, TypeAdapter

from ..events import CoderEvent, MessageData
from ..git.patches import FilePatch, Selection
from ..models import (
    AdoptablePane,
    ApproveResult,
    CancelResult,
    CheckResult,
    ContextPack,
    DeleteResult,
    OutcomeContract,
    PullRequestResult,
    PushResult,
    ReviseResult,
    ScheduledTask,
    SessionDetail,
    SessionSummary,
    Split,
    StartResult,
    SubscribeResult,
    TaskRun,
    TranscriptTurn,
)
from ..states import NeedsYou
from . import protocol as p

if TYPE_CHECKING:
    from ..api import Supervisor
    from ..panes.base import Screen
    from ..session.board import Watcher
    from ..session.journal import Subscription
    from ..states import CoderState

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")

Json = dict[str, Any]


@dataclasses.dataclass(frozen=True, eq=False)
class Call(Generic[P, R]):
    """One method of the owner's surface.

    `params`: the model its parameters validate against (unknown fields are
    refused). `result`: the type its answer is read as. `agents`: an agent
    may call it at all. `person`: what only a person may do, as the refusal
    says it ("approve {whose} diff"); an agent's call is refused and shown to
    the operator. `own_session`: an agent may call it only about its own
    session. `streams`: notifications follow its answer. `unbounded`: its
    answer comes when the owner's work is done, however long (a client must
    not time it out)."""

    params: type[P]
    result: Any  # a type: its answer is validated as it
    agents: bool = False
    person: str | None = None
    own_session: bool = False
    streams: bool = False
    unbounded: bool = False
    name: str = dataclasses.field(default="", init=False)

    def __set_name__(self, owner: type, name: str) -> None:
        object.__setattr__(self, "name", name)

    def request(self, params: P) -> Json:
        """The JSON-RPC params of a call (validated again by the owner)."""
        return params.model_dump(mode="json", exclude_unset=True)

    def read(self, answer: Any) -> R:
        """The owner's answer as this method's result type."""
        adapter: TypeAdapter[R] | None = _ADAPTERS.get(self.name)
        if adapter is None:
            adapter = _ADAPTERS[self.name] = TypeAdapter(self.result)
        return adapter.validate_python(answer)


_ADAPTERS: dict[str, Any] = {}  # built on first use: a CLI call reads one or two


def _agents(params: type[P], result: Any, *, own: bool = False, **kw: Any) -> Call[P, Any]:
    return Call(params, result, agents=True, own_session=own, **kw)


def _person(params: type[P], result: Any, phrase: str, **kw: Any) -> Call[P, Any]:
    return Call(params, result, person=phrase, **kw)


def _operator(params: type[P], result: Any, **kw: Any) -> Call[P, Any]:
    """Not for agents; nothing a person must witness."""
    return Call(params, result, **kw)


class Calls:
    """Every method, and once, who may call it. Agents may read (the board,
    their own session's history and events), send messages as themselves,
    and start runs where the operator allows; what changes a session's
    course or the operator's repository, schedule or board is a person's."""

    hello: Call[p.NoParams, Json] = _agents(p.NoParams, Json)
    list: Call[p.NoParams, builtins.list[SessionSummary]] = _agents(
        p.NoParams, builtins.list[SessionSummary]
    )
    get: Call[p.SessionParams, SessionDetail] = _agents(p.SessionParams, SessionDetail)
    # where agents_may_start; a session an agent started stops at gate 1
    start: Call[p.StartParams, StartResult] = _agents(p.StartParams, StartResult)
    confirm: Call[p.ConfirmParams, dict[str, str]] = _person(
        p.ConfirmParams, dict[str, str], "confirm {whose} contract"
    )
    foreman_split: Call[p.SessionParams, Split] = _operator(p.SessionParams, Split)
    set_foreman_split: Call[p.SplitParams, Split] = _person(
        p.SplitParams, Split, "set {whose} split"
    )
    revise: Call[p.ReviseParams, ReviseResult] = _person(
        p.ReviseParams, ReviseResult, "revise {whose} contract"
    )
    respond: Call[p.RespondParams, dict[str, bool]] = _person(
        p.RespondParams, dict[str, bool], "answer {whose} question"
    )
    steer: Call[p.SteerParams, dict[str, bool]] = _person(
        p.SteerParams, dict[str, bool], "steer {whose} agent"
    )
    set_mode: Call[p.ModeParams, dict[str, str]] = _person(
        p.ModeParams, dict[str, str], "set {whose} agent's mode"
    )
    set_model: Call[p.ModelParams, dict[str, str]] = _person(
        p.ModelParams, dict[str, str], "set {whose} agent's model"
    )
    set_option: Call[p.OptionParams, dict[str, str]] = _person(
        p.OptionParams, dict[str, str], "set {whose} agent's config option"
    )
    # the agent's honest way out: its task cannot be done as specified
    report_impossible: Call[p.ImpossibleParams, str] = _agents(p.ImpossibleParams, str, own=True)
    question_options: Call[p.SessionParams, builtins.list[str]] = _agents(
        p.SessionParams, builtins.list[str], own=True
    )
    approve: Call[p.ApproveParams, ApproveResult] = _person(
        p.ApproveParams, ApproveResult, "approve {whose} diff", unbounded=True
    )
    reject: Call[p.RejectParams, ApproveResult] = _person(
        p.RejectParams, ApproveResult, "reject {whose} diff"
    )
    # ending, reviving or retrying a session spends or throws away the operator's work
    cancel: Call[p.SessionParams, CancelResult] = _person(
        p.SessionParams, CancelResult, "cancel {whose} session"
    )
    reverify: Call[p.SessionParams, builtins.list[CheckResult]] = _operator(
        p.SessionParams, builtins.list[CheckResult], unbounded=True
    )
    revive: Call[p.SessionParams, None] = _person(p.SessionParams, None, "revive {whose} agent")
    # the board is the operator's: an archived row hides what needs them
    rename: Call[p.RenameParams, SessionSummary] = _person(
        p.RenameParams, SessionSummary, "rename {whose} session"
    )
    archive: Call[p.ArchiveParams, SessionSummary] = _person(
        p.ArchiveParams, SessionSummary, "archive {whose} session"
    )
    retry: Call[p.RetryParams, StartResult] = _person(
        p.RetryParams, StartResult, "retry {whose} session"
    )
    delete: Call[p.SessionParams, DeleteResult] = _person(
        p.SessionParams, DeleteResult, "delete {whose} session"
    )
    push: Call[p.PushParams, PushResult] = _person(
        p.PushParams, PushResult, "publish {whose} branch"
    )
    pull_request: Call[p.PushParams, PullRequestResult] = _person(
        p.PushParams, PullRequestResult, "open a pull request for {whose} branch"
    )
    history: Call[p.SessionParams, builtins.list[CoderEvent]] = _agents(
        p.SessionParams, builtins.list[CoderEvent], own=True
    )
    # from the session the owner identified (the `sender` a client names is not believed)
    send: Call[p.SendParams, MessageData] = _agents(p.SendParams, MessageData)
    task_pause: Call[p.TaskPauseParams, ScheduledTask] = _person(
        p.TaskPauseParams, ScheduledTask, "pause a scheduled task"
    )
    task_run: Call[p.TaskParams, TaskRun] = _person(p.TaskParams, TaskRun, "run a scheduled task")
    search: Call[p.SearchParams, builtins.list[str]] = _operator(p.SearchParams, builtins.list[str])
    transcript: Call[p.TranscriptParams, builtins.list[TranscriptTurn]] = _agents(
        p.TranscriptParams, builtins.list[TranscriptTurn], own=True
    )
    # a session's conversation, to load elsewhere: the operator's, not an agent's
    export_context: Call[p.SessionParams, ContextPack] = _operator(p.SessionParams, ContextPack)
    adoptable: Call[p.AdoptableParams, builtins.list[AdoptablePane]] = _operator(
        p.AdoptableParams, builtins.list[AdoptablePane]
    )
    adopt: Call[p.AdoptParams, p.Adopted] = _person(p.AdoptParams, p.Adopted, "adopt a pane")
    release: Call[p.SessionParams, None] = _person(p.SessionParams, None, "release {whose} pane")
    tasks: Call[p.NoParams, builtins.list[ScheduledTask]] = _operator(
        p.NoParams, builtins.list[ScheduledTask]
    )
    task_add: Call[p.TaskAddParams, ScheduledTask] = _person(
        p.TaskAddParams, ScheduledTask, "schedule a task"
    )
    task_remove: Call[p.TaskParams, None] = _person(p.TaskParams, None, "remove a scheduled task")
    task_runs: Call[p.TaskParams, builtins.list[TaskRun]] = _operator(
        p.TaskParams, builtins.list[TaskRun]
    )
    review_files: Call[p.SessionParams, builtins.list[FilePatch]] = _agents(
        p.SessionParams, builtins.list[FilePatch], own=True
    )
    checkout_clashes: Call[p.SessionParams, builtins.list[str]] = _operator(
        p.SessionParams, builtins.list[str]
    )
    subscribe: Call[p.SubscribeParams, SubscribeResult] = _agents(
        p.SubscribeParams, SubscribeResult, own=True, streams=True
    )
    watch: Call[p.NoParams, p.BoardAnswer] = _operator(p.NoParams, p.BoardAnswer, streams=True)
    unsubscribe: Call[p.StreamParams, dict[str, bool]] = _agents(p.StreamParams, dict[str, bool])
    wait_for: Call[p.WaitParams, SessionSummary] = _agents(p.WaitParams, SessionSummary, own=True)
    session_info: Call[p.SessionParams, p.SessionInfo] = _agents(
        p.SessionParams, p.SessionInfo, own=True
    )
    engines: Call[p.NoParams, p.EngineInfo] = _agents(p.NoParams, p.EngineInfo)
    engine_refusal: Call[p.EngineParams, str | None] = _agents(p.EngineParams, str | None)
    agent_screen: Call[p.ScreenParams, p.ScreenAnswer] = _operator(p.ScreenParams, p.ScreenAnswer)
    # typing into a pane is acting as the operator at that terminal
    agent_keys: Call[p.KeysParams, dict[str, int]] = _person(
        p.KeysParams, dict[str, int], "type into {whose} pane"
    )
    agent_resize: Call[p.ResizeParams, dict[str, bool]] = _operator(p.ResizeParams, dict[str, bool])
    agent_scrollback: Call[p.ScrollbackParams, builtins.list[str]] = _operator(
        p.ScrollbackParams, builtins.list[str]
    )
    attach_argv: Call[p.SessionParams, builtins.list[str] | None] = _operator(
        p.SessionParams, builtins.list[str] | None
    )
    discussions_list: Call[p.NoParams, builtins.list[Json]] = _operator(
        p.NoParams, builtins.list[Json]
    )
    discussion_get: Call[p.DiscussionParams, Json] = _operator(p.DiscussionParams, Json)
    discussion_start: Call[p.DiscussionStartParams, Json] = _person(
        p.DiscussionStartParams, Json, "start a discussion"
    )
    # the owner holds each discussion once: every console resumes, follows and
    # speaks in the same one (none keeps its own copy over the state dir)
    discussion_resume: Call[p.DiscussionParams, Json] = _person(
        p.DiscussionParams, Json, "resume a discussion"
    )
    discussion_subscribe: Call[p.DiscussionStreamParams, Json] = _operator(
        p.DiscussionStreamParams, Json, streams=True
    )
    discussion_send: Call[p.DiscussionSendParams, dict[str, int]] = _person(
        p.DiscussionSendParams, dict[str, int], "speak in the operator's discussion"
    )
    discussion_cancel: Call[p.DiscussionParams, dict[str, bool]] = _person(
        p.DiscussionParams, dict[str, bool], "stop a discussion's reply"
    )
    discussion_model: Call[p.DiscussionModelParams, dict[str, str | None]] = _person(
        p.DiscussionModelParams, dict[str, str | None], "pin a discussion's model"
    )
    discussion_link: Call[p.DiscussionLinkParams, dict[str, bool]] = _person(
        p.DiscussionLinkParams, dict[str, bool], "start a discussion's prepared task"
    )
    discussion_promote: Call[p.DiscussionParams, Json] = _person(
        p.DiscussionParams, Json, "turn a discussion into a task"
    )
    discussion_close: Call[p.DiscussionParams, dict[str, bool]] = _person(
        p.DiscussionParams, dict[str, bool], "close a discussion"
    )
    # where agents_may_start; an agent cancels only its own runs
    assistant_start: Call[p.StartArgs, Json] = _agents(p.StartArgs, Json)
    assistant_poll: Call[p.PollArgs, Json] = _agents(p.PollArgs, Json)
    assistant_cancel: Call[p.CancelArgs, Json] = _agents(p.CancelArgs, Json)


CALLS: Mapping[str, Call[Any, Any]] = {
    name: call for name, call in vars(Calls).items() if isinstance(call, Call)
}
"""Every method by name, in the order `Calls` declares them."""


def call_named(method: str) -> Call[Any, Any]:
    """The record of `method`; refused (the owner's own sentence) when the
    surface has none."""
    found = CALLS.get(method)
    if found is None:
        raise p.ControlError(
            f"unknown method {method!r}", code=p.METHOD_NOT_FOUND, kind="MethodNotFound"
        )
    return found


class OwnerSurface(Protocol):
    """What a client may ask of the owner in-process: the facade
    (`api.Supervisor`) is it; a console attached to another process's owner
    (`attached.AttachedSupervisor`) implements it over the socket."""

    @property
    def state_dir(self) -> Path: ...
    @property
    def broken_rows(self) -> builtins.list[str]: ...
    @property
    def left_running(self) -> builtins.list[str]: ...
    @property
    def opened(self) -> bool: ...  # open() took hold: close() has something to let go

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    # -- reading
    def list(self) -> builtins.list[SessionSummary]: ...
    def get(self, session_id: str) -> SessionDetail: ...
    async def fresh(self, session_id: str) -> SessionDetail: ...
    def is_live(self, session_id: str) -> bool: ...
    def needs_you_of(self, session_id: str) -> str | None: ...
    def journal_path(self, session_id: str) -> Path: ...
    def disk_full(self) -> str | None: ...
    def question_options(self, session_id: str) -> builtins.list[str]: ...
    def model_choices(self) -> builtins.list[tuple[str, bool]]: ...
    def host_choices(self) -> builtins.list[str]: ...
    def engine_choices(self) -> builtins.list[tuple[str, str]]: ...
    def command_engines(self) -> builtins.list[tuple[str, str, str]]: ...
    def engine_refusal(self, engine: str) -> str | None: ...
    def watch(self) -> tuple[builtins.list[SessionSummary], Watcher]: ...
    def unwatch(self, watcher: Watcher) -> bool: ...
    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription[CoderEvent] | None]: ...
    def unsubscribe(self, sub: Subscription[CoderEvent]) -> None: ...
    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float | None = 30,
    ) -> SessionSummary: ...
    async def history(self, session_id: str) -> builtins.list[CoderEvent]: ...
    async def transcript(
        self, session_id: str, limit: int = 500
    ) -> builtins.list[TranscriptTurn]: ...
    async def search(self, text: str) -> builtins.list[str]: ...
    async def export_context(self, session_id: str) -> ContextPack: ...
    async def review_files(self, session_id: str) -> builtins.list[FilePatch]: ...
    async def checkout_clashes(self, session_id: str) -> builtins.list[str]: ...
    async def foreman_split(self, session_id: str) -> Split: ...

    # -- acting
    async def start(
        self,
        intent: str,
        repo: Path | str,
        *,
        engine: str = "auto",
        base: str | None = None,
        max_iterations: int | None = None,
        constraints: builtins.list[str] | None = None,
        discussion_id: str | None = None,
        wait: bool = True,
        contract: OutcomeContract | None = None,
        model: str | None = None,
        split: Split | dict[str, object] | str | None = None,
        host: str | None = None,
        decided: Collection[NeedsYou] = (),
        context: ContextPack | None = None,
    ) -> StartResult: ...
    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]: ...
    async def revise(self, session_id: str, request: str) -> ReviseResult: ...
    def set_foreman_split(
        self, session_id: str, split: Split | dict[str, object] | str
    ) -> Split: ...
    async def respond(
        self, session_id: str, text: str, *, steer: bool = False
    ) -> dict[str, bool]: ...
    async def set_mode(self, session_id: str, mode: str) -> dict[str, str]: ...
    async def set_model(self, session_id: str, model: str) -> dict[str, str]: ...
    async def set_option(self, session_id: str, key: str, value: str) -> dict[str, str]: ...
    async def approve(
        self,
        session_id: str,
        *,
        approve: bool = True,
        accept_finding: bool = False,
        delivery: str | None = None,
        comment: str | None = None,
        selection: Selection | None = None,
        override_red: bool = False,
        discard_rest: bool = False,
        accept_judge_changes: bool = False,
        accept_flaky: bool = False,
    ) -> ApproveResult: ...
    async def reverify(self, session_id: str) -> builtins.list[CheckResult]: ...
    async def cancel(self, session_id: str) -> CancelResult: ...
    async def send(
        self,
        sender: str,
        target: str,
        text: str,
        *,
        expects_reply: bool = False,
        responds_to: str | None = None,
    ) -> MessageData: ...
    async def revive(self, session_id: str) -> None: ...
    def rename(self, session_id: str, name: str | None) -> SessionSummary: ...
    def archive(self, session_id: str, archived: bool = True) -> SessionSummary: ...
    async def retry(
        self, session_id: str, *, wait: bool = False, keep_edits: bool = False
    ) -> StartResult: ...
    async def delete(self, session_id: str) -> DeleteResult: ...
    async def push(self, session_id: str, remote: str = "origin") -> PushResult: ...
    async def pull_request(self, session_id: str, remote: str = "origin") -> PullRequestResult: ...
    async def adoptable(
        self, sockets: builtins.list[Path] | None = None
    ) -> builtins.list[AdoptablePane]: ...
    async def adopt(self, target: str) -> str: ...
    async def release(self, session_id: str) -> None: ...
    async def tasks(self) -> builtins.list[ScheduledTask]: ...
    async def add_task(
        self,
        name: str,
        *,
        action: str,
        params: dict[str, str],
        at: float | None = None,
        every: float | None = None,
        cron: str | None = None,
    ) -> ScheduledTask: ...
    async def remove_task(self, task_id: str) -> None: ...
    async def pause_task(self, task_id: str, paused: bool = True) -> ScheduledTask: ...
    async def run_task_now(self, task_id: str) -> TaskRun: ...
    async def task_runs(self, task_id: str) -> builtins.list[TaskRun]: ...

    # -- the agent's pane
    def agent_screen(self, session_id: str) -> Screen | None: ...
    def agent_screen_version(self, session_id: str) -> int: ...
    def attach_argv(self, session_id: str) -> builtins.list[str] | None: ...
    async def agent_scrollback(self, session_id: str, lines: int = 2000) -> builtins.list[str]: ...
    async def resize_agent(self, session_id: str, width: int, height: int) -> None: ...
    async def send_keys_to_agent(self, session_id: str, keys: builtins.list[str]) -> None: ...


def _facade_is_the_surface(supervisor: Supervisor) -> OwnerSurface:
    return supervisor  # mypy proves the in-process facade is the surface clients use


def _who(call: Call[Any, Any]) -> str:
    if call.person:
        return "a person (" + call.person.replace("{whose} ", "").replace("{whose}", "") + ")"
    if call.agents:
        return (
            "the operator; an agent about its own session"
            if call.own_session
            else "the operator and agents"
        )
    return "the operator (not agents)"


def method_table() -> str:
    """The README's table of methods, generated from `Calls` (a test fails
    when the README's copy differs): name, params, who may call, notes."""
    rows = ["| method | params | who may call | |", "|---|---|---|---|"]
    for name, call in CALLS.items():
        params = ", ".join(f"`{f}`" for f in call.params.model_fields) or "—"
        notes = ", ".join(
            word for word, on in (("streams", call.streams), ("unbounded", call.unbounded)) if on
        )
        rows.append(f"| `{name}` | {params} | {_who(call)} | {notes} |")
    return "\n".join(rows)
