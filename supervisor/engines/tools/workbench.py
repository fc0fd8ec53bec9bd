"""The `Workbench`: the tools of one engine run over one worktree. Every call
passes the inspector chain first; a denial, an unknown tool and a failure all
become results the model reads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ...governance.chain import InspectorChain
from ...governance.confinement import PathEscape
from ...governance.tool_request import ToolRequest
from ...llm.base import ToolCall, ToolSpec
from .asking import ask_user
from .files import edit_file, list_dir, read_file, write_file
from .finding import report_impossible, report_no_change
from .results import ToolError, ToolResult, clip
from .search import find_files, grep_files
from .shell import shell
from .specs import TOOL_SPECS
from .state import ToolState

Handler = Callable[[ToolState, dict[str, Any]], Awaitable[ToolResult]]

HANDLERS: dict[str, Handler] = {
    "read_file": read_file,
    "list_dir": list_dir,
    "find_files": find_files,
    "grep_files": grep_files,
    "write_file": write_file,
    "edit_file": edit_file,
    "shell": shell,
    "ask_user": ask_user,
    "report_no_change": report_no_change,
    "report_impossible": report_impossible,
}


class Workbench:
    """The tools of one engine run over one worktree."""

    def __init__(
        self,
        worktree: Path,
        *,
        chain: InspectorChain,
        env: dict[str, str],
        ask: Callable[[str, list[str]], Awaitable[str]] | None = None,
        withdraw: Callable[[], None] = lambda: None,
        seconds_left: Callable[[], float | None] = lambda: None,
        hidden: Callable[[Path], bool] = lambda _path: False,
        disabled: Iterable[str] = (),
    ) -> None:
        self.state = ToolState(
            root=worktree,
            env=env,
            ask=ask,
            withdraw=withdraw,
            seconds_left=seconds_left,
            hidden=hidden,
        )
        self.root = self.state.root
        self.chain = chain
        self.disabled = frozenset(disabled)

    def specs(self) -> list[ToolSpec]:
        return [spec for name, spec in TOOL_SPECS.items() if name not in self.disabled]

    async def call(
        self, call: ToolCall, *, on_start: Callable[[], None] | None = None
    ) -> ToolResult:
        """Inspect, then run the call (`on_start` fires once it is allowed)."""
        name = call.name
        args = dict(call.arguments) if isinstance(call.arguments, Mapping) else {}
        if name not in TOOL_SPECS or name in self.disabled:
            offered = ", ".join(spec.name for spec in self.specs())
            return ToolResult(
                f"error: there is no tool named {name!r}; the tools are: {offered}",
                summary="unknown tool",
                ok=False,
            )
        denial = self.chain.check(ToolRequest(name, args, self.root))
        if denial is not None:
            return ToolResult(
                f"denied by corral policy ({denial.rule}): {denial.reason}",
                summary=f"denied: {clip(denial.reason, 160)}",
                ok=False,
                denied=denial.reason,
            )
        handler = HANDLERS[name]
        if on_start is not None:
            on_start()
        try:
            result = await handler(self.state, args)
        except (ToolError, PathEscape) as exc:
            return ToolResult(f"error: {exc}", summary=f"error: {clip(str(exc), 160)}", ok=False)
        except OSError as exc:
            why = exc.strerror or str(exc)
            return ToolResult(f"error: {why}", summary=f"error: {clip(why, 160)}", ok=False)
        if result.mutated:
            self.state.mutated = True
        return result
