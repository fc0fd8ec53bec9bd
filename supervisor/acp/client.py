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
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from ..events import BLOCKED_BY_POLICY, BlockedData, ConversationData, EventData
from .files import Missing, Refused, WorktreeFiles
from .terminals import Terminals

MAX_SHOWN_CHARS = 4000  # a diff or a command shown with a tool call or a question

Permission = Callable[
    [ToolCallUpdate, list[PermissionOption]], Awaitable[RequestPermissionResponse]
]


def _text(block: Any) -> str:
    return block.text if isinstance(block, TextContentBlock) else f"[{getattr(block, 'type', '?')}]"


def tool_detail(call: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> str:
    """What a tool call would do, as a person reads it: its diffs (unified),
    else its command or raw input, else the text it carries."""
    parts: list[str] = []
    for item in call.content or []:
        if isinstance(item, FileEditToolCallContent):
            old = (item.old_text or "").splitlines(keepends=True)
            new = item.new_text.splitlines(keepends=True)
            parts.append(
                "".join(difflib.unified_diff(old, new, f"a{item.path}", f"b{item.path}"))
                or f"{item.path}: no change"
            )
        elif isinstance(item, ContentToolCallContent):
            parts.append(_text(item.content))
    raw = call.raw_input
    if not parts and raw is not None:
        command = raw.get("command") if isinstance(raw, dict) else None
        if isinstance(command, list):
            command = " ".join(str(w) for w in command)
        parts.append(f"$ {command}" if command else json.dumps(raw, default=str))
    shown = "\n".join(p.rstrip("\n") for p in parts if p)
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[: MAX_SHOWN_CHARS - 1] + "…"


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
    ) -> None:
        self.files = files
        self.terminals = terminals
        self.emit = emit
        self.permission = permission
        self.on_mode = on_mode
        self.on_options = on_options
        self._said: dict[str, str] = {"message": "", "thought": ""}
        # a prompt is in flight: an unfinished line waits for the rest; outside
        # a turn (an agent may stream its last words after answering the
        # prompt) each piece is journaled as it comes
        self.in_turn = False
        self.replaying = False  # a `session/load` is replaying the conversation
        self.replayed = 0  # the updates it replayed

    # -- the conversation ------------------------------------------------------------

    def flush(self, keep_partial: bool = False) -> None:
        """Journal what the agent said so far: whole lines, and (unless
        `keep_partial`) the unfinished last one."""
        for part, text in self._said.items():
            if not text:
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

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        settings = CurrentModeUpdate | ConfigOptionUpdate | AvailableCommandsUpdate
        if self.replaying and not isinstance(update, settings):
            self.replayed += 1
            return
        if isinstance(update, AgentMessageChunk | AgentThoughtChunk):
            part = "message" if isinstance(update, AgentMessageChunk) else "thought"
            self._said[part] += _text(update.content)
            self.flush(keep_partial=self.in_turn)
            return
        self.flush()
        if isinstance(update, ToolCallStart):
            self.emit(
                ConversationData(
                    part="tool_call",
                    tool_call_id=update.tool_call_id,
                    title=update.title,
                    tool_kind=update.kind,
                    status=update.status or "pending",
                    text=tool_detail(update),
                )
            )
        elif isinstance(update, ToolCallProgress):
            self.emit(
                ConversationData(
                    part="tool_update",
                    tool_call_id=update.tool_call_id,
                    title=update.title,
                    tool_kind=update.kind,
                    status=update.status,
                    text=tool_detail(update),
                )
            )
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

    # -- permission ----------------------------------------------------------------------

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate, **_: Any
    ) -> RequestPermissionResponse:
        self.flush()
        return await self.permission(tool_call, options)

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
