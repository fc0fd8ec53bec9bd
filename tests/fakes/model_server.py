"""A scripted fake model server for driving the real agent CLIs offline.

One stdlib `ThreadingHTTPServer` on 127.0.0.1 (free port) speaks both wire
protocols the CLIs use:

* Anthropic Messages API (`POST /v1/messages`, streamed SSE or plain JSON) —
  Claude Code, via `ANTHROPIC_BASE_URL=<server.url>`.
* OpenAI Responses API (`POST /v1/responses`, streamed SSE) — Codex, via a
  `[model_providers.NAME]` entry with `base_url = <server.url>/v1`.
* OpenAI Chat Completions (`POST /v1/chat/completions`, streamed or not) —
  Aider (through LiteLLM), via `OPENAI_API_BASE=<server.url>/v1` and a model
  named `openai/<name>`. Aider sends no tools: every chat request that does
  not ask for structured output is a main-loop request.
* Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`,
  `:generateContent`, `:countTokens`) — Gemini CLI, via
  `GOOGLE_GEMINI_BASE_URL=<server.url>`. Tool calls become `functionCall`
  parts, so one script drives every CLI.

The test hands the server a *script*: a list of turns. Every "main" model
request (one that carries the agent's tool list; see `consumes_turn`) takes the
next turn: a `Reply` (text and/or tool calls) or an `HttpError`. Auxiliary
requests the CLIs make on the side (Claude Code's title/topic helpers, quota
probes, `count_tokens`, ...) never consume turns: they get `aux_text`. When the
script is exhausted the server answers with `Reply("done")`, so a CLI that
keeps going still ends its turn.

Every request (method, path, headers, JSON body) is recorded in
`server.requests`, so tests can assert what the CLI sent, e.g. the tool result
of the previous call (`tool_results()`).

    with FakeModelServer([Reply(tool_calls=[ToolCall("Write", {...})]), Reply("ok")]) as srv:
        env["ANTHROPIC_BASE_URL"] = srv.url
        ...
        srv.wait_for(lambda s: len(s.turn_requests) >= 2)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeModelServer",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "Turn",
    "Usage",
    "anthropic_sse",
    "chat_completion",
    "chat_sse",
    "gemini_response",
    "gemini_sse",
    "openai_sse",
    "parse_sse",
]


# --------------------------------------------------------------------------- script


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes. `arguments` is the tool's JSON input
    (Anthropic `tool_use.input`; OpenAI `function_call.arguments`, encoded)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful model turn: optional text, then optional tool calls.

    With tool calls the stop reason is `tool_use` (Anthropic) and the CLI runs
    them and comes back with their results in the next request; without, the
    turn ends (`end_turn`)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()
    delay: float = 0.0  # seconds to wait before answering (keeps the CLI "busy")
    usage: Usage | None = None  # the token counts reported (None: 10 in, 5 out)
    # the Gemini API's finishReason (`SAFETY`: the answer was blocked, no content)
    finish: str = "STOP"


@dataclass(frozen=True)
class Usage:
    """The token counts a reply reports: fresh input, output, and the prompt
    cache's writes and reads (the Responses API reports no cache writes and
    counts its cached reads inside `input_tokens`)."""

    input: int = 10
    output: int = 5
    cache_write: int = 0
    cache_read: int = 0


DEFAULT_USAGE = Usage()


@dataclass(frozen=True)
class HttpError:
    """Answer the request with an HTTP error status and the API's error body.

    `times` is how many consecutive main requests get this error (both CLIs
    retry some statuses on their own, Claude Code even a 401 once); `None`
    means every request from then on."""

    status: int
    message: str | None = None
    retry_after: float | None = None
    times: int | None = 1


Turn = Reply | HttpError

# The Gemini API's model methods (`/v1beta/models/<model>:<method>`).
GEMINI_METHODS = ("streamGenerateContent", "generateContent", "countTokens")

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
GEMINI_ERROR_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
OPENAI_ERROR_CODES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # decoded JSON, raw text, or None
    at: float
    turn: Turn | None = None  # the script turn it consumed, if any
    consumed: bool = False

    @property
    def api(self) -> str:
        """ "anthropic", "openai", "chat", "gemini" or "other"."""
        path = self.path.split("?")[0]
        if path.startswith("/v1/messages"):
            return "anthropic"
        if path.rstrip("/").endswith("/chat/completions"):
            return "chat"
        if path.startswith("/v1/responses"):
            return "openai"
        if "/models/" in path and path.rsplit(":", 1)[-1] in GEMINI_METHODS:
            return "gemini"
        return "other"

    def _tools(self) -> list[dict[str, Any]]:
        """The declared tools, flat: Gemini nests them in `functionDeclarations`."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        flat: list[dict[str, Any]] = []
        for tool in tools or []:
            if not isinstance(tool, dict):
                continue
            decls = tool.get("functionDeclarations")
            if isinstance(decls, list):
                flat += [d for d in decls if isinstance(d, dict)]
            else:
                flat.append(tool)
        return flat

    @property
    def tool_names(self) -> list[str]:
        return [
            tool.get("name") or (tool.get("function") or {}).get("name") or ""
            for tool in self._tools()
        ]

    def tool(self, name: str) -> dict[str, Any] | None:
        """The declaration of tool `name` in this request's `tools`."""
        for tool in self._tools():
            if name in (tool.get("name"), (tool.get("function") or {}).get("name")):
                return tool
        return None


def consumes_turn(req: RecordedRequest) -> bool:
    """Whether a request is the agent's main loop (takes the next script turn).

    Claude Code, Codex and Gemini CLI send their full tool list with every
    main-loop request; Aider's chat requests carry none and all count. Their
    side requests carry no tools or ask for structured output (Codex's
    thread-title request wants `{"title": ...}`), and never consume turns.
    A Codex main-loop request is also recognised by its turn metadata header
    (`"thread_source": "user"`), for models whose requests declare no tools."""
    if req.method != "POST" or req.api == "other" or not isinstance(req.body, dict):
        return False
    if req.path.split("?")[0].rstrip("/").endswith(("count_tokens", ":countTokens")):
        return False
    if structured_output_schema(req.body) is not None:
        return False
    if req.tool_names or req.api == "chat":
        return True
    try:
        meta = json.loads(req.headers.get("x-codex-turn-metadata") or "{}")
    except ValueError:
        meta = {}
    return isinstance(meta, dict) and meta.get("thread_source") == "user"


# --------------------------------------------------------------------------- wire formats


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def parse_sse(raw: bytes | str) -> list[tuple[str, dict[str, Any]]]:
    """Split an SSE body into (event, data) pairs (for tests of the framing)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    out = []
    for block in text.split("\n\n"):
        if not block.strip() or block.strip() == "data: [DONE]":  # Chat Completions' end
            continue
        event, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        out.append((event, json.loads("\n".join(data))))
    return out


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):06d}"


def _chunks(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streaming Messages API response for `reply`."""
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.call_id or _new_id("toolu"),
                "name": call.name,
                "input": call.arguments,
            }
        )
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(reply.usage or DEFAULT_USAGE, final=True),
    }


def _anthropic_usage(usage: Usage, *, final: bool) -> dict[str, int]:
    """`message_start` reports one output token so far, the end all of them."""
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output if final else 1,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
    }


def anthropic_sse(reply: Reply, model: str) -> list[bytes]:
    """The Messages API event stream for `reply`, one bytes chunk per event."""
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": _new_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _anthropic_usage(reply.usage or DEFAULT_USAGE, final=False),
                },
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    index = 0
    if reply.text:
        events.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for piece in _chunks(reply.text):
            events.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call in reply.tool_calls:
        block = {
            "type": "tool_use",
            "id": call.call_id or _new_id("toolu"),
            "name": call.name,
            "input": {},
        }
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for piece in _chunks(json.dumps(call.arguments), 40):
            events.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": (reply.usage or DEFAULT_USAGE).output},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def openai_sse(reply: Reply, model: str) -> list[bytes]:
    """The Responses API event stream for `reply`, one bytes chunk per event."""
    resp_id = _new_id("resp")
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
    events = [
        _sse(
            "response.created",
            {
                "type": "response.created",
                "response": {**base, "status": "in_progress", "output": []},
            },
        ),
        _sse(
            "response.in_progress",
            {
                "type": "response.in_progress",
                "response": {**base, "status": "in_progress", "output": []},
            },
        ),
    ]
    output: list[dict[str, Any]] = []
    index = 0
    if reply.text:
        item_id = _new_id("msg")
        events.append(
            _sse(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {
                        "type": "message",
                        "id": item_id,
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    },
                },
            )
        )
        events.append(
            _sse(
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            )
        )
        for piece in _chunks(reply.text):
            events.append(
                _sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "delta": piece,
                    },
                )
            )
        events.append(
            _sse(
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "text": reply.text,
                },
            )
        )
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        events.append(
            _sse(
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "part": part,
                },
            )
        )
        item = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        events.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
        output.append(item)
        index += 1
    for call in reply.tool_calls:
        item_id = _new_id("fc")
        args = json.dumps(call.arguments)
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": call.call_id or _new_id("call"),
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        events.append(
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        events.append(
            _sse(
                "response.function_call_arguments.delta",
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "delta": args,
                },
            )
        )
        events.append(
            _sse(
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "output_index": index,
                    "arguments": args,
                },
            )
        )
        done = {**item, "arguments": args, "status": "completed"}
        events.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": done},
            )
        )
        output.append(done)
        index += 1
    counts = reply.usage or DEFAULT_USAGE
    usage = {
        "input_tokens": counts.input + counts.cache_read,
        "input_tokens_details": {"cached_tokens": counts.cache_read},
        "output_tokens": counts.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts.input + counts.cache_read + counts.output,
    }
    events.append(
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": output, "usage": usage},
            },
        )
    )
    return events


def openai_response(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streaming Responses API body (the final `response` object)."""
    last = parse_sse(b"".join(openai_sse(reply, model)))[-1][1]
    return last["response"]


def _chat_tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": call.call_id or _new_id("call"),
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for i, call in enumerate(reply.tool_calls)
    ]


def _chat_usage() -> dict[str, int]:
    return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streaming Chat Completions response for `reply`."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {k: v for k, v in c.items() if k != "index"} for c in _chat_tool_calls(reply)
        ]
    return {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": _chat_usage(),
    }


def chat_sse(reply: Reply, model: str) -> list[bytes]:
    """The Chat Completions stream: `data:` chunks (role, text pieces, tool
    calls, finish_reason with usage), then `data: [DONE]`."""
    base = {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {**base, "choices": [choice], **extra}
        return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        events += [chunk({"content": piece}) for piece in _chunks(reply.text)]
    if reply.tool_calls:
        events.append(chunk({"tool_calls": _chat_tool_calls(reply)}))
    finish = "tool_calls" if reply.tool_calls else "stop"
    events.append(chunk({}, finish, usage=_chat_usage()))
    events.append(b"data: [DONE]\n\n")
    return events


def gemini_response(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streaming `generateContent` response for `reply`: text and
    `functionCall` parts in one candidate (finishReason STOP either way; the
    CLI runs the calls it finds)."""
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        fc: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.call_id:
            fc["id"] = call.call_id
        parts.append({"functionCall": fc})
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": reply.finish, "index": 0}
        ],
        "usageMetadata": _gemini_usage(reply.usage),
        "modelVersion": model,
        "responseId": _new_id("resp"),
    }


def _gemini_usage(usage: Usage | None = None) -> dict[str, int]:
    """The Gemini API counts cached tokens inside `promptTokenCount`."""
    counts = usage or DEFAULT_USAGE
    prompt = counts.input + counts.cache_read
    found = {"promptTokenCount": prompt, "candidatesTokenCount": counts.output}
    if counts.cache_read:
        found["cachedContentTokenCount"] = counts.cache_read
    return {**found, "totalTokenCount": prompt + counts.output}


def gemini_sse(reply: Reply, model: str) -> list[bytes]:
    """The `streamGenerateContent?alt=sse` stream for `reply`: `data:` lines
    only (no `event:`), each a partial GenerateContentResponse; text in
    chunks, then each function call whole, the last chunk with finishReason
    and usage."""
    resp_id = _new_id("resp")
    chunks: list[list[dict[str, Any]]] = []
    if reply.text:
        chunks += [[{"text": piece}] for piece in _chunks(reply.text)]
    for call in reply.tool_calls:
        fc: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.call_id:
            fc["id"] = call.call_id
        chunks.append([{"functionCall": fc}])
    if not chunks:
        chunks.append([{"text": ""}])
    events = []
    for i, parts in enumerate(chunks):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        data: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": model,
            "responseId": resp_id,
        }
        if i == len(chunks) - 1:
            candidate["finishReason"] = reply.finish
            data["usageMetadata"] = _gemini_usage(reply.usage)
        events.append(f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode())
    return events


def sample_for_schema(schema: Any, text: str = "ok") -> Any:
    """A minimal value satisfying a (simple) JSON schema: used to answer the
    CLIs' structured side requests (Codex asks for `{"title": ...}`)."""
    if not isinstance(schema, dict):
        return text
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return sample_for_schema(schema[key][0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: sample_for_schema(sub, text) for name, sub in props.items()}
    if kind == "array":
        return [sample_for_schema(schema.get("items"), text)] if schema.get("minItems") else []
    if kind in ("number", "integer"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    max_len = schema.get("maxLength")
    return text[:max_len] if max_len else text


def structured_output_schema(body: Any) -> Any:
    """The JSON schema a request asks the answer to follow, if any."""
    if not isinstance(body, dict):
        return None
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":  # Chat Completions
        return (fmt.get("json_schema") or {}).get("schema") or {}
    gen = body.get("generationConfig")
    if isinstance(gen, dict):  # Gemini: JSON mode with a schema
        for key in ("responseJsonSchema", "responseSchema"):
            if isinstance(gen.get(key), dict):
                return gen[key]
        if gen.get("responseMimeType") == "application/json":
            return {}
    for holder in (body.get("text"), body.get("output_config"), body.get("output_format")):
        if isinstance(holder, dict):
            fmt = holder.get("format", holder)
            if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
                return fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema") or {}
    return None


# --------------------------------------------------------------------------- server


class FakeModelServer:
    """Threaded fake Anthropic + OpenAI + Gemini endpoint on 127.0.0.1 (free port).

    Use as a context manager (or `start()`/`stop()`). `url` is the base for
    `ANTHROPIC_BASE_URL` and `GOOGLE_GEMINI_BASE_URL`; `openai_base_url`
    (`url + "/v1"`) for Codex."""

    def __init__(
        self,
        script: Iterable[Turn] = (),
        *,
        final: Reply = Reply("done"),
        aux_text: str = "Fake task",
        consumes: Callable[[RecordedRequest], bool] = consumes_turn,
        model: str = "fake-model",
    ) -> None:
        self._script: list[Turn] = list(script)
        self.final = final
        self.aux_text = aux_text
        self.consumes = consumes
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Condition()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------
    def start(self) -> FakeModelServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    # script --------------------------------------------------------------
    def push(self, *turns: Turn) -> None:
        """Append turns to the script (e.g. between two prompts)."""
        with self._lock:
            self._script.extend(turns)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def _next_turn(self) -> Turn:
        with self._lock:
            if not self._script:
                return self.final
            turn = self._script[0]
            if isinstance(turn, HttpError) and turn.times != 1:
                if turn.times is not None:
                    self._script[0] = replace(turn, times=turn.times - 1)
                return turn
            return self._script.pop(0)

    # records -------------------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
            self._lock.notify_all()

    @property
    def turn_requests(self) -> list[RecordedRequest]:
        """Requests that consumed a script turn (or the final reply), in order."""
        with self._lock:
            return [r for r in self.requests if r.consumed]

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def wait_for(self, predicate: Callable[[FakeModelServer], bool], timeout: float = 30.0) -> None:
        """Block until `predicate(self)` holds (re-checked on every request)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                # The predicate may use the properties above, which re-take the
                # (reentrant-free) lock: evaluate it unlocked.
                self._lock.release()
                try:
                    ok = predicate(self)
                finally:
                    self._lock.acquire()
                if ok:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"fake model server: condition not met in {timeout}s; saw {self.paths()}"
                    )
                self._lock.wait(min(left, 0.5))

    def tool_results(self) -> list[Any]:
        """Every tool result the CLIs sent back, oldest first (Anthropic
        `tool_result` blocks, OpenAI `function_call_output` items and `tool`
        messages, Gemini `functionResponse` parts)."""
        seen: dict[str | None, Any] = {}  # by call id
        for req in self.turn_requests:
            body = req.body if isinstance(req.body, dict) else {}
            for msg in body.get("messages") or []:
                content = msg.get("content") if isinstance(msg, dict) else None
                if isinstance(content, list):
                    for block in content:
                        if isinstance(block, dict) and block.get("type") == "tool_result":
                            seen[block.get("tool_use_id")] = block
                if isinstance(msg, dict) and msg.get("role") == "tool":  # Chat Completions
                    seen[msg.get("tool_call_id")] = msg
            for content in body.get("contents") or []:  # Gemini functionResponse parts
                for part in (content.get("parts") if isinstance(content, dict) else None) or []:
                    if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                        fr = part["functionResponse"]
                        # each request repeats the history: dedupe by id, else by content
                        seen[fr.get("id") or json.dumps(fr, sort_keys=True)] = fr
            for item in body.get("input") or []:
                if isinstance(item, dict) and item.get("type") in (
                    "function_call_output",
                    "custom_tool_call_output",
                ):
                    seen[item.get("call_id")] = item
        return list(seen.values())


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.1"
    server_version = "FakeModelServer/1"

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    # plumbing ------------------------------------------------------------
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "").lower() in ("gzip",):
            import gzip

            raw = gzip.decompress(raw)
        elif self.headers.get("Content-Encoding", "").lower() == "zstd":
            return {"_undecoded": "zstd", "_bytes": len(raw)}
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, chunks: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _record(self, body: Any) -> RecordedRequest:
        req = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            at=time.time(),
        )
        return req

    # verbs ---------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.fake._record(self._record(None))
        self._send_json(200, {})

    def do_GET(self) -> None:
        req = self._record(None)
        self.fake._record(req)
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, self._models())
        else:
            self._send_json(
                404,
                {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": f"fake: no {path}"},
                },
            )

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        body = self._read_body()
        req = self._record(body)
        path = self.path.split("?")[0].rstrip("/")
        consumes = self.fake.consumes(req)
        turn: Turn
        if consumes:
            turn = self.fake._next_turn()
            req.turn, req.consumed = turn, True
        else:
            schema = structured_output_schema(body)
            text = (
                self.fake.aux_text
                if schema is None
                else json.dumps(sample_for_schema(schema, self.fake.aux_text))
            )
            turn = Reply(text)
        self.fake._record(req)
        if path.endswith("/count_tokens"):
            self._send_json(200, {"input_tokens": 100})
            return
        if path.endswith(":countTokens"):
            self._send_json(200, {"totalTokens": 100})
            return
        if req.api == "other":
            self._send_json(404, {"error": {"message": f"fake: no {path}", "type": "not_found"}})
            return
        if isinstance(turn, HttpError):
            self._send_error_turn(req.api, turn)
            return
        if turn.delay:
            time.sleep(turn.delay)
        model = (body or {}).get("model") if isinstance(body, dict) else None
        model = model or self.fake.model
        stream = isinstance(body, dict) and bool(body.get("stream"))
        if req.api == "gemini":
            # the model is in the path; the SDK streams when the method says so
            model = path.rsplit("/", 1)[-1].split(":")[0] or self.fake.model
            if path.endswith(":streamGenerateContent"):
                self._send_sse(gemini_sse(turn, model))
            else:
                self._send_json(200, gemini_response(turn, model))
        elif req.api == "chat":
            if stream:
                self._send_sse(chat_sse(turn, model))
            else:
                self._send_json(200, chat_completion(turn, model))
        elif req.api == "anthropic":
            if stream:
                self._send_sse(anthropic_sse(turn, model))
            else:
                self._send_json(200, anthropic_message(turn, model))
        elif stream:
            self._send_sse(openai_sse(turn, model))
        else:
            self._send_json(200, openai_response(turn, model))

    def _send_error_turn(self, api: str, err: HttpError) -> None:
        headers = {}
        if err.retry_after is not None:
            headers["retry-after"] = str(err.retry_after)
        message = (
            err.message
            or f"fake {err.status} {HTTPStatus(err.status).phrase if err.status in HTTPStatus._value2member_map_ else ''}".strip()
        )
        if api == "anthropic":
            body = {
                "type": "error",
                "error": {
                    "type": ANTHROPIC_ERROR_TYPES.get(err.status, "api_error"),
                    "message": message,
                },
            }
            headers["request-id"] = _new_id("req")
        elif api == "gemini":
            status = GEMINI_ERROR_STATUSES.get(err.status, "UNKNOWN")
            body = {"error": {"code": err.status, "message": message, "status": status}}
        else:
            etype, code = OPENAI_ERROR_CODES.get(err.status, ("server_error", None))
            body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
        self._send_json(err.status, body, headers)

    def _models(self) -> dict[str, Any]:
        model = self.fake.model
        entry = {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2025-01-01T00:00:00Z",
            "object": "model",
            "created": 0,
            "owned_by": "fake",
        }
        return {
            "object": "list",
            "data": [entry],
            "has_more": False,
            "first_id": model,
            "last_id": model,
            "models": [],
        }
