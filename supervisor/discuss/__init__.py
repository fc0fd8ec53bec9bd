"""Read-only, repo-grounded discussions that end in a reviewed coding intent.

An operator who is still working out *what* they want talks it through with
the model, grounded in one repository. The conversation can end in a
*prepared task* (the model calls `prepare_coding_task {intent, constraints}`)
or in `promote()`, which distils the conversation into an intent plus the
agreed constraints. The operator edits either one before starting a session
with `Supervisor.start(..., constraints=..., discussion_id=...)`. **Nothing
in this module starts work**: preparing and promoting only record a proposal.

Read-only, by two independent mechanisms:

1. **A gate before anything runs.** `write_file`, `edit_file` and `shell`
   (advertised or not: the model may hallucinate them) are refused at once,
   before the `Workbench` sees them. The model receives
   `DISCUSSION_MUTATION_REFUSAL` word for word as the tool result, and the
   operator sees a `refusal` event plus `tool_result {ok: false}`. No human is
   ever asked to approve anything on this surface.
2. **Read tools confined to the repo root.** `read_file`, `list_dir`,
   `find_files` and `grep_files` run through the built-in engine's
   `Workbench` (`supervisor.engines.tools.workbench`) with every other tool
   disabled, so its inspector chain (`FileConfinement`,
   `confine`) refuses a path that leaves the root lexically (`..`, absolute,
   `~`) or through a symlink; the model receives that refusal as the result.

The operator's policy files bind a discussion as they bind a run, read afresh
for each message: denied paths and tools are refused, and a denied
`prepare_coding_task` is neither advertised nor honoured.

The runs a discussion starts are the supervisor's to record and to admit
(`linked_runs`): one unfinished run at a time, and a follow-up continues from
what the last one delivered. Each turn the model is told how those runs stand
(`coding_context`: the newest eight rows of that record and fixed guidance,
beside the operator's message only, never saved in the transcript).

Symlink caveat: the containment check resolves symlinks when the call is
checked, and the file is opened afterwards. A symlink inside the repo that is
swapped to point outside between the check and the open (a race with another
process writing the repo) could still be followed. The check is a guard
against the model *naming* a path outside the repo, not a sandbox against a
hostile process racing it. Unlike the seed, symlinks committed in the repo
that point outside are refused too (the seed's lexical clamp followed them).

Deliberate departures from the seed, for a single-process console:
- `web_search` / `http_request` are not offered (nothing can leave the machine
  through a discussion); the advertised tools are the four read tools plus
  `prepare_coding_task`.
- There is one owner (the process that owns the state dir; every console,
  its own or an attached one, reaches the discussions through it:
  `control/discussions.py`), so there is no per-connection ownership;
  `resume()` of a discussion that is already open returns the open one.
- `promote()` and `edit_prepared()` also emit `task_prepared` (with a
  `source`), so a review panel has one event to follow.
- `cancel()` ends the turn with `turn_complete {cancelled: true}`.
- Idle expiry runs on `start`/`resume` and whenever `reap_idle()` is called
  (a console can call it from a timer).

Events are `DiscussEvent {discussion_id, seq, ts, type, data}`, typed: one
payload model per `DiscussEventType` (`events`); `seq` counts
from 0 per opened discussion (a resume replays the saved history with fresh
seqs). Every turn is `user_message`, then `assistant_delta` / `tool_call` /
`refusal` / `tool_result`, then `assistant_message` [`task_prepared`] or
`error`, and exactly one `turn_complete` last.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .common import (
    CLOSED,
    DISCUSS_EVENT_BUFFER_MAX,
    DISCUSS_MAX_TURNS,
    DISCUSS_MESSAGE_MAX_BYTES,
    DISCUSS_SUBSCRIBER_QUEUE,
    DISCUSSION_IDLE_TTL_SECS,
    DISCUSSION_MUTATION_REFUSAL,
    EMPTY_MESSAGE,
    GATED_TOOLS,
    GUIDANCE_LIMIT,
    MAX_OPEN_DISCUSSIONS,
    NO_TURNS_YET,
    PREPARE_SPEC,
    PREPARE_TOOL,
    PROMOTE_MAX_ATTEMPTS,
    READ_TOOLS,
    TRANSCRIPT_MAX_TURNS,
    PreparedTask,
    no_open,
    not_a_repo,
    still_answering,
    system_prompt,
    too_large,
    too_many_open,
)

# The chat itself (the model loop, its event stream, the manager) loads on
# first use: the supervisor imports this package for the runs a discussion
# started (`linked_runs`), and the console's first paint must not pay for it.
if TYPE_CHECKING:
    from .discussion import Discussion
    from .discussion_events import (
        DISCUSS_EVENT_ADAPTER,
        DISCUSS_EVENT_CLASSES,
        DiscussAssistantDeltaData,
        DiscussAssistantDeltaEvent,
        DiscussAssistantMessageData,
        DiscussAssistantMessageEvent,
        DiscussData,
        DiscussErrorData,
        DiscussErrorEvent,
        DiscussEvent,
        DiscussEventBase,
        DiscussEventType,
        DiscussRefusalData,
        DiscussRefusalEvent,
        DiscussSubscription,
        DiscussSubscriptionDropped,
        DiscussTaskPreparedData,
        DiscussTaskPreparedEvent,
        DiscussToolCallData,
        DiscussToolCallEvent,
        DiscussToolResultData,
        DiscussToolResultEvent,
        DiscussTurnCompleteData,
        DiscussTurnCompleteEvent,
        DiscussUserMessageData,
        DiscussUserMessageEvent,
        EventStream,
        parse_discuss_event,
    )
    from .manager import Discussions

_LAZY = {
    "Discussion": ".discussion",
    "Discussions": ".manager",
    "DISCUSS_EVENT_ADAPTER": ".discussion_events",
    "DISCUSS_EVENT_CLASSES": ".discussion_events",
    "DiscussAssistantDeltaData": ".discussion_events",
    "DiscussAssistantDeltaEvent": ".discussion_events",
    "DiscussAssistantMessageData": ".discussion_events",
    "DiscussAssistantMessageEvent": ".discussion_events",
    "DiscussData": ".discussion_events",
    "DiscussErrorData": ".discussion_events",
    "DiscussErrorEvent": ".discussion_events",
    "DiscussEvent": ".discussion_events",
    "DiscussEventBase": ".discussion_events",
    "DiscussEventType": ".discussion_events",
    "DiscussRefusalData": ".discussion_events",
    "DiscussRefusalEvent": ".discussion_events",
    "DiscussSubscription": ".discussion_events",
    "DiscussSubscriptionDropped": ".discussion_events",
    "DiscussTaskPreparedData": ".discussion_events",
    "DiscussTaskPreparedEvent": ".discussion_events",
    "DiscussToolCallData": ".discussion_events",
    "DiscussToolCallEvent": ".discussion_events",
    "DiscussToolResultData": ".discussion_events",
    "DiscussToolResultEvent": ".discussion_events",
    "DiscussTurnCompleteData": ".discussion_events",
    "DiscussTurnCompleteEvent": ".discussion_events",
    "DiscussUserMessageData": ".discussion_events",
    "DiscussUserMessageEvent": ".discussion_events",
    "EventStream": ".discussion_events",
    "parse_discuss_event": ".discussion_events",
}


def __getattr__(name: str) -> Any:
    """Load the chat's names on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CLOSED",
    "DISCUSSION_IDLE_TTL_SECS",
    "DISCUSSION_MUTATION_REFUSAL",
    "DISCUSS_EVENT_ADAPTER",
    "DISCUSS_EVENT_BUFFER_MAX",
    "DISCUSS_EVENT_CLASSES",
    "DISCUSS_MAX_TURNS",
    "DISCUSS_MESSAGE_MAX_BYTES",
    "DISCUSS_SUBSCRIBER_QUEUE",
    "EMPTY_MESSAGE",
    "GATED_TOOLS",
    "GUIDANCE_LIMIT",
    "MAX_OPEN_DISCUSSIONS",
    "NO_TURNS_YET",
    "PREPARE_SPEC",
    "PREPARE_TOOL",
    "PROMOTE_MAX_ATTEMPTS",
    "READ_TOOLS",
    "TRANSCRIPT_MAX_TURNS",
    "DiscussAssistantDeltaData",
    "DiscussAssistantDeltaEvent",
    "DiscussAssistantMessageData",
    "DiscussAssistantMessageEvent",
    "DiscussData",
    "DiscussErrorData",
    "DiscussErrorEvent",
    "DiscussEvent",
    "DiscussEventBase",
    "DiscussEventType",
    "DiscussRefusalData",
    "DiscussRefusalEvent",
    "DiscussSubscription",
    "DiscussSubscriptionDropped",
    "DiscussTaskPreparedData",
    "DiscussTaskPreparedEvent",
    "DiscussToolCallData",
    "DiscussToolCallEvent",
    "DiscussToolResultData",
    "DiscussToolResultEvent",
    "DiscussTurnCompleteData",
    "DiscussTurnCompleteEvent",
    "DiscussUserMessageData",
    "DiscussUserMessageEvent",
    "Discussion",
    "Discussions",
    "EventStream",
    "PreparedTask",
    "no_open",
    "not_a_repo",
    "parse_discuss_event",
    "still_answering",
    "system_prompt",
    "too_large",
    "too_many_open",
]
