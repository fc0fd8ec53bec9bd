"""Tokens and cost per session, and the per-session budget.

Every `usage_secs` the owner reads each live session's agent records a little
further (only what was appended: `agents/usage_records.py`), off the event
loop, and prices them (`agents/prices.py`), with what an engine reported
itself meanwhile (an ACP agent's `usage`, `RunContext.note_usage`). A change is stored with the
session and pushed to the board. The row adds what corral's own models
served (drafting, the built-in engine: `model_use`, `cost_usd`). Crossing
`[budget] per_session_usd` or `per_session_tokens` sets the row's
`over_budget` sentence (the notifier tells of the edge, once).
Sessions on other hosts are left out: their agents' files are not here.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..agents.base import AgentUnavailable
from ..agents.prices import priced
from ..agents.profiles import known_profile, profile_for
from ..agents.provider_home import session_env, session_home
from ..cancelling import cancel_and_wait
from ..config import BudgetSettings, ModelPrice
from ..models import CoderSession
from ..panes.stop_mark import agents_dir
from .registry import SessionRegistry
from .spend import budget_sentence, totals

if TYPE_CHECKING:  # the records' reader loads with the first session that has any
    from ..agents.usage_records import UsageRecords

log = logging.getLogger(__name__)


def record_roots(agent: str, env: Mapping[str, str]) -> list[Path]:
    """Where `agent` keeps the records `usage_records` reads (its profile's
    `usage_dir` under each of its own directories)."""
    try:
        profile = profile_for(agent)
    except AgentUnavailable:
        return []
    if profile.usage_dir is None:
        return []
    dirs, _ = profile.own_paths(dict(env))
    return [d / profile.usage_dir for d in dirs]


def newest_jsonl(pattern: str) -> Path | None:
    """The newest `.jsonl` file `pattern` matches (a file vanishing meanwhile
    is passed over)."""
    dated = []
    for found in glob.glob(pattern):
        if found.endswith(".jsonl"):
            try:
                dated.append((os.path.getmtime(found), found))
            except OSError:
                continue
    return Path(max(dated)[1]) if dated else None


def corrals_own_pattern(
    agent: str, named: str, agent_session: str, home: Path | None = None
) -> bool:
    """Whether `named` is the file pattern corral itself made for this agent's
    conversation (Gemini CLI's chat file, whose name holds its start time),
    under the session's own provider home `home` or the operator's."""
    profile = known_profile(agent)
    return profile is not None and named in profile.launch_transcripts(agent_session, home)


class UsageWatch:
    def __init__(
        self,
        registry: SessionRegistry,
        interval: float,
        budget: BudgetSettings,
        prices: Mapping[str, ModelPrice],
    ) -> None:
        self._registry = registry
        self.interval = interval
        self.budget = budget
        self.prices = dict(prices)
        self._records: dict[str, UsageRecords] = {}  # session -> its agent's file
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="the usage watch")
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # one bad pass must not end the watch
                log.exception("reading agents' usage failed")
            await asyncio.sleep(self.interval)

    def _wanted(self, session: CoderSession) -> UsageRecords | None:
        """The session's agent record file, kept from the last pass when it
        is still the same one."""
        identity = session.agent_identity
        if session.host or identity is None:
            return None
        from ..agents.usage_records import KINDS, UsageRecords

        agent = identity.agent
        profile = known_profile(agent)
        kind = KINDS.get(profile.usage_format or "") if profile is not None else None
        if kind is None or profile is None or profile.usage_dir is None:
            return None
        if not identity.session_id or not identity.transcript_path:
            return None
        kept = self._records.get(session.id)
        named = identity.transcript_path
        home = session_home(agents_dir(self._registry.state_dir) / session.id)
        if glob.has_magic(named):
            # known as a pattern until the agent wrote it (Gemini CLI): once found,
            # kept. Only the pattern corral itself made is searched: a path a hook
            # payload named is the agent's word, and a pattern in it could send the
            # owner through the whole disk on every pass.
            if not corrals_own_pattern(agent, named, identity.session_id, home):
                return None
            if kept is not None and kept.named == named:
                return kept
            found = newest_jsonl(named)
            if found is None:
                return None
            path = found
        else:
            path = Path(named)
        if kept is not None and kept.path == path and kept.agent_session == identity.session_id:
            return kept
        # the session's own provider home first (where its agent keeps them now)
        own = record_roots(agent, session_env(agent, home.parent, os.environ))
        roots = [home / profile.usage_dir, *own, *record_roots(agent, os.environ)]
        records = UsageRecords(kind, path, identity.session_id, roots)
        records.named = named
        records.workdir = session.worktree
        return records

    async def refresh(self) -> None:
        """Read every live session's records further; store and show changes."""
        sessions: dict[str, CoderSession] = {}
        for sid in self._registry.live_ids():
            live = self._registry.get_live(sid)
            if live is not None:
                sessions[sid] = live.session
        self._records = {
            sid: records for sid, s in sessions.items() if (records := self._wanted(s)) is not None
        }
        changed = await asyncio.to_thread(self._read_all, list(self._records.values()))
        for sid, session in sessions.items():
            records = self._records.get(sid)
            live = self._registry.get_live(sid)
            if live is None:
                continue
            before = (
                dict(session.agent_usage),
                session.agent_cost_usd,
                list(session.unpriced_models),
                session.over_budget,
            )
            if records is not None and id(records) in changed:
                session.agent_usage = records.usage()
            # priced every pass: usage an engine reported itself (ACP) lands between
            session.agent_cost_usd, session.unpriced_models = priced(
                session.agent_usage, self.prices
            )
            pending = live.model_ledger.spend  # a built-in engine's run in progress
            session.over_budget = budget_sentence(totals(session, pending), self.budget)
            after = (
                session.agent_usage,
                session.agent_cost_usd,
                session.unpriced_models,
                session.over_budget,
            )
            if after != before:
                try:
                    self._registry.persist(live)
                except Exception:  # the store's failure is the store's to report
                    log.exception("storing %s's usage failed", sid)
                self._registry.notify(sid)

    @staticmethod
    def _read_all(records: list[UsageRecords]) -> set[int]:
        changed = set()
        for one in records:
            was_refused = one.refused is not None
            try:
                if one.read():
                    changed.add(id(one))
            except OSError as exc:  # a file going away under us
                log.debug("usage records %s: %s", one.path, exc)
            if one.refused is not None and not was_refused:
                log.warning("not counting the usage in %s: %s", one.path, one.refused)
        return changed
