"""Context packs: a session's conversation and a bounded snapshot of its
worktree, exported to load into a new session or a discussion.

The conversation is the agent's own transcript where corral can read one
(Claude Code, Codex, Gemini CLI, Aider), else corral's log of the session:
the task, the operator's guidance and answers, and what the agent said. Only
the last `MAX_PACK_MESSAGES` messages are kept, each cut to
`MAX_PACK_MESSAGE_CHARS` (`truncated` says so). The snapshot holds where HEAD
was, `git status` of the worktree, and AGENTS.md / CLAUDE.md / README.md when
each is a small UTF-8 regular file inside it (a symlink or a large file is
listed as skipped, never followed or read whole). No agent session id, login
or path outside the worktree is written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..events import CoderEvent, OperatorGuidanceData, PaneAnswerData, PlanTextData
from ..git.run import GitError, git
from ..models import (
    MAX_PACK_FILE_CHARS,
    MAX_PACK_MESSAGE_CHARS,
    MAX_PACK_MESSAGES,
    CoderSession,
    ContextPack,
    PackFile,
    PackMessage,
    PackRepository,
    TranscriptTurn,
)
from ..states import label

SELECTED_FILES = ("AGENTS.md", "CLAUDE.md", "README.md")
MAX_CHANGED = 200


def _clip(text: str) -> tuple[str, bool]:
    text = text.strip()
    if len(text) <= MAX_PACK_MESSAGE_CHARS:
        return text, False
    return text[: MAX_PACK_MESSAGE_CHARS - 1] + "…", True


def _from_log(session: CoderSession, events: Iterable[CoderEvent]) -> list[tuple[str, str]]:
    """corral's own record of the conversation, for an agent with no transcript."""
    said: list[tuple[str, str]] = [("user", session.execution_intent())]
    for event in events:
        data = event.data
        if isinstance(data, PlanTextData):
            said.append(("assistant", data.text))
        elif isinstance(data, OperatorGuidanceData) and data.status == "queued":
            said.append(("user", data.text))
        elif isinstance(data, PaneAnswerData):
            said.append(("user", data.answer))
    return said


def pack_messages(
    session: CoderSession, turns: list[TranscriptTurn], events: Iterable[CoderEvent]
) -> tuple[list[PackMessage], int, bool]:
    """(the messages kept, how many there were, whether any was cut)."""
    said = [(t.role, t.text) for t in turns] or _from_log(session, events)
    said = [(role, text) for role, text in said if text.strip()]
    truncated = len(said) > MAX_PACK_MESSAGES
    kept: list[PackMessage] = []
    for role, text in said[-MAX_PACK_MESSAGES:]:
        clipped, cut = _clip(text)
        truncated = truncated or cut
        kept.append(PackMessage(role="user" if role == "user" else "assistant", text=clipped))
    return kept, len(said), truncated


def _read_selected(root: Path, name: str) -> PackFile:
    path = root / name
    try:
        st = os.lstat(path)
    except OSError:
        return PackFile(path=name, skipped="absent")
    if not stat.S_ISREG(st.st_mode):
        return PackFile(path=name, skipped="not a regular file")
    if st.st_size > MAX_PACK_FILE_CHARS:
        return PackFile(path=name, skipped="too large")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_PACK_FILE_CHARS + 1)
    except OSError:
        return PackFile(path=name, skipped="unreadable")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return PackFile(path=name, skipped="not UTF-8")
    if len(text) > MAX_PACK_FILE_CHARS:
        return PackFile(path=name, skipped="too large")
    return PackFile(path=name, text=text)


def repository_snapshot(worktree: Path) -> PackRepository | None:
    """HEAD, the changed files and the selected files of `worktree` (None
    when it is gone). Blocks on git."""
    if not worktree.is_dir():
        return None
    try:
        head: str | None = git(worktree, "rev-parse", "--verify", "-q", "HEAD").strip() or None
    except GitError:
        head = None
    try:
        status = git(worktree, "status", "--porcelain", "--untracked-files=all")
        changed = status.splitlines()[:MAX_CHANGED]
    except GitError:
        changed = []
    files = [_read_selected(worktree, name) for name in SELECTED_FILES]
    return PackRepository(head=head, changed=changed, files=files)


def export_pack(
    session: CoderSession, turns: list[TranscriptTurn], events: Iterable[CoderEvent]
) -> ContextPack:
    """The session's context pack. Blocks on git (the snapshot)."""
    kept, count, truncated = pack_messages(session, turns, events)
    agent = str((session.pane or {}).get("agent") or session.engine_ran or session.engine)
    worktree = Path(session.worktree) if session.worktree else None
    return ContextPack(
        source_session=label(session.id),
        source_agent=agent.removeprefix("external:"),
        source_message_count=count,
        retained_messages=kept,
        repository=repository_snapshot(worktree) if worktree is not None else None,
        truncated=truncated,
    )
