"""Fake model servers for the provider tests: stdlib `ThreadingHTTPServer`s
on 127.0.0.1 (a free port), used as context managers.

* `FakeOpenAIServer`: `POST /v1/chat/completions` (SSE chunks, `[DONE]`);
  `base_url` is `url + "/v1"`.
* `FakeAnthropicServer`: `POST /v1/messages` (Messages API SSE events, or one
  JSON message when the request does not ask to stream) and
  `/v1/messages/count_tokens`; `base_url` is `url`.

Each request takes the next script step: a `Reply` (text and/or tool calls,
optionally delayed or stalled mid-stream), a `Status` (an HTTP error with an
optional Retry-After), or a callable `(RecordedRequest) -> Reply | Status`.
When the script runs out the server answers `default` (or a 500 saying so).
Every request — headers and JSON body — is kept in `requests`.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class FakeCall:
    """A tool call; its JSON arguments are streamed in `pieces` fragments."""

    name: str
    arguments: dict[str, Any]
    id: str = ""
    pieces: int = 3


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_calls: tuple[FakeCall, ...] = ()
    stop: str | None = None  # finish_reason / stop_reason override
    usage: tuple[int, int] = (12, 7)  # (input, output) tokens
    model: str = "fake-model"
    chunk: int = 4  # characters per text delta
    delay: float = 0.0  # seconds before the response head
    stall: float = 0.0  # seconds to stall after the first event
    as_json: bool = False  # answer with one JSON body, not SSE
    error_event: dict[str, Any] | None = None  # an in-stream error (then stop)
    truncate: bool = False  # end the stream right after the text, with no stop reason


@dataclass(frozen=True)
class Status:
    status: int
    body: Any = field(default_factory=lambda: {"error": {"message": "fake error"}})
    retry_after: str | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


Step = Reply | Status | Callable[[RecordedRequest], "Reply | Status"]

_ids = itertools.count(1)


def _pieces(text: str, n: int) -> list[str]:
    if not text:
        return [""]
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


class _Server:
    api = ""

    def __init__(self, script: Iterable[Step] = (), *, default: Reply | None = None) -> None:
        self.script: list[Step] = list(script)
        self.default = default
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._port: int | None = None

    # lifecycle
    def __enter__(self) -> Any:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._port = self._httpd.server_address[1]
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._port is not None, "server not started"
        return f"http://127.0.0.1:{self._port}"  # still known after the server stops

    def push(self, *steps: Step) -> None:
        with self.lock:
            self.script.extend(steps)

    def next_step(self, req: RecordedRequest) -> Reply | Status:
        with self.lock:
            self.requests.append(req)
            step = self.script.pop(0) if self.script else None
        if step is None:
            return self.default or Status(500, {"error": {"message": "fake script exhausted"}})
        if callable(step) and not isinstance(step, Reply | Status):
            return step(req)
        return step

    def all_text(self) -> str:
        """Every recorded header and body, as one string (for leak checks)."""
        return "\n".join(
            json.dumps({"headers": r.headers, "body": r.body}, default=str) for r in self.requests
        )

    # wire formats (overridden)
    def events(self, reply: Reply, req: RecordedRequest) -> Iterator[bytes]:
        raise NotImplementedError

    def json_body(self, reply: Reply, req: RecordedRequest) -> dict[str, Any]:
        raise NotImplementedError

    def handles(self, path: str) -> bool:
        raise NotImplementedError


# ---------------------------------------------------------------------------
# OpenAI chat completions


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


class FakeOpenAIServer(_Server):
    api = "openai"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def handles(self, path: str) -> bool:
        return path.split("?")[0].rstrip("/").endswith("/chat/completions")

    def events(self, reply: Reply, req: RecordedRequest) -> Iterator[bytes]:
        cid = f"chatcmpl-{next(_ids)}"
        base = {"id": cid, "object": "chat.completion.chunk", "model": reply.model}
        yield _data({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        if reply.error_event is not None:
            yield _data(reply.error_event)
            return
        for piece in _chunks(reply.text, reply.chunk):
            yield _data({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
        if reply.truncate:
            return
        for index, call in enumerate(reply.tool_calls):
            first = {
                "index": index,
                "id": call.id or f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield _data({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
            for piece in _pieces(json.dumps(call.arguments), call.pieces):
                delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                yield _data({**base, "choices": [{"index": 0, "delta": delta}]})
        finish = reply.stop or ("tool_calls" if reply.tool_calls else "stop")
        yield _data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        body = req.body if isinstance(req.body, dict) else {}
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": reply.usage[0],
                "completion_tokens": reply.usage[1],
                "total_tokens": sum(reply.usage),
            }
            yield _data({**base, "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    def json_body(self, reply: Reply, req: RecordedRequest) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{next(_ids)}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in reply.tool_calls
            ]
        finish = reply.stop or ("tool_calls" if reply.tool_calls else "stop")
        return {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "model": reply.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1]},
        }


# ---------------------------------------------------------------------------
# Anthropic messages


def _event(name: str, obj: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()


class FakeAnthropicServer(_Server):
    api = "anthropic"

    @property
    def base_url(self) -> str:
        return self.url

    def handles(self, path: str) -> bool:
        return path.split("?")[0].rstrip("/").endswith("/v1/messages")

    def events(self, reply: Reply, req: RecordedRequest) -> Iterator[bytes]:
        message: dict[str, Any] = {
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": reply.usage[0], "output_tokens": 1},
        }
        yield _event("message_start", {"type": "message_start", "message": message})
        yield _event("ping", {"type": "ping"})
        if reply.error_event is not None:
            yield _event("error", reply.error_event)
            return
        index = 0
        if reply.text:
            start = {"type": "text", "text": ""}
            yield _event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            for piece in _chunks(reply.text, reply.chunk):
                delta = {"type": "text_delta", "text": piece}
                yield _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if reply.truncate:
            return
        for call in reply.tool_calls:
            block = {
                "type": "tool_use",
                "id": call.id or f"toolu_{next(_ids)}",
                "name": call.name,
                "input": {},
            }
            yield _event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
            for piece in _pieces(json.dumps(call.arguments), call.pieces):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": reply.usage[1]},
            },
        )
        yield _event("message_stop", {"type": "message_stop"})

    def json_body(self, reply: Reply, req: RecordedRequest) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        content += [
            {
                "type": "tool_use",
                "id": c.id or f"toolu_{next(_ids)}",
                "name": c.name,
                "input": c.arguments,
            }
            for c in reply.tool_calls
        ]
        return {
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": reply.stop or ("tool_use" if reply.tool_calls else "end_turn"),
            "usage": {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]},
        }


# ---------------------------------------------------------------------------
# The handler


class _Handler(BaseHTTPRequestHandler):
    fake: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": f"no route for GET {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        req = RecordedRequest("POST", self.path, dict(self.headers.items()), body)
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/count_tokens"):
            with self.fake.lock:
                self.fake.requests.append(req)
            self._send_json(200, {"input_tokens": 10})
            return
        if not self.fake.handles(self.path):
            with self.fake.lock:
                self.fake.requests.append(req)
            self._send_json(404, {"error": {"message": f"no route for POST {self.path}"}})
            return
        step = self.fake.next_step(req)
        if isinstance(step, Status):
            headers = {"Retry-After": step.retry_after} if step.retry_after is not None else {}
            self._send_json(step.status, step.body, headers)
            return
        if step.delay and self.fake.closing.wait(step.delay):
            return
        streaming = isinstance(body, dict) and body.get("stream") is True
        if step.as_json or not streaming:
            self._send_json(200, self.fake.json_body(step, req))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for i, chunk in enumerate(self.fake.events(step, req)):
                self.wfile.write(chunk)
                self.wfile.flush()
                if i == 0 and step.stall and self.fake.closing.wait(step.stall):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass


def refused_url() -> str:
    """A 127.0.0.1 URL on a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
