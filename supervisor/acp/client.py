"""corral's side of one ACP connection: what the agent tells (its
conversation) becomes typed `conversation` events; what it asks of the
client (files, terminals) is served inside the session's worktree and
sandbox, and every refusal is a typed `blocked` event (what, why, by whom);
a permission request goes to `permission` (the engine turns it into the
session's question); a new mode or new config options go to `on_mode` and
`on_options` (the engine keeps the session's `AgentOffers`).

While the agent loads a conversation (`session/load`) it replays it as
updates: the session's log already holds them, so they are counted, not
journaled a second time as if the agent said them again."""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    ContentToolCallContent,
    CreateTerminalResponse,
    CurrentModeUpdate,
    EnvVariable,
    FileEditToolCallContent,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from ..events import BLOCKED_BY_POLICY, SHELL_WRITE, BlockedData, ConversationData, EventData
from .contained import Contained
from .files import Missing, Refused, WorktreeFiles
from .terminals import Terminals

MAX_SHOWN_CHARS = 4000  # a diff or a command shown with a tool call or a question

Permission = Callable[
    [ToolCallUpdate, list[PermissionOption]], Awaitable[RequestPermissionResponse]
]
# a finished shell call of the agent's own (its command, its output, when it
# began): the writes corral's sandbox contained (`contained.contained_writes`)
ContainedCheck = Callable[[str, str, float], list[Contained]]
SHELL_KINDS = ("execute",)
DONE = ("completed", "failed")


def _text(block: Any) -> str:
    return block.text if isinstance(block, TextContentBlock) else f"[{getattr(block, 'type', '?')}]"


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a{path}", f"b{path}"
    )
    return "".join(lines) or f"{path}: no change"


def _input_detail(raw: Any) -> str:
    """A tool call's raw input as a person reads it: an edit (`file_path`
    with `old_string`/`new_string`, as Claude's Edit sends it) or a write
    (`file_path` with `content`) as a unified diff, a command as `$ …`, any
    other input as JSON (the permission question must show what it asks)."""
    if not isinstance(raw, dict):
        return json.dumps(raw, default=str)
    path = raw.get("file_path") or raw.get("path")
    if isinstance(path, str) and isinstance(raw.get("new_string"), str):
        return _diff(path, str(raw.get("old_string") or ""), raw["new_string"])
    if isinstance(path, str) and isinstance(raw.get("content"), str):
        return _diff(path, "", raw["content"])
    command = raw.get("command") or raw.get("cmd")
    if isinstance(command, list):
        command = " ".join(str(w) for w in command)
    if isinstance(command, str) and command:
        return f"$ {command}"
    return json.dumps(raw, default=str)


def shell_command(raw: Any) -> str:
    """The command line a shell tool call's raw input carries (`command`, a
    string or an argv list, or `cmd`), else ""."""
    if not isinstance(raw, dict):
        return ""
    command = raw.get("command") or raw.get("cmd")
    if isinstance(command, list):
        command = " ".join(str(w) for w in command)
    return command if isinstance(command, str) else ""


def _clip(shown: str, keep_tail: bool = False) -> str:
    if len(shown) <= MAX_SHOWN_CHARS:
        return shown
    return "…" + shown[-MAX_SHOWN_CHARS + 1 :] if keep_tail else shown[: MAX_SHOWN_CHARS - 1] + "…"


def tool_detail(call: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> str:
    """What a tool call would do, as a person reads it: its diffs (unified),
    else its command or raw input, else the text it carries."""
    parts: list[str] = []
    for item in call.content or []:
        if isinstance(item, FileEditToolCallContent):
            parts.append(_diff(item.path, item.old_text or "", item.new_text))
        elif isinstance(item, ContentToolCallContent):
            parts.append(_text(item.content))
    if not parts and call.raw_input is not None:
        parts.append(_input_detail(call.raw_input))
    return _clip("\n".join(p.rstrip("\n") for p in parts if p))


def raw_output_text(raw: Any) -> str:
    """A tool call's `rawOutput` as text: a string as it is; a shell's
    output fields (`output`, `stdout`, `stderr`, `formatted_output`) joined;
    anything else as JSON."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        fields = [
            raw[k]
            for k in ("formatted_output", "aggregated_output", "output", "stdout", "stderr")
            if isinstance(raw.get(k), str) and raw[k]
        ]
        if fields:
            return "\n".join(dict.fromkeys(fields))  # one field often repeats another
    return json.dumps(raw, default=str)


class CorralClient:
    """The ACP `Client` for one session (the SDK routes the agent's requests here)."""

    def __init__(
        self,
        files: WorktreeFiles,
        terminals: Terminals,
        emit: Callable[[EventData], None],
        permission: Permission,
        on_mode: Callable[[str], None] = lambda _mode: None,
        on_options: Callable[[list[Any]], None] = lambda _options: None,
        contained: ContainedCheck | None = None,
    ) -> None:
        self.files = files
        self.terminals = terminals
        self.emit = emit
        self.permission = permission
        self.on_mode = on_mode
        self.on_options = on_options
        self.contained = contained
        self._began: dict[str, float] = {}  # a tool call's start (wall clock)
        self._said: dict[str, str] = {"message": "", "thought": ""}
        # a prompt is in flight: an unfinished line waits for the rest; outside
        # a turn (an agent may stream its last words after answering the
        # prompt) each piece is journaled as it comes
        self.in_turn = False
        self.replaying = False  # a `session/load` is replaying the conversation
        self.replayed = 0  # the updates it replayed
        # what the agent said or did this turn (messages, thoughts, tool calls):
        # none at all is a turn its model may have refused without a reason
        self.spoken = 0
        self.turn_began = time.time()  # when the prompt in flight was sent
        self.reported: set[str] = set()  # the contained writes told this turn
        # each tool call as last described (a permission request for it may
        # carry only its raw input: the question shows the diff it concerns)
        self._calls: dict[str, ToolCallStart | ToolCallProgress] = {}

    def tool_output(self, call: ToolCallStart | ToolCallProgress) -> str:
        """What a tool call printed: its raw output, and the output of the
        terminals it shows (run by corral, so read from corral's own record)."""
        parts = [raw_output_text(call.raw_output)]
        for item in call.content or []:
            if isinstance(item, TerminalToolCallContent):
                try:
                    parts.append(self.terminals.output(item.terminal_id)[0])
                except Refused:
                    continue  # released already: its output was told before
        return _clip("\n".join(p.rstrip("\n") for p in parts if p), keep_tail=True)

    def described(self, tool_call: ToolCallUpdate) -> ToolCallUpdate:
        """`tool_call` with the content the agent gave the same call before,
        when it sends none itself (Claude asks permission with raw input)."""
        known = self._calls.get(tool_call.tool_call_id)
        if tool_call.content or known is None or not known.content:
            return tool_call
        return tool_call.model_copy(update={"content": known.content})

    # -- the conversation ------------------------------------------------------------

    def flush(self, keep_partial: bool = False, only: str | None = None) -> None:
        """Journal what the agent said so far: whole lines, and (unless
        `keep_partial`) the unfinished last one; `only` that part."""
        for part, text in self._said.items():
            if not text or (only is not None and part != only):
                continue
            if keep_partial:
                head, sep, tail = text.rpartition("\n")
                if not sep:
                    continue
                text, self._said[part] = head, tail
            else:
                self._said[part] = ""
            if text.strip():
                self.emit(ConversationData(part=part, text=text))  # type: ignore[arg-type]

    def chunk(self, part: str, said: str) -> None:
        """A piece of text the agent said (`message`) or thought (`thought`),
        straight from the wire (`StdioWire.on_chunk`)."""
        if self.replaying:
            self.replayed += 1
            return
        self._piece(part, said)

    def _piece(self, part: str, said: str) -> None:
        other = "thought" if part == "message" else "message"
        if self._said[other]:  # a thought ends when the agent speaks (and back)
            self.flush(only=other)
        self.spoken += bool(said.strip())
        self._said[part] += said
        self.flush(keep_partial=self.in_turn)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        settings = CurrentModeUpdate | ConfigOptionUpdate | AvailableCommandsUpdate
        if self.replaying and not isinstance(update, settings):
            self.replayed += 1
            return
        if isinstance(update, AgentMessageChunk | AgentThoughtChunk):
            part = "message" if isinstance(update, AgentMessageChunk) else "thought"
            self._piece(part, _text(update.content))
            return
        self.flush()
        if isinstance(update, ToolCallStart):
            self.spoken += 1
            self._calls[update.tool_call_id] = update
            self._began.setdefault(update.tool_call_id, time.time())
            self.emit(
                ConversationData(
                    part="tool_call",
                    tool_call_id=update.tool_call_id,
                    title=update.title,
                    tool_kind=update.kind,
                    status=update.status or "pending",
                    text=tool_detail(update),
                    output=self.tool_output(update) or None,
                )
            )
        elif isinstance(update, ToolCallProgress):
            started = self._calls.get(update.tool_call_id)
            if update.content and started is not None:
                self._calls[update.tool_call_id] = update
            output = self.tool_output(update)
            self.emit(
                ConversationData(
                    part="tool_update",
                    tool_call_id=update.tool_call_id,
                    title=update.title,
                    tool_kind=update.kind,
                    status=update.status,
                    text=tool_detail(update),
                    output=output or None,
                )
            )
            if update.status in DONE:
                self._check_shell(started, update, output)
        elif isinstance(update, AgentPlanUpdate):
            lines = [f"[{e.status}] {e.content}" for e in update.entries]
            self.emit(ConversationData(part="plan", text="\n".join(lines)))
        elif isinstance(update, AvailableCommandsUpdate):
            names = [f"/{c.name} — {c.description}" for c in update.available_commands]
            self.emit(ConversationData(part="commands", text="\n".join(names)))
        elif isinstance(update, CurrentModeUpdate):
            self.on_mode(update.current_mode_id)
        elif isinstance(update, ConfigOptionUpdate):
            self.on_options(list(update.config_options))

    def _check_shell(
        self, started: ToolCallStart | ToolCallProgress | None, done: ToolCallProgress, output: str
    ) -> None:
        """After one of the agent's own shell calls: each write outside the
        worktree that corral's sandbox contained is a `blocked` event (the
        agent was told it went well, or saw an error it may not explain).
        A call first seen finished (Gemini CLI asks permission, then sends
        only its end) counts from its permission request, else the turn's start."""
        began = self._began.pop(done.tool_call_id, self.turn_began)
        if self.contained is None:
            return
        kind = done.kind or (started.kind if started else None)
        command = shell_command(done.raw_input) or shell_command(
            started.raw_input if started else None
        )
        if not command and kind in SHELL_KINDS:
            command = done.title or (started.title if started else None) or ""
        if not command:
            return
        self.report_contained(self.contained(command, output, began))

    def report_contained(self, found: list[Contained]) -> None:
        """Each contained write once per turn (a terminal's end and its tool
        call's end may both see the same refusal)."""
        for write in found:
            if write.path in self.reported:
                continue
            self.reported.add(write.path)
            self.emit(
                BlockedData(what=f"{SHELL_WRITE} {write.path}", why=write.why, by=BLOCKED_BY_POLICY)
            )

    # -- permission ----------------------------------------------------------------------

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate, **_: Any
    ) -> RequestPermissionResponse:
        self.flush()
        self._began.setdefault(tool_call.tool_call_id, time.time())
        return await self.permission(self.described(tool_call), options)

    # -- files -----------------------------------------------------------------------------

    def _refuse(self, what: str, exc: Refused) -> RequestError:
        self.emit(BlockedData(what=what, why=str(exc), by=BLOCKED_BY_POLICY))
        return RequestError(-32000, f"refused by corral: {exc}")

    async def read_text_file(
        self,
        path: str,
        session_id: str,
        limit: int | None = None,
        line: int | None = None,
        **_: Any,
    ) -> ReadTextFileResponse:
        try:
            return ReadTextFileResponse(content=self.files.read(path, line, limit))
        except Missing:
            raise RequestError.resource_not_found(path) from None
        except Refused as exc:
            raise self._refuse(f"fs/read_text_file {path}", exc) from None

    async def write_text_file(
        self, content: str, path: str, session_id: str, **_: Any
    ) -> WriteTextFileResponse | None:
        try:
            self.files.write(path, content)
        except Refused as exc:
            raise self._refuse(f"fs/write_text_file {path}", exc) from None
        return WriteTextFileResponse()

    # -- terminals --------------------------------------------------------------------------

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: list[EnvVariable] | None = None,
        output_byte_limit: int | None = None,
        **_: Any,
    ) -> CreateTerminalResponse:
        variables = {v.name: v.value for v in env or []}
        try:
            terminal_id = await self.terminals.create(
                command, args, variables, cwd, output_byte_limit
            )
        except Refused as exc:
            raise self._refuse(f"terminal/create {command}", exc) from None
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> TerminalOutputResponse:
        try:
            output, truncated, code, sig = self.terminals.output(terminal_id)
        except Refused as exc:
            raise self._refuse(f"terminal/output {terminal_id}", exc) from None
        done = code is not None or sig is not None
        return TerminalOutputResponse(
            output=output,
            truncated=truncated,
            exit_status=TerminalExitStatus(exit_code=code, signal=sig) if done else None,
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> WaitForTerminalExitResponse:
        try:
            code, sig = await self.terminals.wait(terminal_id)
        except Refused as exc:
            raise self._refuse(f"terminal/wait_for_exit {terminal_id}", exc) from None
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> KillTerminalResponse | None:
        try:
            await self.terminals.kill(terminal_id)
        except Refused as exc:
            raise self._refuse(f"terminal/kill {terminal_id}", exc) from None
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> ReleaseTerminalResponse | None:
        try:
            await self.terminals.release(terminal_id)
        except Refused as exc:
            raise self._refuse(f"terminal/release {terminal_id}", exc) from None
        return ReleaseTerminalResponse()
