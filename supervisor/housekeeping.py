"""What the command line may learn or do about a state dir without owning it.

Stored sessions, who holds the owner lock, corral's worktrees and the plan to
prune them (and its execution, which does take the lock), the agent panes on
corral's tmux server (strays included), and the facts `corral doctor` and
`corral agents` report about this host. The rules live here; the command line
only prints the typed results.

Readers never need the owner lock: the database is opened read-only, so a
running console is fine. Every function blocks (SQLite, git, tmux).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from .errors import CorralError
from .git.leases import Lease, LeaseBook, LeaseState, is_clean, remove_worktree
from .git.run import GitError, git
from .hosts.probe import HostReport
from .hosts.settings import HostSettings
from .models import CoderSession, SessionSummary
from .panes.base import PaneBackend, PaneError, PaneHandle, PaneInfo
from .panes.stop_mark import agents_dir, mark_stopped
from .paths import ensure_unowned
from .session.summaries import stored_summary
from .states import CoderState, label
from .store import DB_NAME, LockHolder, OwnerLock, Store, read_lock_holder
from .store.listing import rows_json
from .workspaces import Workspaces

__all__ = [
    "AGENT_CLIS",
    "MIN_TMUX",
    "AgentCli",
    "AgentPane",
    "ConfigStatus",
    "HostReport",
    "HostTool",
    "LockHolder",
    "ModelStatus",
    "PaneListing",
    "PaneStop",
    "PruneOutcome",
    "PruneReport",
    "PruneStep",
    "StoredSessions",
    "WorktreeRow",
    "agent_clis",
    "agent_panes",
    "agents_on_path",
    "config_status",
    "ensure_unowned",
    "host_reports",
    "host_tool",
    "lock_holder",
    "model_status",
    "prune_worktrees",
    "stop_panes",
    "stored_sessions",
    "worktrees",
]

# -- the owner lock -------------------------------------------------------------


def lock_holder(state_dir: Path) -> LockHolder | None:
    """Who owns `state_dir` now, or None when nobody does. Never blocks."""
    return read_lock_holder(state_dir)


# -- stored sessions --------------------------------------------------------------


@dataclass(frozen=True)
class StoredSessions:
    """Board rows for every stored session (newest first), none advertising
    an action, plus the ids whose rows could not be read (left untouched)."""

    rows: list[SessionSummary]
    unreadable: list[str]


def stored_sessions(state_dir: Path) -> StoredSessions:
    """Read from the summaries the store keeps (no session is parsed in full
    unless its row predates them)."""
    store = Store(state_dir, readonly=True)
    try:
        listing = store.summaries(stored_summary)
    finally:
        store.close()
    return StoredSessions(listing.rows, listing.unreadable)


def stored_sessions_json(rows: list[SessionSummary]) -> bytes:
    """`corral sessions --json`: the rows, indented, serialised in one call (UTF-8)."""
    return rows_json(rows)


def _read_sessions(state_dir: Path) -> tuple[list[CoderSession], list[str]]:
    store = Store(state_dir, readonly=True)
    try:
        return store.list_sessions()
    finally:
        store.close()


def _session_states(state_dir: Path) -> dict[str, CoderState]:
    sessions, _ = _read_sessions(state_dir)
    return {s.id: s.state for s in sessions}


# -- worktrees --------------------------------------------------------------------


class WorktreeRow(BaseModel):
    """One of corral's session worktrees as its lease and its session see it."""

    path: str
    session: str | None  # the session's label
    session_state: CoderState | None  # None: no stored session
    lease: LeaseState
    note: str | None
    exists: bool
    clean: bool | None  # None: the directory is gone


def _read_leases(state_dir: Path) -> list[Lease]:
    db = state_dir / DB_NAME
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return LeaseBook(conn, readonly=True).all()
    finally:
        conn.close()


def worktrees(state_dir: Path) -> list[WorktreeRow]:
    """Session worktrees not yet removed (scratch copies are corral's own)."""
    states = _session_states(state_dir)
    rows: list[WorktreeRow] = []
    for lease in _read_leases(state_dir):
        if lease.state is LeaseState.REMOVED or lease.kind == "scratch":
            continue
        exists = Path(lease.path).is_dir()
        rows.append(
            WorktreeRow(
                path=lease.path,
                session=label(lease.session_id) if lease.session_id else None,
                session_state=states.get(lease.session_id or ""),
                lease=lease.state,
                note=lease.note,
                exists=exists,
                clean=is_clean(Path(lease.path)) if exists else None,
            )
        )
    return rows


# -- pruning ----------------------------------------------------------------------

ACTIVE_LEASES = {LeaseState.ALLOCATING, LeaseState.READY, LeaseState.IN_USE}


class PruneOutcome(StrEnum):
    """What pruning did (or, in a dry run, would do) with one worktree."""

    KEPT_SESSION_LIVE = "kept_session_live"  # its session has not ended
    WOULD_REMOVE = "would_remove"  # dry run
    WOULD_KEEP_DIRTY = "would_keep_dirty"  # dry run: uncommitted changes, --force removes it
    REMOVED = "removed"
    KEPT_UNSAFE = "kept_unsafe"  # removal was refused: `detail` says why
    KEPT_UNKNOWN = "kept_unknown"  # no lease records it; --force removes it
    REMOVED_UNKNOWN = "removed_unknown"  # no lease, removed because of --force
    KEPT_UNKNOWN_FAILED = "kept_unknown_failed"  # --force, but git refused: `detail`


REMOVING = {PruneOutcome.REMOVED, PruneOutcome.REMOVED_UNKNOWN}


@dataclass(frozen=True)
class PruneStep:
    path: str
    outcome: PruneOutcome
    detail: str = ""  # the live session's state, or why the removal failed

    @property
    def removed(self) -> bool:
        return self.outcome in REMOVING


@dataclass
class PruneReport:
    state_dir: Path
    dry_run: bool
    has_store: bool = True  # False: no database, so no worktrees
    steps: list[PruneStep] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return sum(step.removed for step in self.steps)

    @property
    def kept(self) -> int:
        return len(self.steps) - self.removed


def prune_worktrees(
    state_dir: Path,
    *,
    dry_run: bool,
    force: bool,
    on_step: Callable[[PruneStep], None] | None = None,
) -> PruneReport:
    """Remove the worktrees no live session needs. Pruning changes the state
    dir, so it takes the owner lock (a dry run too: it reconciles the leases).
    Nothing dirty, unknown or mismatched is removed without `force`; a
    worktree whose HEAD moved or that git no longer lists as ours never is.
    `on_step` hears each decision as it is made."""
    lock = OwnerLock(state_dir)
    try:
        lock.acquire()
    except CorralError as exc:
        raise CorralError(
            f"{exc}. Pruning changes the state dir; close the console first (it also removes "
            "expired worktrees itself, hourly)"
        ) from None
    report = PruneReport(state_dir, dry_run)
    try:
        if not (state_dir / DB_NAME).exists():
            report.has_store = False
            return report
        states = _session_states(state_dir)
        workspaces = Workspaces(state_dir, state_dir / DB_NAME)
        try:
            for step in _decide(workspaces, states, dry_run=dry_run, force=force):
                report.steps.append(step)
                if on_step is not None:
                    on_step(step)
        finally:
            workspaces.close()
    finally:
        lock.release()
    return report


def _decide(
    workspaces: Workspaces, states: dict[str, CoderState], *, dry_run: bool, force: bool
) -> Iterator[PruneStep]:
    """The decisions one at a time (removals happen as they are decided)."""
    workspaces.reconcile()
    for lease in workspaces.leases():
        if lease.state is LeaseState.REMOVED:
            continue
        state = states.get(lease.session_id or "")
        if lease.state in ACTIVE_LEASES and state is not None and not state.is_terminal:
            continue  # a session still uses it: not a candidate
        if state is not None and not state.is_terminal:
            yield PruneStep(lease.path, PruneOutcome.KEPT_SESSION_LIVE, state.value)
            continue
        if dry_run:
            clean = is_clean(Path(lease.path)) if Path(lease.path).exists() else True
            removable = clean or force or lease.discard_ok
            outcome = PruneOutcome.WOULD_REMOVE if removable else PruneOutcome.WOULD_KEEP_DIRTY
            yield PruneStep(lease.path, outcome)
            continue
        ok, why = remove_worktree(workspaces.book, lease, force=force)
        yield PruneStep(
            lease.path,
            PruneOutcome.REMOVED if ok else PruneOutcome.KEPT_UNSAFE,
            "" if ok else why,
        )
    for path in workspaces.unknown_worktrees():
        if not force or dry_run:
            yield PruneStep(path, PruneOutcome.KEPT_UNKNOWN)
            continue
        try:
            git(Path(path), "worktree", "remove", "--force", "--", path)
        except GitError as exc:
            yield PruneStep(path, PruneOutcome.KEPT_UNKNOWN_FAILED, str(exc))
        else:
            yield PruneStep(path, PruneOutcome.REMOVED_UNKNOWN)


# -- agent panes --------------------------------------------------------------------


@dataclass(frozen=True)
class AgentPane:
    """A pane on corral's tmux server (here or on a host) carrying corral's owner marker."""

    pane_id: str
    alive: bool
    exit_status: int | None
    command: str
    session_id: str | None  # None: a stray, no stored session owns it
    session_state: CoderState | None
    owner: str = ""  # the owner marker, "<session id>:<incarnation>"
    host: str = ""  # the [[hosts]] name it runs on ("": this machine)

    @property
    def stray(self) -> bool:
        return self.session_id is None


@dataclass
class PaneListing:
    """Every marked pane here and on the configured hosts; hosts that did
    not answer are named with the reason (their panes are not known)."""

    panes: list[AgentPane] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)


def agent_panes(state_dir: Path, hosts: list[HostSettings] | None = None) -> PaneListing:
    """Every marked pane (one tmux sweep here, one ssh round trip per host
    from `[[hosts]]`), matched to its stored session by owner marker. A
    stray is listed, never killed."""
    listing = PaneListing()
    with _pane_places(state_dir, hosts) as places:
        for place, (infos, error) in zip(places, _sweep_all(places), strict=True):
            if error:
                listing.unreachable[place.host] = error
                continue
            listing.panes += [pane for _owner, pane in _match(infos, state_dir, place.host)]
    return listing


@dataclass(frozen=True)
class _Place:
    host: str  # "": this machine
    backend: PaneBackend


@contextlib.contextmanager
def _pane_places(state_dir: Path, hosts: list[HostSettings] | None) -> Iterator[list[_Place]]:
    """corral's tmux server here and each host's; a connection made only
    for this is closed after (a console's own connection is left running)."""
    from .hosts.connection import HostConnection
    from .hosts.remote_tmux import RemoteTmuxBackend

    if hosts is None:
        from .config import load_config

        hosts = load_config().hosts
    places = [_Place("", _tmux_backend())]
    ours: list[HostConnection] = []
    for settings in hosts:
        conn = HostConnection(settings, state_dir)
        if conn.master_pid() is None:
            ours.append(conn)
        places.append(_Place(settings.name, RemoteTmuxBackend(conn, settings.state_dir)))
    try:
        yield places
    finally:
        for conn in ours:
            conn.close()


def _sweep_all(places: list[_Place]) -> list[tuple[dict[str, PaneInfo], str]]:
    """Each place's panes (side by side: a host that does not answer holds
    up no other), or why a host did not answer."""
    from concurrent.futures import ThreadPoolExecutor

    def one(place: _Place) -> tuple[dict[str, PaneInfo], str]:
        if not place.host:
            return place.backend.sweep(), ""
        try:
            return place.backend.sweep(), ""
        except PaneError as exc:
            return {}, str(exc)

    with ThreadPoolExecutor(max_workers=min(8, len(places))) as pool:
        return list(pool.map(one, places))


def _match(
    infos: dict[str, PaneInfo], state_dir: Path, host: str = ""
) -> list[tuple[str, AgentPane]]:
    sessions, _ = _read_sessions(state_dir) if (state_dir / DB_NAME).exists() else ([], [])
    owners = {(s.pane or {}).get("owner"): s for s in sessions if s.pane}
    panes: list[tuple[str, AgentPane]] = []
    for owner, info in sorted(infos.items()):
        session = owners.get(owner)
        panes.append(
            (
                owner,
                AgentPane(
                    pane_id=info.handle.pane_id,
                    alive=info.alive,
                    exit_status=info.exit_status,
                    command=info.current_command,
                    owner=owner,
                    session_id=session.id if session else None,
                    session_state=session.state if session else None,
                    host=host,
                ),
            )
        )
    return panes


@dataclass(frozen=True)
class PaneStop:
    """One pane `stop_panes` was asked to stop, and whether it is gone now."""

    pane: AgentPane
    owner: str
    gone: bool
    error: str | None = None


def _tmux_backend() -> PaneBackend:
    from .factory import make_backend  # the pane backends: only when asked

    socket_dir = os.environ.get("CORRAL_TMUX_SOCKET_DIR", "").strip()
    return make_backend("tmux", socket_dir=Path(socket_dir) if socket_dir else None)


def attach_command() -> list[str]:
    """The exact command that attaches a terminal to corral's tmux server (its
    socket, `CORRAL_TMUX_SOCKET_DIR` respected), to watch every agent at once."""
    from .panes.tmux import TmuxBackend

    backend = _tmux_backend()
    assert isinstance(backend, TmuxBackend)
    return backend.attach_server_argv()


def stop_panes(
    state_dir: Path,
    which: list[str],
    *,
    strays: bool = False,
    every: bool = False,
    hosts: list[HostSettings] | None = None,
) -> list[PaneStop]:
    """Stop the marked panes (here and on the configured hosts) chosen by
    owner marker, session id (or its label), pane id, `strays` or `every`:
    the process group, then the window. Each result says whether a later
    sweep saw the pane gone. A pane of a session a running console owns is
    stopped too: that session then sees its agent exit, marked as stopped on
    purpose, so it is not started again as after a crash."""
    results: list[PaneStop] = []
    with _pane_places(state_dir, hosts) as places:
        for place, (infos, _error) in zip(places, _sweep_all(places), strict=True):
            results += _stop_in(place, infos, state_dir, which, strays=strays, every=every)
    return results


def _stop_in(
    place: _Place,
    infos: dict[str, PaneInfo],
    state_dir: Path,
    which: list[str],
    *,
    strays: bool,
    every: bool,
) -> list[PaneStop]:
    backend = place.backend
    chosen: list[tuple[str, AgentPane, PaneHandle]] = []
    for owner, pane in _match(infos, state_dir, place.host):
        session = pane.session_id or ""
        wanted = (
            every
            or (strays and pane.stray)
            or any(
                w in (owner, pane.pane_id, session, label(session) if session else owner)
                or (len(w) >= 6 and bool(session) and session.endswith(w))
                for w in which
            )
        )
        if wanted:
            chosen.append((owner, pane, infos[owner].handle))
    errors: dict[str, str] = {}
    for owner, pane, handle in chosen:
        if pane.session_id:  # its owner must not take the exit for a crash
            with contextlib.suppress(OSError):
                mark_stopped(agents_dir(state_dir), pane.session_id, owner)
        try:
            backend.kill(handle, 5.0)
        except PaneError as exc:
            errors[owner] = str(exc)
    after: dict[str, PaneInfo] = {}
    if chosen:
        try:
            after = backend.sweep()
        except PaneError as exc:  # a host that stopped answering: not seen gone
            after = {owner: infos[owner] for owner, _p, _h in chosen}
            for owner, _p, _h in chosen:
                errors.setdefault(owner, str(exc))
    return [
        PaneStop(pane, owner, gone=owner not in after, error=errors.get(owner))
        for owner, pane, _handle in chosen
    ]


# -- this host: what `corral agents` and `corral doctor` report -----------------------

AGENT_CLIS = ("claude", "codex", "gemini", "aider", "opencode")
MIN_TMUX = (3, 2)
_VERSION_ARGS = {"git": ("--version",), "tmux": ("-V",)}
_MINIMUM = {"tmux": MIN_TMUX}


@dataclass(frozen=True)
class AgentCli:
    """An agent corral can run, as found on this host."""

    name: str
    label: str
    binary: str | None  # None: not installed
    version: str | None  # None: not installed, or it would not say


def agent_clis() -> list[AgentCli]:
    """The agents in corral's order of preference, then the demo agent."""
    from .agents.profiles import PREFERENCE, profile_for

    found: list[AgentCli] = []
    for name in (*PREFERENCE, "demo"):
        profile = profile_for(name)
        binary = profile.find()
        version = profile.version(binary) if binary is not None else None
        found.append(AgentCli(name, profile.label, binary, version))
    return found


def oneshot_presets() -> list[AgentCli]:
    """The one-shot presets (`claude-p`, …): label and command line (as the
    version), with the binary they need (None: not installed)."""
    from .agents.oneshot import PRESETS, oneshot_profile

    found: list[AgentCli] = []
    for name in PRESETS:
        profile = oneshot_profile(name)
        found.append(AgentCli(name, profile.label, profile.find(), profile.command))
    return found


def agents_on_path() -> list[tuple[str, str | None]]:
    """Each agent CLI's executable on PATH (None: not installed)."""
    return [(name, shutil.which(name)) for name in AGENT_CLIS]


@dataclass(frozen=True)
class HostTool:
    """git or tmux: its version line (None: not found) and whether it is
    new enough for corral."""

    name: str
    version: str | None
    minimum: tuple[int, int] | None = None

    @property
    def too_old(self) -> bool:
        if self.version is None or self.minimum is None:
            return False
        return _parse_version(self.version) < self.minimum


def host_tool(name: str) -> HostTool:
    """`git` or `tmux`."""
    version = _version_of([name, *_VERSION_ARGS[name]]) if shutil.which(name) else None
    return HostTool(name, version, _MINIMUM.get(name))


def _version_of(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def _parse_version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass(frozen=True)
class ModelStatus:
    """The configured model: none is fine (agents, manual and convention
    contracts still work); a broken configuration is a problem to fix."""

    configured: bool
    description: str  # what is configured, when something is
    error: str | None = None


def model_status() -> ModelStatus:
    from .llm.catalog import load_catalog

    try:
        catalog = load_catalog()
    except CorralError as exc:
        return ModelStatus(False, "", str(exc))
    if not catalog.entries:
        return ModelStatus(False, "")
    return ModelStatus(True, f"{len(catalog.entries)} in order: {', '.join(catalog.names)}")


@dataclass(frozen=True)
class ModelCheck:
    """One configured model as `corral doctor` checks it (never its key)."""

    name: str
    ok: bool
    detail: str


def model_checks(timeout: float = 2.0) -> list[ModelCheck]:
    """Each configured model: its key's variable set or not, and a TCP
    connect to its server (no request is sent, so nothing is billed)."""
    from .llm.catalog import check_entry, describe_entry, load_catalog

    try:
        catalog = load_catalog()
    except CorralError:
        return []
    checks = [check_entry(e, timeout=timeout) for e in catalog.entries]
    return [ModelCheck(c.entry.name, c.ok, describe_entry(c)) for c in checks]


@dataclass(frozen=True)
class ConfigStatus:
    path: Path
    exists: bool  # False: absent, so the defaults apply
    error: str | None = None


def config_status() -> ConfigStatus:
    from .config import load_config
    from .paths import config_path

    path = config_path()
    try:
        load_config(path)
    except CorralError as exc:
        return ConfigStatus(path, path.exists(), str(exc))
    return ConfigStatus(path, path.exists())


@dataclass(frozen=True)
class ConfinementStatus:
    confined: bool  # checks and the built-in shell run in the sandbox
    detail: str  # one line for the operator
    agents: str = ""  # how external agents' panes run, one line
    agents_unconfined: bool = False  # agents were asked to be confined and cannot be
    # "agents unconfined: <why>" for the board's header, "" when every agent is confined
    agents_note: str = ""


KEPT = "whatever they start still ends with them (pane keeper)"


def _agents_line(enabled: bool, available: bool, why: str) -> tuple[str, bool, str]:
    """How agents run: the `[sandbox] agents` setting (on by default) and the
    per-agent overrides, against whether a sandbox can run here; returns
    (the line, whether confinement was wanted and cannot be had, the
    header's note)."""
    from .agents.settings import load_agent_settings
    from .config import load_config

    try:
        default = load_config().sandbox.agents
        overrides = {
            n: s.sandbox for n, s in load_agent_settings().items() if s.sandbox is not None
        }
    except CorralError:
        default, overrides = True, {}
    on = sorted(n for n, v in overrides.items() if v)
    off = sorted(n for n, v in overrides.items() if not v)
    if not enabled:
        return (
            f"unconfined ([sandbox] enabled = false): {KEPT}",
            False,
            ("agents unconfined: [sandbox] enabled = false"),
        )
    if not default and not on:
        return (
            f"unconfined ([sandbox] agents = false): {KEPT}",
            False,
            ("agents unconfined: [sandbox] agents = false"),
        )
    if not available:
        return (
            f"unconfined: no sandbox can run here ({why}); {KEPT}",
            True,
            f"agents unconfined: {why}",
        )
    if default:
        who, note = "every agent", ""
        if off:
            who += f" except {', '.join(off)}"
            note = f"agents unconfined: {', '.join(off)} (sandbox = false)"
        return f"confined with network: {who}", False, note
    return (
        f"confined with network: {', '.join(on)}",
        False,
        f"agents unconfined: all but {', '.join(on)} ([sandbox] agents = false)",
    )


def confinement_status() -> ConfinementStatus:
    """Whether checks and the built-in shell will run in the sandbox, and if
    not, why (no bwrap, user namespaces refused, not Linux, or opted out);
    and how external agents will run."""
    from .config import load_config
    from .sandbox import sandbox_status

    try:
        enabled = load_config().sandbox.enabled
    except CorralError:
        enabled = True
    status = sandbox_status()
    agents, agents_unconfined, note = _agents_line(enabled, status.available, status.detail)
    if not enabled:
        return ConfinementStatus(
            False,
            "off ([sandbox] enabled = false): checks run unconfined, "
            "guarded only by the inspector chain",
            agents,
            agents_note=note,
        )
    return ConfinementStatus(status.available, status.describe(), agents, agents_unconfined, note)


def host_reports(state_dir: Path) -> list[HostReport]:
    """`[[hosts]]` from the config, each checked over SSH (in parallel: a
    host that does not answer must not hold up the others)."""
    from concurrent.futures import ThreadPoolExecutor

    from .config import load_config
    from .hosts.probe import probe

    hosts = load_config().hosts
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(lambda h: probe(h, state_dir), hosts))
