"""The `report_no_change` tool: the model nominates a no-change finding
(the task's premise is wrong, the behaviour is deliberate, or it is already
satisfied). A finding must leave the tree untouched, so it is refused once
the run changed anything.

The `report_impossible` tool: the task cannot be done as specified (its tests
contradict its intent). The round ends; the operator reads the reason and
decides, instead of the model being pushed through repair rounds toward
rigging the exam. Allowed after edits (it ends in no verdict either way)."""

from __future__ import annotations

from typing import Any

from ...models import NoChangeFinding
from .results import ToolError, ToolResult, clip
from .state import ToolState, text_arg

ALREADY_EDITED = (
    "refused: you already made a successful edit in this run ({what}), so this is not a "
    "no-change finding (a finding must leave the tree untouched). Finish the change instead."
)


async def report_no_change(state: ToolState, args: dict[str, Any]) -> ToolResult:
    summary = text_arg(args, "summary").strip()
    if not summary:
        raise ToolError("the summary is empty; say why no change is needed")
    evidence = text_arg(args, "evidence", required=False).strip()
    kind = text_arg(args, "kind", required=False).strip() or "premise_wrong"
    if state.mutated:
        what = "; ".join(state.mutations[-3:]) or "a change to the worktree"
        return ToolResult(
            ALREADY_EDITED.format(what=what),
            summary="refused: the run already changed the worktree",
            ok=False,
        )
    finding = NoChangeFinding(kind=kind, summary=summary, evidence=evidence)
    return ToolResult(
        "recorded: corral ends the run and asks the operator to review the finding",
        summary=f"no-change finding ({kind}): {clip(summary, 120)}",
        nomination=finding,
    )


async def report_impossible(state: ToolState, args: dict[str, Any]) -> ToolResult:
    reason = text_arg(args, "reason").strip()
    if not reason:
        raise ToolError("the reason is empty; say what in the task contradicts what")
    return ToolResult(
        "recorded: corral ends the run and asks the operator, who revises the contract, "
        "tells you to go on, or cancels",
        summary=f"reported impossible: {clip(reason, 120)}",
        impossible=reason,
    )
