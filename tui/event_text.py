"""One line of the session's event log per event (pure; no business rules)."""

from __future__ import annotations

import time

from rich.text import Text

from corral.supervisor.models import ApproveResult, CoderEvent, EventKind
from corral.supervisor.states import CoderState

K = EventKind


def clip(text: str, n: int = 240) -> str:
    """One line of at most `n` characters (whitespace folded, "…" when cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def describe(event: CoderEvent) -> Text:
    d = event.data
    stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
    line = Text(f"{stamp} ", style="bright_black")
    k = event.kind
    if k is K.PLAN_TEXT:
        line.append(clip(d.get("text", "")))
    elif k is K.TOOL_CALL:
        args = {key: v for key, v in d.items() if key != "tool"}
        detail = ", ".join(f"{key}={clip(v, 80)}" for key, v in args.items())
        line.append(f"tool {d.get('tool')}", style="cyan").append(f" {detail}")
    elif k is K.CHECK_COMPLETED:
        r = d.get("result", {})
        ok = r.get("passed")
        line.append("PASS " if ok else "FAIL ", style="green" if ok else "bold red")
        slow = int(r.get("duration_ms") or 0) >= 5000
        line.append(str(r.get("name")) + (f" ({int(r['duration_ms']) // 1000} s)" if slow else ""))
    elif k is K.CONTRACT_EVALUATED:
        ok = d.get("passed")
        line.append(
            "runtime verification: all checks pass" if ok else "runtime verification: RED",
            style="bold green" if ok else "bold red",
        )
    elif k is K.STATE_CHANGED:
        line.append(f"state {d.get('from')} → {d.get('to')}", style="magenta")
    elif k is K.ITERATION_STARTED:
        line.append(f"iteration {d.get('n')}/{d.get('max')}", style="bright_black")
    elif k is K.USER_INPUT_REQUESTED:
        line.append("question: ", style="bold yellow").append(clip(d.get("prompt", "")))
    elif k is K.USER_INPUT_EXPIRED:
        line.append(f"question expired after {d.get('waited_secs')}s", style="yellow")
    elif k is K.OPERATOR_GUIDANCE:
        line.append("guidance queued: ", style="cyan").append(clip(d.get("text", "")))
    elif k is K.CONTRACT_PROPOSED:
        checks = d.get("contract", {}).get("checks", [])
        verb = "revised" if d.get("revised") else "proposed"
        line.append(f"contract {verb}: {len(checks)} check(s)", style="yellow")
    elif k is K.CONTRACT_BASELINE:
        results = d.get("results", [])
        red = sum(1 for r in results if not r.get("passed"))
        line.append(f"baseline: {red} red, {len(results) - red} green")
        if d.get("gates_nothing"):
            line.append(" — every check already passes", style="bold yellow")
    elif k is K.CONTRACT_REVISION_REJECTED:
        line.append("revision not applied: ", style="yellow").append(clip(d.get("reason", "")))
    elif k is K.DIFF_READY:
        line.append(f"diff ready: {d.get('changed_paths')} file(s)", style="bold yellow")
    elif k is K.FINDING_PROPOSED:
        line.append("no-change finding: ", style="bold yellow")
        line.append(clip(d.get("finding", {}).get("summary", "")))
    elif k is K.WORKTREE_CHANGED:
        files = ", ".join(str(f) for f in d.get("files", [])[:5]) or "back as verified"
        when = "during" if d.get("phase") == "during_verification" else "since"
        line.append(f"worktree changed {when} verification: ", style="yellow").append(clip(files))
    elif k is K.MERGE_COMPLETED:
        line.append(f"delivered to branch {d.get('branch')}", style="bold green")
    elif k in (K.ERROR, K.AUTH_REQUIRED):
        line.append(clip(d.get("message", "")), style="bold red")
    elif k is K.BUDGET_EXHAUSTED:
        line.append(f"budget exhausted: {clip(d.get('reason', ''))}", style="bold red")
    elif k is K.AGENT_STATUS:
        status = str(d.get("status"))
        style = {"waiting": "bold yellow", "running": "green", "error": "bold red"}.get(status, "")
        line.append(f"agent {status}", style=style).append(
            f" — {clip(d.get('reason', ''), 120)} ({d.get('source')})", style="bright_black"
        )
    elif k is K.EXTERNAL_EVENT and "agent" in d:
        line.append(f"started {d.get('agent')} in pane {d.get('pane')}", style="cyan")
    elif k is K.ENGINE_SELECTED:
        line.append(f"engine {d.get('engine')}: {clip(d.get('reason', ''))}")
    else:
        line.append(f"{k.value} {clip(str(d))}")
    return line


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
    return f"Done: {result.state.value}."
