"""The events of a session, typed: one payload model per `EventKind`.

Every event is `{session_id, seq, ts, kind, data}` on the wire (`corral run
--json`) and in the journal (which leaves out `session_id`), exactly as when
`data` was a free dict. What changed is the Python side:

- each kind has its own event class (`PlanTextEvent`, ...) whose `kind` is a
  `Literal` and whose `data` is that kind's payload model (`PlanTextData`, ...);
- `CoderEvent` is the union of them, discriminated on `kind`, so a consumer
  narrows with `event.kind is EventKind.X`, `isinstance` or `match` and then
  reads typed attributes, and mypy checks producers and consumers alike;
- a producer hands the log a payload (`log.append(PlanTextData(text=...))`);
  the payload knows its kind, so the two can never disagree.

Two kinds have several shapes, one payload class per shape (chosen by the
keys present when parsing), and part of them is open on purpose:
- `tool_call`: a call starts (`ToolCallData`), is refused (`ToolDeniedData`),
  finishes (`ToolResultData`), or is the runtime answering a question in an
  agent's pane (`PaneAnswerData`). A call's own arguments (whatever a model or
  a script passed to the tool) are open: they travel as extra fields beside
  the typed ones, as on the wire, and `args` returns them.
- `external_event`: the two shapes corral produces are typed
  (`AgentStartedData`, `ModelUsageData`); anything else an agent integration
  reports loads as `ExternalData`, whose fields are all open (`fields`).
Separate classes rather than optional fields keep each shape's fields
required, and keep serialization in pydantic's compiled code (the journal
writes every event on the append path).

The one optional field a producer leaves out rather than setting to null (an
evaluation's `scope`) is left out of the JSON when unset. Key order inside
`data` follows the model; for a tool call that puts `tool` first (it used to
follow the arguments), which no JSON reader can tell apart.

Payloads are frozen: one event object is shared by every subscriber and the
replay buffer. A producer that passes a model it may change later (a session's
contract or finding) passes a copy.

Parsing (journals, clients) goes through `parse_event` / `EVENT_ADAPTER`,
which validate; the log's append path trusts its typed producers and does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
)

from .models import (
    CheckResult,
    DiffFile,
    EventKind,
    NoChangeFinding,
    OutcomeContract,
    SetupOutcome,
)
from .states import CoderState
from .status import AgentStatus

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_CLASSES",
    "GUIDANCE_DELIVERED",
    "GUIDANCE_NOT_DELIVERED",
    "GUIDANCE_QUEUED",
    "MESSAGE_ACCEPTED",
    "MESSAGE_AMBIGUOUS",
    "MESSAGE_QUEUED",
    "MESSAGE_REJECTED",
    "AgentStartedData",
    "AgentStatusData",
    "AgentStatusEvent",
    "AuthRequiredData",
    "AuthRequiredEvent",
    "BlockedData",
    "BlockedEvent",
    "BoundaryData",
    "BoundaryEvent",
    "BudgetExhaustedData",
    "BudgetExhaustedEvent",
    "CheckCompletedData",
    "CheckCompletedEvent",
    "CoderEvent",
    "ContractBaselineData",
    "ContractBaselineEvent",
    "ContractEvaluatedData",
    "ContractEvaluatedEvent",
    "ContractProposedData",
    "ContractProposedEvent",
    "ContractRevisionRejectedData",
    "ContractRevisionRejectedEvent",
    "ConversationData",
    "ConversationEvent",
    "DiffReadyData",
    "DiffReadyEvent",
    "EngineFallbackData",
    "EngineFallbackEvent",
    "EngineSelectedData",
    "EngineSelectedEvent",
    "ErrorData",
    "ErrorEvent",
    "EventBase",
    "EventData",
    "EventKind",
    "ExternalData",
    "ExternalEvent",
    "FindingProposedData",
    "FindingProposedEvent",
    "FindingResolvedData",
    "FindingResolvedEvent",
    "IterationStartedData",
    "IterationStartedEvent",
    "MergeCompletedData",
    "MergeCompletedEvent",
    "MessageData",
    "MessageEvent",
    "ModelFallbackData",
    "ModelFallbackEvent",
    "ModelUsageData",
    "OperatorGuidanceData",
    "OperatorGuidanceEvent",
    "PaneAnswerData",
    "PlanTextData",
    "PlanTextEvent",
    "SetupCompletedData",
    "SetupCompletedEvent",
    "StateChangedData",
    "StateChangedEvent",
    "ToolCallData",
    "ToolCallEvent",
    "ToolData",
    "ToolDeniedData",
    "ToolResultData",
    "UserInputExpiredData",
    "UserInputExpiredEvent",
    "UserInputRequestedData",
    "UserInputRequestedEvent",
    "WorktreeChangedData",
    "WorktreeChangedEvent",
    "parse_event",
]

K = EventKind


def _is_none(value: object) -> bool:
    return value is None


def _from_field() -> Any:
    """`from` is a Python keyword: the attribute is `from_`, the wire key `from`."""
    return Field(validation_alias="from", serialization_alias="from")


class EventData(BaseModel):
    """The payload of one event kind. Unknown fields in parsed input are
    ignored (a newer journal still loads); `from_` fields are written `from`."""

    model_config = ConfigDict(
        defer_build=True,
        frozen=True,
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    KIND: ClassVar[EventKind]


# -- payloads, in EventKind order ------------------------------------------------------


class EngineSelectedData(EventData):
    KIND = K.ENGINE_SELECTED
    engine: str
    reason: str


class PlanTextData(EventData):
    """Narration: what the engine or the runtime is doing."""

    KIND = K.PLAN_TEXT
    text: str


class ContractProposedData(EventData):
    KIND = K.CONTRACT_PROPOSED
    contract: OutcomeContract
    revised: bool = False


class ContractBaselineData(EventData):
    KIND = K.CONTRACT_BASELINE
    results: list[CheckResult]
    gates_nothing: bool


class SetupCompletedData(EventData):
    """The contract's setup ran (or its cached environment was reused)."""

    KIND = K.SETUP_COMPLETED
    outcome: SetupOutcome


MESSAGE_QUEUED = "queued"
MESSAGE_ACCEPTED = "accepted"  # pasted at the agent's idle prompt and seen there
MESSAGE_REJECTED = "rejected"  # its pane was gone: never shown to the agent
MESSAGE_AMBIGUOUS = "ambiguous"  # the paste was not confirmed: it may show unsent
OPERATOR = "operator"  # the sender of a message typed by the operator


class MessageData(EventData):
    """One message between sessions (or from the operator), logged in the
    target's journal and in the sender's: `queued`, then how it ended."""

    KIND = K.MESSAGE
    message_id: str
    sender: str  # a session id, or "operator"
    target: str
    text: str
    status: str = MESSAGE_QUEUED
    reason: str | None = Field(default=None, exclude_if=_is_none)
    hops: int = 0
    # the sender waits for the target's answer (kept until it is delivered)
    expects_reply: bool = Field(default=False, exclude_if=lambda v: not v)
    responds_to: str | None = Field(default=None, exclude_if=_is_none)  # the message it answers


class BoundaryData(EventData):
    """An agent called what only a person may do (approve, confirm, ...):
    refused, and written here so the operator sees the attempt. `caller` is
    the session whose agent called (None: an agent the owner could not tie
    to a session); `target` the session it named, if any."""

    KIND = K.BOUNDARY
    method: str
    caller: str | None = None
    target: str | None = None
    message: str


class ConversationData(EventData):
    """One piece of an agent's conversation told over a protocol (ACP): what
    it said (`message`), thought (`thought`), a tool call it started
    (`tool_call`: `title`, `tool_kind`, `status`, `text` its diff or command)
    or moved on (`tool_update`), its plan (`plan`: one entry per line of
    `text`), the commands it offers (`commands`), its mode (`mode`), its
    model (`model`), its config options (`config`: `id = value` a line), the
    prompt corral sent (`prompt`) and the end of a turn (`turn_end`, `text`
    the agent's stop reason as it said it). A tool call's `output` is what
    it printed (its raw output or its terminal's), when it told."""

    KIND = K.CONVERSATION
    part: Literal[
        "message",
        "thought",
        "tool_call",
        "tool_update",
        "plan",
        "commands",
        "mode",
        "model",
        "config",
        "prompt",
        "turn_end",
    ]
    text: str = ""
    tool_call_id: str | None = Field(default=None, exclude_if=_is_none)
    title: str | None = Field(default=None, exclude_if=_is_none)
    tool_kind: str | None = Field(default=None, exclude_if=_is_none)
    status: str | None = Field(default=None, exclude_if=_is_none)
    # a tool call's output as it reported it (a shell's stdout and stderr, its
    # terminal's output): shown under its command, never run or obeyed
    output: str | None = Field(default=None, exclude_if=_is_none)


BLOCKED_BY_POLICY: Final = "policy"  # corral's own rules (outside the worktree, no such request)
BLOCKED_BY_OPERATOR: Final = "operator"  # the operator refused it (a rejected permission)
BLOCKED_BY_PROVIDER: Final = "provider"  # the agent's side refused or failed it
# a write an agent's own shell made outside its worktree, which corral's
# sandbox kept (private /tmp) or refused (read-only): `what` starts with it,
# and the board shows it (`session.attention`)
SHELL_WRITE: Final = "shell write"


class BlockedData(EventData):
    """Something an agent asked for was refused: `what` it asked (a method
    and its target), `why` in one sentence, and `by` whom (corral's
    `policy`, the `operator`, or the `provider`)."""

    KIND = K.BLOCKED
    what: str
    why: str
    by: Literal["policy", "operator", "provider"]


class ContractRevisionRejectedData(EventData):
    KIND = K.CONTRACT_REVISION_REJECTED
    request: str
    reason: str


# a hop's reason -> what the model did, as the fallback line says it
FALLBACK_CAUSES: dict[str, str] = {
    "auth_rejected": "rejected its key",
    "server_error": "answered with a server error",
    "timed_out": "timed out",
    "unreachable": "could not be reached",
    "rate_limited": "is rate-limited",
    "unparseable_json": "answered with something that is not the JSON asked for",
}


class ModelFallbackData(EventData):
    """A model request moved to the next model in order. Every hop is
    journaled; only `notice` ones (a rejected credential: the operator must
    act) are shown on the board and in the session view."""

    KIND = K.MODEL_FALLBACK
    from_: str = _from_field()
    to: str
    # timed_out, server_error, unreachable, rate_limited, auth_rejected, unparseable_json
    reason: str
    detail: str = ""
    notice: bool = True

    def sentence(self) -> str:
        """What happened to the first model, in the words of its cause."""
        what = FALLBACK_CAUSES.get(self.reason) or (
            "rejected its key" if self.notice else "failed"  # a free-text reason of old
        )
        return f"model {self.from_} {what}; {self.to} answers instead"

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Written only when they say something, so older journals read back the same."""
        data: dict[str, Any] = handler(self)
        if not self.detail:
            data.pop("detail", None)
        if self.notice:
            data.pop("notice", None)
        return data


class AuthRequiredData(EventData):
    KIND = K.AUTH_REQUIRED
    message: str
    wait_secs: int = 0


class IterationStartedData(EventData):
    KIND = K.ITERATION_STARTED
    n: int
    max: int


class UserInputRequestedData(EventData):
    KIND = K.USER_INPUT_REQUESTED
    prompt: str
    options: list[str] = Field(default_factory=list)


class UserInputExpiredData(EventData):
    """The question has waited `waited_secs` unanswered. `still_waiting`: it
    stays pending (a reminder, the signal kept); older journals carry False,
    when the wait ended the question."""

    KIND = K.USER_INPUT_EXPIRED
    prompt: str
    waited_secs: int
    still_waiting: bool = Field(default=False, exclude_if=lambda v: not v)


GUIDANCE_QUEUED = "queued"
GUIDANCE_DELIVERED = "delivered"
GUIDANCE_NOT_DELIVERED = "not_delivered"


class OperatorGuidanceData(EventData):
    """One operator guidance message and where it is: `queued` when accepted,
    then `delivered` (handed to the model, or pasted into the agent's pane at
    its idle prompt and seen there) or `not_delivered` with the `reason`.
    Older journals carry only `queued`."""

    KIND = K.OPERATOR_GUIDANCE
    text: str
    status: str = GUIDANCE_QUEUED
    reason: str | None = Field(default=None, exclude_if=_is_none)


class ToolData(EventData):
    """A `tool_call` event: one of four shapes, each its own class (below)."""

    KIND = K.TOOL_CALL
    tool: str


class _OpenArgs(ToolData):
    """A tool call's own arguments are open: they are the extra fields, written
    beside the typed ones as on the wire; `args` returns them."""

    model_config = ConfigDict(extra="allow")

    @property
    def args(self) -> dict[str, Any]:
        return self.__pydantic_extra__ or {}

    def _with(self, args: Mapping[str, Any]) -> None:
        reserved = type(self).model_fields
        extra = {k: v for k, v in args.items() if k not in reserved}
        object.__setattr__(self, "__pydantic_extra__", extra)


class ToolCallData(_OpenArgs):
    """A tool call starts, with its arguments."""

    @classmethod
    def with_args(cls, tool: str, args: Mapping[str, Any]) -> ToolCallData:
        """An argument named like a typed field (`tool`) is dropped."""
        call = cls(tool=tool)
        call._with(args)
        return call


class ToolDeniedData(_OpenArgs):
    """A tool call was refused by policy, with its arguments and the reason."""

    denied: str

    @classmethod
    def with_args(cls, tool: str, args: Mapping[str, Any], denied: str) -> ToolDeniedData:
        call = cls(tool=tool, denied=denied)
        call._with(args)
        return call


class ToolResultData(ToolData):
    """A tool call finished: its one-line summary and whether it succeeded."""

    result: str
    ok: bool


class PaneAnswerData(ToolData):
    """The runtime answered a question on an agent's screen."""

    tool: Literal["answer"] = "answer"
    question: str
    answer: str
    action: str  # what was done, e.g. "selected option 1: Yes"


_RESULT_KEYS = frozenset(ToolResultData.model_fields)
_ANSWER_KEYS = frozenset(PaneAnswerData.model_fields)


def _tool_call_shape(value: Any) -> str:
    """Which `tool_call` payload a dict (or an instance) is, by its keys."""
    if isinstance(value, ToolData):
        return type(value).__name__
    if isinstance(value, Mapping):
        keys = value.keys()
        if "denied" in keys:
            return ToolDeniedData.__name__
        if keys == _RESULT_KEYS:
            return ToolResultData.__name__
        if keys == _ANSWER_KEYS and value.get("tool") == "answer":
            return PaneAnswerData.__name__
    return ToolCallData.__name__


ToolCallPayload = Annotated[
    Annotated[ToolCallData, Tag(ToolCallData.__name__)]
    | Annotated[ToolDeniedData, Tag(ToolDeniedData.__name__)]
    | Annotated[ToolResultData, Tag(ToolResultData.__name__)]
    | Annotated[PaneAnswerData, Tag(PaneAnswerData.__name__)],
    Discriminator(_tool_call_shape),
]


class CheckCompletedData(EventData):
    KIND = K.CHECK_COMPLETED
    result: CheckResult


class ContractEvaluatedData(EventData):
    KIND = K.CONTRACT_EVALUATED
    by: str = "runtime"
    # "approved subset" after a partial approval; absent (not null) otherwise
    scope: str | None = Field(default=None, exclude_if=_is_none)
    passed: bool
    results: list[CheckResult] = Field(default_factory=list)


class DiffReadyData(EventData):
    KIND = K.DIFF_READY
    stat: str = ""
    patch: str = ""
    patch_truncated: bool = False
    patch_full_bytes: int = 0
    changed_paths: int = 0
    files: list[DiffFile] = Field(default_factory=list)


class FindingProposedData(EventData):
    KIND = K.FINDING_PROPOSED
    finding: NoChangeFinding


class FindingResolvedData(EventData):
    KIND = K.FINDING_RESOLVED
    accepted: bool
    comment: str | None


class MergeCompletedData(EventData):
    KIND = K.MERGE_COMPLETED
    branch: str
    commit: str


class EngineFallbackData(EventData):
    KIND = K.ENGINE_FALLBACK
    from_: str = _from_field()
    to: str
    reason: str | None


class AgentStartedData(EventData):
    """`external_event`: an agent was started in a pane."""

    KIND = K.EXTERNAL_EVENT
    agent: str
    pane: str
    incarnation: int
    started: str
    # whether the pane's command runs in the sandbox, and one line on how (what
    # it writes, or why it is unconfined); absent from journals written before
    confined: bool | None = Field(default=None, exclude_if=_is_none)
    sandbox: str | None = Field(default=None, exclude_if=_is_none)


class ModelUsageData(EventData):
    """`external_event`: the built-in engine's running model usage."""

    KIND = K.EXTERNAL_EVENT
    engine: str
    model: str
    iteration: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None


class ExternalData(EventData):
    """`external_event` of any other shape: every field is open (`fields`)."""

    model_config = ConfigDict(extra="allow")

    KIND = K.EXTERNAL_EVENT

    @property
    def fields(self) -> dict[str, Any]:
        return self.__pydantic_extra__ or {}


class BudgetExhaustedData(EventData):
    KIND = K.BUDGET_EXHAUSTED
    reason: str
    iterations: int


class ErrorData(EventData):
    KIND = K.ERROR
    message: str


class StateChangedData(EventData):
    KIND = K.STATE_CHANGED
    from_: CoderState = _from_field()
    to: CoderState


class AgentStatusData(EventData):
    KIND = K.AGENT_STATUS
    status: AgentStatus
    reason: str
    source: str  # "hook" | "pane" | "process"
    question: str | None


class WorktreeChangedData(EventData):
    """The worktree moved away from what the checks saw: while they ran (that
    attempt does not count) or after verification (approval delivers the
    verified tree, not these files)."""

    KIND = K.WORKTREE_CHANGED
    phase: Literal["during_verification", "since_verification"]
    files: list[str]
    attempt: int | None = None  # during verification: which attempt moved
    of: int | None = None  # ... out of how many


# required fields only: a journal written before `confined` existed still reads
_STARTED_KEYS = frozenset(k for k, f in AgentStartedData.model_fields.items() if f.is_required())
_USAGE_KEYS = frozenset(ModelUsageData.model_fields)


def _external_shape(value: Any) -> str:
    """Which `external_event` payload a dict (or an instance) is: by its keys."""
    if isinstance(value, AgentStartedData):
        return "started"
    if isinstance(value, ModelUsageData):
        return "usage"
    if isinstance(value, Mapping):
        if value.keys() >= _STARTED_KEYS:
            return "started"
        if value.keys() >= _USAGE_KEYS:
            return "usage"
    return "other"


ExternalPayload = Annotated[
    Annotated[AgentStartedData, Tag("started")]
    | Annotated[ModelUsageData, Tag("usage")]
    | Annotated[ExternalData, Tag("other")],
    Discriminator(_external_shape),
]


# -- events ------------------------------------------------------------------------------


class EventBase(BaseModel):
    """What every event has. `seq` is unique and increasing per session."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    seq: int
    ts: float


class EngineSelectedEvent(EventBase):
    kind: Literal[K.ENGINE_SELECTED] = K.ENGINE_SELECTED
    data: EngineSelectedData


class PlanTextEvent(EventBase):
    kind: Literal[K.PLAN_TEXT] = K.PLAN_TEXT
    data: PlanTextData


class ContractProposedEvent(EventBase):
    kind: Literal[K.CONTRACT_PROPOSED] = K.CONTRACT_PROPOSED
    data: ContractProposedData


class ContractBaselineEvent(EventBase):
    kind: Literal[K.CONTRACT_BASELINE] = K.CONTRACT_BASELINE
    data: ContractBaselineData


class ContractRevisionRejectedEvent(EventBase):
    kind: Literal[K.CONTRACT_REVISION_REJECTED] = K.CONTRACT_REVISION_REJECTED
    data: ContractRevisionRejectedData


class ModelFallbackEvent(EventBase):
    kind: Literal[K.MODEL_FALLBACK] = K.MODEL_FALLBACK
    data: ModelFallbackData


class AuthRequiredEvent(EventBase):
    kind: Literal[K.AUTH_REQUIRED] = K.AUTH_REQUIRED
    data: AuthRequiredData


class IterationStartedEvent(EventBase):
    kind: Literal[K.ITERATION_STARTED] = K.ITERATION_STARTED
    data: IterationStartedData


class UserInputRequestedEvent(EventBase):
    kind: Literal[K.USER_INPUT_REQUESTED] = K.USER_INPUT_REQUESTED
    data: UserInputRequestedData


class UserInputExpiredEvent(EventBase):
    kind: Literal[K.USER_INPUT_EXPIRED] = K.USER_INPUT_EXPIRED
    data: UserInputExpiredData


class OperatorGuidanceEvent(EventBase):
    kind: Literal[K.OPERATOR_GUIDANCE] = K.OPERATOR_GUIDANCE
    data: OperatorGuidanceData


class ToolCallEvent(EventBase):
    kind: Literal[K.TOOL_CALL] = K.TOOL_CALL
    data: ToolCallPayload


class CheckCompletedEvent(EventBase):
    kind: Literal[K.CHECK_COMPLETED] = K.CHECK_COMPLETED
    data: CheckCompletedData


class ContractEvaluatedEvent(EventBase):
    kind: Literal[K.CONTRACT_EVALUATED] = K.CONTRACT_EVALUATED
    data: ContractEvaluatedData


class DiffReadyEvent(EventBase):
    kind: Literal[K.DIFF_READY] = K.DIFF_READY
    data: DiffReadyData


class FindingProposedEvent(EventBase):
    kind: Literal[K.FINDING_PROPOSED] = K.FINDING_PROPOSED
    data: FindingProposedData


class FindingResolvedEvent(EventBase):
    kind: Literal[K.FINDING_RESOLVED] = K.FINDING_RESOLVED
    data: FindingResolvedData


class MergeCompletedEvent(EventBase):
    kind: Literal[K.MERGE_COMPLETED] = K.MERGE_COMPLETED
    data: MergeCompletedData


class EngineFallbackEvent(EventBase):
    kind: Literal[K.ENGINE_FALLBACK] = K.ENGINE_FALLBACK
    data: EngineFallbackData


class ExternalEvent(EventBase):
    kind: Literal[K.EXTERNAL_EVENT] = K.EXTERNAL_EVENT
    data: ExternalPayload


class BudgetExhaustedEvent(EventBase):
    kind: Literal[K.BUDGET_EXHAUSTED] = K.BUDGET_EXHAUSTED
    data: BudgetExhaustedData


class ErrorEvent(EventBase):
    kind: Literal[K.ERROR] = K.ERROR
    data: ErrorData


class StateChangedEvent(EventBase):
    kind: Literal[K.STATE_CHANGED] = K.STATE_CHANGED
    data: StateChangedData


class AgentStatusEvent(EventBase):
    kind: Literal[K.AGENT_STATUS] = K.AGENT_STATUS
    data: AgentStatusData


class WorktreeChangedEvent(EventBase):
    kind: Literal[K.WORKTREE_CHANGED] = K.WORKTREE_CHANGED
    data: WorktreeChangedData


class SetupCompletedEvent(EventBase):
    kind: Literal[K.SETUP_COMPLETED] = K.SETUP_COMPLETED
    data: SetupCompletedData


class MessageEvent(EventBase):
    kind: Literal[K.MESSAGE] = K.MESSAGE
    data: MessageData


class BoundaryEvent(EventBase):
    kind: Literal[K.BOUNDARY] = K.BOUNDARY
    data: BoundaryData


class ConversationEvent(EventBase):
    kind: Literal[K.CONVERSATION] = K.CONVERSATION
    data: ConversationData


class BlockedEvent(EventBase):
    kind: Literal[K.BLOCKED] = K.BLOCKED
    data: BlockedData


_Events = Union[  # noqa: UP007 (the members are listed one per line, in EventKind order)
    EngineSelectedEvent,
    PlanTextEvent,
    ContractProposedEvent,
    ContractBaselineEvent,
    ContractRevisionRejectedEvent,
    ModelFallbackEvent,
    AuthRequiredEvent,
    IterationStartedEvent,
    UserInputRequestedEvent,
    UserInputExpiredEvent,
    OperatorGuidanceEvent,
    ToolCallEvent,
    CheckCompletedEvent,
    ContractEvaluatedEvent,
    DiffReadyEvent,
    FindingProposedEvent,
    FindingResolvedEvent,
    MergeCompletedEvent,
    EngineFallbackEvent,
    ExternalEvent,
    BudgetExhaustedEvent,
    ErrorEvent,
    StateChangedEvent,
    AgentStatusEvent,
    WorktreeChangedEvent,
    SetupCompletedEvent,
    MessageEvent,
    BoundaryEvent,
    ConversationEvent,
    BlockedEvent,
]

CoderEvent = Annotated[_Events, Field(discriminator="kind")]
"""One entry of a session's event stream: any of the event classes above."""

EVENT_ADAPTER: TypeAdapter[CoderEvent] = TypeAdapter(
    CoderEvent, config=ConfigDict(defer_build=True)
)


def parse_event(obj: Mapping[str, Any]) -> CoderEvent:
    """Validate one event (a parsed JSON object). Raises `ValidationError`."""
    return EVENT_ADAPTER.validate_python(obj)


def _payload_classes(annotation: Any) -> list[type[EventData]]:
    """The payload classes an event's `data` annotation admits."""
    if isinstance(annotation, type) and issubclass(annotation, EventData):
        return [annotation]
    return [c for arg in get_args(annotation) for c in _payload_classes(arg)]


def _event_classes() -> dict[type[EventData], type[EventBase]]:
    """Payload class → its event class, checked: one event class per kind,
    and every payload's `KIND` is its event's `kind`."""
    table: dict[type[EventData], type[EventBase]] = {}
    kinds: set[EventKind] = set()
    for event_cls in get_args(_Events):
        kind = event_cls.model_fields["kind"].default
        if kind in kinds:
            raise TypeError(f"two event classes for {kind}")
        kinds.add(kind)
        for payload in _payload_classes(event_cls.model_fields["data"].annotation):
            if payload.KIND is not kind:
                raise TypeError(f"{payload.__name__}.KIND is {payload.KIND}, not {kind}")
            table[payload] = event_cls
    if kinds != set(EventKind):
        raise TypeError(f"event kinds without an event class: {set(EventKind) - kinds}")
    return table


EVENT_CLASSES: dict[type[EventData], type[EventBase]] = _event_classes()
"""Which event class carries each payload class (the log's append path)."""
