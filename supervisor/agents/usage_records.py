"""Tokens an agent CLI recorded it used, read from its own files.

Claude Code writes one JSONL line per assistant message block
(`~/.claude/projects/<cwd>/<session id>.jsonl`): `message.usage` holds
`input_tokens`, `output_tokens`, `cache_creation_input_tokens` and
`cache_read_input_tokens`, `message.model` the model, and a message written
in several lines repeats its `message.id` (the last line counts). Codex
writes `event_msg` lines whose payload is a `token_count` with the thread's
running total (`info.total_token_usage`: its `input_tokens` include the
`cached_input_tokens`), and `turn_context` lines naming the model, in
`sessions/Y/M/D/rollout-…-<thread id>.jsonl` whose first line
(`session_meta`) names the thread. Gemini CLI appends one JSONL record per
message (written again as it grows, by `id`) to
`~/.gemini/tmp/<project>/chats/session-<time>-<id[:8]>.jsonl`, whose first
record names the session (`sessionId`); a `gemini` message's `tokens` hold
`input` (its `cached` part included), `output`, `thoughts` and `tool`.

These files are the agent's to write, so they are data from an adversary:
only a regular file (no symlink as its last part, none leading out of the
agent's own directories) named for this session's agent conversation is
read; a record naming another conversation or working outside the session's
worktree is ignored, and so is a file whose header names another one. A line longer than `MAX_LINE` is skipped
whole, at most `READ_BUDGET` bytes are read per call (the rest the next
time), a count that is not a whole number from 0 to `MAX_TOKENS` drops its
record, and nothing read is ever run. Reading is incremental: each call
reads only what was appended since the last one.
"""

from __future__ import annotations

import json
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..models import TokenUse

RecordKind = Literal["claude", "codex", "gemini"]

MAX_LINE = 4 * 1024 * 1024  # a longer line is skipped, not parsed
READ_BUDGET = 16 * 1024 * 1024  # bytes read per call at most
MAX_TOKENS = 10**10  # more in one record is not a count, it is a lie
MAX_OPEN_RECORDS = 4096  # messages kept replaceable; older ones are settled
MAX_MODELS = 16  # distinct model names kept; the rest are counted as one
OTHER_MODELS = "other models"

KINDS: dict[str, RecordKind] = {"claude": "claude", "codex": "codex", "gemini": "gemini"}
# what a line that may count always holds (Codex: `token_count` or `turn_context`)
MARKS: dict[str, bytes] = {"claude": b'"usage"', "gemini": b'"tokens"'}


def _count(value: Any) -> int | None:
    """A token count, or None when it is not a plausible one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKENS else None


def _claude_use(usage: Any) -> TokenUse | None:
    if not isinstance(usage, dict):
        return None
    counts = [
        _count(usage.get(key, 0))
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    ]
    if any(c is None for c in counts):
        return None
    fresh, out, write, read = (c or 0 for c in counts)
    return TokenUse(input=fresh, output=out, cache_write=write, cache_read=read)


def _gemini_use(tokens: Any) -> TokenUse | None:
    if not isinstance(tokens, dict):
        return None
    counts = [_count(tokens.get(k, 0)) for k in ("input", "cached", "output", "thoughts", "tool")]
    if any(c is None for c in counts):
        return None
    given, cached, out, thoughts, tool = (c or 0 for c in counts)
    if cached > given:
        return None
    return TokenUse(input=given - cached + tool, output=out + thoughts, cache_read=cached)


def _codex_use(total: Any) -> TokenUse | None:
    if not isinstance(total, dict):
        return None
    given = _count(total.get("input_tokens", 0))
    cached = _count(total.get("cached_input_tokens", 0))
    out = _count(total.get("output_tokens", 0))
    if given is None or cached is None or out is None or cached > given:
        return None
    return TokenUse(input=given - cached, output=out, cache_read=cached)


def real_roots(roots: list[Path]) -> list[Path]:
    """The roots with their symlinks resolved (the ones that exist)."""
    found = []
    for root in roots:
        try:
            found.append(root.resolve(strict=True))
        except (OSError, RuntimeError):
            continue
    return found


def opened_path(fd: int, path: Path) -> Path | None:
    """Where the file open at `fd` really is (the kernel's word for it, so a
    directory swapped for a link after the open changes nothing)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        try:
            return path.resolve(strict=True)
        except (OSError, RuntimeError):
            return None


def inside(real: Path, roots: list[Path]) -> bool:
    text = str(real)
    return any(text.startswith(str(root).rstrip("/") + "/") for root in roots)


def belongs(kind: RecordKind, path: Path, agent_session: str) -> bool:
    """The file's name is the one the agent gives this conversation's records."""
    if not agent_session or "/" in agent_session:
        return False
    if kind == "claude":
        return path.name == f"{agent_session}.jsonl"
    if kind == "gemini":
        return path.name.startswith("session-") and path.name.endswith(
            f"-{agent_session[:8]}.jsonl"
        )
    return path.name.startswith("rollout-") and path.name.endswith(f"-{agent_session}.jsonl")


@dataclass
class UsageRecords:
    """One agent record file, read a little further on each `read`."""

    kind: RecordKind
    path: Path
    agent_session: str
    roots: list[Path]
    named: str = ""  # the path or pattern the session's identity gave
    # the session's worktree: a Claude Code record (its `cwd`) or a Codex
    # thread (its header's `cwd`) working elsewhere is another session's
    workdir: str | None = None
    offset: int = 0
    refused: str | None = None  # why the file is not counted (it was not read)
    skipped_lines: int = 0
    _file: tuple[int, int] | None = None  # (device, inode) being read
    _skipping: bool = False  # inside a line longer than MAX_LINE
    _settled: dict[str, TokenUse] = field(default_factory=dict)  # by model
    _open: OrderedDict[str, tuple[str, TokenUse]] = field(default_factory=OrderedDict)
    _model: str | None = None  # Codex: the model the last turn named
    _header_seen: bool = False  # Codex, Gemini CLI: the first record named this conversation
    _real_roots: list[Path] | None = None  # `roots` resolved, once they exist
    _models: set[str] = field(default_factory=set)  # the model names counted so far

    def usage(self) -> dict[str, TokenUse]:
        """Tokens by model, as far as read."""
        out = dict(self._settled)
        for model, use in self._open.values():
            out[model] = out.get(model, TokenUse()).plus(use)
        return out

    def read(self) -> bool:
        """Read what was appended; True when the usage may have changed. A
        refused file stays refused (and uncounted)."""
        if self.refused is not None:
            return False
        try:
            return self._read()
        except _Refused as refusal:
            return self._refuse(str(refusal))

    def _read(self) -> bool:
        if not belongs(self.kind, self.path, self.agent_session):
            return self._refuse("it is not named for this conversation")
        try:
            seen = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False  # not written yet
        if (seen.st_dev, seen.st_ino) == self._file and seen.st_size == self.offset:
            return False  # the same file, nothing appended: not even opened
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False  # gone again, or a symlink: nothing read
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return self._refuse("it is not a regular file")
            if not self._real_roots:
                self._real_roots = real_roots(self.roots)
            real = opened_path(fd, self.path)
            if real is None or not inside(real, self._real_roots):
                return self._refuse("it is outside the agent's own directories")
            changed = False
            if self._file != (info.st_dev, info.st_ino) or info.st_size < self.offset:
                changed = bool(self._settled or self._open)
                self._restart((info.st_dev, info.st_ino))
            if info.st_size == self.offset:
                return changed
            fh.seek(self.offset)
            data = fh.read(min(READ_BUDGET, info.st_size - self.offset))
        return self._take(data) or changed

    def _refuse(self, why: str) -> bool:
        had = bool(self._settled or self._open)
        self.refused = why
        self._restart(None)
        return had

    def _restart(self, file: tuple[int, int] | None) -> None:
        self._file, self.offset, self._skipping = file, 0, False
        self._settled, self._open, self._model, self._header_seen = {}, OrderedDict(), None, False
        self._models = set()

    def _take(self, data: bytes) -> bool:
        changed = False
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            elif end - start <= MAX_LINE:
                changed = self._line(data[start:end]) or changed
            else:
                self.skipped_lines += 1
            start = end + 1
        tail = len(data) - start
        if tail > MAX_LINE or (self._skipping and tail):
            if not self._skipping:
                self.skipped_lines += 1
            self._skipping = True  # the rest of this line is passed over
            start = len(data)
        self.offset += start
        return changed

    def _line(self, raw: bytes) -> bool:
        if not raw.strip():
            return False
        if self._header_seen or self.kind == "claude":
            # most lines are tool output: not parsed unless they could count
            if self.kind != "codex" and MARKS[self.kind] not in raw:
                return False
            if self.kind == "codex" and b"token_count" not in raw and b"turn_context" not in raw:
                return False
        try:
            row = json.loads(raw)
        except ValueError:
            return False
        if not isinstance(row, dict):
            return False
        if self.kind == "claude":
            return self._claude(row)
        if self.kind == "gemini":
            return self._gemini(row)
        return self._codex(row)

    def _here(self, cwd: Any) -> bool:
        """`cwd` is the session's worktree (or in it), or no worktree is known."""
        if self.workdir is None:
            return True
        root = self.workdir.rstrip("/")
        return isinstance(cwd, str) and (cwd == root or cwd.startswith(root + "/"))

    def _claude(self, row: dict[str, Any]) -> bool:
        if row.get("type") != "assistant" or row.get("sessionId") != self.agent_session:
            return False
        if not self._here(row.get("cwd")):
            return False
        message = row.get("message")
        if not isinstance(message, dict):
            return False
        key, model = message.get("id"), message.get("model")
        if not isinstance(key, str) or not isinstance(model, str) or not model:
            return False
        if model.startswith("<"):  # `<synthetic>`: Claude Code's own notes, no model ran
            return False
        use = _claude_use(message.get("usage"))
        if use is None:
            return False
        self._keep(key[:200], model[:200], use)
        return True

    def _gemini(self, row: dict[str, Any]) -> bool:
        if not self._header_seen:
            if row.get("sessionId") != self.agent_session:
                raise _Refused("its first record names another session")
            self._header_seen = True
            return False
        key, model = row.get("id"), row.get("model")
        if row.get("type") != "gemini" or not isinstance(key, str):
            return False
        if not isinstance(model, str) or not model:
            return False
        use = _gemini_use(row.get("tokens"))
        if use is None:
            return False
        self._keep(key[:200], model[:200], use)
        return True

    def _codex(self, row: dict[str, Any]) -> bool:
        payload = row.get("payload")
        if not isinstance(payload, dict):
            return False
        kind = row.get("type")
        if not self._header_seen:
            if kind != "session_meta" or payload.get("id") != self.agent_session:
                raise _Refused("its header names another thread")
            if "cwd" in payload and not self._here(payload["cwd"]):
                raise _Refused("its thread works in another directory")
            self._header_seen = True
            return False
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            self._model = payload["model"][:200] or None
            return False
        if kind != "event_msg" or payload.get("type") != "token_count":
            return False
        info = payload.get("info")
        use = _codex_use(info.get("total_token_usage") if isinstance(info, dict) else None)
        if use is None:
            return False
        # a running total: the thread's whole use so far, by the model now
        self._open.clear()
        self._settled.clear()
        self._open["total"] = (self._model or "unknown model", use)
        return True

    def _keep(self, key: str, model: str, use: TokenUse) -> None:
        if model not in self._models:
            if len(self._models) >= MAX_MODELS:
                model = OTHER_MODELS
            self._models.add(model)
        self._open.pop(key, None)
        self._open[key] = (model, use)
        while len(self._open) > MAX_OPEN_RECORDS:
            _, (old_model, old) = self._open.popitem(last=False)
            self._settled[old_model] = self._settled.get(old_model, TokenUse()).plus(old)


class _Refused(Exception):
    """A file whose header names another conversation."""
