"""An ACP session's typed events folded into the blocks a person reads: what
the agent said (one block per message, its streamed pieces joined), what it
thought (one block per thought), each tool call (its updates folded into
it: title, status, the diff or command, the output), its plan, the prompts
corral sent, the ends of turns, refusals and setting changes; and the
commands it offers (for the prompt's completions).

Pure and incremental: `add` takes one event and says which block changed
or was added, so a view of thousands of events is built in one pass and a
streaming one touches only its last block. All the text here is the
agent's: the view decides how to show it safely."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from corral.supervisor.events import BlockedData, CoderEvent, ConversationData

Kind = Literal["message", "thought", "tool", "plan", "prompt", "turn_end", "note"]

TEXT_LIMIT = 200_000  # one block keeps this much of what an agent streams into it


@dataclass
class Block:
    """One thing shown: `kind`, its `text` (a message's markdown, a
    thought, a tool call's diff or command, a plan's entries one a line,
    a note), and for a tool call its `title`, `tool_kind`, `status` and
    `output`. `version` grows with each change (a view redraws on it)."""

    kind: Kind
    text: str = ""
    title: str = ""
    tool_kind: str = ""
    status: str = ""
    output: str = ""
    tool_call_id: str = ""
    version: int = 0

    def searchable(self) -> str:
        return "\n".join((self.title, self.text, self.output)).casefold()


@dataclass(frozen=True)
class Command:
    """A command the agent offers (`/name`), with what it says it does."""

    name: str
    description: str


@dataclass
class Conversation:
    blocks: list[Block] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    _tools: dict[str, int] = field(default_factory=dict)
    _plan_at: int | None = None  # the plan block of the turn in progress

    def add(self, event: CoderEvent) -> int | None:
        """Fold in one event; the index of the block it added or changed
        (None: it shows no block, e.g. the offered commands)."""
        data = event.data
        if isinstance(data, BlockedData):
            return self._new(Block("note", text=f"blocked ({data.by}): {data.what} — {data.why}"))
        if not isinstance(data, ConversationData):
            return None
        part = data.part
        if part in ("message", "thought"):
            last = self.blocks[-1] if self.blocks else None
            if last is not None and last.kind == part:  # the next piece of the same one
                joined = f"{last.text}\n{data.text}" if last.text else data.text
                last.text = joined[-TEXT_LIMIT:]
                last.version += 1
                return len(self.blocks) - 1
            return self._new(Block(part, text=data.text))
        if part in ("tool_call", "tool_update"):
            return self._tool(data)
        if part == "plan":
            return self._plan(data.text)
        if part == "prompt":
            self._plan_at = None  # a new turn: its plan is a new block
            return self._new(Block("prompt", text=data.text))
        if part == "turn_end":
            return self._new(Block("turn_end", text=data.text))
        if part == "commands":
            self.commands = parse_commands(data.text)
            return None
        if part in ("mode", "model"):
            return self._new(Block("note", text=f"{part}: {data.text}"))
        if part == "config":
            return self._new(Block("note", text="config: " + "; ".join(data.text.splitlines())))
        return None

    def _new(self, block: Block) -> int:
        self.blocks.append(block)
        return len(self.blocks) - 1

    def _tool(self, data: ConversationData) -> int:
        call_id = data.tool_call_id or ""
        index = self._tools.get(call_id) if call_id else None
        if index is None:
            block = Block("tool", tool_call_id=call_id)
            index = self._new(block)
            if call_id:
                self._tools[call_id] = index
        block = self.blocks[index]
        # an update tells only what changed: the rest stays as it was told
        block.title = data.title or block.title or call_id
        block.tool_kind = data.tool_kind or block.tool_kind
        block.status = data.status or block.status
        block.text = data.text or block.text
        block.output = data.output or block.output
        block.version += 1
        return index

    def _plan(self, text: str) -> int:
        """The plan as it stands: one block per turn, rewritten by each update."""
        if self._plan_at is not None:
            block = self.blocks[self._plan_at]
            block.text = text
            block.version += 1
            return self._plan_at
        self._plan_at = self._new(Block("plan", text=text))
        return self._plan_at

    def matches(self, needle: str) -> list[int]:
        """The blocks whose text holds `needle` (case-insensitive), in order."""
        wanted = needle.casefold()
        if not wanted:
            return []
        return [i for i, block in enumerate(self.blocks) if wanted in block.searchable()]


def parse_commands(text: str) -> list[Command]:
    """The `commands` event's lines (`/name — description`) as commands."""
    commands: list[Command] = []
    for line in text.splitlines():
        name, _, description = line.partition(" — ")
        name = name.strip()
        if name.startswith("/") and len(name) > 1 and " " not in name:
            commands.append(Command(name, description.strip()))
    return commands


def fold(events: list[CoderEvent]) -> Conversation:
    conversation = Conversation()
    for event in events:
        conversation.add(event)
    return conversation
