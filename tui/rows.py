"""How a board row looks: ordering, glyphs, relative ages. Pure functions of
a `SessionSummary`, so screens stay free of rules and tests can pin them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.text import Text

from corral.supervisor.states import CoderState, said

from .visible import visible

if TYPE_CHECKING:
    from corral.supervisor.models import AgentOffers, CheckResult, CoderSession, SessionSummary

S = CoderState

STATE_STYLE: dict[CoderState, tuple[str, str]] = {
    S.CREATED: ("…", "cyan"),
    S.CONTRACT_PROPOSED: ("?", "yellow"),
    S.CONTRACT_CONFIRMED: ("▶", "green"),
    S.RUNNING: ("▶", "green"),
    S.NEEDS_APPROVAL: ("◆", "yellow"),
    S.MERGED: ("✓", "green"),
    S.REPORTED: ("✓", "blue"),
    S.FAILED: ("✗", "red"),
    S.ABANDONED: ("–", "bright_black"),
}


class Styled(str):
    """A cell's words and their style, made into Rich text only when drawn: a
    board of 10,000 rows builds, measures and compares its cells as strings
    (Rich's Text costs several times more to make). Equal only with the same style."""

    style: str

    def __new__(cls, text: str, style: str = "") -> Styled:
        made = super().__new__(cls, text)
        made.style = style
        return made

    @property
    def plain(self) -> str:
        return str(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other) is True and getattr(other, "style", "") == self.style

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __rich__(self) -> Text:
        return Text(visible(str(self)), style=self.style)


_MADE: dict[tuple[str, str], Styled] = {}
MADE_LIMIT = 4096  # distinct (words, style) pairs kept; past it cells are made afresh


def styled(text: str, style: str = "") -> Styled:
    """`Styled(text, style)`, the same object each time: a board's cells repeat
    a few words (states, needs-you labels), and making one costs more than
    finding it (each carries its own attribute dict)."""
    key = (text, style)
    made = _MADE.get(key)
    if made is None:
        made = Styled(text, style)
        if len(_MADE) < MADE_LIMIT:
            _MADE[key] = made
    return made


def group_of(row: SessionSummary) -> int:
    """Needs-you rows first, then work in progress, then finished."""
    if row.needs_you is not None:
        return 0
    if not row.state.is_terminal:
        return 1 if row.live else 2
    return 3


def ordered(rows: list[SessionSummary]) -> list[SessionSummary]:
    return sorted(rows, key=lambda r: (group_of(r), -r.updated_at, r.session_id))


def age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def glyph(row: SessionSummary) -> Styled:
    if row.needs_you is not None:
        return styled("!", "bold black on yellow")
    mark, style = STATE_STYLE[row.state]
    return styled(mark, style)


SOURCE_WORDS = {
    "hook": "hook",
    "pane": "screen",
    "process": "process",
    "prompt": "prompt sent",
    "host": "ssh",
    "protocol": "protocol",
}


def agent_words(status: str | None, reason: str | None, source: str | None) -> str | None:
    """What the agent is doing and how corral knows it: `agent waiting (hook):
    asks permission for Write`. A waiting or signed-out agent always comes
    with its reason."""
    if not status:
        return None
    words = f"agent {'signed out' if status == 'auth' else status}"
    if source:
        words += f" ({SOURCE_WORDS.get(source, source)})"
    if status == "unreachable":
        return f"host unreachable: {reason}" if reason else "host unreachable"
    if status in ("waiting", "auth", "error") and reason:
        words += f": {reason}"
    return words


def offers_words(offers: AgentOffers | None) -> str | None:
    """An ACP agent's mode, model and config options as it announced them:
    `mode ask · model fast-1 · reasoning=medium, web=false`."""
    if offers is None or offers.is_empty():
        return None
    parts = []
    if offers.mode:
        parts.append(f"mode {offers.mode}")
    if offers.model:
        parts.append(f"model {offers.model}")
    if offers.options:
        parts.append(", ".join(f"{o.id}={o.value}" for o in offers.options))
    return " · ".join(parts) or None


def state_text(row: SessionSummary) -> Styled:
    words = said(row.state)
    if row.live and row.state is S.RUNNING and row.agent_status:
        status = "signed out" if row.agent_status == "auth" else row.agent_status
        source = SOURCE_WORDS.get(row.agent_source or "", row.agent_source or "")
        words = f"agent {status}" + (f" ({source})" if source else "")
        if row.agent_status == "unreachable":
            words = "host unreachable"
    if row.state is S.FAILED and row.failure_kind and row.failure_kind != "error":
        words = f"failed ({row.failure_kind.replace('_', ' ')})"
    if row.adopted and not row.state.is_terminal:
        words = f"adopted · {words}"
    if row.dormant:
        words = "dormant (R revives)"
    elif not row.live and not row.state.is_terminal:
        words += " (stopped)"
    if row.progress:  # a foreman session: its subtasks are under it, not rows of their own
        words += f" · {row.progress}"
    return styled(words, STATE_STYLE[row.state][1])


def needs_text(row: SessionSummary) -> Styled:
    """The needs-you label, with what is asked: the question's text, the
    agent's own sign-in sentence; an agent waiting with no question yet shows
    its reason. An agent's attempt at what only a person may do comes first."""
    if row.boundary_notice and not row.state.is_terminal:
        return styled(f"⚠ {row.boundary_notice}", "bold red")
    if row.needs_you == "question" and row.question_prompt:
        return styled(f"question: {row.question_prompt}", "bold yellow")
    if row.needs_you == "auth" and row.auth_message:
        return styled(f"sign-in: {row.auth_message}", "bold yellow")
    if row.needs_you_label:
        return styled(row.needs_you_label, "bold yellow")
    if row.state is S.FAILED and row.error:
        return styled(row.error.strip().splitlines()[0], "red")
    if row.over_budget:
        return styled(f"⚠ {row.over_budget}", "bold red")
    if row.live and row.agent_status == "unreachable" and row.agent_reason:
        return styled(row.agent_reason, "yellow")
    if row.live and row.agent_status == "waiting" and row.agent_reason:
        return styled(f"waiting: {row.agent_reason}", "yellow")
    if row.model_notice and not row.state.is_terminal:
        return styled(row.model_notice, "yellow")
    if row.context_refresh_due and row.live and not row.state.is_terminal:
        return styled("fresh context due: long active work (see its log)", "yellow")
    return styled("")


def engine_text(row: SessionSummary) -> str:
    if row.engine_ran and row.engine_ran != row.engine:
        return f"{row.engine}→{row.engine_ran}"
    return row.engine


def host_name(row: SessionSummary) -> str:
    """Where the session runs: its [[hosts]] name, or `local`."""
    return row.host or "local"


def repo_name(row: SessionSummary) -> str:
    return os.path.basename(row.repo.rstrip("/")) or row.repo


def changes_text(row: SessionSummary) -> Styled:
    """Git stats in a few cells: `3f +12 −4`, and `↓2` when the base gained
    commits since the start (empty before anything changed)."""
    parts = []
    if row.files_changed:
        parts.append(f"{row.files_changed}f +{row.lines_added or 0} −{row.lines_removed or 0}")
    if row.behind_base:
        parts.append(f"↓{row.behind_base}")
    return styled(" ".join(parts), "yellow" if row.behind_base else "")


def tokens_short(count: int) -> str:
    """`950`, `12.3k`, `4.5M`: a token count in a few cells."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def cost_text(row: SessionSummary) -> Styled:
    """What the session used: `$1.23`, `$1.23+?` when some of its tokens
    have no known price, `45.1k tok` when none has; `⚠` over its budget
    (empty before anything was recorded)."""
    if row.tokens_in is None:
        return styled("")
    if row.cost_usd is None:
        total = (row.tokens_in or 0) + (row.tokens_out or 0)
        total += (row.tokens_cache_write or 0) + (row.tokens_cache_read or 0)
        words = f"{tokens_short(total)} tok"
    else:
        words = f"${row.cost_usd:.2f}" + ("+?" if row.price_unknown else "")
    if row.over_budget:
        return styled(f"⚠{words}", "bold red")
    return styled(words, "")


def agent_usage_line(session: CoderSession) -> str:
    """`agent's records: <model> 1.2k in / 340 out / 5.0k cache …; $0.04` for
    the session screen ("price unknown" for a model without one)."""
    if not session.agent_usage:
        return ""
    parts = []
    for model, use in session.agent_usage.items():
        words = f"{model} {tokens_short(use.input)} in / {tokens_short(use.output)} out"
        if use.cache_write or use.cache_read:
            words += (
                f" / cache {tokens_short(use.cache_write)} written,"
                f" {tokens_short(use.cache_read)} read"
            )
        if model in session.unpriced_models:
            words += " (price unknown)"
        parts.append(words)
    line = "agent's records: " + "; ".join(parts)
    if session.agent_cost_usd is not None:
        line += f" — ${session.agent_cost_usd:.2f}"
    return line


def spend_line(rows: list[SessionSummary]) -> str:
    """`$3.21 spent · 1 over budget` over the board's rows (`+?`: some tokens
    have no known price); empty when nothing was recorded."""
    recorded = [r for r in rows if r.tokens_in is not None and not r.archived]
    if not recorded:
        return ""
    cost = sum(r.cost_usd or 0.0 for r in recorded)
    unknown = any(r.price_unknown or r.cost_usd is None for r in recorded)
    line = f"${cost:.2f}{'+?' if unknown else ''} spent"
    over = sum(1 for r in recorded if r.over_budget)
    return line + (f" · {over} over budget" if over else "")


OVER_BUDGET_MARK = "⚠ "
INTENT_LIMIT = 400  # characters of an intent's first line a board row keeps


def intent_text(row: SessionSummary) -> Text | str:
    """The intent's first line, after the operator's name for the session;
    marked `⚠` when the session is over budget and its needs-you cell says
    something else (the need comes first there)."""
    first = visible(row.intent.splitlines()[0], limit=INTENT_LIMIT) if row.intent else ""
    shown = row.over_budget and needs_text(row).plain.startswith(OVER_BUDGET_MARK + "over")
    mark = OVER_BUDGET_MARK if row.over_budget and not shown else ""
    if not row.name and not mark:
        return first
    if not row.name:
        return Text.assemble((mark, "bold red"), first)
    name = visible(row.name, limit=INTENT_LIMIT)
    return Text.assemble((mark, "bold red"), (name, "bold"), "  ", (first, "dim"))


def counts_line(rows: list[SessionSummary]) -> str:
    """`5 sessions: 3 need you · 0 in progress · 2 finished (1 failed)` —
    the three parts add up to the total; failed ones are among the finished.
    Archived sessions are off the board: counted apart, after the rest."""
    archived = sum(1 for r in rows if r.archived)
    rows = [r for r in rows if not r.archived]
    needs = sum(1 for r in rows if r.needs_you is not None)
    working = sum(1 for r in rows if r.needs_you is None and not r.state.is_terminal)
    done = sum(1 for r in rows if r.state.is_terminal)
    failed = sum(1 for r in rows if r.state is S.FAILED)
    noun = "session" if len(rows) == 1 else "sessions"
    finished = f"{done} finished" + (f" ({failed} failed)" if failed else "")
    parts = [f"{needs} need you", f"{working} in progress", finished]
    line = f"{len(rows)} {noun}:  " + "  ·  ".join(parts)
    return line + (f"  ({archived} archived)" if archived else "")


def announcement(rows: list[SessionSummary]) -> tuple[str, str] | None:
    """(title, body) of one toast for sessions that started needing the
    operator at about the same time; None for none."""
    if not rows:
        return None

    def intent(r: SessionSummary) -> str:
        return r.intent.splitlines()[0] if r.intent else r.label

    if len(rows) == 1:
        return f"{rows[0].label}: {rows[0].needs_you_label}", intent(rows[0])
    lines = [f"{r.label}: {r.needs_you_label}" for r in rows[:3]]
    if len(rows) > 3:
        lines.append(f"and {len(rows) - 3} more")
    return f"{len(rows)} sessions need you", "\n".join(lines)


FILTER_WORDS = {
    "all": "all sessions",
    "needs": "needs you",
    "running": "in progress",
    "finished": "finished",
}
ARCHIVED = "archived"  # the only filter that shows archived sessions (only those)


REPO_FILTER = "repo:"  # + the repo's path: one filter per repo on the board


def filter_cycle(rows: list[SessionSummary]) -> list[str]:
    """The board's filters in `f` order: the four fixed ones, then one per
    repo (only when sessions span more than one repo)."""
    repos = sorted({r.repo for r in rows if not r.archived})
    archived = [ARCHIVED] if any(r.archived for r in rows) else []
    return [*FILTER_WORDS, *archived, *(REPO_FILTER + repo for repo in repos if len(repos) > 1)]


def filter_words(name: str) -> str:
    if name.startswith(REPO_FILTER):
        path = name[len(REPO_FILTER) :]
        return f"repo {os.path.basename(path.rstrip('/')) or path}"
    if name == ARCHIVED:
        return "archived (h brings one back)"
    return FILTER_WORDS.get(name, name)


def filtered(
    rows: list[SessionSummary], name: str, search: str = "", found: frozenset[str] = frozenset()
) -> list[SessionSummary]:
    """Rows for a board filter and a free-text search (name, intent, repo,
    label, id; `found`: ids the supervisor's search matched in events and
    transcripts). Archived rows show under the archived filter only."""
    rows = [r for r in rows if r.archived == (name == ARCHIVED)]
    if name.startswith(REPO_FILTER):
        rows = [r for r in rows if r.repo == name[len(REPO_FILTER) :]]
    elif name == "needs":
        rows = [r for r in rows if r.needs_you is not None]
    elif name == "running":
        rows = [r for r in rows if r.needs_you is None and not r.state.is_terminal]
    elif name == "finished":
        rows = [r for r in rows if r.state.is_terminal]
    words = search.lower().split()
    if words:
        rows = [r for r in rows if r.session_id in found or all(matches(w, r) for w in words)]
    return rows


def words_of(row: SessionSummary) -> str:
    """The words a search matches loosely: name, intent, agent, state."""
    needs = row.needs_you.value if row.needs_you is not None else ""
    return (
        f"{row.name or ''} {row.intent} {row.engine} {row.state.value} "
        f"{said(row.state)} {needs}".lower()
    )


def matches(word: str, row: SessionSummary) -> bool:
    """A search word is in the row's words, repo, label, id or host; or (three
    letters or more) its letters come in order inside one of its words:
    `hlo` finds hello, `cntr` contract (never inside a path or an id)."""
    loose = words_of(row)
    exact = f"{loose} {row.repo} {row.label} {row.session_id} host:{host_name(row)}".lower()
    if word in exact:
        return True
    if len(word) < 3:
        return False
    for token in loose.split():
        it = iter(token)
        if all(ch in it for ch in word):
            return True
    return False


def checks_outcome(results: list[CheckResult]) -> str:
    """`2 of 3 checks pass; failing: lint` — what a re-verification found."""
    passed = sum(1 for r in results if r.passed)
    failing = [r.name for r in results if not r.passed]
    line = f"{passed} of {len(results)} checks pass"
    return line + (f"; failing: {', '.join(failing)}" if failing else ".")


ATTRIBUTE_DRIVERS_WORDS = (
    "The change adds .gitattributes lines that hand files to a git filter or diff/merge "
    "driver. corral ran none of them (it runs git with every driver off), but once this is "
    "delivered your git and your CI run whatever your config names there:"
)
