"""Keyed starts: a caller that sends `idempotency_key` with a start gets one
session for that key, however often it repeats the request. An MCP client
that times out and retries, or a double click that sends twice, must not
leave the operator two sessions to confirm and pay for.

A key belongs to its caller (the operator, or the agent of one session): the
same key from someone else is a different key, so nobody reads another's run
by guessing theirs. The request is fingerprinted (intent, repository,
contract, engine, base); a key repeated with a different request is refused
with a sentence rather than silently answered with the first run. A key
lives `KEY_TTL_SECS`; at most `MAX_KEYS` live at once and a new key past that
is refused, never evicted (an evicted key would let the next retry start a
second session).

Two deliberate departures from the node's spawn cache: a start that failed
is not remembered (nothing was created, so a retry cannot make a second
session, and a refusal such as "too many open runs" must not stick to the key
for 15 minutes); and a repeat while the first start is still under way waits
for it and answers with the same run, instead of racing it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CorralError
from .callers import Agent, Caller
from .protocol import StartArgs

KEY_TTL_SECS = 900.0
MAX_KEYS = 256
MAX_KEY_CHARS = 200


def _owner_of(caller: Caller | None) -> str:
    if isinstance(caller, Agent):
        return f"agent:{caller.session_id or '?'}"
    return "operator"


def request_digest(args: StartArgs) -> str:
    """What makes two starts the same start (not `invoked_by`: a record)."""
    shape = [args.intent, args.repo, args.contract, args.engine, args.base]
    blob = json.dumps(shape, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Entry:
    digest: str
    expires_at: float
    answer: asyncio.Future[dict[str, Any]]


class StartKeys:
    """The live keys of one owner (in memory: a restart forgets them, as it
    forgets the handles they answer with)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    async def once(
        self,
        args: StartArgs,
        caller: Caller | None,
        start: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """`start()` once per (caller, key); a repeat gets the first answer
        with `"replayed": true`. Without a key, `start()` as it is."""
        key = args.idempotency_key
        if key is None:
            return await start()
        key = key.strip()
        if not key or len(key) > MAX_KEY_CHARS:
            raise CorralError(
                f"idempotency_key must be 1 to {MAX_KEY_CHARS} characters: send one per "
                "start you mean (a fresh random id), the same one only when you repeat it"
            )
        self._expire()
        slot = (_owner_of(caller), key)
        digest = request_digest(args)
        entry = self._entries.get(slot)
        if entry is not None:
            if entry.digest != digest:
                raise CorralError(
                    f"idempotency_key {key!r} was already used for a different start "
                    "(intent, repo, contract, engine or base differ): use a new key for a new "
                    "run, or repeat the first request exactly to get its handle"
                )
            try:
                answer = await asyncio.shield(entry.answer)
            except asyncio.CancelledError:
                if not entry.answer.cancelled():
                    raise  # this caller went away
                raise CorralError(
                    f"the first start with idempotency_key {key!r} was stopped before it "
                    "answered, and no run was made: send the start again"
                ) from None
            return {**answer, "replayed": True}
        if len(self._entries) >= MAX_KEYS:
            raise CorralError(
                f"{MAX_KEYS} start keys are live, which is the limit: start without "
                f"idempotency_key, or wait up to {int(KEY_TTL_SECS // 60)} minutes for old "
                "keys to expire"
            )
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        # taken before anything awaits: a repeat arriving mid-start waits for this one
        self._entries[slot] = _Entry(digest, self.clock() + KEY_TTL_SECS, future)
        try:
            answer = await start()
        except BaseException as exc:
            self._entries.pop(slot, None)
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: no warning when no repeat was waiting
            else:
                future.cancel()
            raise
        future.set_result(answer)
        return answer

    def _expire(self) -> None:
        now = self.clock()
        for slot in [s for s, e in self._entries.items() if e.expires_at <= now]:
            del self._entries[slot]
