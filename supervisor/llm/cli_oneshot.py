"""Text-only model jobs through an installed agent CLI, used one-shot:
`claude -p --output-format json` or `codex exec --json`.

This lets an operator who is signed in to Claude Code or Codex draft
contracts without configuring an API key for corral. The whole conversation
is flattened into one prompt; tools are not supported. The CLI runs in an
empty private directory (so it has nothing to act on), in its own process
group, which is killed when the call times out or is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .base import ErrorKind, Message, ModelError, ToolSpec, Turn, Usage

Agent = Literal["claude", "codex"]

#: Prompts longer than this go through stdin (one argv string is capped at 128 KiB).
MAX_ARG_BYTES = 96 * 1024
MAX_OUTPUT_BYTES = 16 * 1024 * 1024

_AUTH = re.compile(
    r"invalid api key|api key|authenticat|unauthori[sz]ed|\b401\b|\b403\b|/login|log ?in\b|"
    r"logged in|oauth token|sign in|signed in",
    re.IGNORECASE,
)
_RATE = re.compile(r"rate.?limit|\b429\b|usage limit|quota|overloaded", re.IGNORECASE)
_SIGN_IN = {
    "claude": "run `claude` once and sign in, or set ANTHROPIC_API_KEY",
    "codex": "run `codex login`, or set OPENAI_API_KEY",
}


def flatten(messages: Sequence[Message]) -> str:
    """One prompt: the system text, then the user's request — or, for a
    longer exchange, the transcript ending with the turn to answer."""
    system = [m.content for m in messages if m.role == "system" and m.content]
    rest = [m for m in messages if m.role != "system"]
    parts = list(system)
    if len(rest) == 1 and rest[0].role == "user":
        parts.append(rest[0].content)
    elif rest:
        lines = ["The conversation so far; reply as the assistant to its last message."]
        for m in rest:
            label = {"user": "User", "assistant": "Assistant", "tool": "Tool result"}[m.role]
            lines.append(f"### {label}\n{m.content}")
        parts.append("\n\n".join(lines))
    return "\n\n".join(parts)


def _classify(text: str) -> ErrorKind:
    if _AUTH.search(text):
        return "auth"
    if _RATE.search(text):
        return "rate_limit"
    return "server"


def _tail(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class CliOneShotProvider:
    """`ModelProvider` running one CLI process per call."""

    def __init__(
        self,
        agent: Agent = "claude",
        binary: str | None = None,
        model: str = "",
        *,
        cwd: Path | None = None,
        extra_args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        max_arg_bytes: int = MAX_ARG_BYTES,
    ) -> None:
        if agent not in ("claude", "codex"):
            raise ValueError(f"unknown agent CLI {agent!r}; use claude or codex")
        self.agent: Agent = agent
        self.name = f"cli:{agent}"
        self.binary = binary
        self.model = model
        self.cwd = cwd
        self.extra_args = list(extra_args)
        self.env = dict(env) if env is not None else None
        self.max_arg_bytes = max_arg_bytes

    def resolve_binary(self) -> str | None:
        env = self.env if self.env is not None else os.environ
        if self.binary:
            if os.sep in self.binary:
                return self.binary if os.access(self.binary, os.X_OK) else None
            return shutil.which(self.binary, path=env.get("PATH"))
        return shutil.which(self.agent, path=env.get("PATH"))

    def argv(self, binary: str, prompt: str) -> tuple[list[str], bytes | None]:
        """The command line, and the stdin bytes when the prompt is too long
        for one argument."""
        via_stdin = len(prompt.encode("utf-8")) > self.max_arg_bytes
        if self.agent == "claude":
            argv = [binary, "-p", "--output-format", "json"]
            if self.model:
                argv += ["--model", self.model]
            argv += self.extra_args
            if not via_stdin:
                argv.append(prompt)
        else:
            argv = [binary, "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only"]
            if self.model:
                argv += ["--model", self.model]
            argv += self.extra_args
            argv.append("-" if via_stdin else prompt)
        return argv, (prompt.encode("utf-8") if via_stdin else None)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        on_delta: Callable[[str], None] | None = None,
        timeout: float = 120.0,
    ) -> Turn:
        if tools:
            raise ModelError(
                f"the {self.name} provider runs text-only jobs; tools are not supported",
                kind="bad_request",
            )
        binary = self.resolve_binary()
        if binary is None:
            where = self.binary or self.agent
            raise ModelError(
                f"the {self.agent} CLI is not installed ({where} not found on PATH): install it "
                "or configure another model provider (see `corral doctor`)",
                kind="unavailable",
            )
        argv, stdin = self.argv(binary, flatten(messages))
        with tempfile.TemporaryDirectory(prefix="corral-cli-") as scratch:
            rc, out, err = await self._run(argv, stdin, Path(self.cwd or scratch), timeout)
        if self.agent == "claude":
            turn = self._parse_claude(rc, out, err)
        else:
            turn = self._parse_codex(rc, out, err)
        if on_delta is not None and turn.text:
            on_delta(turn.text)
        return turn

    async def _run(
        self, argv: list[str], stdin: bytes | None, cwd: Path, timeout: float
    ) -> tuple[int, str, str]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(cwd),
                env=self.env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ModelError(
                f"cannot start the {self.agent} CLI ({argv[0]}): {exc.strerror or exc}",
                kind="unavailable",
            ) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            _kill_group(proc)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            raise ModelError(
                f"the {self.agent} CLI did not answer within {timeout:g} s", kind="timeout"
            ) from None
        except asyncio.CancelledError:
            _kill_group(proc)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
            raise
        finally:
            _kill_group(proc)  # nothing the CLI started outlives the call
        return (
            proc.returncode if proc.returncode is not None else -1,
            out[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"),
            err[-MAX_OUTPUT_BYTES:].decode("utf-8", "replace"),
        )

    def _fail(self, detail: str, kind: ErrorKind | None = None) -> ModelError:
        kind = kind or _classify(detail)
        detail = _tail(detail) or "no output"
        if kind == "auth":
            return ModelError(
                f"the {self.agent} CLI is not signed in ({detail}): {_SIGN_IN[self.agent]}",
                kind="auth",
            )
        return ModelError(f"the {self.agent} CLI failed: {detail}", kind=kind)

    # -- claude -p --output-format json ------------------------------------
    def _parse_claude(self, rc: int, out: str, err: str) -> Turn:
        result = self._claude_result(out)
        if result is None:
            raise self._fail(err.strip() or out.strip() or f"exit status {rc}")
        text = result.get("result")
        if result.get("is_error") or not isinstance(text, str):
            detail = str(text or result.get("subtype") or "an error result")
            raise self._fail(detail)
        raw_usage = result.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        cost = result.get("total_cost_usd")
        model_usage = result.get("modelUsage")
        model = self.model
        if not model and isinstance(model_usage, dict) and model_usage:
            model = next(iter(model_usage))
        return Turn(
            text=text,
            usage=Usage(
                input_tokens=sum(
                    int(usage.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                ),
                output_tokens=int(usage.get("output_tokens") or 0),
                cost_usd=float(cost) if isinstance(cost, int | float) else None,
            ),
            model=model or "claude",
        )

    @staticmethod
    def _claude_result(out: str) -> dict[str, Any] | None:
        candidates: list[Any] = []
        try:
            candidates.append(json.loads(out))
        except ValueError:
            for line in reversed(out.splitlines()):
                with contextlib.suppress(ValueError):
                    candidates.append(json.loads(line))
                    break
        for data in candidates:
            items = data if isinstance(data, list) else [data]
            for item in reversed(items):
                if isinstance(item, dict) and ("result" in item or item.get("type") == "result"):
                    return item
        return None

    # -- codex exec --json ---------------------------------------------------
    def _parse_codex(self, rc: int, out: str, err: str) -> Turn:
        text: str | None = None
        errors: list[str] = []
        usage = Usage()
        for line in out.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            raw_item = event.get("item")
            item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
            if kind == "item.completed" and item.get("type") in (
                "agent_message",
                "assistant_message",
            ):
                text = str(item.get("text") or "")
            elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
                u = event["usage"]
                usage = Usage(
                    input_tokens=int(u.get("input_tokens") or 0),
                    output_tokens=int(u.get("output_tokens") or 0),
                )
            elif kind == "turn.failed":
                error = event.get("error")
                errors.append(str(error.get("message") if isinstance(error, dict) else error))
            elif kind == "error":
                errors.append(str(event.get("message") or event))
        if text is None or (rc != 0 and errors):
            raise self._fail("; ".join(errors) or err.strip() or f"exit status {rc}")
        return Turn(text=text, usage=usage, model=self.model or "codex")
