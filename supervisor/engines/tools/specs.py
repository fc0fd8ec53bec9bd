"""The tools as the model sees them: names, descriptions and JSON schemas,
in the order they are offered."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...llm.base import ToolSpec


def _schema(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "Path relative to the worktree."}

TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "read_file",
            "Read a text file of the worktree. Each line is prefixed with its number and a tab "
            "(the prefixes are not part of the file). Long files are cut; ask for a line range "
            "to read further.",
            _schema(
                {
                    "path": _PATH,
                    "start_line": {"type": "integer", "description": "First line (1-based)."},
                    "end_line": {"type": "integer", "description": "Last line (inclusive)."},
                },
                ["path"],
            ),
        ),
        ToolSpec(
            "list_dir",
            "List a directory of the worktree (directories end with '/').",
            _schema({"path": {**_PATH, "description": "Directory (default: the worktree)."}}),
        ),
        ToolSpec(
            "find_files",
            "Find files by glob among the files git sees (tracked, and untracked but not "
            "ignored). '**' crosses directories; a pattern without '/' matches file names at "
            "any depth.",
            _schema(
                {
                    "pattern": {"type": "string", "description": "Glob, e.g. 'src/**/*.py'."},
                    "path": {**_PATH, "description": "Directory to search (default: all)."},
                },
                ["pattern"],
            ),
        ),
        ToolSpec(
            "grep_files",
            "Search file contents with a regular expression (Python syntax) among the files git "
            "sees. Returns 'path:line: text' for each match, capped.",
            _schema(
                {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {**_PATH, "description": "File or directory (default: all)."},
                    "glob": {"type": "string", "description": "Only files matching this glob."},
                    "case_insensitive": {"type": "boolean"},
                },
                ["pattern"],
            ),
        ),
        ToolSpec(
            "write_file",
            "Create a file, or replace a whole file. An existing file must have been read with "
            "read_file in this run first. Prefer edit_file for changes to existing files.",
            _schema(
                {"path": _PATH, "content": {"type": "string", "description": "The full text."}},
                ["path", "content"],
            ),
        ),
        ToolSpec(
            "edit_file",
            "Replace one exact occurrence of old_text with new_text in a file. old_text must "
            "match the file exactly (whitespace included, no line-number prefixes) and occur "
            "exactly once; include surrounding lines to make it unique.",
            _schema(
                {
                    "path": _PATH,
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                },
                ["path", "old_text", "new_text"],
            ),
        ),
        ToolSpec(
            "shell",
            "Run a bash command in the worktree (non-interactive; stdin is empty). Returns the "
            "exit code and the combined output, capped. Default timeout 120 s, at most 600 s; "
            "on timeout the command and everything it started are killed.",
            _schema(
                {
                    "command": {"type": "string"},
                    "timeout_secs": {"type": "number", "description": "Default 120, max 600."},
                },
                ["command"],
            ),
        ),
        ToolSpec(
            "ask_user",
            "Ask the operator a question and wait for the answer. Use it only for decisions you "
            "cannot make from the code and the task; the run waits meanwhile.",
            _schema(
                {
                    "prompt": {"type": "string", "description": "The question."},
                    "options": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Suggested answers (optional).",
                    },
                },
                ["prompt"],
            ),
        ),
        ToolSpec(
            "report_impossible",
            "Report that the task cannot be done as specified (its tests contradict its "
            "intent), with the reason. This ends the run without verification; the operator "
            "revises the contract, tells you to go on, or cancels. Use it instead of changing "
            "tests, test configuration or special-casing inputs.",
            _schema({"reason": {"type": "string"}}, ["reason"]),
        ),
        ToolSpec(
            "report_no_change",
            "Report that the task needs no change (for example its premise is wrong, or the "
            "behaviour is deliberate), with evidence. This ends the run; a human reviews the "
            "finding. Refused once you have changed anything.",
            _schema(
                {
                    "kind": {
                        "type": "string",
                        "description": "premise_wrong, deliberate_behavior or already_satisfied.",
                    },
                    "summary": {"type": "string"},
                    "evidence": {"type": "string"},
                },
                ["summary", "evidence"],
            ),
        ),
    )
}
