"""The control protocol, version `corral-control/1`: JSON-RPC 2.0 over the
unix socket `<state dir>/control.sock`, one JSON object per line (UTF-8,
newline-terminated), no request longer than `MAX_MESSAGE_BYTES` and no answer longer than
`MAX_ANSWER_BYTES`.

A request is `{"jsonrpc": "2.0", "id": 1, "method": "get", "params": {...}}`;
its answer carries the same id and either `result` or `error`
(`{"code", "message", "data": {"kind"}}`: `message` is the supervisor's
sentence, `kind` its exception class, e.g. `StateDirError`). Requests on one
connection may be answered out of order; match them by id.

`subscribe` and `watch` stream after their answer, as notifications (no id)
naming the request that opened them in `params.stream`: `event` (one session
event, as in the journal), `board` (changed board rows), and `stream_end`
(`reason`: `closed` or `dropped`; a dropped stream says `resume_from`, the
seq to subscribe from again). `unsubscribe {stream}` ends one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import errors
from ..events import CoderEvent
from ..models import ContextPack, OutcomeContract, SessionSummary
from ..panes.base import Screen
from ..paths import SOCKET_NAME
from ..states import NeedsYou

PROTOCOL = "corral-control/1"
MAX_MESSAGE_BYTES = 1 << 20  # one request line, 1 MiB
# One answer or notification line: the board of 10,000 stored sessions is
# about 12 MB, so answers get more room than requests (which a client writes).
MAX_ANSWER_BYTES = 1 << 26  # 64 MiB
MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, 104 on the BSDs

# JSON-RPC error codes: the standard ones, then one for a supervisor refusal.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CORRAL_ERROR = -32000
TOO_LARGE = -32001

# how the owner writes an `event` notification, so a client can take the event
# out without parsing the envelope: EVENT_HEAD <stream id> EVENT_MID <event> }}
EVENT_HEAD = b'{"jsonrpc":"2.0","method":"event","params":{"stream":'
EVENT_MID = b',"event":'

ERROR_KINDS: dict[str, type[errors.CorralError]] = {
    "CorralError": errors.CorralError,
    "StateDirError": errors.StateDirError,
    "ConfigError": errors.ConfigError,
    "DiskFullError": errors.DiskFullError,
    "FlakyPassHeld": errors.FlakyPassHeld,
    "JudgeChangeHeld": errors.JudgeChangeHeld,
}


def socket_path(state_dir: Path) -> Path:
    return Path(state_dir) / SOCKET_NAME


def event_row(event: CoderEvent) -> dict[str, Any]:
    """An event as `corral run --json` prints it: the journal's row (`seq`,
    `ts`, `kind`, `data`) plus `session_id`."""
    return {
        "session_id": event.session_id,
        "seq": event.seq,
        "ts": event.ts,
        "kind": event.kind._value_,
        "data": event.data,
    }


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def error_kind(exc: BaseException) -> str:
    """The exception's class name, e.g. `StateDirError` or `UserInputExpired`."""
    return type(exc).__name__


class ControlError(errors.CorralError):
    """An error answer from the owner: its sentence, kind and code."""

    def __init__(self, message: str, *, code: int, kind: str) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


def params_problem(method: str, exc: ValidationError) -> str:
    """The sentence for params that do not fit `method`'s model: each field
    and what is wrong with it."""
    problems = "; ".join(
        f"{'.'.join(str(x) for x in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
    )
    return f"{method}: {problems}"


def raise_error(error: dict[str, Any]) -> None:
    """Raise the error an answer carries: the supervisor's own class for the
    kinds a client knows, else a `ControlError` (a `CorralError` too) that
    keeps the kind and the code."""
    message = str(error.get("message", "error"))
    code = int(error.get("code", INTERNAL_ERROR))
    data = error.get("data")
    kind = str(data.get("kind", "")) if isinstance(data, dict) else ""
    if code == CORRAL_ERROR and kind in ERROR_KINDS:
        raise ERROR_KINDS[kind](message)
    raise ControlError(message, code=code, kind=kind or "protocol")


# --- params of each method (unknown fields are refused) ----------------------
# Each model builds its validator when first used (defer_build): an owner no
# client has called yet holds none of them.


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class NoParams(_Params):
    pass


class SessionParams(_Params):
    session_id: str


class RetryParams(SessionParams):
    keep_edits: bool = False


class StartParams(_Params):
    intent: str
    repo: str
    engine: str = "auto"
    base: str | None = None
    max_iterations: int | None = None
    constraints: list[str] | None = None
    discussion_id: str | None = None
    wait: bool = True
    contract: OutcomeContract | None = None
    model: str | None = None
    split: dict[str, Any] | None = None  # a foreman session's split, the operator's own
    host: str | None = None  # a configured [[hosts]] name (None: this machine)
    # needs the operator decided ahead (`corral run --yes`, `--deliver`): no
    # notice for them; dropped when an agent sends it
    decided: list[NeedsYou] = Field(default_factory=list)
    context: ContextPack | None = None  # another session's context pack


class SplitParams(_Params):
    session_id: str
    split: dict[str, Any]


class ConfirmParams(_Params):
    session_id: str
    contract: OutcomeContract | None = None


class ReviseParams(_Params):
    session_id: str
    request: str


class ImpossibleParams(_Params):
    session_id: str  # the caller's own session (an agent may report only on its own)
    reason: str


class RespondParams(_Params):
    session_id: str
    text: str
    steer: bool = False


class ModeParams(_Params):
    session_id: str
    mode: str


class ModelParams(_Params):
    session_id: str
    model: str


class OptionParams(_Params):
    session_id: str
    key: str
    value: str


class SteerParams(_Params):
    session_id: str
    text: str


class TaskAddParams(_Params):
    name: str = ""
    action: str
    params: dict[str, str]
    at: float | None = None
    every: float | None = None
    cron: str | None = None


class TaskParams(_Params):
    task_id: str


class TaskPauseParams(_Params):
    task_id: str
    paused: bool = True


class SearchParams(_Params):
    text: str


class TranscriptParams(_Params):
    session_id: str
    limit: int = 500


class AdoptableParams(_Params):
    sockets: list[str] | None = None  # tmux socket paths (None: the user's defaults)


class AdoptParams(_Params):
    target: str  # "<socket>:%N", "%N" or "session:window.pane"


class SendParams(_Params):
    sender: str  # a session id, or "operator"
    target: str
    text: str
    expects_reply: bool = False  # kept pending until the target's answer is delivered
    responds_to: str | None = None  # the message id this answers


class ApproveParams(_Params):
    session_id: str
    accept_finding: bool = False
    delivery: str | None = None
    comment: str | None = None
    # path -> hunk indexes to deliver (null: the whole file); absent: everything
    selection: dict[str, list[int] | None] | None = None
    override_red: bool = False
    discard_rest: bool = False
    # the person saw that the change changed how it is judged (contracts.judge)
    accept_judge_changes: bool = False
    # the person saw that a check passed only on its immediate re-run (flaky)
    accept_flaky: bool = False


class RenameParams(_Params):
    session_id: str
    name: str | None = None  # None or empty clears the name


class ArchiveParams(_Params):
    session_id: str
    archived: bool = True  # False brings an archived session back


class PushParams(_Params):
    session_id: str
    remote: str = "origin"


class RejectParams(_Params):
    session_id: str
    comment: str | None = None


class SubscribeParams(_Params):
    session_id: str
    from_seq: int = Field(default=0, ge=0)


class StreamParams(_Params):
    stream: int | str


class WaitParams(_Params):
    session_id: str
    states: list[str] | None = None
    needs: bool = False
    timeout: float | None = Field(default=30, ge=0)


class EngineParams(_Params):
    engine: str


class ScreenParams(_Params):
    session_id: str
    known_version: int = -2  # the version the client holds: its screen is not resent


class KeysParams(_Params):
    session_id: str
    keys: list[str]


class ResizeParams(_Params):
    session_id: str
    width: int = Field(ge=1, le=1000)
    height: int = Field(ge=1, le=1000)


class ScrollbackParams(_Params):
    session_id: str
    lines: int = Field(default=2000, ge=1, le=100_000)


class DiscussionParams(_Params):
    discussion_id: str


class DiscussionStreamParams(_Params):
    discussion_id: str
    from_seq: int = Field(default=0, ge=0)  # replay from here, then live


class DiscussionStartParams(_Params):
    repo: str
    context: ContextPack | None = None


class DiscussionSendParams(_Params):
    discussion_id: str
    text: str


class DiscussionModelParams(_Params):
    discussion_id: str
    model: str | None = None  # blank or `auto`: no pin (the default order)


class DiscussionLinkParams(_Params):
    discussion_id: str
    session_id: str  # the session just started from the discussion's prepared task


# the assistant tools' arguments (MCP callers add fields of their own: ignored)


class StartArgs(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    intent: str
    repo: str
    contract: dict[str, Any] | str | None = None
    engine: str = "auto"
    base: str | None = None
    invoked_by: str | None = None
    # one session per (caller, key), however often the start is repeated (start_keys.py)
    idempotency_key: str | None = None


class PollArgs(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    run_id: str
    since_seq: int = Field(default=0, ge=0)


class CancelArgs(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    run_id: str


# --- answers that are no facade type of their own -------------------------------


class _Answer(BaseModel):
    # an older client reads a newer owner
    model_config = ConfigDict(extra="ignore", defer_build=True)


class BoardAnswer(_Answer):
    """`watch`: the whole board; its changes follow as `board` notifications."""

    rows: list[SessionSummary]


class SessionInfo(_Answer):
    live: bool
    needs_you: str | None = None
    journal_path: str


class EngineInfo(_Answer):
    """What the new-session form offers, and whether the disk is full."""

    choices: list[tuple[str, str]]
    command_engines: list[tuple[str, str, str]]
    disk_full: str | None = None
    hosts: list[str] = []
    models: list[tuple[str, bool]] = []


class ScreenAnswer(_Answer):
    """`agent_screen`: the version, and the screen only when it moved."""

    version: int
    unchanged: bool = False
    screen: Screen | None = None


class Adopted(_Answer):
    session_id: str


LONE_SURROGATE = (
    "a text parameter holds a lone UTF-16 surrogate (such as \\ud800), which is not text "
    "corral can store or show; send valid Unicode"
)


def holds_lone_surrogate(value: object) -> bool:
    """JSON's `\\ud800` escapes decode to a lone surrogate: not Unicode, so
    storing it fails (UTF-8 cannot encode it) after a session is half made.
    Such a request is refused whole, before anything acts on it."""
    if isinstance(value, str):
        if value.isascii():
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(holds_lone_surrogate(k) or holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_lone_surrogate(v) for v in value)
    return False
