"""The built-in engine's tools, all confined to the session's worktree.

`read_file`, `list_dir`, `find_files`, `grep_files` read; `write_file` and
`edit_file` change files (an existing file must have been read in this run
before `write_file` replaces it; `edit_file` replaces exactly one match);
`shell` runs `bash -c` in the worktree with a scrubbed environment, in its own
process group that is killed on timeout or cancel; `ask_user` parks the run on
the question gate; `report_no_change` nominates a no-change finding (refused
once anything changed). Every call passes the inspector chain
(`supervisor.policy_rules`) first; a denial becomes the tool's result.

Outputs are capped so one call cannot flood the model's context. Errors are
results too: the model reads a sentence saying what to do instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contracts.checks import run_command
from ..errors import CorralError
from ..llm.base import ToolCall, ToolSpec
from ..models import NoChangeFinding
from ..policy_rules import InspectorChain, PathEscape, ToolRequest, confine, relative_name
from ..session.questions import CLEARED, QuestionCleared

MAX_READ_CHARS = 60_000
MAX_READ_LINES = 2_000
MAX_READ_BYTES = 8 * 1024 * 1024
MAX_LIST_ENTRIES = 500
MAX_FIND_RESULTS = 500
MAX_GREP_MATCHES = 200
MAX_GREP_LINE = 300
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_SHELL_CHARS = 16_000
SHELL_DEFAULT_TIMEOUT = 120.0
SHELL_MAX_TIMEOUT = 600.0
SHELL_MIN_TIMEOUT = 1.0

ALREADY_EDITED = (
    "refused: you already made a successful edit in this run ({what}), so this is not a "
    "no-change finding (a finding must leave the tree untouched). Finish the change instead."
)


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

MUTATING_TOOLS = frozenset({"write_file", "edit_file", "shell"})


@dataclass
class ToolResult:
    text: str  # what the model receives
    summary: str  # one short line for the event log
    ok: bool = True
    mutated: bool = False
    denied: str | None = None
    nomination: NoChangeFinding | None = None


class ToolError(Exception):
    """A sentence for the model: the call failed and nothing changed."""


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def short_args(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for the event log: long texts become their size."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in ("content", "old_text", "new_text") and isinstance(value, str):
            out[key] = f"<{len(value)} chars>"
        elif isinstance(value, str):
            out[key] = _clip(value, 200)
        elif isinstance(value, int | float | bool) or value is None:
            out[key] = value
        else:
            out[key] = _clip(str(value), 200)
    return out


def cap_output(text: str, limit: int = MAX_SHELL_CHARS) -> str:
    """The head and the tail of a long output, with the gap marked."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n…[{omitted} characters omitted]…\n{text[-tail:]}"


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob where `**` crosses directories and `*`, `?` do not."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


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
        self.root = Path(os.path.realpath(worktree))
        self.chain = chain
        self.env = env
        self.ask = ask
        self.withdraw = withdraw
        self.seconds_left = seconds_left
        self.hidden = hidden
        self.disabled = frozenset(disabled)
        self.read: set[Path] = set()
        self.mutated = False
        self.mutations: list[str] = []

    def specs(self) -> list[ToolSpec]:
        return [spec for name, spec in TOOL_SPECS.items() if name not in self.disabled]

    def rel(self, path: Path) -> str:
        return relative_name(self.root, path)

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
                summary=f"denied: {_clip(denial.reason, 160)}",
                ok=False,
                denied=denial.reason,
            )
        handler: Callable[[dict[str, Any]], Awaitable[ToolResult]] = getattr(self, f"_{name}")
        if on_start is not None:
            on_start()
        try:
            result = await handler(args)
        except (ToolError, PathEscape) as exc:
            return ToolResult(f"error: {exc}", summary=f"error: {_clip(str(exc), 160)}", ok=False)
        except OSError as exc:
            why = exc.strerror or str(exc)
            return ToolResult(f"error: {why}", summary=f"error: {_clip(why, 160)}", ok=False)
        if result.mutated:
            self.mutated = True
        return result

    # -- argument helpers ---------------------------------------------------------

    @staticmethod
    def _text(args: Mapping[str, Any], key: str, *aliases: str, required: bool = True) -> str:
        for name in (key, *aliases):
            value = args.get(name)
            if isinstance(value, str):
                return value
        if required:
            raise ToolError(f"the '{key}' argument is required (a string)")
        return ""

    @staticmethod
    def _int(args: Mapping[str, Any], key: str) -> int | None:
        value = args.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ToolError(f"'{key}' must be a whole number")
        try:
            return int(value)
        except ValueError:
            raise ToolError(f"'{key}' must be a whole number") from None

    def _path(self, args: Mapping[str, Any], default: str | None = None) -> Path:
        raw = args.get("path", default)
        if raw is None:
            raise ToolError("the 'path' argument is required (relative to the worktree)")
        return confine(self.root, raw)

    # -- reading ----------------------------------------------------------------

    async def _read_file(self, args: dict[str, Any]) -> ToolResult:
        target = self._path(args)
        rel = self.rel(target)
        if not target.exists():
            raise ToolError(f"{rel} does not exist")
        if target.is_dir():
            raise ToolError(f"{rel} is a directory; use list_dir")
        start = self._int(args, "start_line") or 1
        end = self._int(args, "end_line")
        with target.open("rb") as fh:
            data = fh.read(MAX_READ_BYTES + 1)
        self.read.add(target)
        if _is_binary(data):
            size = target.stat().st_size
            return ToolResult(f"{rel} is a binary file ({size} bytes)", summary=f"{rel}: binary")
        lines = data[:MAX_READ_BYTES].decode("utf-8", errors="replace").splitlines()
        total = len(lines)
        if total == 0:
            return ToolResult(f"{rel} is empty", summary=f"{rel}: empty")
        start = max(1, start)
        last_wanted = total if end is None else max(start, min(end, total))
        if start > total:
            raise ToolError(f"{rel} has {total} lines; start_line {start} is past the end")
        out: list[str] = []
        size = 0
        last = start - 1
        for n in range(start, last_wanted + 1):
            line = f"{n:>6}\t{lines[n - 1]}"
            if out and (size + len(line) > MAX_READ_CHARS or len(out) >= MAX_READ_LINES):
                break
            out.append(line)
            size += len(line) + 1
            last = n
        text = "\n".join(out)
        if last < total and (end is None or last < last_wanted):
            text += (
                f"\n[showing lines {start}-{last} of {total}; read again with "
                f"start_line={last + 1} for more]"
            )
        elif len(data) > MAX_READ_BYTES:
            text += f"\n[the file is larger than {MAX_READ_BYTES} bytes; the rest was not read]"
        return ToolResult(text, summary=f"{rel}: lines {start}-{last} of {total}")

    async def _list_dir(self, args: dict[str, Any]) -> ToolResult:
        target = self._path(args, ".")
        rel = self.rel(target)
        if not target.is_dir():
            raise ToolError(f"{rel} is not a directory")
        entries: list[str] = []
        for child in sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            if child.name == ".git" or self.hidden(child):
                continue
            name = " ".join(child.name.splitlines())  # a newline in a name cannot fake lines
            entries.append(name + ("/" if child.is_dir() else ""))
        shown = entries[:MAX_LIST_ENTRIES]
        text = "\n".join(shown) if shown else "(empty directory)"
        if len(entries) > len(shown):
            text += f"\n[{len(entries) - len(shown)} more entries not shown]"
        return ToolResult(text, summary=f"{rel}: {len(entries)} entries")

    def _git_files(self, base: Path) -> list[Path]:
        """Files git sees under `base` (tracked, and untracked but not ignored)."""
        try:
            argv = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
            proc = subprocess.run(
                [*argv, "--", self.rel(base)],
                cwd=self.root,
                env=self.env,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        names: list[str]
        if proc is not None and proc.returncode == 0:
            names = sorted({os.fsdecode(n) for n in proc.stdout.split(b"\x00") if n})
        else:
            names = []
            for folder, dirs, files in os.walk(base):
                dirs[:] = sorted(d for d in dirs if d != ".git")
                for f in sorted(files):
                    names.append(os.path.relpath(os.path.join(folder, f), self.root))
        out: list[Path] = []
        for name in names:
            path = self.root / name
            if not path.is_file():
                continue
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(self.root) or self.hidden(real):
                continue
            out.append(path)
        return out

    async def _find_files(self, args: dict[str, Any]) -> ToolResult:
        pattern = self._text(args, "pattern").strip().removeprefix("./")
        if not pattern:
            raise ToolError("the 'pattern' argument is empty")
        base = self._path(args, ".")
        if not base.is_dir():
            raise ToolError(f"{self.rel(base)} is not a directory")
        regex = _glob_regex(pattern)
        by_name = "/" not in pattern
        files = await asyncio.to_thread(self._git_files, base)
        hits: list[str] = []
        for path in files:
            rel_base = path.relative_to(base).as_posix() if path.is_relative_to(base) else ""
            subject = path.name if by_name else rel_base
            if regex.match(subject):
                hits.append(self.rel(path))
        shown = hits[:MAX_FIND_RESULTS]
        text = "\n".join(shown) if shown else f"no files match {pattern!r}"
        if len(hits) > len(shown):
            text += f"\n[{len(hits) - len(shown)} more matches not shown; narrow the pattern]"
        return ToolResult(text, summary=f"{pattern}: {len(hits)} file(s)")

    async def _grep_files(self, args: dict[str, Any]) -> ToolResult:
        pattern = self._text(args, "pattern")
        flags = re.IGNORECASE if args.get("case_insensitive") else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise ToolError(f"{pattern!r} is not a valid regular expression: {exc}") from None
        base = self._path(args, ".")
        glob = self._text(args, "glob", required=False).strip()
        glob_regex = _glob_regex(glob.removeprefix("./")) if glob else None

        def search() -> tuple[list[str], int]:
            files = [base] if base.is_file() else self._git_files(base)
            hits: list[str] = []
            more = 0
            for path in files:
                if glob_regex is not None:
                    subject = path.name if "/" not in glob else self.rel(path)
                    if not glob_regex.match(subject):
                        continue
                try:
                    if path.stat().st_size > MAX_GREP_FILE_BYTES:
                        continue
                    data = path.read_bytes()
                except OSError:
                    continue
                if _is_binary(data):
                    continue
                rel = self.rel(path)
                for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                    if regex.search(line):
                        if len(hits) >= MAX_GREP_MATCHES:
                            more += 1
                            continue
                        shown = line if len(line) <= MAX_GREP_LINE else line[:MAX_GREP_LINE] + "…"
                        hits.append(f"{rel}:{n}: {shown}")
            return hits, more

        if not base.exists():
            raise ToolError(f"{self.rel(base)} does not exist")
        hits, more = await asyncio.to_thread(search)
        text = "\n".join(hits) if hits else f"no matches for {pattern!r}"
        if more:
            text += f"\n[{more} more matches not shown; narrow the pattern or the path]"
        return ToolResult(text, summary=f"{_clip(pattern, 60)}: {len(hits) + more} match(es)")

    # -- changing -----------------------------------------------------------------

    async def _write_file(self, args: dict[str, Any]) -> ToolResult:
        target = self._path(args)
        content = self._text(args, "content")
        rel = self.rel(target)
        existed = target.exists()
        if existed and target.is_dir():
            raise ToolError(f"{rel} is a directory")
        if existed and target not in self.read:
            raise ToolError(
                f"{rel} already exists and you have not read it in this run; read_file it "
                "first (or use edit_file) so you do not overwrite what you have not seen"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        target.write_bytes(data)
        self.read.add(target)
        verb = "replaced" if existed else "created"
        self.mutations.append(f"{verb} {rel}")
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        return ToolResult(
            f"{verb} {rel} ({lines} lines, {len(data)} bytes)",
            summary=f"{verb} {rel} ({lines} lines)",
            mutated=True,
        )

    async def _edit_file(self, args: dict[str, Any]) -> ToolResult:
        target = self._path(args)
        old = self._text(args, "old_text", "old_string")
        new = self._text(args, "new_text", "new_string")
        rel = self.rel(target)
        if not target.is_file():
            raise ToolError(f"{rel} does not exist; use write_file to create it")
        if not old:
            raise ToolError("old_text is empty; give the exact text to replace")
        if old == new:
            raise ToolError("old_text and new_text are the same; nothing would change")
        try:
            content = target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel} is not UTF-8 text; edit_file cannot change it") from None
        count = content.count(old)
        if count == 0:
            raise ToolError(
                f"old_text was not found in {rel}; read_file it and copy the exact text "
                "(whitespace included, without the line-number prefixes)"
            )
        if count > 1:
            raise ToolError(
                f"old_text is not unique: it appears {count} times in {rel}; include more "
                "surrounding lines so it matches exactly once"
            )
        at = content.index(old)
        line = content.count("\n", 0, at) + 1
        target.write_bytes(content.replace(old, new, 1).encode("utf-8"))
        self.read.add(target)
        self.mutations.append(f"edited {rel}")
        removed = old.count("\n") + 1
        added = new.count("\n") + 1 if new else 0
        return ToolResult(
            f"edited {rel} at line {line}: replaced {removed} line(s) with {added} line(s)",
            summary=f"edited {rel} at line {line} (-{removed} +{added})",
            mutated=True,
        )

    def _fingerprint(self) -> str | None:
        """HEAD and `git status` of the worktree (None when git cannot tell)."""
        try:
            head = subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=self.root,
                env=self.env,
                capture_output=True,
                timeout=60,
                check=False,
            )
            status = subprocess.run(
                ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                cwd=self.root,
                env=self.env,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if head.returncode != 0 or status.returncode != 0:
            return None
        return os.fsdecode(head.stdout + b"\n" + status.stdout)

    async def _shell(self, args: dict[str, Any]) -> ToolResult:
        command = self._text(args, "command")
        if not command.strip():
            raise ToolError("the command is empty")
        raw = args.get("timeout_secs", args.get("timeout"))
        try:
            timeout = SHELL_DEFAULT_TIMEOUT if raw is None else float(raw)
        except (TypeError, ValueError):
            raise ToolError("timeout_secs must be a number of seconds") from None
        timeout = min(max(timeout, SHELL_MIN_TIMEOUT), SHELL_MAX_TIMEOUT)
        left = self.seconds_left()
        if left is not None:
            timeout = max(0.1, min(timeout, left))
        before = await asyncio.to_thread(self._fingerprint)
        code, output, timed_out = await run_command(command, self.root, timeout, self.env)
        after = await asyncio.to_thread(self._fingerprint)
        changed = before is not None and after is not None and before != after
        if changed:
            self.mutations.append(f"`{_clip(command, 80)}` changed the worktree")
        lines = output.count("\n") + (1 if output and not output.endswith("\n") else 0)
        if timed_out:
            head = (
                f"timed out after {timeout:g}s; the command and everything it started were killed"
            )
            summary = f"timed out after {timeout:g}s"
        else:
            head = f"exit code {code}"
            summary = f"exit {code}, {lines} line(s) of output"
        body = cap_output(output) if output.strip() else "(no output)"
        return ToolResult(f"{head}\n{body}", summary=summary, ok=not timed_out, mutated=changed)

    # -- the operator and the finding -----------------------------------------------

    async def _ask_user(self, args: dict[str, Any]) -> ToolResult:
        prompt = self._text(args, "prompt", "question").strip()
        if not prompt:
            raise ToolError("the question is empty")
        options = args.get("options") or []
        if not isinstance(options, list):
            raise ToolError("options must be a list of strings")
        options = [str(o) for o in options]
        if self.ask is None:
            raise ToolError("no operator can be asked in this run; decide from the task")
        left = self.seconds_left()
        try:
            if left is None:
                answer = await self.ask(prompt, options)
            else:
                answer = await asyncio.wait_for(self.ask(prompt, options), max(left, 0.01))
        except TimeoutError:  # the session's deadline, not the question window
            self._withdraw()
            return ToolResult(
                "the session's time budget ran out before the operator answered",
                summary="no answer (time budget)",
                ok=False,
            )
        except asyncio.CancelledError:
            self._withdraw()
            raise
        except QuestionCleared:
            return ToolResult(CLEARED, summary="question withdrawn", ok=False)
        except CorralError as exc:  # expired: the sentence goes to the model
            return ToolResult(str(exc), summary=f"no answer: {_clip(str(exc), 120)}", ok=False)
        return ToolResult(answer, summary=f"answered: {_clip(answer, 120)}")

    def _withdraw(self) -> None:
        with contextlib.suppress(Exception):
            self.withdraw()

    async def _report_no_change(self, args: dict[str, Any]) -> ToolResult:
        summary = self._text(args, "summary").strip()
        if not summary:
            raise ToolError("the summary is empty; say why no change is needed")
        evidence = self._text(args, "evidence", required=False).strip()
        kind = self._text(args, "kind", required=False).strip() or "premise_wrong"
        if self.mutated:
            what = "; ".join(self.mutations[-3:]) or "a change to the worktree"
            return ToolResult(
                ALREADY_EDITED.format(what=what),
                summary="refused: the run already changed the worktree",
                ok=False,
            )
        finding = NoChangeFinding(kind=kind, summary=summary, evidence=evidence)
        return ToolResult(
            "recorded: corral ends the run and asks the operator to review the finding",
            summary=f"no-change finding ({kind}): {_clip(summary, 120)}",
            nomination=finding,
        )
