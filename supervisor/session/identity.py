"""An agent's own session identity, read from its hooks.

Claude Code's hook payloads carry `session_id` and `transcript_path`;
Codex's `notify` payload carries `thread-id`; OpenCode's plugin names its
`ses_…` session. Gemini CLI's id is chosen by corral at launch, and Aider's
conversation is its per-session chat history (both recorded by the engine). With it, a session whose agent
went away (corral was closed and the pane died, or the agent crashed) is
dormant rather than failed: its conversation can be resumed in the same
worktree. Without it, it is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ..agents.profiles import known_profile
from ..models import AgentIdentity, CoderSession, IdentityState
from ..states import CoderState
from .transcripts import read_transcript, resolve

_ID_KEYS = ("session_id", "thread-id", "thread_id", "sessionID")


def identity_from_hook(event: Mapping[str, object]) -> tuple[str | None, str | None]:
    """(the agent's session id, its transcript path) named by one hook payload."""
    sid = next((event[k] for k in _ID_KEYS if isinstance(event.get(k), str) and event[k]), None)
    transcript = event.get("transcript_path")
    return (
        str(sid) if sid else None,
        transcript if isinstance(transcript, str) and transcript else None,
    )


def note_hook(
    session: CoderSession,
    agent: str,
    event: Mapping[str, object],
    locate: Callable[[str], Path | None] | None = None,
) -> bool:
    """Fold one hook payload into the session's identity; True when it changed.

    `locate` finds where the agent saved a conversation its hooks name without
    a path (Codex); an id it cannot find was never saved, so it is not the
    conversation to resume and is left out."""
    sid, transcript = identity_from_hook(event)
    if sid is None:
        return False
    if transcript is None and locate is not None:
        found = locate(sid)
        if found is None:
            return False
        transcript = str(found)
    current = session.agent_identity
    if (
        current is not None
        and current.session_id == sid
        and current.state is IdentityState.LIVE
        and (transcript is None or current.transcript_path == transcript)
    ):
        return False
    session.agent_identity = AgentIdentity(
        agent=agent,
        session_id=sid,
        transcript_path=transcript or (current.transcript_path if current else None),
        state=IdentityState.LIVE,
    )
    return True


def resume_id(session: CoderSession) -> str | None:
    """The agent session a new pane should resume, when one is known and its
    transcript (when the agent named one) was written: an agent killed before
    it saved anything has no conversation to go back to, and starts afresh."""
    identity = session.agent_identity
    if identity is None or identity.state is IdentityState.UNAVAILABLE:
        return None
    if identity.transcript_path and not _holds_a_turn(identity.agent, identity.transcript_path):
        return None
    return identity.session_id


def _holds_a_turn(agent: str, path: str) -> bool:
    """Whether the agent saved a conversation there: a file that exists but
    holds no user turn yet (Claude Code writes its first lines before the
    prompt) cannot be resumed — `claude --resume` says "No conversation
    found" and exits."""
    found = resolve(path)
    if found is None:
        return False
    fmt = _format(agent)
    if not fmt:  # an agent whose transcript corral cannot read: that it was written counts
        return True
    try:
        return any(turn.role == "user" for turn in read_transcript(found, fmt))
    except (OSError, ValueError):
        return False


def _format(agent: str) -> str:
    """The transcript format `agent`'s profile names ("" when none)."""
    profile = known_profile(agent)
    return (profile.transcript_format or "") if profile is not None else ""


def can_go_dormant(session: CoderSession) -> bool:
    """A running session whose agent is gone keeps its place when its
    conversation can be resumed in its (still present) worktree."""
    return (
        session.state is CoderState.RUNNING
        and resume_id(session) is not None
        and bool(session.worktree)
        and Path(str(session.worktree)).is_dir()
    )


def mark_dormant(session: CoderSession) -> None:
    assert session.agent_identity is not None
    session.agent_identity.state = IdentityState.DORMANT


def is_dormant(session: CoderSession) -> bool:
    return (
        session.state is CoderState.RUNNING
        and session.agent_identity is not None
        and session.agent_identity.state is IdentityState.DORMANT
    )
