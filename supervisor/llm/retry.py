"""HTTP plumbing shared by the HTTP providers: one streaming POST read on a
daemon thread (stdlib `http.client`; no third-party HTTP client), Server-Sent
Events framing, status → `ModelError` mapping and retry with backoff.

The reading thread hands everything to the event loop in order (the response
head, then each SSE event, or the whole body), so `on_delta` callbacks always
run on the loop. Closing an exchange shuts its socket down, which wakes the
thread at once: a timed-out or cancelled call never leaves a reader behind.

Nothing here logs or formats a key: error bodies of rejected credentials are
dropped, other bodies are capped and scrubbed of the key before they reach a
message.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http.client
import json
import logging
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .base import ModelError, Turn

log = logging.getLogger("corral.llm")

MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 32 * 1024 * 1024
IO_TIMEOUT_GRACE = 2.0
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


# ---------------------------------------------------------------------------
# Retry policy


@dataclass
class RetryPolicy:
    """429 and 5xx are retried `max_retries` times (so 1 + max_retries
    requests), waiting `base_delay * 2**n` (0.5 s, 1 s, 2 s …, at most
    `max_delay`), or the server's Retry-After capped at `max_retry_after`."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 20.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return min(self.base_delay * (2**retry), self.max_delay)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds, fractional
    tolerated, or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class Retryable(Exception):
    """A failure worth another request: nothing reached `on_delta` yet."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


async def with_retries(
    attempt: Callable[[float], Awaitable[Turn]],
    *,
    policy: RetryPolicy,
    timeout: float,
    where: str,
) -> Turn:
    """Run `attempt(remaining_secs)` until it returns, retrying `Retryable`
    failures with backoff; the whole call (retries and waits included) is
    bounded by `timeout`, after which it is a `ModelError(kind="timeout")`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    retries = 0
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise timeout_error(where, timeout)
        try:
            return await asyncio.wait_for(attempt(remaining), remaining)
        except TimeoutError:
            raise timeout_error(where, timeout) from None
        except Retryable as exc:
            if retries >= policy.max_retries:
                raise exc.error from None
            delay = policy.delay(retries, exc.retry_after)
            if loop.time() + delay >= deadline:
                raise exc.error from None
            retries += 1
            log.info(
                "model server %s: %s; retry %d of %d in %.2fs",
                where,
                exc.error.kind,
                retries,
                policy.max_retries,
                delay,
            )
            await policy.sleep(delay)


def timeout_error(where: str, timeout: float) -> ModelError:
    return ModelError(
        f"the model server at {where} did not finish answering within {timeout:g} s",
        kind="timeout",
    )


# ---------------------------------------------------------------------------
# Status and transport errors


def scrub(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "[redacted]")
    return text


def error_detail(body: bytes, secret: str | None, limit: int = 300) -> str:
    """The server's own error message from a JSON or text body, one line,
    capped and scrubbed of the key."""
    text = body[:MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            text = str(err.get("message") or err.get("type") or err)
        elif isinstance(err, str):
            text = err
        elif isinstance(data.get("message"), str):
            text = data["message"]
    text = " ".join(scrub(text, secret).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status_error(
    status: int,
    body: bytes,
    *,
    where: str,
    model: str,
    key_hint: str,
    secret: str | None,
    retry_after: float | None = None,
) -> ModelError | Retryable:
    """The `ModelError` for a non-200 answer (wrapped in `Retryable` for
    429 / 5xx / 408). A rejected key never echoes the server's body."""
    if status in (401, 403):
        if secret:
            msg = f"the model server at {where} rejected the API key: set {key_hint} to a valid key"
        else:
            msg = f"the model server at {where} requires an API key: set {key_hint}"
        return ModelError(msg, kind="auth", status=status)
    detail = error_detail(body, secret)
    suffix = f": {detail}" if detail else ""
    if status == 429:
        err = ModelError(
            f"the model server at {where} is rate limiting requests (HTTP 429){suffix}",
            kind="rate_limit",
            status=status,
        )
        return Retryable(err, retry_after)
    if status >= 500 or status == 408:
        err = ModelError(
            f"the model server at {where} failed (HTTP {status}){suffix}",
            kind="server",
            status=status,
        )
        return Retryable(err, retry_after)
    if status == 404:
        return ModelError(
            f"the model server at {where} answered 404 (wrong base URL, or no model "
            f"{model!r}?){suffix}",
            kind="bad_request",
            status=status,
        )
    return ModelError(
        f"the model server at {where} refused the request (HTTP {status}){suffix}",
        kind="bad_request",
        status=status,
    )


def transport_error(exc: BaseException, *, where: str, started: bool) -> ModelError:
    """A socket-level failure: before an answer began it is `unavailable`,
    mid-answer it is `server`."""
    if isinstance(exc, TimeoutError):
        return ModelError(f"the model server at {where} stopped answering", kind="timeout")
    if not started:
        if isinstance(exc, ConnectionRefusedError):
            return ModelError(
                f"cannot reach the model server at {where}: is it running?", kind="unavailable"
            )
        if isinstance(exc, ssl.SSLError):
            return ModelError(
                f"cannot reach the model server at {where}: TLS failed ({exc})",
                kind="unavailable",
            )
        return ModelError(
            f"cannot reach the model server at {where}: is it running? ({exc})",
            kind="unavailable",
        )
    return ModelError(
        f"the connection to the model server at {where} broke mid-answer ({exc})", kind="server"
    )


# ---------------------------------------------------------------------------
# SSE


def iter_sse(lines: Iterator[bytes]) -> Iterator[tuple[str, str]]:
    """(event name, data) pairs from SSE lines. Multi-line data is joined
    with newlines; comments and unknown fields are skipped; a final event
    without its blank line is still delivered."""
    event = ""
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield event or "message", "\n".join(data)


# ---------------------------------------------------------------------------
# One streaming exchange


@dataclass
class Head:
    status: int
    headers: dict[str, str]

    @property
    def is_sse(self) -> bool:
        return "text/event-stream" in self.headers.get("content-type", "")

    @property
    def retry_after(self) -> float | None:
        return parse_retry_after(self.headers.get("retry-after"))


def _proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
    """The environment's proxy for this URL (never for loopback hosts)."""
    if host in _LOOPBACK:
        return None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(proxy if "//" in proxy else f"http://{proxy}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or 80


class Exchange:
    """A POST whose answer is read on a daemon thread and handed to the loop
    as queue items: ("head", Head), ("event", name, data) for an SSE answer or
    ("body", bytes) otherwise, then ("end",) — or ("error", exc)."""

    def __init__(self, url: str, headers: dict[str, str], body: bytes, io_timeout: float) -> None:
        self.url = url
        self.headers = headers
        self.body = body
        # A backstop only: the caller's deadline (asyncio) fires first and
        # closes the socket; this bounds a thread whose loop went away.
        self.io_timeout = max(io_timeout, 0.05) + IO_TIMEOUT_GRACE
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._conn: http.client.HTTPConnection | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corral-llm-http", daemon=True)
        self.started = False  # a 200 head arrived

    # -- thread side --------------------------------------------------------
    def _put(self, item: tuple[Any, ...]) -> None:
        if self._closed.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def _connection(self) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        proxy = _proxy_for(parts.scheme, host)
        conn: http.client.HTTPConnection
        if https:
            context = ssl.create_default_context()
            if proxy:
                conn = http.client.HTTPSConnection(*proxy, timeout=self.io_timeout, context=context)
                conn.set_tunnel(host, port)
            else:
                conn = http.client.HTTPSConnection(
                    host, port, timeout=self.io_timeout, context=context
                )
        elif proxy:
            conn = http.client.HTTPConnection(*proxy, timeout=self.io_timeout)
            path = urlunsplit(("http", f"{host}:{port}", parts.path or "/", parts.query, ""))
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.io_timeout)
        return conn, path

    def _run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        try:
            conn, path = self._connection()
            self._conn = conn
            conn.connect()
            if self._closed.is_set():
                return
            conn.request("POST", path, body=self.body, headers=self.headers)
            resp = conn.getresponse()
            head = Head(resp.status, {k.lower(): v for k, v in resp.getheaders()})
            self._put(("head", head))
            if resp.status == 200 and head.is_sse:
                for name, data in iter_sse(iter(resp.readline, b"")):
                    if self._closed.is_set():
                        return
                    self._put(("event", name, data))
            else:
                limit = MAX_JSON_BODY if resp.status == 200 else MAX_ERROR_BODY
                self._put(("body", resp.read(limit)))
            self._put(("end",))
        except BaseException as exc:
            self._put(("error", exc))
        finally:
            if conn is not None:
                conn.close()

    # -- loop side ----------------------------------------------------------
    def start(self) -> Exchange:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop reading: shut the socket down so a blocked read returns now."""
        self._closed.set()
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    async def next(self) -> tuple[Any, ...]:
        return await self.queue.get()

    async def head(self, where: str) -> Head:
        item = await self.next()
        if item[0] == "error":
            raise transport_error(item[1], where=where, started=False)
        assert item[0] == "head", item
        self.started = item[1].status == 200
        return item[1]

    async def body_bytes(self, where: str) -> bytes:
        item = await self.next()
        if item[0] == "error":
            raise transport_error(item[1], where=where, started=self.started)
        return item[1] if item[0] == "body" else b""

    async def events(self, where: str) -> AsyncIterator[tuple[str, str]]:
        while True:
            item = await self.next()
            kind = item[0]
            if kind == "event":
                yield item[1], item[2]
            elif kind == "error":
                raise transport_error(item[1], where=where, started=True)
            else:
                return


def start_exchange(
    url: str, headers: dict[str, str], payload: dict[str, Any], io_timeout: float
) -> Exchange:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return Exchange(url, headers, body, io_timeout).start()


def json_or_error(body: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise ModelError(
            f"the model server at {where} sent an answer that is not JSON", kind="server"
        ) from None
    if not isinstance(data, dict):
        raise ModelError(f"the model server at {where} sent an unexpected answer", kind="server")
    return data


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """A tool call's arguments: a JSON object (empty when blank); anything
    that does not parse to an object is kept as `{"_raw": text}` so the
    caller can report it back to the model."""
    if isinstance(raw, dict):
        return raw
    if raw is None or not str(raw).strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}
