"""One tool call as the inspectors see it, and which tools name a path."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_TOOLS = frozenset(
    {"read_file", "list_dir", "find_files", "grep_files", "write_file", "edit_file"}
)
WRITE_TOOLS = frozenset({"write_file", "edit_file"})


@dataclass(frozen=True)
class ToolRequest:
    """One tool call as the inspectors see it."""

    tool: str
    arguments: Mapping[str, Any]
    worktree: Path

    @property
    def command(self) -> str:
        value = self.arguments.get("command", "")
        return value if isinstance(value, str) else ""
