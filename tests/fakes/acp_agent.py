#!/usr/bin/env python3
"""A scripted ACP agent on stdio (the SDK's agent side), for the protocol's
edge cases. `acp_agent.py SCRIPT [ARG]`:

- `write`: asks permission to write notes.txt (the edit's diff shown), then
  writes it through `fs/write_text_file` if allowed; says what happened.
- `outside PATH`: tries to write PATH (outside its worktree), says how that
  went, then writes notes.txt inside.
- `shell [PATH]`: runs `echo done > notes.txt` (after `echo pwn > PATH`
  when given) through `terminal/create`, shown as a tool call over that
  terminal.
- `ownshell PATH`: runs a command in its own shell (a child process, as
  Claude Code's Bash and Gemini CLI's shell tool do, inside the agent's
  sandbox) that writes PATH and `$ACP_FAKE_OUT/landed.txt` (a writable
  grant) and tries `/usr/corral-own-shell`, shown as an
  `execute` tool call with its raw input and output, says the write went
  well, then writes notes.txt unasked.
- `slow`: says it is working and waits until `session/cancel` arrives.
- `garbage`: writes a line that is not JSON-RPC, then does `write` unasked.
- `mute`: never answers `initialize`.
- `exit`: exits with status 3 in the middle of its turn.
- `limited`: answers the prompt with a JSON-RPC error, code 429 (its
  provider's rate limit).
- `quick`: says one line and ends its turn at once (bench/status.py --acp).
- `stream [SECS]`: says a line every SECS (0.1) and starts and completes a
  tool call every tenth line, until `session/cancel` (bench/status.py
  --acp-console: a console with many ACP sessions streaming).
- `burst [N]`: says N lines (300) as fast as it can, each in three pieces
  cut mid-word, a two-piece thought before every 50th, then writes
  notes.txt itself and ends its turn (a flood of chunks: nothing may be
  lost, in fewer journal appends).
- `usage IN,OUT,THOUGHT,CACHE_READ,CACHE_WRITE`: writes notes.txt unasked and
  reports those token counts in its prompt answer's `usage`.
- `load`: like `write` but advertises `session/load`; the first process
  exits mid-turn, a loaded one finishes the work.
- `forget`: like `load`, but `session/load` fails as Gemini CLI's does
  ("Internal error", details "No previous sessions found").
- `models`: like `slow`, and announces models (`fast-1`, `deep-2`, as the
  real adapters write them: `models` in the answer to `session/new`, set with
  `session/set_model`, which the SDK's agent side no longer routes, so this
  agent's own transport serves them) and config options (`reasoning`:
  low/medium/high, `web`: on/off); at the start of its turn it moves
  `reasoning` to medium itself (`config_option_update`).
Each turn it records what it saw in `$ACP_FAKE_OUT/<script>.jsonl` when set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any, Literal, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    RequestError,
    plan_entry,
    run_agent,
    start_edit_tool_call,
    start_tool_call,
    tool_diff_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.agent.connection import AgentSideConnection
from acp.schema import (
    AgentCapabilities,
    ConfigOptionUpdate,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    Usage,
)
from acp.stdio import stdio_streams

Stop = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
SCRIPT = sys.argv[1] if len(sys.argv) > 1 else "write"
ARG = sys.argv[2] if len(sys.argv) > 2 else ""
MODES = SessionModeState(
    current_mode_id="ask",
    available_modes=[SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code")],
)

MODELS = {
    "currentModelId": "fast-1",
    "availableModels": [
        {"modelId": "fast-1", "name": "Fast"},
        {"modelId": "deep-2", "name": "Deep", "description": "thinks longer"},
    ],
}


def config_options(reasoning: str, web: bool) -> list[Any]:
    levels = [SessionConfigSelectOption(value=v, name=v.title()) for v in ("low", "medium", "high")]
    return [
        SessionConfigOptionSelect(
            id="reasoning",
            name="Reasoning",
            type="select",
            current_value=reasoning,
            options=levels,
            category="thought_level",
        ),
        SessionConfigOptionBoolean(id="web", name="Web search", type="boolean", current_value=web),
    ]


BURST_THOUGHT_EVERY = 50


def burst_pieces(i: int) -> list[str]:
    """Line `i` of `burst`, in the pieces it is streamed in (a line cut
    mid-word, as models stream tokens)."""
    return ["burst line ", f"{i}: al", "pha beta\n"]


def record(entry: dict[str, Any]) -> None:
    out = os.environ.get("ACP_FAKE_OUT")
    if out:
        with open(os.path.join(out, f"{SCRIPT}.jsonl"), "a") as f:
            f.write(json.dumps(entry) + "\n")


class Fake:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd = "."
        self.cancelled = asyncio.Event()
        self.reasoning, self.web = "low", False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        if SCRIPT == "mute":
            await asyncio.Event().wait()
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=SCRIPT in ("load", "forget")),
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        self.cwd = cwd
        if SCRIPT == "models":
            return NewSessionResponse(
                session_id="fake-session-1",
                modes=MODES,
                config_options=config_options(self.reasoning, self.web),
            )
        return NewSessionResponse(session_id="fake-session-1", modes=MODES)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        self.cwd = cwd
        if SCRIPT == "forget":  # as Gemini CLI 0.61 answers a revive
            record({"load_refused": session_id})
            raise RequestError(-32603, "Internal error", {"details": "No previous sessions found"})
        record({"loaded": session_id})
        await self.say(session_id, "(replayed) earlier turn\n")
        return LoadSessionResponse(modes=MODES)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> SetSessionModeResponse:
        record({"mode": mode_id})
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        record({"option": config_id, "value": value})
        if config_id == "reasoning" and isinstance(value, str):
            self.reasoning = value
        elif config_id == "web" and isinstance(value, bool):
            self.web = value
        return SetSessionConfigOptionResponse(
            config_options=config_options(self.reasoning, self.web)
        )

    async def cancel(self, session_id: str, **_: Any) -> None:
        record({"cancel": session_id})
        self.cancelled.set()

    async def say(self, sid: str, text: str) -> None:
        await self.conn.session_update(session_id=sid, update=update_agent_message_text(text))

    async def write_notes(self, sid: str, ask: bool) -> Stop:
        path = os.path.join(self.cwd, "notes.txt")
        diff = tool_diff_content(path, "done\n", None)
        call = start_edit_tool_call(
            "call-1", "Write notes.txt", path, "done\n", extra_options=[diff]
        )
        await self.conn.session_update(session_id=sid, update=call)
        if ask:
            options = [
                PermissionOption(option_id="yes-once", name="Allow", kind="allow_once"),
                PermissionOption(option_id="yes-always", name="Always allow", kind="allow_always"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ]
            answer = await self.conn.request_permission(
                session_id=sid,
                tool_call=update_tool_call(
                    "call-1", title="Write notes.txt", kind="edit", content=call.content
                ),
                options=options,
            )
            chosen = getattr(answer.outcome, "option_id", None)
            record({"permission": chosen})
            if chosen != "yes-once" and chosen != "yes-always":
                await self.conn.session_update(
                    session_id=sid, update=update_tool_call("call-1", status="failed")
                )
                await self.say(sid, "I was not allowed to write notes.txt.\n")
                return "end_turn"
        await self.conn.write_text_file(session_id=sid, path=path, content="done\n")
        await self.conn.session_update(
            session_id=sid, update=update_tool_call("call-1", status="completed")
        )
        await self.say(sid, "I wrote notes.txt.\n")
        return "end_turn"

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        sid = session_id
        if SCRIPT == "quick":  # one line said, the turn over at once (latency bench)
            await self.say(sid, "ok\n")
            return PromptResponse(stop_reason="end_turn")
        text = "".join(getattr(b, "text", "") for b in prompt)
        record({"prompt": text})
        await self.conn.session_update(
            session_id=sid, update=update_agent_thought_text("Thinking about notes.")
        )
        await self.conn.session_update(
            session_id=sid,
            update=update_plan([plan_entry("write notes.txt", status="in_progress")]),
        )
        await self.say(sid, "Working on it")
        await self.say(sid, " now.\n")
        stop: Stop = "end_turn"
        if SCRIPT == "write":
            stop = await self.write_notes(sid, ask=True)
        elif SCRIPT == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
            stop = await self.write_notes(sid, ask=False)
        elif SCRIPT == "usage":  # ARG: "input,output,thought,cache_read,cache_write"
            stop = await self.write_notes(sid, ask=False)
            fresh, out, thought, read, write = (int(n) for n in ARG.split(","))
            usage = Usage(
                total_tokens=fresh + out + thought + read + write,
                input_tokens=fresh,
                output_tokens=out,
                thought_tokens=thought,
                cached_read_tokens=read,
                cached_write_tokens=write,
            )
            return PromptResponse(stop_reason=stop, usage=usage)
        elif SCRIPT == "outside":
            try:
                await self.conn.write_text_file(session_id=sid, path=ARG, content="escaped\n")
                await self.say(sid, "outside write went through\n")
            except Exception as exc:
                await self.say(sid, f"outside write refused: {exc}\n")
            stop = await self.write_notes(sid, ask=False)
        elif SCRIPT == "shell":
            line = "echo done > notes.txt; echo ok"
            if ARG:  # also a write outside the worktree (`shell PATH`)
                line = f"echo pwn > {ARG}; {line}"
            term = await self.conn.create_terminal(
                session_id=sid,
                command="sh",
                args=["-c", line],
                cwd=self.cwd,
            )
            # shown as a tool call over its terminal, as the real adapters do
            await self.conn.session_update(
                session_id=sid,
                update=start_tool_call(
                    "sh-1",
                    "echo done > notes.txt",
                    kind="execute",
                    status="in_progress",
                    content=[tool_terminal_ref(term.terminal_id)],
                ),
            )
            status = await self.conn.wait_for_terminal_exit(
                session_id=sid, terminal_id=term.terminal_id
            )
            out = await self.conn.terminal_output(session_id=sid, terminal_id=term.terminal_id)
            await self.conn.session_update(
                session_id=sid,
                update=update_tool_call(
                    "sh-1", status="completed", content=[tool_terminal_ref(term.terminal_id)]
                ),
            )
            await self.conn.release_terminal(session_id=sid, terminal_id=term.terminal_id)
            record({"exit": status.exit_code, "output": out.output})
            await self.say(sid, f"shell said {out.output.strip()}\n")
        elif SCRIPT == "ownshell":
            landed = os.path.join(os.environ.get("ACP_FAKE_OUT", "/nowhere"), "landed.txt")
            command = (
                f"echo pwn > {ARG}; echo ok > {landed}; touch /usr/corral-own-shell; echo wrote it"
            )
            await self.conn.session_update(
                session_id=sid,
                update=start_tool_call(
                    "own-1",
                    command,
                    kind="execute",
                    status="pending",
                    raw_input={"command": command},
                ),
            )
            ran = await asyncio.create_subprocess_exec(
                "sh",
                "-c",
                command,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            printed = (await ran.communicate())[0]
            await self.conn.session_update(
                session_id=sid,
                update=update_tool_call(
                    "own-1", status="completed", raw_output={"output": printed.decode()}
                ),
            )
            record({"exit": ran.returncode, "output": printed.decode()})
            await self.say(sid, f"Wrote {ARG}.\n")
            stop = await self.write_notes(sid, ask=False)
        elif SCRIPT == "slow":
            await self.cancelled.wait()
            stop = "cancelled"
        elif SCRIPT == "stream":
            interval = float(ARG or 0.1)
            i = 0
            while not self.cancelled.is_set():
                i += 1
                if i % 10 == 0:
                    call = f"call-{i}"
                    await self.conn.session_update(
                        session_id=sid,
                        update=start_edit_tool_call(call, f"Edit file {i}", "notes.txt", "x\n"),
                    )
                    await self.conn.session_update(
                        session_id=sid, update=update_tool_call(call, status="completed")
                    )
                await self.say(sid, f"streaming line {i}: reading, thinking, editing\n")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.cancelled.wait(), interval)
            stop = "cancelled"
        elif SCRIPT == "burst":
            for i in range(1, int(ARG or 300) + 1):
                if i % BURST_THOUGHT_EVERY == 0:
                    for piece in ("consider", f"ing {i}\n"):
                        await self.conn.session_update(
                            session_id=sid, update=update_agent_thought_text(piece)
                        )
                for piece in burst_pieces(i):
                    await self.say(sid, piece)
            with open(os.path.join(self.cwd, "notes.txt"), "w") as notes:
                notes.write("done\n")
            stop = "end_turn"
        elif SCRIPT == "models":
            self.reasoning = "medium"
            await self.conn.session_update(
                session_id=sid,
                update=ConfigOptionUpdate(
                    session_update="config_option_update",
                    config_options=config_options(self.reasoning, self.web),
                ),
            )
            await self.say(sid, "Thinking harder now.\n")
            await self.cancelled.wait()
            stop = "cancelled"
        elif SCRIPT == "refuse":  # the agent's side refuses the turn (typed stopReason)
            stop = "refusal"
        elif SCRIPT == "limited":  # its provider's rate limit, as the adapters answer it
            raise RequestError(429, "Rate limit reached: retry after 60 s", {"retry_after": 60})
        elif SCRIPT == "exit":
            sys.stderr.write("crash: out of cheese\n")
            sys.stderr.flush()
            os._exit(3)
        elif SCRIPT in ("load", "forget"):
            marker = os.path.join(os.environ.get("ACP_FAKE_OUT", self.cwd), "load-crashed")
            if not os.path.exists(marker):
                open(marker, "w").close()
                sys.stderr.write("crash before writing\n")
                sys.stderr.flush()
                os._exit(4)
            stop = await self.write_notes(sid, ask=False)
        return PromptResponse(stop_reason=stop)


class ModelsTransport:
    """The agent's stdio, newline-delimited JSON, carrying what the SDK's
    agent side lacks: `models` added to the answer to `session/new`, and
    `session/set_model` answered here (an unknown model is an error)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.new_ids: set[Any] = set()
        self.current = str(MODELS["currentModelId"])

    async def send(self, message: dict[str, Any]) -> None:
        if message.get("id") in self.new_ids and isinstance(message.get("result"), dict):
            self.new_ids.discard(message["id"])
            message["result"]["models"] = {**MODELS, "currentModelId": self.current}
        self.writer.write((json.dumps(message) + "\n").encode())
        await self.writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self.reader.readline()
            if not line:
                return None
            message = json.loads(line)
            if message.get("method") == "session/new":
                self.new_ids.add(message.get("id"))
            if message.get("method") != "session/set_model":
                return cast(dict[str, Any], message)
            model = (message.get("params") or {}).get("modelId")
            record({"model": model})
            offered = [m["modelId"] for m in MODELS["availableModels"]]  # type: ignore[index]
            if model in offered:
                self.current = str(model)
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            else:
                error = {"code": -32602, "message": f"unknown model {model}"}
                await self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})

    async def close(self) -> None:
        self.writer.close()


async def main() -> None:
    if SCRIPT != "models":
        await run_agent(cast(Agent, Fake()))
        return
    reader, writer = await stdio_streams()
    conn = AgentSideConnection(
        cast(Agent, Fake()), ModelsTransport(reader, writer), listening=False
    )
    await conn.listen()


if __name__ == "__main__":
    asyncio.run(main())
