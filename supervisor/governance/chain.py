"""The inspector chain: every tool call of the built-in engine passes it
before it runs.

The chain is the built-in rules followed by the operator's policy files. The
first inspector that denies wins; the engine returns its reason to the model
as the tool result and writes it to the event log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from .confinement import FileConfinement
from .operator_policy import OperatorPolicy
from .shell_guard import ShellGuard
from .tool_request import ToolRequest


@dataclass(frozen=True)
class Denial:
    """Which inspector denied a call, and the sentence the model receives."""

    rule: str
    reason: str


class Inspector(Protocol):
    name: str

    def inspect(self, request: ToolRequest) -> str | None:
        """The reason to deny `request`, or None to let it through."""
        ...


class InspectorChain:
    """Every inspector sees the call; the first deny wins."""

    def __init__(self, inspectors: Iterable[Inspector]) -> None:
        self.inspectors = list(inspectors)

    def check(self, request: ToolRequest) -> Denial | None:
        for inspector in self.inspectors:
            reason = inspector.inspect(request)
            if reason:
                return Denial(rule=inspector.name, reason=reason)
        return None


def default_chain(operator: OperatorPolicy | None = None) -> InspectorChain:
    """Worktree confinement, the built-in shell rules, then the operator's
    policy when it has any rules."""
    inspectors: list[Inspector] = [FileConfinement(), ShellGuard()]
    if operator is not None and operator.rules:
        inspectors.append(operator)
    return InspectorChain(inspectors)
