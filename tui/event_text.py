"""One line of the session's event log per event (pure; no business rules)."""

from __future__ import annotations

import time

from rich.text import Text

from corral.supervisor.events import (
    FALLBACK_CAUSES,
    AgentStartedData,
    AgentStatusData,
    AuthRequiredData,
    BlockedData,
    BoundaryData,
    BudgetExhaustedData,
    CheckCompletedData,
    CoderEvent,
    ContractBaselineData,
    ContractEvaluatedData,
    ContractProposedData,
    ContractRevisionRejectedData,
    ConversationData,
    DiffReadyData,
    EngineSelectedData,
    ErrorData,
    FindingProposedData,
    IterationStartedData,
    MergeCompletedData,
    MessageData,
    ModelFallbackData,
    OperatorGuidanceData,
    PaneAnswerData,
    PlanTextData,
    SetupCompletedData,
    StateChangedData,
    ToolCallData,
    ToolData,
    ToolDeniedData,
    ToolResultData,
    UserInputExpiredData,
    UserInputRequestedData,
    WorktreeChangedData,
)
from corral.supervisor.models import ApproveResult
from corral.supervisor.states import CoderState, label
from corral.supervisor.states import said as said_state

from .rows import SOURCE_WORDS
from .safe_text import made_visible


def clip(text: object, n: int = 240) -> str:
    """One line of at most `n` characters (whitespace folded, "…" when cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def tool_call_fields(data: ToolData) -> list[tuple[str, object]]:
    """What a tool call line lists after the tool's name, in the order the
    producers always wrote them: the arguments, then the refusal; or the
    result; or the question answered in the pane."""
    match data:
        case ToolCallData(args=args):
            return list(args.items())
        case ToolDeniedData(args=args, denied=denied):
            return [*args.items(), ("denied", denied)]
        case ToolResultData(result=result, ok=ok):
            return [("result", result), ("ok", ok)]
        case PaneAnswerData(question=question, answer=answer, action=action):
            return [("question", question), ("answer", answer), ("action", action)]
    return []


BLOCKED_BY_WORDS = {
    "policy": "corral's policy",
    "operator": "the operator",
    "provider": "the agent",
}
TOOL_STATUS_STYLE = {"completed": "green", "failed": "bold red", "in_progress": "yellow"}


def conversation_line(line: Text, said: ConversationData) -> None:
    """An ACP agent's conversation: what it said in plain text, its thoughts
    dimmed, a tool call with its kind and status, a turn's end with the
    agent's stop reason as it gave it."""
    match said.part:
        case "message":
            line.append(clip(said.text, 400))
        case "thought":
            line.append("thinking: " + clip(said.text, 160), style="italic bright_black")
        case "tool_call" | "tool_update":
            status = said.status or ""
            line.append(f"tool {said.title or said.tool_call_id or ''}", style="cyan")
            if said.tool_kind:
                line.append(f" ({said.tool_kind})", style="bright_black")
            if status:
                line.append(f" {status}", style=TOOL_STATUS_STYLE.get(status, ""))
            if said.text:
                line.append(" " + clip(said.text, 160), style="bright_black")
        case "plan":
            line.append("plan: ", style="magenta").append(clip(said.text.replace("\n", "; ")))
        case "commands":
            line.append("commands: ", style="bright_black").append(
                clip(said.text.replace("\n", "; "), 160), style="bright_black"
            )
        case "mode":
            line.append(f"mode {said.text}", style="magenta")
        case "model":
            line.append(f"model {said.text}", style="magenta")
        case "config":
            line.append("config: ", style="magenta").append(clip(said.text.replace("\n", "; ")))
        case "prompt":
            line.append("prompt sent: ", style="cyan").append(clip(said.text, 160))
        case "turn_end":
            line.append(f"turn ended: {said.text}", style="bold")


def describe(event: CoderEvent) -> Text:
    stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
    line = Text(f"{stamp} ", style="bright_black")
    match event.data:
        case PlanTextData(text=text):
            line.append(clip(text))
        case ToolData() as call:
            detail = ", ".join(f"{key}={clip(v, 80)}" for key, v in tool_call_fields(call))
            line.append(f"tool {call.tool}", style="cyan").append(f" {detail}")
        case CheckCompletedData(result=r):
            ok = r.passed
            if r.cannot_run:
                line.append("CANNOT RUN ", style="bold magenta")
            else:
                line.append("PASS " if ok else "FAIL ", style="green" if ok else "bold red")
            slow = r.duration_ms >= 5000
            line.append(r.name + (f" ({r.duration_ms // 1000} s)" if slow else ""))
            if r.cannot_run:
                line.append(f": {clip(r.reason)}")
        case ContractEvaluatedData(passed=ok, results=results):
            line.append(
                "runtime verification: all checks pass" if ok else "runtime verification: RED",
                style="bold green" if ok else "bold red",
            )
            blocked = sum(1 for r in results if r.cannot_run)
            if blocked:
                line.append(f" ({blocked} cannot run here)", style="bold magenta")
        case StateChangedData(from_=src, to=dst):
            line.append(f"state {said_state(src)} → {said_state(dst)}", style="magenta")
        case IterationStartedData(n=n, max=most):
            line.append(f"iteration {n}/{most}", style="bright_black")
        case UserInputRequestedData(prompt=prompt):
            line.append("question: ", style="bold yellow").append(clip(prompt))
        case UserInputExpiredData(waited_secs=waited, still_waiting=True):
            line.append(f"question unanswered after {waited}s: still waiting", style="yellow")
        case UserInputExpiredData(waited_secs=waited):
            line.append(f"question expired after {waited}s", style="yellow")
        case OperatorGuidanceData(text=text, status="delivered"):
            line.append("guidance delivered: ", style="cyan").append(clip(text))
        case OperatorGuidanceData(text=text, status="not_delivered", reason=reason):
            line.append("guidance NOT delivered", style="bold yellow")
            line.append(f" ({reason}): " if reason else ": ", style="yellow").append(clip(text))
        case OperatorGuidanceData(text=text):
            line.append("guidance queued: ", style="cyan").append(clip(text))
        case MessageData() as message:
            _message(line, message)
        case ContractProposedData(contract=contract, revised=revised):
            verb = "revised" if revised else "proposed"
            line.append(f"contract {verb}: {len(contract.checks)} check(s)", style="yellow")
            if contract.hidden_checks:
                held = len(contract.hidden_checks)
                line.append(f" + {held} hidden (held back from the agent)", style="yellow")
            networked = [c.name for c in contract.checks if c.network]
            if networked:
                line.append(f" — network allowed for {', '.join(networked)}", style="bold yellow")
        case ContractBaselineData(results=results, gates_nothing=gates_nothing):
            blocked = sum(1 for r in results if r.cannot_run)
            red = sum(1 for r in results if not r.passed) - blocked
            line.append(f"baseline: {red} red, {len(results) - red - blocked} green")
            if blocked:
                line.append(f", {blocked} cannot run", style="bold magenta")
            if gates_nothing:
                line.append(" — every check already passes", style="bold yellow")
        case SetupCompletedData(outcome=outcome):
            if outcome.ok:
                how = "reused cached environment" if outcome.cached else "environment built"
                line.append(f"setup ({outcome.phase}): {how}")
            else:
                why = "timed out" if outcome.timed_out else f"exited {outcome.exit_code}"
                line.append(f"setup ({outcome.phase}) failed: ", style="bold magenta")
                line.append(clip(f"{outcome.failed_command} {why}"))
                tail = [t for t in outcome.output_tail.strip().splitlines() if t.strip()][-3:]
                for text in tail:
                    line.append(f"\n  │ {clip(text)}")
        case ContractRevisionRejectedData(reason=reason):
            line.append("revision not applied: ", style="yellow").append(clip(reason))
        case DiffReadyData(changed_paths=changed):
            line.append(f"diff ready: {changed} file(s)", style="bold yellow")
        case FindingProposedData(finding=finding):
            line.append("no-change finding: ", style="bold yellow")
            line.append(clip(finding.summary))
        case WorktreeChangedData(phase=phase, files=files):
            when = "during" if phase == "during_verification" else "since"
            shown = ", ".join(files[:5]) or "back as verified"
            line.append(f"worktree changed {when} verification: ", style="yellow").append(
                clip(shown)
            )
        case MergeCompletedData(branch=branch):
            line.append(f"delivered to branch {branch}", style="bold green")
        case ModelFallbackData(reason=reason, detail=detail) as hop:
            line.append(hop.sentence(), style="bold yellow")
            said = detail or ("" if reason in FALLBACK_CAUSES else reason)
            if said:
                line.append(f" — {clip(said, 160)}", style="yellow")
        case ConversationData() as said:
            conversation_line(line, said)
        case BlockedData(what=what, why=why, by=by):
            line.append(f"blocked ({BLOCKED_BY_WORDS.get(by, by)}): ", style="bold red").append(
                f"{clip(what, 120)} — {clip(why, 160)}"
            )
        case BoundaryData(message=message):
            line.append(f"refused: {clip(message)}", style="bold red")
        case ErrorData(message=message) | AuthRequiredData(message=message):
            line.append(clip(message), style="bold red")
        case BudgetExhaustedData(reason=reason):
            line.append(f"budget exhausted: {clip(reason)}", style="bold red")
        case AgentStatusData(status=status, reason=reason, source=source):
            style = {
                "waiting": "bold yellow",
                "running": "green",
                "error": "bold red",
                "auth": "bold red",
            }.get(status, "")
            shown = "signed out" if status == "auth" else status
            line.append(f"agent {shown}", style=style).append(
                f" — {clip(reason, 120)} ({SOURCE_WORDS.get(source, source)})",
                style="bright_black",
            )
        case AgentStartedData(agent=agent, pane=pane, sandbox=sandbox):
            line.append(f"started {agent} in pane {pane}", style="cyan")
            if sandbox:  # None in journals written before agents could be confined
                line.append(f" — {clip(sandbox, 160)}", style="bright_black")
        case EngineSelectedData(engine=engine, reason=reason):
            line.append(f"engine {engine}: {clip(reason)}")
        case _:  # fallbacks, a resolved finding, model usage, other external events
            line.append(f"{event.kind.value} {clip(event.data.model_dump())}")
    return made_visible(line)  # an agent's words are shown, never obeyed


def approval_outcome(result: ApproveResult) -> str:
    """The toast after approve / reject: where the change went, then what the
    supervisor adds (e.g. that later changes were not delivered)."""
    sentence = _where_it_went(result)
    if result.note:
        sentence += f" {result.note[0].upper()}{result.note[1:]}."
    return sentence


def _where_it_went(result: ApproveResult) -> str:
    part = "the approved part" if result.partial else "the change"
    if result.state is CoderState.ABANDONED:
        return "Rejected. The worktree is kept for reference."
    if result.delivery == "branch" and result.branch:
        return f"Delivered {part} to branch {result.branch} ({(result.commit or '')[:12]})."
    if result.delivery == "checkout":
        if result.already_applied:
            return f"{part.capitalize()} was already in {result.repo}."
        return f"Applied {part} to {result.repo}; HEAD and the index are unchanged."
    if result.state is CoderState.REPORTED:
        return "Finding accepted: nothing is published."
    return f"Done: {said_state(result.state)}."


MESSAGE_STYLE = {
    "queued": "cyan",
    "accepted": "green",
    "rejected": "bold red",
    "ambiguous": "bold yellow",
}


def _message(line: Text, data: MessageData) -> None:
    """`message corral-a → corral-b accepted: text` (the operator is named so)."""

    def who(sid: str) -> str:
        return sid if sid == "operator" else label(sid)

    style = MESSAGE_STYLE.get(data.status, "cyan")
    line.append(f"message {who(data.sender)} → {who(data.target)} {data.status}", style=style)
    if data.reason:
        line.append(f" ({data.reason})", style=style)
    line.append(": ").append(clip(data.text))
