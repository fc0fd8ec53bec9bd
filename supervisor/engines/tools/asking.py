"""The `ask_user` tool: the run parks on the question gate until the
operator answers, the question is cleared, or the session's time runs out."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...errors import CorralError, swallowed
from ...session.questions import CLEARED, QuestionCleared
from .results import ToolError, ToolResult, clip
from .state import ToolState, text_arg

log = logging.getLogger("corral.supervisor.engines.tools.asking")


async def ask_user(state: ToolState, args: dict[str, Any]) -> ToolResult:
    prompt = text_arg(args, "prompt", "question").strip()
    if not prompt:
        raise ToolError("the question is empty")
    options = args.get("options") or []
    if not isinstance(options, list):
        raise ToolError("options must be a list of strings")
    options = [str(o) for o in options]
    if state.ask is None:
        raise ToolError("no operator can be asked in this run; decide from the task")
    left = state.seconds_left()
    try:
        if left is None:
            answer = await state.ask(prompt, options)
        else:
            answer = await asyncio.wait_for(state.ask(prompt, options), max(left, 0.01))
    except TimeoutError:  # the session's deadline, not the question window
        _withdraw(state)
        return ToolResult(
            "the session's time budget ran out before the operator answered",
            summary="no answer (time budget)",
            ok=False,
        )
    except asyncio.CancelledError:
        _withdraw(state)
        raise
    except QuestionCleared:
        return ToolResult(CLEARED, summary="question withdrawn", ok=False)
    except CorralError as exc:  # expired: the sentence goes to the model
        return ToolResult(str(exc), summary=f"no answer: {clip(str(exc), 120)}", ok=False)
    return ToolResult(answer, summary=f"answered: {clip(answer, 120)}")


def _withdraw(state: ToolState) -> None:
    with swallowed(log, "withdrawing the agent's question"):
        state.withdraw()
