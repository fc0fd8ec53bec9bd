"""Board rows, built in one place for live and stored sessions alike."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..llm.chain import ModelSpend
from ..models import CoderSession, SessionSummary
from ..states import CoderState, FailureKind, NeedsYou, label, needs_you, needs_you_label
from .identity import is_dormant
from .live import LiveSession
from .spend import totals


def _worktree_if_present(session: CoderSession) -> str | None:
    return session.worktree if session.worktree and os.path.isdir(session.worktree) else None


def _where(session: CoderSession) -> str | None:
    """Where the agent's worktree is: `host:path` on another host."""
    if session.host and session.remote_worktree:
        return f"{session.host}:{session.remote_worktree}"
    return _worktree_if_present(session)


def _failure_kind(session: CoderSession) -> FailureKind | None:
    if session.state is not CoderState.FAILED:
        return None
    return session.failure_kind or FailureKind.ERROR


def stored_summary(session: CoderSession) -> SessionSummary:
    """A session this process is not running: never advertises an action."""
    offers = session.agent_offers
    row = SessionSummary(
        session_id=session.id,
        label=label(session.id),
        state=session.state,
        intent=session.intent,
        repo=session.repo,
        engine=session.engine,
        requested_engine=session.requested_engine,
        engine_ran=session.engine_ran,
        authored_by=list(session.authored_by),
        iterations=session.iterations,
        max_iterations=session.max_iterations,
        created_at=session.created_at,
        updated_at=session.updated_at,
        live=False,
        error=session.error,
        needs_you=None,
        needs_you_label=None,
        steering_available=False,
        question_prompt=None,
        auth_message=None,
        auth_wait_secs=None,
        failure_kind=_failure_kind(session),
        worktree=_worktree_if_present(session),
        result_branch=session.result_branch,
        result_commit=session.result_commit,
        model=session.model,
        model_pinned=session.model_pinned,
        discussion_id=session.discussion_id,
        next_seq=None,
        changed_since_verification=bool(session.changed_since_verification),
        name=session.name,
        archived=session.archived_at is not None,
        dormant=is_dormant(session),
        progress=session.foreman_progress,
        host=session.host,
        where=_where(session),
        adopted=bool(session.pane and session.pane.get("adopted")),
        agent_mode=offers.mode if offers else None,
        agent_model=offers.model if offers else None,
        agent_options=offers.option_values() if offers and offers.options else None,
    )
    update = {**_diff_stats(session), **_usage(session)}
    return row.model_copy(update=update) if update else row


def _usage(
    session: CoderSession, pending: Mapping[str, ModelSpend] | None = None
) -> dict[str, object]:
    """Tokens and cost so far (nothing when nothing was recorded)."""
    spent = totals(session, pending)
    if not spent.recorded:
        return {}
    return {
        "tokens_in": spent.tokens.input,
        "tokens_out": spent.tokens.output,
        "tokens_cache_write": spent.tokens.cache_write,
        "tokens_cache_read": spent.tokens.cache_read,
        "cost_usd": spent.cost_usd,
        "price_unknown": spent.price_unknown,
        "over_budget": session.over_budget,
    }


def _diff_stats(session: CoderSession) -> dict[str, object]:
    """The verified diff's numbers (a session not running now)."""
    if session.diff is None or not session.diff.files:
        return {}
    files = session.diff.files
    return {
        "files_changed": len(files),
        "lines_added": sum(f.added for f in files),
        "lines_removed": sum(f.removed for f in files),
    }


def summary_json(session: CoderSession) -> str:
    """The board row the store keeps beside each session (see store/listing.py)."""
    return stored_summary(session).model_dump_json()


def live_summary(live: LiveSession) -> SessionSummary:
    session = live.session
    attention = live.attention
    question = live.question.is_pending
    need = needs_you(
        session.state,
        live=True,
        question_pending=question,
        auth_outstanding=attention.auth_outstanding,
        approval_kind=attention.approval_kind,
    )
    # a hold is said while the diff it holds still waits (gone with a new verification)
    held = attention.held if need is NeedsYou.MERGE else None
    row = stored_summary(session)
    stats = live.git_stats
    git = (
        {
            "files_changed": stats.files,
            "lines_added": stats.added,
            "lines_removed": stats.removed,
            "behind_base": stats.behind,
        }
        if stats is not None and not session.state.is_terminal
        else {}
    )
    return row.model_copy(
        update={
            **git,
            **_usage(session, live.model_ledger.spend),
            "live": True,
            "iterations": max(session.iterations, attention.iteration),
            "needs_you": need,
            "needs_you_label": held or needs_you_label(need),
            "approval_held": held,
            "steering_available": live.steering.is_open and not question,
            "question_prompt": live.question.prompt if question else None,
            "question_reminders": live.question.reminders if question else 0,
            "auth_message": attention.auth_message,
            "auth_wait_secs": attention.auth_wait_secs,
            "model_notice": attention.model_notice,
            "boundary_notice": attention.boundary_notice,
            "next_seq": live.log.next_seq,
            "agent_status": live.agent_status.status.value if live.agent_status else None,
            "agent_reason": live.agent_status.reason if live.agent_status else None,
            "agent_source": live.agent_status.source if live.agent_status else None,
            "context_refresh_due": session.context_refresh_due,
        }
    )
