"""One open discussion: turns, the read-only tool gate, promote, persistence."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..contracts.model_drafter import extract_json
from ..engines.tools.results import short_args
from ..engines.tools.specs import TOOL_SPECS
from ..engines.tools.workbench import Workbench
from ..errors import CorralError
from ..governance.chain import default_chain
from ..governance.env_scrub import scrubbed_env
from ..governance.operator_policy import OperatorPolicy
from ..governance.policy_files import PolicyFileError, load_operator_policy
from ..governance.tool_request import ToolRequest
from ..llm.base import Message, ModelError, ModelProvider, ToolCall, ToolSpec
from ..llm.config import NO_MODEL
from ..models import ContextPack
from .common import (
    CLOSED,
    DISCUSS_MAX_TURNS,
    DISCUSS_MESSAGE_MAX_BYTES,
    DISCUSSION_MUTATION_REFUSAL,
    DISTILL_MAX_TOKENS,
    EMPTY_MESSAGE,
    GATED_TOOLS,
    NO_TURNS_YET,
    PREPARE_SPEC,
    PREPARE_TOOL,
    PROMOTE_MAX_ATTEMPTS,
    READ_TOOLS,
    REPLY_MAX_TOKENS,
    TRANSCRIPT_MAX_TURNS,
    PreparedTask,
    _clean_constraints,
    _message_from_json,
    _message_to_json,
    still_answering,
    system_prompt,
    too_large,
)
from .discussion_events import (
    DiscussAssistantDeltaData,
    DiscussAssistantMessageData,
    DiscussErrorData,
    DiscussRefusalData,
    DiscussSubscription,
    DiscussTaskPreparedData,
    DiscussToolCallData,
    DiscussToolResultData,
    DiscussTurnCompleteData,
    DiscussUserMessageData,
    EventStream,
)
from .linked_runs import DiscussionRuns, coding_context
from .model_pin import check_change, check_model, normalize, pinned

# --- one discussion ----------------------------------------------------------------


def _task_prepared(
    source: Literal["model", "operator", "promote", "saved"],
    task: PreparedTask,
    *,
    replayed: bool = False,
) -> DiscussTaskPreparedData:
    return DiscussTaskPreparedData(
        source=source, intent=task.intent, constraints=list(task.constraints), replayed=replayed
    )


class Discussion:
    """One open discussion. Created by `Discussions.start` / `resume`."""

    def __init__(
        self,
        *,
        discussion_id: str,
        repo: Path,
        provider: ModelProvider | None,
        store_dir: Path,
        repo_summary: str,
        context: str,
        created_at: float,
        clock: Callable[[], float] = time.time,
        global_policy: Path | None = None,
    ) -> None:
        self.id = discussion_id
        self.repo = repo
        self.provider = provider
        self.store_dir = store_dir
        self.repo_summary = repo_summary
        self.project_context = context
        self.created_at = created_at
        self.updated_at = created_at
        self._clock = clock
        self.last_active = clock()
        self.events = EventStream(discussion_id, clock=clock)
        self.messages: list[Message] = [
            Message("system", system_prompt(repo, repo_summary, context))
        ]
        self.transcript: list[tuple[str, str]] = []  # (Operator|Assistant, text)
        self.prepared_task: PreparedTask | None = None
        self.model: str | None = None  # the pinned model (None: the default order)
        self.turns = 0
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        self._answering = False
        self._cached_constraints: list[str] | None = None
        self.global_policy = global_policy  # None: ~/.config/corral/policy.toml
        self.policy = OperatorPolicy()
        self.workbench = self._workbench(self.policy)

    def _workbench(self, policy: OperatorPolicy) -> Workbench:
        """The read tools, behind the built-in rules and the operator's policy."""
        root = self.repo
        return Workbench(
            root,
            chain=default_chain(policy),
            env=scrubbed_env(),
            hidden=lambda path: policy.path_denied(path, root) is not None,
            disabled=[name for name in TOOL_SPECS if name not in READ_TOOLS]
            + list(policy.denied_tools),
        )

    def load_policy(self) -> OperatorPolicy:
        """Read the operator's policy files (global, and the repo's
        `.corral/policies/*.toml`) afresh, as a run does when it starts: a
        discussion is held to the same deny rules as the work it prepares.
        Raises `PolicyFileError` naming a file that does not parse."""
        self.policy = load_operator_policy(self.repo, self.global_policy)
        self.workbench = self._workbench(self.policy)
        return self.policy

    # -- state ----------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.store_dir / f"{self.id}.json"

    @property
    def answering(self) -> bool:
        return self._answering

    def tools(self) -> list[ToolSpec]:
        """The advertised tools: the read tools and, unless the operator's
        policy denies it, `prepare_coding_task`."""
        prepare = [] if PREPARE_TOOL in self.policy.denied_tools else [PREPARE_SPEC]
        return [*self.workbench.specs(), *prepare]

    def touch(self) -> None:
        self.last_active = self._clock()

    def idle_secs(self) -> float:
        return self._clock() - self.last_active

    def subscribe(self, from_seq: int = 0) -> DiscussSubscription:
        self.touch()
        return self.events.subscribe(from_seq)

    def _record(self, role: str, text: str) -> None:
        if text.strip():
            self.transcript.append((role, text))
            del self.transcript[:-TRANSCRIPT_MAX_TURNS]

    # -- a turn -------------------------------------------------------------------

    def choose_model(self, name: str | None) -> None:
        """Pin a model (`auto` or blank clears the pin); saved at once. Refused
        while answering and while a run started from here is unfinished."""
        new = normalize(name)
        if new == self.model:
            return
        if self._answering:
            raise CorralError(still_answering(self.id))
        check_change(self.linked_sessions)
        if new is not None:
            check_model(self.provider, new)
        self.model = new
        self.updated_at = self._clock()
        self.save()

    @property
    def model_provider(self) -> ModelProvider | None:
        """What this discussion's requests go to (its pin, strictly)."""
        return pinned(self.provider, self.model)

    async def send(self, text: str) -> int:
        """Dispatch one operator message and return the seq of its
        `user_message`; the reply runs in the background (`wait()` for it)."""
        if self.closed:
            raise CorralError(CLOSED)
        if self.provider is None:
            raise CorralError(NO_MODEL)
        if not text.strip():
            raise CorralError(EMPTY_MESSAGE)
        size = len(text.encode("utf-8"))
        if size > DISCUSS_MESSAGE_MAX_BYTES:
            raise CorralError(too_large(size))
        if self._answering:
            raise CorralError(still_answering(self.id))
        try:
            self.load_policy()
        except PolicyFileError as exc:
            raise CorralError(
                f"{exc} — fix or remove that policy file, then send the message again"
            ) from None
        # No await from here to create_task: the latch, the first event and
        # the dispatch are one step of the event loop.
        self._answering = True
        self.touch()
        self._record("Operator", text)
        self.prepared_task = None
        self._cached_constraints = None
        event = self.events.emit(DiscussUserMessageData(text=text))
        self._task = asyncio.get_running_loop().create_task(self._run_turn(text))
        return event.seq

    async def wait(self) -> None:
        """Until the current turn (if any) has ended."""
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    def cancel(self) -> bool:
        """Stop the current turn; it still ends with `turn_complete`."""
        task = self._task
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def _run_turn(self, text: str) -> None:
        provider = self.model_provider
        assert provider is not None
        cancelled = False
        proposal: PreparedTask | None = None
        try:
            asked = len(self.messages)
            self.messages.append(Message("user", text))
            tools = self.tools()
            # the runs started from here as they stand now, beside this message
            # only: read afresh each turn, never kept in the record
            context = coding_context(self.linked_sessions)
            answered = False
            for _ in range(DISCUSS_MAX_TURNS):
                sent = list(self.messages)
                if context:
                    sent[asked] = Message("user", f"{context}\n\n{text}")
                turn = await provider.complete(
                    sent,
                    tools,
                    max_tokens=REPLY_MAX_TOKENS,
                    on_delta=self._on_delta,
                )
                self.messages.append(Message("assistant", turn.text, tool_calls=turn.tool_calls))
                if not turn.tool_calls:
                    self._record("Assistant", turn.text)
                    self.turns += 1
                    self.events.emit(DiscussAssistantMessageData(text=turn.text))
                    answered = True
                    break
                for call in turn.tool_calls:
                    result, prepared = await self._run_tool(call)
                    if prepared is not None:
                        proposal = prepared
                    self.messages.append(
                        Message("tool", result, tool_call_id=call.id, name=call.name)
                    )
            if not answered:
                self.events.emit(
                    DiscussErrorData(
                        message=(
                            f"the model used {DISCUSS_MAX_TURNS} rounds of tools without a "
                            "final answer; ask a narrower question"
                        )
                    )
                )
            if proposal is not None:
                self.prepared_task = proposal
                self.events.emit(_task_prepared("model", proposal))
        except asyncio.CancelledError:
            cancelled = True
        except ModelError as exc:
            self.events.emit(DiscussErrorData(message=str(exc), kind=exc.kind))
        except Exception as exc:  # a turn never dies silently
            self.events.emit(DiscussErrorData(message=f"discussion turn failed: {exc}"))
        finally:
            self._repair_thread()
            self._answering = False
            self.touch()
            self.updated_at = self._clock()
            try:
                self.save()
            except OSError as exc:
                self.events.emit(DiscussErrorData(message=f"could not save the discussion: {exc}"))
            self.events.emit(DiscussTurnCompleteData(cancelled=cancelled))

    def _on_delta(self, piece: str) -> None:
        if piece:
            self.events.emit(DiscussAssistantDeltaData(text=piece))

    def _repair_thread(self) -> None:
        """Give every tool call a result (a cancelled turn can leave some
        unanswered), so the thread stays valid for the next request."""
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        repaired: list[Message] = []
        for m in self.messages:
            repaired.append(m)
            for call in m.tool_calls:
                if call.id not in answered:
                    repaired.append(
                        Message(
                            "tool",
                            "not run: the turn was stopped",
                            tool_call_id=call.id,
                            name=call.name,
                        )
                    )
        self.messages = repaired

    async def _run_tool(self, call: ToolCall) -> tuple[str, PreparedTask | None]:
        """The text the model receives, and a proposal if this was
        `prepare_coding_task`. Gated tools are refused before anything runs."""
        args = call.arguments if isinstance(call.arguments, dict) else {}
        self.events.emit(DiscussToolCallData(name=call.name, args=short_args(call.name, args)))
        if call.name in GATED_TOOLS:
            self.events.emit(DiscussRefusalData(tool=call.name, reason=DISCUSSION_MUTATION_REFUSAL))
            self.events.emit(
                DiscussToolResultData(
                    name=call.name, ok=False, summary="refused: this discussion is read-only"
                )
            )
            return DISCUSSION_MUTATION_REFUSAL, None
        if call.name == PREPARE_TOOL:
            denied = self.policy.inspect(ToolRequest(call.name, args, self.repo))
            if denied is not None:
                self.events.emit(DiscussRefusalData(tool=call.name, reason=denied))
                self.events.emit(
                    DiscussToolResultData(name=call.name, ok=False, summary=f"denied: {denied}")
                )
                return (
                    f"denied by corral policy (operator policy): {denied}. No task was "
                    "prepared; describe the change in your answer instead."
                ), None
            intent = args.get("intent")
            if not isinstance(intent, str) or not intent.strip():
                msg = "error: prepare_coding_task needs a non-empty 'intent' string"
                self.events.emit(DiscussToolResultData(name=call.name, ok=False, summary=msg))
                return msg, None
            task = PreparedTask(intent.strip(), _clean_constraints(args.get("constraints")))
            self.events.emit(
                DiscussToolResultData(name=call.name, ok=True, summary="task prepared for review")
            )
            return (
                "Prepared the task for the operator to review and edit. Nothing has started "
                "and no file changed; the operator decides whether to start coding.",
                task,
            )
        result = await self.workbench.call(call)
        if result.denied is not None or result.summary.startswith("error: path "):
            self.events.emit(
                DiscussRefusalData(tool=call.name, reason=result.denied or result.summary)
            )
        self.events.emit(
            DiscussToolResultData(name=call.name, ok=result.ok, summary=result.summary)
        )
        return result.text, None

    # -- the prepared task ------------------------------------------------------------

    def edit_prepared(self, intent: str, constraints: list[str]) -> PreparedTask:
        """The operator's edit of the proposal (saved)."""
        if not isinstance(intent, str) or not intent.strip():
            raise CorralError("the intent is empty — say what the coding task should do")
        self.prepared_task = PreparedTask(intent.strip(), _clean_constraints(list(constraints)))
        self._cached_constraints = None
        self.updated_at = self._clock()
        self.save()
        self.events.emit(_task_prepared("operator", self.prepared_task))
        return self.prepared_task

    def distill_transcript(self) -> str:
        return "\n\n".join(f"{role}: {text}" for role, text in self.transcript)

    async def _distill(self) -> PreparedTask:
        if self.provider is None:
            raise CorralError(NO_MODEL)
        prompt = (
            "A developer has been discussing a change to a repository with an assistant. "
            "Distill the discussion into ONE actionable coding intent plus the constraints "
            "they agreed on.\n\n"
            f"REPOSITORY\n{self.repo_summary}\n{self.project_context}\n\n"
            f"DISCUSSION\n{self.distill_transcript()}\n\n"
            "Return ONLY a JSON object, no prose and no code fences: "
            '{"proposed_intent": "one paragraph, imperative, what to change and why", '
            '"constraints": ["..."]}\n'
            "The intent is an INSTRUCTION; never quote the transcript back. Include only "
            "constraints actually agreed in the discussion; otherwise return an empty array."
        )
        last_err = "no attempt was made"
        provider = self.model_provider
        assert provider is not None
        for _ in range(PROMOTE_MAX_ATTEMPTS):
            try:
                turn = await provider.complete(
                    [Message("user", prompt)],
                    (),
                    max_tokens=DISTILL_MAX_TOKENS,
                    temperature=0.0,
                )
            except ModelError as exc:
                last_err = f"generation failed: {exc}"
                continue
            data, problem = extract_json(turn.text)
            if problem is not None or not isinstance(data, dict):
                last_err = f"output did not parse: {problem or 'not a JSON object'}"
                continue
            intent = data.get("proposed_intent")
            if not isinstance(intent, str) or not intent.strip():
                last_err = "the model returned no proposed_intent"
                continue
            return PreparedTask(intent.strip(), _clean_constraints(data.get("constraints")))
        raise CorralError(
            f"could not distill this discussion into an intent after {PROMOTE_MAX_ATTEMPTS} "
            f"attempts: {last_err}"
        )

    async def promote(self) -> PreparedTask:
        """Distil the conversation into an intent + constraints (stored as the
        prepared task, editable). Starts nothing."""
        if self.closed:
            raise CorralError(CLOSED)
        if self.provider is None:
            raise CorralError(NO_MODEL)
        if self._answering:
            raise CorralError(f"{self.id} is still answering — try again in a moment")
        if not self.transcript:
            raise CorralError(NO_TURNS_YET)
        task = await self._distill()
        self.prepared_task = task
        self._cached_constraints = None
        self.updated_at = self._clock()
        self.touch()
        self.save()
        self.events.emit(_task_prepared("promote", task))
        return task

    async def constraints_for_start(self) -> list[str]:
        """The constraints a session started from this discussion must respect."""
        if self._answering:
            raise CorralError(
                f"{self.id} is still answering — wait for `turn_complete` before starting a "
                "run from it, or the constraints would be distilled from a question with no "
                "answer beside it"
            )
        if self.prepared_task is not None:
            return list(self.prepared_task.constraints)
        if self._cached_constraints is not None:
            return list(self._cached_constraints)
        if not self.transcript:
            return []
        try:
            task = await self._distill()
        except CorralError as exc:
            raise CorralError(
                f"Could not carry the conversation's requirements into this task: {exc}. No "
                "task was started. Retry when model access is available."
            ) from exc
        self._cached_constraints = list(task.constraints)
        return list(task.constraints)

    # -- linked sessions ------------------------------------------------------------------

    @property
    def linked_sessions(self) -> list[dict[str, Any]]:
        """The coding runs started from this discussion, as the supervisor
        recorded them (state, delivered commit and destination), oldest first.
        The supervisor, not this object, writes them: it links a run when it
        starts it and records its outcome when it finishes."""
        try:
            return DiscussionRuns(self.store_dir).runs(self.id)
        except CorralError:
            return []

    def link_session(self, session_id: str) -> None:
        """A session was started from this discussion: that consumes the
        prepared task (the supervisor already linked `session_id`)."""
        self.prepared_task = None
        self._cached_constraints = None
        self.updated_at = self._clock()
        self.save()

    # -- persistence ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The saved record; `model` only when pinned, so an unpinned
        discussion is saved exactly as before pins existed."""
        data = {
            "version": 1,
            "discussion_id": self.id,
            "repo": str(self.repo),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "turns": self.turns,
            "messages": [_message_to_json(m) for m in self.messages if m.role != "system"],
            "transcript": [[role, text] for role, text in self.transcript],
            "prepared_task": self.prepared_task.to_dict() if self.prepared_task else None,
        }
        if self.model is not None:
            data["model"] = self.model
        return data

    def load_context(self, pack: ContextPack) -> None:
        """Begin with another session's context pack: given to the model as
        quoted history before the developer's first message (and kept with the
        discussion's saved messages)."""
        self.messages.append(Message("user", pack.as_prompt()))
        self.transcript.append(("Operator", f"(loaded the context of {pack.source_session})"))
        self.save()

    def save(self) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def _restore(self, data: dict[str, Any]) -> None:
        self.messages = [self.messages[0]] + [
            _message_from_json(row) for row in data.get("messages") or ()
        ]
        self.transcript = [(str(r), str(t)) for r, t in data.get("transcript") or ()]
        self.turns = int(data.get("turns") or 0)
        model = data.get("model")
        self.model = model if isinstance(model, str) and model else None
        self.updated_at = float(data.get("updated_at") or self.created_at)
        task = data.get("prepared_task")
        if isinstance(task, dict) and isinstance(task.get("intent"), str):
            self.prepared_task = PreparedTask(
                task["intent"], _clean_constraints(task.get("constraints"))
            )
        self._replay()

    def _replay(self) -> None:
        """The saved history as events; no tool is run again and no result is
        invented."""
        emit = self.events.emit
        for m in self.messages:
            if m.role == "user" and m.content.strip():
                emit(DiscussUserMessageData(text=m.content, replayed=True))
            elif m.role == "assistant":
                for call in m.tool_calls:
                    args = short_args(call.name, call.arguments)
                    emit(DiscussToolCallData(name=call.name, args=args, replayed=True))
                if m.content.strip():
                    said = (
                        DiscussAssistantDeltaData if m.tool_calls else DiscussAssistantMessageData
                    )
                    emit(said(text=m.content, replayed=True))
        if self.prepared_task is not None:
            emit(_task_prepared("saved", self.prepared_task, replayed=True))

    def _shutdown(self) -> None:
        self.closed = True
        self.cancel()
        self.events.close_all()

    def summary(self) -> dict[str, Any]:
        return {
            "discussion_id": self.id,
            "repo": str(self.repo),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "turns": self.turns,
            "open": not self.closed,
            "answering": self._answering,
            "prepared": self.prepared_task is not None,
            "model": self.model,
        }
