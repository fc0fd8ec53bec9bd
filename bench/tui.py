"""Benchmark of the console (tui/) through a real pseudo-terminal.

Two budgets from ARCHITECTURE.md, both measured on the real console process
(a child in a 200x50 pty, read by this script; no Pilot):

(a) cold start to first board paint with 10,000 stored sessions (≤ 1 s):
    a temporary CORRAL_HOME whose SQLite store holds 10,000 sessions in varied
    terminal and gate states; `corral --repo <git repo>` is spawned in a pty
    and the clock runs from spawn until the pty output contains the board's
    counts line ("N sessions"). Median over --runs runs (5; 3 with --quick);
    each run then presses `q` and waits for the process to exit.

(b) keystroke → repaint with 100 live sessions streaming output (≤ 20 ms p95):
    a child process (this file with --child-live) runs the real CorralApp over
    a real Supervisor with 100 sessions on a temp git repo. With `--engine
    panes` (the default) every session's agent is a real tmux pane on the
    console's private tmux socket running a shell loop that prints a line
    every 50 ms (bash builtins only: no fork per line), watched by the real
    PaneManager; with `--engine scripted`, in-process scripted engines that
    emit a narration line every 50 ms. Once every session runs, this script
    writes one arrow key (Down or Up, alternating, so the cursor stays on
    screen) into the pty and times the gap until the frame in which the
    board's cursor row has really moved: the pty output is fed to a terminal
    emulator (pyte) and the session on the row painted in the cursor's style
    (learned from one calibration key) is compared after every chunk (the
    board keeps its cursor on its session when rows re-order, so the session,
    not the row number, says the key was handled); the chunk's arrival time
    counts, not the parsing. The next output chunk is not the answer:
    with sessions streaming, it is usually some other repaint. Random pause
    50-150 ms between keys; --keys keys (100; 40 with --quick). The floor,
    timed the same way in the same run under the same load: a bare Textual
    app (a DataTable of 100 rows, nothing else) in the same pty; the ratio is
    printed. The gap to the next chunk with no key sent ("background") is
    printed too: how often the board repaints on its own.
    The work behind the figures, for corral and the floor alike
    (bench/textual_counts.py, read from the child by a signal): over 10 s with
    no key, then over the keys, Textual's full layouts, frames, who asked
    for a layout or a repaint (by widget class) and the board's rows
    rendered, printed per second with no key and per key above that; the
    layouts since the child started (the sessions arriving); the child's CPU
    in the no-key window (its main thread apart: the event loop shares its
    GIL with the pane sweep's worker) and its tmux server's. --profile PATH
    writes a cProfile of the child's loop over those two windows only.
    --compare-child CMD runs the same measurement with another tree's live
    child in the same run (a command that runs that tree's
    `bench/tui.py --child-live`), for before/after figures.

(c) `corral sessions --json` on the same 10,000 stored sessions (≤ 300 ms):
    spawn to exit, stdout read to the end. Median over --runs runs. The floor,
    each run: `cat` of the same listing (~15 MB) through the same kind of pipe. The first
    run on a store makes the listing the next runs serve while the store is
    unchanged (supervisor/stored_rows.py): it is printed apart, with its CPU.

(d) cold start with an empty store: as (a), until the board's "0 sessions"
    line; with --ccmanager PATH (its npm launcher or its binary), ccmanager's
    first paint in the same pty on the same repo, run for run (until its title
    line). Its npm launcher is a node script that runs the real program (a
    binary) as its child, so both are timed: the launcher as a user starts it,
    and the binary it runs (found in the launcher's process tree) started
    directly, the peer to beat (budget: corral paints first). CPU figures are
    the whole process tree's (every live descendant plus the ones it reaped)
    at first paint, for corral and ccmanager alike. Then the idle console's
    memory: the resident size of its process tree 2 s after first paint
    (budget ≤ 60 MB; ccmanager's beside it when run).

(e) the console's CPU and memory: the (b) child with 10 sessions streaming a
    line every 50 ms, then with 50 sessions running but quiet, and with none;
    the CPU over --cpu-secs (10) as % of one core (budgets ≤ 5 % streaming,
    ≤ 2 % idle) of the child's process tree and, with pane sessions, of
    corral's own tmux server (it draws every pane; the agents in the panes are
    the agents' cost, not corral's); resident memory (console tree + tmux
    server) per live session against the child with none, for streaming and
    for quiet sessions (budget ≤ 2 MB each).

--compare CMD also runs (a), (c) and (d) with another corral command (an older
checkout's, say), run for run with this one, so both figures share the load.
The children run with bytecode caches (PYTHONDONTWRITEBYTECODE is dropped from
their environment), as an installed corral does.

Run (from the repo root): .venv/bin/python bench/tui.py [--quick] [--runs N] [--keys N]
    [--engine panes|scripted] [--profile PATH] [--compare CMD] [--compare-child CMD]
    [--ccmanager PATH] [--load N]
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parents[1]
ROOT = _HERE if (_HERE / "supervisor").is_dir() else Path.cwd()
sys.path.insert(0, str(ROOT))

BUDGET_COLD_S = 1.0
BUDGET_LIST_S = 0.3
REFERENCE_EMPTY_S = 0.35  # ccmanager's first paint, the peer to beat
BUDGET_IDLE_RSS_MB = 60.0
BUDGET_KEY_P95_MS = 20.0
LIVE_SESSIONS = 100
COLS, LINES = 200, 50
COUNTS_RE = re.compile(rb"(\d+) sessions")
CCMANAGER_RE = re.compile(rb"Worktree Manager")  # ccmanager's title line
DOWN, UP = b"\x1b[B", b"\x1b[A"
SESSION_RE = re.compile(r"session \d+")  # the live sessions' intents, the floor's rows


def corral_bin() -> str:
    local = ROOT / ".venv" / "bin" / "corral"
    return str(local) if local.exists() else (shutil.which("corral") or "corral")


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x"}
    env.update(GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@x")
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "commit", "-q", "--allow-empty", "-m", "init"],
    ):
        subprocess.run(cmd, cwd=path, env=env, check=True, capture_output=True)
    return path


def write_config(path: Path) -> Path:
    # keep all 10,000 rows: the default retention would prune to 500
    path.write_text("[supervisor.retention]\nmax_sessions = 50000\nmax_age_days = 3650\n")
    return path


def child_env(home: Path, config: Path) -> dict[str, str]:
    dropped = ("COLUMNS", "LINES", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        CORRAL_HOME=str(home),
        CORRAL_CONFIG=str(config),
        CORRAL_TMUX_SOCKET_DIR=str(home.parent / "tmux"),
        TERM="xterm-256color",
        COLORTERM="truecolor",
    )
    env.pop("CORRAL_LLM_PROVIDER", None)
    return env


def read_chunk(proc, timeout: float) -> bytes:  # type: ignore[no-untyped-def]
    ready, _, _ = select.select([proc.fd], [], [], timeout)
    if not ready:
        return b""
    try:
        return os.read(proc.fd, 65536)
    except OSError:
        return b""


def drain(proc, secs: float) -> bytes:  # type: ignore[no-untyped-def]
    out = b""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        out += read_chunk(proc, max(0.0, end - time.monotonic()))
    return out


def quit_app(proc, timeout: float = 15) -> None:  # type: ignore[no-untyped-def]
    if proc.isalive():
        proc.write(b"q")
    end = time.monotonic() + timeout
    while proc.isalive() and time.monotonic() < end:
        read_chunk(proc, 0.1)
    if proc.isalive():
        proc.terminate(force=True)


# -- (a) cold start -------------------------------------------------------------


def seed_store(home: Path, repo: Path, n: int) -> None:
    from corral.supervisor.models import CoderSession
    from corral.supervisor.session.summaries import summary_json
    from corral.supervisor.states import CoderState
    from corral.supervisor.store import Store

    states = [
        CoderState.MERGED,
        CoderState.REPORTED,
        CoderState.FAILED,
        CoderState.ABANDONED,
        CoderState.NEEDS_APPROVAL,
        CoderState.CONTRACT_PROPOSED,
    ]
    store = Store(home, summarize=summary_json)  # as a console writes them
    assert store._conn is not None
    now = time.time()
    store._conn.execute("BEGIN")
    for i in range(n):
        state = states[i % len(states)]
        store.save_session(
            CoderSession(
                id=f"bench{i:06d}-{os.urandom(4).hex()}",
                repo=str(repo),
                intent=f"Bench task {i}: make the thing number {i} do what it says",
                state=state,
                iterations=i % 8,
                created_at=now - 3600 - i * 60,
                updated_at=now - i * 30,
                error="bench: stored failure" if state is CoderState.FAILED else None,
            )
        )
    store._conn.execute("COMMIT")
    store.close()


def list_json(runs: int, n: int, cmds: list[str]) -> dict[str, list[float]]:
    """`corral sessions --json` on `n` stored sessions: spawn to exit, each
    command in turn within every run."""
    times: dict[str, list[float]] = {cmd: [] for cmd in cmds}
    with tempfile.TemporaryDirectory(prefix="corral-bench-list-") as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        home = base / "home"
        home.mkdir()
        seed_store(home, repo, n)
        env = child_env(home, write_config(base / "config.toml"))
        listing = base / "listing.json"
        for run in range(runs):
            for cmd in cmds:
                t0 = time.perf_counter()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                done = subprocess.run(
                    [cmd, "sessions", "--json"], env=env, capture_output=True, check=True
                )
                elapsed = time.perf_counter() - t0
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                CPU.setdefault(cmd, []).append(
                    after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                )
                count = done.stdout.count(b'"session_id"')
                spent = (CPU[cmd][-1]) * 1000
                first = (
                    "  (first on this store: makes the kept listing)"
                    if run == 0 and cmd == cmds[0]
                    else ""
                )
                print(
                    f"  run {run + 1}: {elapsed * 1000:7.1f} ms  CPU {spent:5.0f} ms  "
                    f"({count} sessions listed)  {cmd}{first}"
                )
                times[cmd].append(elapsed)
                if cmd == cmds[0]:
                    listing.write_bytes(done.stdout)
            # the floor: the same bytes through the same pipe from `cat`
            t0 = time.perf_counter()
            subprocess.run(["cat", str(listing)], capture_output=True, check=True)
            elapsed = time.perf_counter() - t0
            print(f"  run {run + 1}: {elapsed * 1000:7.1f} ms  the same listing from `cat` (floor)")
            times.setdefault(FLOOR_CAT, []).append(elapsed)
    return times


FLOOR_CAT = "`cat` of the listing (floor)"


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, parents before their children."""
    found: list[int] = []
    todo = [pid]
    while todo:
        here = todo.pop(0)
        for task in Path(f"/proc/{here}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time so far (user + system) of a live process and everything below
    it: each live process's own and what it reaped of its children. The
    figure the machine's load does not inflate (much)."""
    total = 0
    for each in (pid, *descendants(pid)):
        try:
            fields = _stat(each)
        except OSError:
            continue  # it exited meanwhile; its parent's reaped time has it
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """CPU time so far of one thread of a process (the main thread: tid = pid):
    the event loop's share, apart from the worker threads that share its GIL."""
    try:
        fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a live process and everything below it (MB, 10^6 bytes)."""
    total = 0
    for each in (pid, *descendants(pid)):
        try:
            status = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total * 1024 / 1e6  # VmRSS is in KiB


RSS: dict[str, list[float]] = {}  # command → tree RSS (MB) once idle after first paint, per run
IDLE_SETTLE_S = 2.0


def real_program(pid: int) -> str | None:
    """The program a launcher runs: the first process below `pid` whose
    executable is not the launcher's own (node, say); None if there is none."""
    try:
        own = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    for each in descendants(pid):
        try:
            exe = os.readlink(f"/proc/{each}/exe")
        except OSError:
            continue
        if exe != own:
            return exe
    return None


CPU: dict[str, list[float]] = {}  # command → tree CPU seconds at first paint (or to exit), per run
PROGRAMS: dict[str, str] = {}  # command → the real program found below it at first paint


def first_paint(argv: list[str], env: dict[str, str], cwd: Path, marker: re.Pattern[bytes]):  # type: ignore[no-untyped-def]
    """Spawn `argv` in a pty; (seconds until `marker` shows, the match, the process)."""
    from ptyprocess import PtyProcess

    t0 = time.perf_counter()
    proc = PtyProcess.spawn(argv, dimensions=(LINES, COLS), env=env, cwd=str(cwd))
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out += read_chunk(proc, 0.5)
        m = marker.search(out)
        if m:
            elapsed = time.perf_counter() - t0
            CPU.setdefault(argv[0], []).append(tree_cpu_seconds(proc.pid))
            program = real_program(proc.pid)
            if program:
                PROGRAMS[argv[0]] = program
            return elapsed, m, proc
        if not proc.isalive():
            break
    tail = out[-2000:].decode(errors="replace")
    proc.terminate(force=True)
    raise SystemExit(f"{argv[0]}: no first paint within 30 s; output tail:\n{tail}")


def ccmanager_binary(launcher: str, env: dict[str, str], cwd: Path) -> str:
    """The binary ccmanager's launcher runs (itself when given the binary)."""
    _elapsed, _m, proc = first_paint([launcher], env, cwd, CCMANAGER_RE)
    CPU.pop(launcher, None)  # a warm-up, not a run
    drain(proc, 0.3)
    proc.terminate(force=True)
    return PROGRAMS.pop(launcher, launcher)


def cold_start(runs: int, n: int, cmds: list[str], ccmanager: str | None = None):  # type: ignore[no-untyped-def]
    """Spawn to first board paint, each command in turn within every run (and
    ccmanager's first paint on the same repo, through its launcher and its
    binary started directly, when given)."""
    times: dict[str, list[float]] = {cmd: [] for cmd in cmds}
    with tempfile.TemporaryDirectory(prefix="corral-bench-tui-") as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        config = write_config(base / "config.toml")
        peers: list[str] = []
        if ccmanager:
            ccm_env = child_env(base / "ccm-home", config)
            ccm_env["HOME"] = str(base / "ccm-home")  # its own config, made on first start
            binary = ccmanager_binary(ccmanager, ccm_env, repo)
            peers = [ccmanager] if binary == ccmanager else [ccmanager, binary]
            if binary != ccmanager:
                print(f"  ccmanager's launcher {ccmanager} runs {binary}: both timed")
            for peer in peers:
                times[peer] = []
        for run in range(runs):
            for i, cmd in enumerate(cmds):
                home = base / f"home{run}-{i}"
                home.mkdir()
                if n:
                    seed_store(home, repo, n)
                env = child_env(home, config)
                elapsed, m, proc = first_paint([cmd, "--repo", str(repo)], env, repo, COUNTS_RE)
                shown = int(m.group(1))
                print(
                    f"  run {run + 1}: {elapsed * 1000:7.1f} ms  (counts line: {shown} sessions)"
                    f"  {cmd}"
                )
                times[cmd].append(elapsed)
                if n:
                    drain(proc, 0.3)
                else:  # the idle console: its memory once settled
                    drain(proc, IDLE_SETTLE_S)
                    RSS.setdefault(cmd, []).append(tree_rss_mb(proc.pid))
                quit_app(proc)
            for peer in peers:
                elapsed, _m, proc = first_paint([peer], ccm_env, repo, CCMANAGER_RE)
                print(f"  run {run + 1}: {elapsed * 1000:7.1f} ms  (its title line)  {peer}")
                times[peer].append(elapsed)
                drain(proc, IDLE_SETTLE_S)
                RSS.setdefault(peer, []).append(tree_rss_mb(proc.pid))
                proc.terminate(force=True)
    return times


# -- (b) keystroke → repaint ------------------------------------------------------


# A pane session's agent: a shell loop in a real tmux pane. It waits at a
# `> ` prompt for the task corral pastes, then streams a line every 50 ms
# (bash builtins only: `read -t` is the sleep, so no fork per line) or sleeps.
PANE_STREAMING = r"""printf 'stand-in agent\n> '
read -r task
i=0
while :; do
  i=$((i+1))
  echo "streaming narration line $i: reading, thinking, editing"
  read -rt 0.05 _
done
"""
PANE_QUIET = r"""printf 'stand-in agent\n> '
read -r task
exec sleep 3600
"""
ENGINES = ("panes", "scripted")


def child_live(
    ready_file: Path, repo: Path, n: int, quiet: bool = False, engine: str = "scripted"
) -> None:
    """The console with `n` live sessions streaming narration (runs in the pty);
    `quiet`: running, but saying nothing. `engine`: "panes" (a shell loop in a
    real tmux pane per session, on the console's private tmux socket) or
    "scripted" (in-process scripted engines)."""
    from corral.supervisor.api import Supervisor
    from corral.supervisor.config import SupervisorConfig
    from corral.supervisor.states import CoderState
    from corral.tui.app import CorralApp

    if engine == "panes":
        from corral.supervisor.contracts.drafting import FixedDrafter
        from corral.supervisor.factory import build_supervisor
        from corral.supervisor.models import ContractCheck, OutcomeContract

        script = ready_file.parent / ("quiet.sh" if quiet else "stream.sh")
        script.write_text(PANE_QUIET if quiet else PANE_STREAMING)
        never = OutcomeContract(
            checks=[ContractCheck(name="done", command="test -f done.txt", timeout_secs=10)]
        )
        sup = build_supervisor(
            ready_file.parent / "state",
            FixedDrafter(never),
            socket_dir=tmux_dir(ready_file.parent),
            default_engine=f"custom:bash {script}",
            config=SupervisorConfig(max_session_wall_secs=0),
        )
    else:
        from tests.fakes.scripted import (
            Iteration,
            Say,
            ScriptedDrafter,
            ScriptedEngine,
            ScriptedEngines,
            Sleep,
            contract,
        )

        steps: list = [Iteration(1)]
        for i in range(6000):  # ~5 minutes of a line every 50 ms
            steps += [Say(f"streaming narration line {i}: reading, thinking, editing"), Sleep(0.05)]
        if quiet:
            steps = [Iteration(1), Sleep(600)]
        sup = Supervisor(
            ready_file.parent / "state",
            drafter=ScriptedDrafter([contract(("done", "test -f done.txt"), description="bench")]),
            engines=ScriptedEngines(lambda: ScriptedEngine([steps], label="bench")),
            config=SupervisorConfig(max_session_wall_secs=0),
        )

    async def seed(s: Supervisor) -> None:
        ids = []
        for i in range(n):
            ids.append((await s.start(f"Bench live session {i}", repo, engine="auto")).session_id)
        for sid in ids:
            await s.wait_for(sid, needs=True, timeout=300)
            await s.confirm(sid)
        for sid in ids:
            await s.wait_for(sid, {CoderState.RUNNING}, timeout=300)
        ready_file.write_text(str(len(ids)))

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    instrument_if_asked()
    try:
        app.run()
    finally:
        kill_tmux_servers(ready_file.parent)


def child_floor(ready_file: Path, n: int) -> None:
    """The floor: a bare Textual app, a DataTable of `n` rows with a row
    cursor and nothing else (runs in the pty)."""
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    class Floor(App[None]):
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield DataTable(cursor_type="row")

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns("session", "state", "activity")
            for i in range(n):
                table.add_row(f"Bench live session {i}", "running", "streaming narration")
            table.focus()
            ready_file.write_text(str(n))

    instrument_if_asked()
    Floor().run()


COUNTS_ENV = "CORRAL_BENCH_COUNTS"  # where a (b) child writes its Textual work counts


def instrument_if_asked() -> None:
    """Count the child's Textual work (bench/textual_counts.py) when the
    bench asked for it."""
    path = os.environ.get(COUNTS_ENV)
    if path:
        import textual_counts

        textual_counts.instrument(Path(path))


def tmux_dir(base: Path) -> Path:
    """Where the console child's private tmux socket lives (CORRAL_TMUX_SOCKET_DIR)."""
    return base / "tmux"


def tmux_server_pids(base: Path) -> list[int]:
    """The pids of the tmux servers on the sockets under `base`'s tmux dir:
    corral's own, a cost of the console that its process tree leaves out
    (the server daemonizes)."""
    pids = []
    for sock in tmux_dir(base).glob("*"):
        done = subprocess.run(
            ["tmux", "-S", str(sock), "display-message", "-p", "#{pid}"],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and done.stdout.strip().isdigit():
            pids.append(int(done.stdout.strip()))
    return pids


def kill_tmux_servers(base: Path) -> None:
    for sock in tmux_dir(base).glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def own_cpu_seconds(pid: int) -> float:
    """A process's own CPU time (user + system), not its reaped children's:
    for the tmux server, whose children are the agents in the panes."""
    try:
        fields = _stat(pid)
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def own_rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


BUDGET_CPU_STREAMING_PCT = 5.0
BUDGET_CPU_IDLE_PCT = 2.0
BUDGET_RSS_PER_SESSION_MB = 2.0


# Sessions are measured once they have started: a session that just started
# has its worktree read for git stats (a first read, then one more), which is
# starting, not streaming or idling; with 50 of them at 20 reads a 5 s sweep
# that takes five sweeps.
STARTED_SETTLE_SECS = 30.0


LIVE_CHILD = (
    "--as-live-child"  # ends a --compare-child command: it takes the live child's arguments
)


def live_argv() -> list[str]:
    """This file as the console child; ready file, repo and n follow, then
    optionally the mode ("stream" or "quiet") and the engine."""
    return [sys.executable, str(Path(__file__).resolve()), "--child-live"]


def console_cost(
    n: int, quiet: bool, secs: float, engine: str = "scripted", ready_timeout: float = 600
) -> tuple[float, float, float, float]:
    """(CPU % of one core over `secs` of the console child's tree and corral's
    tmux server, the tmux server's share of it, their RSS in MB at the end, the
    tmux server's share of it) with `n` sessions running (streaming, or
    `quiet`), measured from STARTED_SETTLE_SECS after they started."""
    from ptyprocess import PtyProcess

    with tempfile.TemporaryDirectory(prefix="corral-bench-cost-") as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        ready = base / "ready"
        env = child_env(base / "state", write_config(base / "config.toml"))
        argv = live_argv()
        argv += [str(ready), str(repo), str(n), "quiet" if quiet else "stream", engine]
        proc = PtyProcess.spawn(argv, dimensions=(LINES, COLS), env=env, cwd=str(ROOT))
        try:
            t0 = time.monotonic()
            while not ready.exists():
                read_chunk(proc, 0.2)
                if not proc.isalive() or time.monotonic() - t0 > ready_timeout:
                    raise SystemExit(f"console cost: {n} sessions not running in time")
            drain(proc, STARTED_SETTLE_SECS if n else 2.0)  # past the start's own work
            servers = tmux_server_pids(base)
            if engine == "panes" and n and not servers:
                raise SystemExit("console cost: no tmux server found for the pane sessions")
            tmux0 = sum(own_cpu_seconds(p) for p in servers)
            cpu0, wall0 = tree_cpu_seconds(proc.pid) + tmux0, time.monotonic()
            drain(proc, secs)
            tmux = sum(own_cpu_seconds(p) for p in servers) - tmux0
            cpu = tree_cpu_seconds(proc.pid) + tmux0 + tmux - cpu0
            wall = time.monotonic() - wall0
            tmux_rss = sum(own_rss_mb(p) for p in servers)
            return (
                cpu / wall * 100,
                tmux / wall * 100,
                tree_rss_mb(proc.pid) + tmux_rss,
                tmux_rss,
            )
        finally:
            quit_app(proc, timeout=20)
            kill_tmux_servers(base)


# every key of the last keystrokes(): (sent, its repaint arrived at the pty, the bench saw it
# after parsing what came before, the bench's parsing meanwhile), seconds
KEY_TIMES: list[tuple[float, float, float, float]] = []


class Term:
    """The child's pty output as a screen (pyte), parsed only when asked: the
    bytes of a drain are kept and fed at once, outside any timed window."""

    def __init__(self, proc) -> None:  # type: ignore[no-untyped-def]
        import pyte

        self.proc = proc
        self.screen = pyte.Screen(COLS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.pending = b""
        self.unparsed = 0  # sequences pyte could not take (its parser restarted after each)
        self.parse_secs = 0.0  # spent parsing so far (bench/key_trace.py: the bench's own share)
        # the reader thread's (arrival, chunk) queue, while it runs
        self._chunks: queue.Queue[tuple[float, bytes]] | None = None

    def read(self, timeout: float) -> float:
        """Read one chunk (within `timeout`) and parse everything read so far;
        the chunk's arrival time, or 0.0 when nothing came. With the reader
        running, the arrival is when the reader thread took it from the pty,
        not when this parse-bound thread got to it."""
        if self._chunks is None:
            chunk = read_chunk(self.proc, timeout)
            arrived = time.perf_counter()
        else:
            arrived, chunk = self.next_chunk(timeout)
        self.pending += chunk
        self.parse()
        return arrived if chunk else 0.0

    def drain(self, secs: float) -> None:
        if self._chunks is None:
            self.pending += drain(self.proc, secs)
            return
        end = time.perf_counter() + secs
        chunks = [self.pending]
        while (left := end - time.perf_counter()) > 0:
            chunks.append(self.next_chunk(left)[1])
        self.pending = b"".join(chunks)  # a backlog of megabytes under load: joined once

    def start_reader(self) -> None:
        """Read the pty on a thread of its own, stamping each chunk as it
        arrives: pyte parses a streaming screen far slower than a terminal
        does (tens of ms for one repaint of 50 streaming sessions under
        load), and a chunk read only after the parse of the one before would
        charge that parse to the console (bench/key_trace.py showed it)."""
        import threading

        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self._chunks = chunks
        self._reading = True
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)  # the reader gets the GIL back from a parse quickly

        def read() -> None:
            while self._reading:
                chunk = read_chunk(self.proc, 0.05)
                if chunk:
                    chunks.put((time.perf_counter(), chunk))

        self._reader = threading.Thread(target=read, name="bench-pty-reader", daemon=True)
        self._reader.start()

    def stop_reader(self) -> None:
        if self._chunks is not None:
            self._reading = False
            self._reader.join(1.0)
            sys.setswitchinterval(self._switch)
            self._chunks = None  # what it read and nobody parsed is not needed any more

    @property
    def reading(self) -> bool:
        """Whether the reader thread stamps the chunks."""
        return self._chunks is not None

    def next_chunk(self, timeout: float) -> tuple[float, bytes]:
        """From the reader: (arrival, chunk) within `timeout`, or (0.0, b"")."""
        assert self._chunks is not None
        try:
            return self._chunks.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return 0.0, b""

    def parse(self) -> None:
        if self.pending:
            data, self.pending = self.pending, b""
            began = time.perf_counter()
            try:
                self.stream.feed(data)
            except (TypeError, ValueError, IndexError, StopIteration):
                # a sequence pyte does not know the shape of (its parser dies
                # with it): a new parser on the same screen, which the next
                # repaints bring up to date
                import pyte

                self.unparsed += 1
                self.stream = pyte.ByteStream(self.screen)
            self.parse_secs += time.perf_counter() - began

    SAMPLE_COLUMNS = tuple(range(1, 60, 4))  # within any table's first columns

    def row_styles(self) -> list[tuple[str, bool]]:
        """Each line's dominant background (colour, reverse), sampled in its first columns."""
        styles = []
        buffer = self.screen.buffer
        for y in range(LINES):
            line = buffer[y]
            seen: dict[tuple[str, bool], int] = {}
            for x in self.SAMPLE_COLUMNS:
                char = line[x]
                key = (char.bg, char.reverse)
                seen[key] = seen.get(key, 0) + 1
            styles.append(max(seen, key=seen.__getitem__))
        return styles

    def rows_in(self, style: tuple[str, bool]) -> tuple[int, ...]:
        return tuple(y for y, got in enumerate(self.row_styles()) if got == style)

    def selected(self, style: tuple[str, bool]) -> str:
        """Which session the cursor row shows ("session 17"; the rows in the
        cursor's style when no row names one): the board keeps its cursor on
        its session when rows re-order, so a changed row number alone is no
        proof that the key was handled, and a changed session is."""
        rows = self.rows_in(style)
        lines = self.screen.display
        for y in rows:
            named = SESSION_RE.search(lines[y])
            if named:
                return named.group(0)
        return repr(rows)

    def text(self) -> str:
        return "\n".join(self.screen.display)


CURSOR_SETTLE_S = 1.5  # the wait for a Down key's repaint while learning the cursor's style


def cursor_style(term: Term) -> tuple[str, bool]:
    """The cursor row's style, learned from one Down key: the style one
    changed line took and another changed line gave up. Up puts it back."""
    for _attempt in range(3):
        term.drain(1.0)
        term.parse()
        before = term.row_styles()
        term.proc.write(DOWN)
        term.drain(CURSOR_SETTLE_S)
        term.parse()
        after = term.row_styles()
        term.proc.write(UP)
        changed = [y for y in range(LINES) if before[y] != after[y]]
        gained = {after[y] for y in changed}
        lost = {before[y] for y in changed}
        # the cursor's style moved (one line took it, one gave it up) and
        # is the rarest on screen (the table's own background is everywhere)
        both = sorted(gained & lost, key=after.count)
        if both and after.count(both[0]) == 1:
            return both[0]
    raise SystemExit(
        "keystroke bench: could not find the cursor row (no line changed style on a Down key);"
        f" the screen:\n{term.text()}"
    )


BACKGROUND_SECS = 10.0  # the window with no key whose Textual work is the background rate


def keystrokes(
    keys: int,
    n: int,
    child: list[str] | None = None,
    ready_timeout: float = 600,
    engine: str = "scripted",
    profile_to: str | None = None,
) -> tuple[list[float], list[float], list[str]]:
    """Key gaps (to the frame in which the cursor row has moved), background
    gaps (to the next chunk, no key) and the child's Textual work (counted
    per second with no key, then per key above that) with `n` live sessions;
    `child` is the console program to run (given ready file, repo and n),
    this file's by default."""
    import textual_counts
    from ptyprocess import PtyProcess

    with tempfile.TemporaryDirectory(prefix="corral-bench-live-") as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        ready = base / "ready"
        env = child_env(base / "state", write_config(base / "config.toml"))
        counts_file = base / "counts.json"
        env[COUNTS_ENV] = str(counts_file)
        argv, extra = (child, []) if child else (live_argv(), ["stream", engine])
        if child and child[-1:] == [LIVE_CHILD]:  # another tree's live child: our arguments
            argv, extra = child[:-1], ["stream", engine]
        proc = PtyProcess.spawn(
            [*argv, str(ready), str(repo), str(n), *extra],
            dimensions=(LINES, COLS),
            env=env,
            cwd=str(ROOT),
        )
        term = Term(proc)
        try:
            t0 = time.monotonic()
            while not ready.exists():
                term.drain(0.2)
                if not proc.isalive() or time.monotonic() - t0 > ready_timeout:
                    term.parse()
                    raise SystemExit(
                        f"live board: sessions not running after {time.monotonic() - t0:.0f} s;"
                        f" the screen:\n{term.text()}"
                    )
            print(f"  {ready.read_text()} sessions running after {time.monotonic() - t0:.1f} s")
            term.drain(2.0)
            style = cursor_style(term)

            def counts():  # type: ignore[no-untyped-def]
                return textual_counts.read(proc.pid, counts_file, term.drain)

            term.start_reader()  # every chunk stamped as it arrives from here on

            if profile_to:
                os.kill(proc.pid, signal.SIGUSR2)  # the measured windows only
            started = before = counts()
            t_quiet, cpu0 = time.monotonic(), tree_cpu_seconds(proc.pid)
            main0 = thread_cpu_seconds(proc.pid, proc.pid)
            servers = tmux_server_pids(base)
            tmux0 = sum(own_cpu_seconds(p) for p in servers)
            term.drain(BACKGROUND_SECS)
            quiet = counts() - before
            quiet_secs = time.monotonic() - t_quiet
            cpu = tree_cpu_seconds(proc.pid) - cpu0
            main_thread = thread_cpu_seconds(proc.pid, proc.pid) - main0
            tmux = sum(own_cpu_seconds(p) for p in servers) - tmux0
            work = [
                f"CPU with no key: {cpu / quiet_secs * 100:.1f} % of a core"
                + (f" (+ its tmux server {tmux / quiet_secs * 100:.1f} %)" if servers else "")
                + f"; its main thread (the event loop) {main_thread / quiet_secs * 100:.1f} %",
                *(
                    f"since it started: {what} {got}"
                    for what, got in sorted(started.items())
                    if what.startswith("layout")
                ),
            ]
            before, t_keys = counts(), time.monotonic()
            KEY_TIMES.clear()
            rng = random.Random(7)
            key_ms: list[float] = []
            idle_ms: list[float] = []
            for i in range(keys):
                term.drain(rng.uniform(0.05, 0.15))
                # background: the wait for the next chunk, with no key sent
                t = time.perf_counter()
                arrived, chunk = term.next_chunk(1.0)
                term.pending += chunk
                idle_ms.append((max(arrived, t) - t) * 1000 if chunk else 1000.0)
                term.drain(rng.uniform(0.02, 0.05))
                term.parse()
                was = term.selected(style)
                parsed = term.parse_secs
                t = time.perf_counter()
                proc.write(DOWN if i % 2 == 0 else UP)
                gap = seen = 1000.0  # the cursor not moved within 1 s counts as 1 s
                # every chunk that arrived within the second is looked at, however
                # long this process takes to parse them (it lags under load)
                while True:
                    arrived = term.read(max(0.0, 1.0 - (time.perf_counter() - t)))
                    if not arrived:
                        if term.reading or time.perf_counter() - t >= 1.0:
                            break
                        continue
                    if arrived - t >= 1.0:
                        break
                    if arrived < t:  # came before the key (parsing lagged): the state before it
                        was = term.selected(style)
                        continue
                    if term.selected(style) != was:
                        gap = (arrived - t) * 1000
                        seen = (time.perf_counter() - t) * 1000
                        break
                key_ms.append(gap)
                KEY_TIMES.append((t, t + gap / 1000, t + seen / 1000, term.parse_secs - parsed))
            keyed, keyed_secs = counts() - before, time.monotonic() - t_keys
            if profile_to:
                os.kill(proc.pid, signal.SIGUSR2)
                stats = counts_file.with_suffix(".pstats")
                end = time.monotonic() + 30
                while not stats.exists() and time.monotonic() < end:
                    term.drain(0.05)
                if stats.exists():
                    shutil.copyfile(stats, profile_to)
                    print(f"  profile of the no-key and key windows written to {profile_to}")
            work += textual_counts.table(quiet, quiet_secs, keyed, keyed_secs, keys)
            if term.unparsed:
                print(
                    f"  ({term.unparsed} output sequence(s) the terminal emulator could not take)"
                )
            return key_ms, idle_ms, work
        finally:
            term.stop_reader()
            quit_app(proc, timeout=20)
            kill_tmux_servers(base)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-live":
        quiet = len(sys.argv) > 5 and sys.argv[5] == "quiet"
        engine = sys.argv[6] if len(sys.argv) > 6 else "scripted"
        child_live(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), quiet, engine)
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--child-floor":
        child_floor(Path(sys.argv[2]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description="console figures through a real pty")
    parser.add_argument("--quick", action="store_true", help="fewer runs and keys")
    parser.add_argument("--runs", type=int, help="cold-start runs (5; 3 with --quick)")
    parser.add_argument("--keys", type=int, help="keystrokes (100; 40 with --quick)")
    parser.add_argument("--sessions", type=int, default=10000, help="stored sessions (10000)")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--skip-list", action="store_true")
    parser.add_argument("--skip-empty", action="store_true")
    parser.add_argument("--skip-keys", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="panes",
        help="live sessions for (b) and (e): shell loops in real tmux panes (default) or "
        "in-process scripted engines",
    )
    parser.add_argument(
        "--live", type=int, default=LIVE_SESSIONS, help="live sessions for (b) (100)"
    )
    parser.add_argument(
        "--profile",
        metavar="PATH",
        help="write the (b) console's cProfile stats of its no-key and key windows there "
        "(pstats format; slows it down)",
    )
    parser.add_argument("--cpu-secs", type=float, default=10.0, help="CPU window for (e) (10)")
    parser.add_argument("--compare", metavar="CMD", help="another corral command, run for run")
    parser.add_argument(
        "--compare-child",
        metavar="CMD",
        help="(b) also with this command as the live console (another tree's `bench/tui.py "
        "--child-live`, given ready file, repo, n, mode, engine), in the same run",
    )
    parser.add_argument("--ccmanager", metavar="PATH", help="ccmanager, for (d) in the same run")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    keys = args.keys or (40 if args.quick else 100)
    ok = True

    cmds = [corral_bin(), *([args.compare] if args.compare else [])]

    def report(label: str, times: dict[str, list[float]], budget: float | None) -> bool:
        good = True
        for cmd, values in times.items():
            cpu = CPU.pop(cmd, [])
            if cpu:
                print(
                    f"  {label} CPU (process tree) median {statistics.median(cpu) * 1000:6.0f} ms  {cmd}"
                )
            med = statistics.median(values)
            verdict = ""
            if budget is not None and cmd == cmds[0]:
                good = med <= budget
                verdict = f"   budget ≤ {budget * 1000:.0f} ms   {'OK' if good else 'OVER BUDGET'}"
            print(f"  {label} median over {runs} runs: {med * 1000:6.0f} ms  {cmd}{verdict}")
        return good

    if not args.skip_cold:
        print(
            f"(a) cold start: `corral --repo` spawned in a {COLS}x{LINES} pty with "
            f"{args.sessions} stored sessions, until the board's counts line is painted"
        )
        ok &= report("(a)", cold_start(runs, args.sessions, cmds), BUDGET_COLD_S)

    if not args.skip_list:
        print(f"(c) `corral sessions --json` with {args.sessions} stored sessions, spawn to exit")
        listed = list_json(runs, args.sessions, cmds)
        ok &= report("(c)", listed, BUDGET_LIST_S)
        ours, floor = statistics.median(listed[cmds[0]]), statistics.median(listed[FLOOR_CAT])
        print(f"  (c) corral against the floor (`cat` of the same bytes): {ours / floor:.2f}×")

    if not args.skip_empty:
        print(f"(d) cold start with an empty store, {COLS}x{LINES} pty, until '0 sessions'")
        times = cold_start(runs, 0, cmds, args.ccmanager)
        report("(d)", times, None)
        for cmd, values in RSS.items():
            med = statistics.median(values)
            verdict = ""
            if cmd == cmds[0]:
                good = med <= BUDGET_IDLE_RSS_MB
                ok &= good
                verdict = (
                    f"   budget ≤ {BUDGET_IDLE_RSS_MB:.0f} MB   {'OK' if good else 'OVER BUDGET'}"
                )
            print(
                f"  (d) idle memory (process tree RSS, {IDLE_SETTLE_S:g} s after first paint) "
                f"median {med:.0f} MB (runs: {', '.join(f'{v:.1f}' for v in values)})  "
                f"{cmd}{verdict}"
            )
        if args.ccmanager:
            ours = statistics.median(times[cmds[0]])
            peers = [cmd for cmd in times if cmd not in cmds]
            for peer in peers:
                theirs = statistics.median(times[peer])
                what = "its binary" if peer == peers[-1] else "its npm launcher"
                print(
                    f"  (d) corral {ours * 1000:.0f} ms against ccmanager ({what}) "
                    f"{theirs * 1000:.0f} ms in this run: "
                    + (
                        f"{theirs / ours:.2f}× faster"
                        if ours < theirs
                        else f"{ours / theirs:.2f}× SLOWER"
                    )
                )
            good = ours < statistics.median(times[peers[-1]])
            ok &= good
            print(
                f"  (d) budget: first paint before ccmanager's binary   "
                f"{'OK' if good else 'OVER BUDGET'}"
            )
        else:
            print(
                f"  (ccmanager's binary ≈ {REFERENCE_EMPTY_S * 1000:.0f} ms, not judged when not run:"
                " --ccmanager PATH)"
            )

    if not args.skip_cost:
        print(
            f"(e) the console's CPU (process tree + corral's tmux server, % of one core) and "
            f"memory ({args.engine} sessions): 10 streaming, 50 running quiet, none "
            f"({STARTED_SETTLE_SECS:g} s after they started); over {args.cpu_secs:g} s each"
        )
        streaming, streaming_tmux, stream_rss, _ = console_cost(
            10, False, args.cpu_secs, args.engine
        )
        idle, idle_tmux, idle_rss, _ = console_cost(50, True, args.cpu_secs, args.engine)
        _, _, empty_rss, _ = console_cost(0, True, 1.0, args.engine)
        per_quiet = (idle_rss - empty_rss) / 50
        per_streaming = (stream_rss - empty_rss) / 10
        for label, got, budget, unit in (
            (
                f"10 streaming: CPU (tmux server {streaming_tmux:.2f} %)",
                streaming,
                BUDGET_CPU_STREAMING_PCT,
                "%",
            ),
            (f"50 idle: CPU (tmux server {idle_tmux:.2f} %)", idle, BUDGET_CPU_IDLE_PCT, "%"),
            (
                f"memory per quiet session ({idle_rss:.0f} MB with 50, {empty_rss:.0f} MB "
                "with none)",
                per_quiet,
                BUDGET_RSS_PER_SESSION_MB,
                " MB",
            ),
            (
                f"memory per streaming session ({stream_rss:.0f} MB with 10, {empty_rss:.0f} MB "
                "with none)",
                per_streaming,
                BUDGET_RSS_PER_SESSION_MB,
                " MB",
            ),
        ):
            good = got <= budget
            ok &= good
            print(
                f"  (e) {label}: {got:.2f}{unit}   budget ≤ {budget:g}{unit}   "
                f"{'OK' if good else 'OVER BUDGET'}"
            )

    if not args.skip_keys:
        print(
            f"(b) keystroke → repaint: {args.live} live sessions ({args.engine}) streaming a "
            "line every 50 ms; Down/Up written to the pty, timed until the frame in which the "
            "cursor row has moved; the floor (a bare Textual DataTable app) timed the same way"
        )
        floor_argv = [sys.executable, str(Path(__file__).resolve()), "--child-floor"]
        floor_ms, _, floor_work = keystrokes(keys, args.live, child=floor_argv)
        profile = str(Path(args.profile).resolve()) if args.profile else None
        key_ms, idle_ms, work = keystrokes(keys, args.live, engine=args.engine, profile_to=profile)
        if args.compare_child:
            other_ms, _, other_work = keystrokes(
                keys, args.live, child=[args.compare_child, LIVE_CHILD], engine=args.engine
            )
            o50, o95 = statistics.median(other_ms), pct(other_ms, 95)
            print(
                f"  {args.compare_child}: p50 {o50:.1f} ms  p95 {o95:.1f} ms  "
                f"max {max(other_ms):.1f} ms over {len(other_ms)} keys"
            )
            print(f"  Textual's work in {args.compare_child} (same windows):")
            for line in other_work:
                print(f"    {line}")
        p50, p95 = statistics.median(key_ms), pct(key_ms, 95)
        f50, f95 = statistics.median(floor_ms), pct(floor_ms, 95)
        good = p95 <= BUDGET_KEY_P95_MS
        ok &= good
        print(
            f"  floor (bare Textual app, {args.live} rows): p50 {f50:.1f} ms  p95 {f95:.1f} ms"
            f"  max {max(floor_ms):.1f} ms over {len(floor_ms)} keys"
        )
        print(
            f"  keystroke: p50 {p50:.1f} ms  p95 {p95:.1f} ms  max {max(key_ms):.1f} ms over "
            f"{len(key_ms)} keys   budget p95 ≤ {BUDGET_KEY_P95_MS:.0f} ms   "
            f"{'OK' if good else 'OVER BUDGET'}"
        )
        print(
            f"  corral against the floor: p50 {p50 / max(f50, 0.01):.2f}×  "
            f"p95 {p95 / max(f95, 0.01):.2f}×"
        )
        print(
            f"  Textual's work in the floor (bare app, {BACKGROUND_SECS:g} s with no key, then the keys):"
        )
        for line in floor_work:
            print(f"    {line}")
        print(f"  Textual's work in corral ({args.live} streaming sessions, same windows):")
        for line in work:
            print(f"    {line}")
        print(
            "  background (no key; the wait for the next chunk): "
            f"p50 {statistics.median(idle_ms):.1f} ms  p95 {pct(idle_ms, 95):.1f} ms"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
