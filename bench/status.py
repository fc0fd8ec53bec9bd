"""Benchmark of status truth at scale (supervisor/status.py, panes/manager.py).

100 stand-in agents, each a small Python program in its own pane of a private
tmux server (socket in a temporary directory, killed at the end), alternate
phases at random (1-6 s each, own seed per agent):

- busy: output streams (a line every 100-250 ms) above a status line
  "✻ Working… (Ns · esc to interrupt)" redrawn in place, as real agents do;
- idle: the status line is cleared and a bare `> ` prompt waits;
- waiting (after some busy phases): "Do you want to make this edit to …?"
  with numbered options; the dialog is erased when the phase ends.

Each stand-in appends its true phase changes (monotonic time, taken once the
screen was written) to its own file. The real PaneManager (worker-thread
sweep every 0.5 s, the stand-ins' screen markers, no hooks) watches them on
an asyncio loop; every status change it announces is recorded with the time
it was announced and the capture time of its evidence. Compared:

- false idle: an idle edge whose evidence was captured while the agent was
  truly busy or waiting (the external engine would verify it and paste a
  repair prompt into a working agent);
- pastes to a busy agent: guidance for each agent arrives at random moments
  (every 1-6 s once the last was delivered) and is held by the gate corral's
  engine applies before it pastes (the pane alive and shown idle) until the
  gate opens; each paste decision is judged against the truth at that moment.
  A paste decided while the agent truly worked, on an idle status whose
  evidence was captured while it worked, is corral's fault (budget 0); one
  whose agent turned busy on its own after corral had rightly seen it idle is
  counted apart (a stand-in resumes by itself; a real agent resumes on
  corral's paste, which marks it running at once). Decided, not typed: the
  stand-ins script their own screens;
- busy phases never seen running (the measured failure: 22 of 100);
- false running: a running edge whose evidence was captured while idle;
- missed waiting: a waiting phase that ended before it was announced with its
  question (phases shorter than the 1.5 s detection budget are listed apart);
- detection latency: announcement time - true change, per kind, p50/p95;
- the loop's responsiveness: how late a 5 ms timer on the PaneManager's own
  event loop fires (p95);
- the loop's own share of each sweep (folding the worker's readings);
- with --console, keystroke → repaint: the real console in a pty (bench/tui.py's
  timing) with N sessions whose `custom:` stand-ins, given their task by paste,
  stream under a busy marker in real tmux panes watched by the real
  PaneManager (every pane changes between any two sweeps: the most work).

Budgets (ARCHITECTURE.md): 0 false idle, 0 pastes to a busy agent on a misread
screen, detection p95 ≤ 1.5 s, keystroke → repaint p95 ≤ 20 ms.

With --acp, turn-end detection over ACP: the scripted ACP agent
(tests/fakes/acp_agent.py `quick`) ends each turn at once; the time from
`session/prompt` sent to its `stopReason` received and the agent's message
journaled by the real client (`acp.client.CorralClient`, `acp.wire`) is the
latency (budget p95 ≤ 50 ms; a pane's is bounded by its 0.5 s sweep). It
first prints the CPU the real wire, the SDK and corral's client spend per
streamed update (the `stream` agent's lines fed from memory), with pieces of
speech past the SDK (now) and through it (before), in the same run.

With --acp-console, keystroke → repaint in the real console (bench/tui.py's
timing, a 200x50 pty) with N (--agents, 50 by default here) sessions whose
agents are the scripted ACP agent (`stream`: a line every 0.1 s and a tool
call every tenth, until cancelled), confined like any agent and driven by the
real ACP engine: every line is a journaled `conversation` event the board's
feed and the preview (the selected session's conversation) repaint from.
Budget p95 ≤ 20 ms quiet, ≤ 50 ms at --load 4 (twice the cores); the
background gap (no key) is printed beside it, and the floor (bench/tui.py's
bare Textual app, timed the same way in the same run) with the ratio.
--profile PATH writes the console's cProfile stats while the keys are timed.
A key's repaint is timed when it arrives at the pty (a reader thread stamps
every chunk): this process's own terminal emulator (pyte) parses a streaming
screen far slower than a terminal, and it lags under load; the old measure
(when pyte had got to it) is printed beside it. --trace splits the slowest
keys into their hops and times the ACP batches and the frames on the
console's loop (bench/key_trace.py).

Run: .venv/bin/python bench/status.py [--quick] [--console] [--acp] [--acp-console]
     [--agents N] [--seconds S] [--keys N] [--profile PATH] [--trace] [--load N]
     [--against OTHER_CHECKOUT] (with --console or --acp-console: the other checkout's
     console is timed first, in the same run, for a before/after; `make view` there first)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.agents.base import AgentProfile
from corral.supervisor.agents.profiles import DEMO
from corral.supervisor.panes.base import PaneSpec
from corral.supervisor.panes.manager import PaneManager, PaneRecord
from corral.supervisor.panes.observe import Seen
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.status import AgentStatus, StatusReading

BUDGET_FALSE_IDLE = 0
BUDGET_P95_S = 1.5
BUDGET_LAG_P95_MS = 20.0
TOLERANCE = 0.05  # a capture may see a screen a moment before its truth line is written

# The stand-in agent: argv = truth file, seed, start time (monotonic), seconds.
STANDIN = r"""
import os, random, sys, time
truth, seed, start, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
out = sys.stdout
log = open(truth, "a", buffering=1)
CLEAR = "\r\x1b[2K"
def mark(phase):
    out.flush()
    log.write(f"{time.monotonic():.4f} {phase}\n")
def idle(until):
    out.write(CLEAR + "done.\n> ")
    mark("idle")
    time.sleep(max(0.0, until - time.monotonic()))
    out.write(CLEAR)
def busy(until):
    began, n = time.monotonic(), 0
    first = True
    while time.monotonic() < until:
        n += 1
        spent = int(time.monotonic() - began)
        out.write(f"{CLEAR}step {n}: editing module_{rng.randrange(99)}.py, line {rng.randrange(999)}\n")
        out.write(f"✻ Working… ({spent}s · esc to interrupt)")
        if first:
            mark("busy")
            first = False
        else:
            out.flush()
        time.sleep(min(rng.uniform(0.1, 0.25), max(0.0, until - time.monotonic())))
    out.write(CLEAR)
def waiting(until):
    out.write(CLEAR + f"Do you want to make this edit to module_{rng.randrange(99)}.py?\n")
    out.write("❯ 1. Yes\n  2. No, and tell the agent what to do differently")
    mark("waiting")
    time.sleep(max(0.0, until - time.monotonic()))
    out.write(CLEAR + "\x1b[1A\x1b[2K\x1b[1A\x1b[2K\r")
time.sleep(max(0.0, start - time.monotonic()))
end = start + seconds
phase = "idle"
while time.monotonic() < end:
    until = time.monotonic() + rng.uniform(1.0, 6.0)
    {"idle": idle, "busy": busy, "waiting": waiting}[phase](until)
    if phase == "busy":
        phase = "waiting" if rng.random() < 0.25 else "idle"
    else:
        phase = "busy"
mark("end")
out.write(CLEAR + "> ")
out.flush()
time.sleep(3600)
"""

STANDIN_PROFILE = AgentProfile(
    name="standin",
    label="stand-in agent",
    binaries=(),
    markers=DEMO.markers,  # "esc to interrupt", "Do you want to make this edit", a bare ">"
    hooks=False,  # screens only: the quiet rule is on too
)
KIND = {"busy": AgentStatus.RUNNING, "idle": AgentStatus.IDLE, "waiting": AgentStatus.WAITING}


@dataclass
class Paste:
    sid: str
    arrived: float  # when the guidance came
    decided: float  # when corral's gate let it through
    evidence: float  # capture time of the reading that made the pane idle


def paste_gate_open(manager: PaneManager, sid: str) -> bool:
    """The gate the external engine applies before it pastes guidance: the
    agent's pane is alive and shown idle."""
    record = manager.record(sid)
    return record is not None and record.alive and record.status.status is AgentStatus.IDLE


async def paster(
    manager: PaneManager, sids: list[str], start: float, pastes: list[Paste], stop: asyncio.Event
) -> None:
    """Guidance arrives for each agent at random moments and is pasted (the
    decision recorded) once corral's gate opens."""
    import random

    rng = random.Random(99)
    due = {sid: start + rng.uniform(0.0, 6.0) for sid in sids}
    while not stop.is_set():
        now = time.monotonic()
        for sid, arrived in due.items():
            if now >= arrived and paste_gate_open(manager, sid):
                evidence = manager.records[sid].tracker.changed_at
                pastes.append(Paste(sid, arrived, now, evidence))
                due[sid] = now + rng.uniform(1.0, 6.0)
        await asyncio.sleep(0.05)


@dataclass
class Change:
    announced: float  # when the loop announced it
    evidence: float  # capture (or sweep) time of the reading that decided it
    status: AgentStatus
    has_question: bool


class Timed(PaneManager):
    """The real PaneManager, with the time its loop spends folding measured."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.fold_secs: list[float] = []
        self._fold_acc = 0.0

    async def sweep_once(self) -> None:
        self._fold_acc = 0.0
        await super().sweep_once()
        self.fold_secs.append(self._fold_acc)

    async def _fold(self, record: PaneRecord, item: Seen) -> None:
        t = time.perf_counter()
        await super()._fold(record, item)
        self._fold_acc += time.perf_counter() - t


def read_truth(path: Path) -> list[tuple[float, str]]:
    rows = []
    for line in path.read_text().splitlines():
        t, phase = line.split()
        rows.append((float(t), phase))
    return rows


def phase_at(truth: list[tuple[float, str]], t: float) -> str:
    current = "start"
    for at, phase in truth:
        if at > t:
            break
        current = phase
    return current


def phases_near(truth: list[tuple[float, str]], t: float) -> set[str]:
    """The true phases at any moment within TOLERANCE of `t` (a screen shows a
    change a moment before its truth line is written)."""
    near = {phase_at(truth, t - TOLERANCE)}
    near.update(p for at, p in truth if t - TOLERANCE < at <= t + TOLERANCE)
    return near


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def loop_lag(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.005)
        samples.append((time.perf_counter() - t - 0.005) * 1000)


async def run(agents: int, seconds: float, work: Path) -> int:
    backend = TmuxBackend(socket_dir=work / "tmux")
    changes: dict[str, list[Change]] = {}
    manager: Timed

    def on_status(sid: str, reading: StatusReading) -> None:
        record = manager.records.get(sid)
        evidence = record.tracker.changed_at if record else time.monotonic()
        changes.setdefault(sid, []).append(
            Change(time.monotonic(), evidence, reading.status, reading.question is not None)
        )

    manager = Timed(backend, work / "hooks", interval=0.5, on_status=on_status)
    script = work / "standin.py"
    script.write_text(STANDIN)
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(work), "LANG": "C.UTF-8"}
    env["TERM"] = "xterm-256color"
    settle = 4.0 + agents * 0.06
    start = time.monotonic() + settle
    truth_files: dict[str, Path] = {}
    try:
        await manager.start()
        for i in range(agents):
            sid = f"standin{i:03d}"
            truth_files[sid] = work / f"{sid}.truth"
            argv = [sys.executable, "-I", "-S", str(script), str(truth_files[sid])]
            argv += [str(1000 + i), f"{start:.4f}", str(seconds)]
            spec = PaneSpec(sid, 1, f"corral-{sid}", work, argv, env, 200, 50)
            await manager.spawn(spec, STANDIN_PROFILE)
        print(f"  {agents} stand-ins spawned; phases run {seconds:g} s from start")
        lag: list[float] = []
        stop = asyncio.Event()
        lagger = asyncio.ensure_future(loop_lag(lag, stop))
        pastes: list[Paste] = []
        pasting = asyncio.ensure_future(paster(manager, list(truth_files), start, pastes, stop))
        sweeps0 = manager.sweep_count
        await asyncio.sleep(max(0.0, start - time.monotonic()) + seconds + 2.0)
        stop.set()
        await lagger
        await pasting
        sweeps = manager.sweep_count - sweeps0
    finally:
        await manager.stop()
        backend.kill_server()

    end = start + seconds
    latency: dict[str, list[float]] = {"busy": [], "idle": [], "waiting": []}
    missed: dict[str, int] = {"busy": 0, "idle": 0, "waiting": 0}
    short: dict[str, int] = {"busy": 0, "idle": 0, "waiting": 0}  # missed, but < the budget
    phases: dict[str, int] = {"busy": 0, "idle": 0, "waiting": 0}
    false_idle = false_running = stale_idle = 0
    for sid, path in truth_files.items():
        truth = [(t, p) for t, p in read_truth(path) if p != "end" and t < end]
        seen = [c for c in changes.get(sid, []) if c.announced >= start - 1.0]
        for c in seen:
            if c.announced > end:
                break
            truly = phases_near(truth, c.evidence)
            if c.status is AgentStatus.IDLE and "idle" not in truly:
                false_idle += 1
                around = [(round(at - c.evidence, 3), p) for at, p in truth]
                around = [x for x in around if -8 < x[0] < 3]
                print(
                    f"  ! false idle on {sid}: evidence {c.evidence - start:.3f} s, announced "
                    f"{c.announced - c.evidence:+.3f} s later; truth around it: {around}"
                )
            elif c.status is AgentStatus.RUNNING and "busy" not in truly:
                false_running += 1
            elif c.status is AgentStatus.IDLE and phase_at(truth, c.announced) != "idle":
                stale_idle += 1  # decided on an idle screen, announced after it ended
        for k, (t, phase) in enumerate(truth):
            if t < start - TOLERANCE:
                continue
            ends = truth[k + 1][0] if k + 1 < len(truth) else end
            if ends > end:
                continue  # cut off by the end of the run
            phases[phase] += 1
            want = KIND[phase]
            hit = next(
                (
                    c
                    for c in seen
                    if t - TOLERANCE <= c.announced
                    and c.status is want
                    and (want is not AgentStatus.WAITING or c.has_question)
                ),
                None,
            )
            # already showing it (the previous phase looked the same): no edge needed
            before = [c for c in seen if c.announced < t - TOLERANCE]
            if hit is None or hit.announced > ends + 0.5:
                if before and before[-1].status is want:
                    latency[phase].append(0.0)
                elif ends - t < BUDGET_P95_S:
                    short[phase] += 1  # over before the budget allows it to be seen
                else:
                    missed[phase] += 1
                continue
            latency[phase].append(max(0.0, hit.announced - t))

    pasted_busy = resumed_alone = into_idle = held = 0
    waits: list[float] = []
    for paste in pastes:
        if paste.decided > end:
            continue
        truth = [(t, p) for t, p in read_truth(truth_files[paste.sid]) if p != "end"]
        if "idle" in phases_near(truth, paste.decided):
            into_idle += 1
            if phase_at(truth, paste.arrived) != "idle":
                held += 1  # it came while the agent worked: held until its turn ended
                turned = next((t for t, p in truth if t > paste.arrived and p == "idle"), None)
                if turned is not None:
                    waits.append(max(0.0, paste.decided - turned))
        elif "idle" not in phases_near(truth, paste.evidence):
            pasted_busy += 1
            print(
                f"  ! paste to busy {paste.sid} at {paste.decided - start:.3f} s on an idle status "
                f"decided from a screen captured at {paste.evidence - start:.3f} s"
            )
        else:
            resumed_alone += 1

    every = [v for vs in latency.values() for v in vs]
    p95 = pct(every, 95)
    lag_p95 = pct(lag, 95)
    fold_ms = [s * 1000 for s in manager.fold_secs]
    ok = false_idle <= BUDGET_FALSE_IDLE and p95 <= BUDGET_P95_S and missed["busy"] == 0
    ok &= missed["waiting"] == 0 and lag_p95 <= BUDGET_LAG_P95_MS and pasted_busy == 0

    def verdict(good: bool) -> str:
        return "PASS" if good else "FAIL"

    print(f"  {sweeps} sweeps; true phases judged: {phases}")
    print(
        f"  false idle (idle edges decided while truly busy/waiting): {false_idle}   "
        f"budget {BUDGET_FALSE_IDLE}   {verdict(false_idle == 0)}"
    )
    print(
        f"  pastes (guidance at random moments, let through by corral's gate: pane shown idle): "
        f"{into_idle + pasted_busy + resumed_alone}; into an idle agent {into_idle}, of which "
        f"{held} came while it worked and were held until its turn ended (held p50 "
        f"{statistics.median(waits) if waits else 0:.2f} s, p95 {pct(waits, 95):.2f} s past it)"
    )
    print(
        f"  pastes to a busy agent, on a screen captured while it worked: {pasted_busy}   "
        f"budget 0   {verdict(pasted_busy == 0)}"
    )
    print(
        f"  pastes to an agent that turned busy on its own after corral saw it idle (before "
        f"the next sweep told; real agents resume on corral's paste): {resumed_alone}"
    )
    print(
        f"  busy phases never seen running: {missed['busy']} of {phases['busy']}   budget 0   "
        f"{verdict(missed['busy'] == 0)}"
    )
    print(f"  false running (running edges decided while truly idle): {false_running}")
    print(
        f"  missed waiting (no question announced before it ended): {missed['waiting']} of "
        f"{phases['waiting']}   budget 0   {verdict(missed['waiting'] == 0)}"
    )
    print(f"  idle phases never seen idle: {missed['idle']} of {phases['idle']}")
    print(
        f"  phases shorter than {BUDGET_P95_S:g} s that ended unseen (not counted above): "
        + ", ".join(f"{k} {v}" for k, v in short.items())
    )
    print(
        f"  idle announced just after a short idle phase ended (decided on an idle screen; "
        f"agents only resume on corral's paste): {stale_idle}"
    )
    for phase in ("busy", "idle", "waiting"):
        vs = latency[phase]
        print(
            f"  detection latency {KIND[phase].value:>8}: p50 {statistics.median(vs) if vs else 0:.2f} s"
            f"  p95 {pct(vs, 95):.2f} s  ({len(vs)} phases)"
        )
    print(
        f"  detection latency, all: p50 {statistics.median(every):.2f} s  p95 {p95:.2f} s   "
        f"budget p95 ≤ {BUDGET_P95_S:g} s   {verdict(p95 <= BUDGET_P95_S)}"
    )
    print(
        f"  loop responsiveness (5 ms timer lateness, stand-in for keystroke → repaint): "
        f"p50 {statistics.median(lag):.1f} ms  p95 {lag_p95:.1f} ms  max {max(lag):.1f} ms   "
        f"budget p95 ≤ {BUDGET_LAG_P95_MS:g} ms   {verdict(lag_p95 <= BUDGET_LAG_P95_MS)}"
    )
    print(
        f"  the loop's share of a sweep (folding readings for {agents} panes): "
        f"p50 {statistics.median(fold_ms):.2f} ms  p95 {pct(fold_ms, 95):.2f} ms"
    )
    return 0 if ok else 1


# -- keystroke → repaint with a console watching agents in real panes -------------

# After the task is pasted at its `> ` prompt, streams output under a busy
# marker for good (every pane changes between any two sweeps: the most work).
CONSOLE_STANDIN = r"""
import os, random, select, sys, time
rng = random.Random(os.getpid())
sys.stdout.write("stand-in agent\n> ")
sys.stdout.flush()
data = os.read(0, 65536)
while select.select([0], [], [], 0.5)[0] and os.read(0, 65536):
    pass
n = 0
while True:
    n += 1
    sys.stdout.write(f"\r\x1b[2Kstep {n}: editing module_{rng.randrange(99)}.py\n")
    sys.stdout.write(f"✻ Working… ({n // 5}s · esc to interrupt)")
    sys.stdout.flush()
    time.sleep(rng.uniform(0.1, 0.25))
"""


def count_textual_work() -> None:
    """What bench/tui.py's keystrokes() asks of its child: count the Textual
    work (bench/textual_counts.py) and hand it over on SIGUSR1, whose default
    action would end the console mid-measurement."""
    path = os.environ.get("CORRAL_BENCH_COUNTS")  # bench/tui.py's COUNTS_ENV
    if path:
        import textual_counts  # bench/ is this script's own folder

        textual_counts.instrument(Path(path))


def console_child(ready: Path, repo: Path, n: int) -> None:
    """The real console with `n` sessions whose agents (custom: stand-ins) run
    in real tmux panes watched by the real PaneManager (runs in the pty)."""
    from corral.supervisor.api import Supervisor
    from corral.supervisor.config import SupervisorConfig
    from corral.supervisor.contracts.drafting import FixedDrafter
    from corral.supervisor.factory import build_supervisor
    from corral.supervisor.models import ContractCheck, OutcomeContract
    from corral.supervisor.states import CoderState
    from corral.tui.app import CorralApp

    script = ready.parent / "console_standin.py"
    script.write_text(CONSOLE_STANDIN)
    never = OutcomeContract(
        checks=[ContractCheck(name="done", command="test -f done.txt", timeout_secs=10)]
    )
    sup = build_supervisor(
        ready.parent / "state",
        FixedDrafter(never),
        socket_dir=ready.parent / "tmux",
        default_engine=f"custom:{sys.executable} -I -S {script}",
        config=SupervisorConfig(max_session_wall_secs=0),
    )

    async def seed(s: Supervisor) -> None:
        ids = []
        for i in range(n):
            ids.append((await s.start(f"Stand-in session {i}", repo, engine="auto")).session_id)
        for sid in ids:
            await s.wait_for(sid, needs=True, timeout=300)
            await s.confirm(sid)
        for sid in ids:
            await s.wait_for(sid, {CoderState.RUNNING}, timeout=300)
        while sum(r.agent_status == "running" for r in s.list()) < n:
            await asyncio.sleep(0.5)
        ready.write_text(str(len(ids)))

    count_textual_work()
    try:
        CorralApp(sup, default_repo=repo, on_ready=seed).run()
    finally:
        for sock in (ready.parent / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


ACP_STREAM_SECS = 0.1  # one line per agent every 0.1 s
ACP_REPORT_ENV = "CORRAL_BENCH_ACP_REPORT"  # where the child says what its process spent
ACP_PROFILE_ENV = "CORRAL_BENCH_ACP_PROFILE"  # where the child writes its cProfile stats
ACP_CURSOR_SETTLE_S = 8.0  # see acp_console_keys
SATURATED_MS = 1000.0  # a key not repainted within bench/tui.py's 1 s counts as 1 s


def acp_console_child(ready: Path, repo: Path, n: int) -> None:
    """The real console with `n` sessions whose agents are the scripted ACP
    agent streaming its conversation (runs in the pty)."""
    from corral.supervisor.api import Supervisor
    from corral.supervisor.config import SupervisorConfig
    from corral.supervisor.contracts.drafting import FixedDrafter
    from corral.supervisor.factory import build_supervisor
    from corral.supervisor.models import ContractCheck, OutcomeContract
    from corral.supervisor.states import CoderState
    from corral.tui.app import CorralApp

    fake = Path(__file__).resolve().parents[1] / "tests" / "fakes" / "acp_agent.py"
    never = OutcomeContract(
        checks=[ContractCheck(name="done", command="test -f done.txt", timeout_secs=10)]
    )
    sup = build_supervisor(
        ready.parent / "state",
        FixedDrafter(never),
        socket_dir=ready.parent / "tmux",
        default_engine=f"acp:{sys.executable} {fake} stream {ACP_STREAM_SECS}",
        config=SupervisorConfig(max_session_wall_secs=0),
    )

    began: dict[str, float] = {}
    profiler = cProfile.Profile()  # with ACP_PROFILE_ENV: the console's loop while timed

    def events_so_far() -> int:
        return sum(r.next_seq or 0 for r in sup.list())  # a stored row has none

    async def seed(s: Supervisor) -> None:
        ids = []
        for i in range(n):
            ids.append((await s.start(f"ACP session {i}", repo, engine="auto")).session_id)
        for sid in ids:
            await s.wait_for(sid, needs=True, timeout=300)
            await s.confirm(sid)
        for sid in ids:
            await s.wait_for(sid, {CoderState.RUNNING}, timeout=300)
        while sum(r.agent_status == "running" for r in s.list()) < n:
            failed = [r.error for r in s.list() if r.state is CoderState.FAILED]
            if failed:
                raise SystemExit(f"an ACP session failed: {failed[0]}")
            await asyncio.sleep(0.5)
        began.update(cpu=time.process_time(), wall=time.monotonic(), events=events_so_far())
        if os.environ.get(ACP_PROFILE_ENV):
            profiler.enable()
        ready.write_text(str(len(ids)))

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    count_textual_work()
    import key_trace  # bench/ is this script's own folder

    if os.environ.get(key_trace.TRACE_ENV):
        key_trace.instrument_child()

    def measured() -> None:  # while the keys were timed: the console's (and owner's) own share
        profile = os.environ.get(ACP_PROFILE_ENV)
        if profile and began:
            profiler.disable()
            profiler.dump_stats(profile)
        if trace := os.environ.get(key_trace.TRACE_ENV):
            key_trace.write_child(trace)
        report = os.environ.get(ACP_REPORT_ENV)
        if report and began:
            cpu, wall = time.process_time() - began["cpu"], time.monotonic() - began["wall"]
            events = events_so_far() - int(began["events"])
            Path(report).write_text(json.dumps({"cpu": cpu, "wall": wall, "events": events}))

    original = app.action_quit

    async def quit_measured() -> None:
        measured()
        await original()

    app.action_quit = quit_measured  # type: ignore[method-assign]
    app.run()


def acp_console_keys(
    keys: int, n: int, root: Path | None = None, floor: bool = True, trace: bool = False
) -> tuple[list[float], list[float], list[float]]:
    """bench/tui.py's keystroke measurement, with `acp_console_child` in its
    pty, then (with `floor`) the floor timed the same way in the same run
    (bench/tui.py's bare Textual app: a DataTable of `n` rows, nothing
    streaming); with `root` (another checkout, its build/view made by `make
    view`), that checkout's console, supervisor and scripted agent are timed."""
    import importlib.util

    import key_trace  # bench/ is this script's own folder

    spec = importlib.util.spec_from_file_location("bench_tui", Path(__file__).with_name("tui.py"))
    assert spec is not None and spec.loader is not None
    tui = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tui)
    # a console saturated by its sessions repaints a key late: learning which
    # row is the cursor must wait for it, or the bench dies before it measures
    tui.CURSOR_SETTLE_S = ACP_CURSOR_SETTLE_S
    child = [sys.executable, str(Path(__file__).resolve()), "--acp-console-child"]
    if root is not None:
        view, script = root / "build" / "view", root / "bench" / "status.py"
        code = (
            f"import runpy, sys; sys.path[:0] = [{str(view)!r}, {str(script.parent)!r}]; "
            "import corral.supervisor, corral.tui; "
            f"sys.argv = [{str(script)!r}, '--acp-console-child', *sys.argv[1:]]; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')"
        )
        child = [sys.executable, "-c", code]
    with tempfile.TemporaryDirectory(prefix="corral-bench-acp-report-") as tmp:
        report = Path(tmp) / "report.json"
        os.environ[ACP_REPORT_ENV] = str(report)
        traced = Path(tmp) / "trace.json"
        if trace:
            os.environ[key_trace.TRACE_ENV] = str(traced)
        else:
            os.environ.pop(key_trace.TRACE_ENV, None)
        try:
            key_ms, idle_ms, work = tui.keystrokes(keys, n, child=child, ready_timeout=600)
            for line in work[:1]:  # its CPU with no key, the event loop's thread apart
                print(f"  {line}")
        except SystemExit as exc:  # no key repainted at all: say so, and time the floor still
            if "cursor row" not in str(exc):
                raise
            print(
                f"  no Down key repainted within {ACP_CURSOR_SETTLE_S:g} s (3 tries): the console "
                f"is saturated; every key counts as {SATURATED_MS:g} ms (the cap), the screen:\n"
                + str(exc).split("the screen:", 1)[-1][:600]
            )
            key_ms, idle_ms = [SATURATED_MS] * keys, [SATURATED_MS] * keys
        if report.exists():
            spent = json.loads(report.read_text())
            print(
                f"  the console's process (owner and screen) while timed: "
                f"{spent['cpu'] / spent['wall'] * 100:.0f} % of one core over "
                f"{spent['wall']:.1f} s, {spent['events']} conversation events "
                f"({spent['events'] / spent['wall']:.0f}/s, "
                f"{spent['cpu'] / max(1, spent['events']) * 1e6:.0f} µs of CPU each)"
            )
        print(f"  {seen_after_parsing(tui.KEY_TIMES)}")
        if trace and traced.exists():
            key_trace.SENT[:] = tui.KEY_TIMES
            for line in key_trace.report(traced):
                print(f"  {line}")
    if not floor:
        return list(key_ms), list(idle_ms), []
    floor_argv = [sys.executable, str(Path(__file__).with_name("tui.py")), "--child-floor"]
    floor_ms, _, _work = tui.keystrokes(keys, n, child=floor_argv)
    print(f"  floor: {seen_after_parsing(tui.KEY_TIMES)}")
    return list(key_ms), list(idle_ms), list(floor_ms)


def seen_after_parsing(times: list[tuple[float, float, float, float]]) -> str:
    """The keys timed as this bench did before its pty reader thread: when its
    own terminal emulator (pyte) had parsed everything that came before the
    key's repaint, its parsing charged to the console."""
    seen = [min(SATURATED_MS, (s - t) * 1000) for t, _a, s, _p in times]
    parse = [p * 1000 for _t, _a, _s, p in times]
    if not seen:
        return "no key timed"
    return (
        f"the same keys as seen after the bench's own parsing (the measure before its pty "
        f"reader): p50 {statistics.median(seen):.1f} ms  p95 {pct(seen, 95):.1f} ms; the "
        f"bench parsed p50 {statistics.median(parse):.1f} ms, p95 {pct(parse, 95):.1f} ms "
        "per key meanwhile"
    )


def console_keys(keys: int, n: int, root: Path | None = None) -> tuple[list[float], list[float]]:
    """bench/tui.py's keystroke measurement, with `console_child` in its pty;
    with `root` (another checkout, built: its build/view), that checkout's
    console and supervisor are timed instead of this one's."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_tui", Path(__file__).with_name("tui.py"))
    assert spec is not None and spec.loader is not None
    tui = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tui)
    child = [sys.executable, str(Path(__file__).resolve()), "--console-child"]
    if root is not None:
        # its `corral` (build/view links its root folders) imported before
        # anything else, then its own bench script run as the child
        view, script = root / "build" / "view", root / "bench" / "status.py"
        code = (
            f"import runpy, sys; sys.path[:0] = [{str(view)!r}, {str(script.parent)!r}]; "
            "import corral.supervisor, corral.tui; "
            f"sys.argv = [{str(script)!r}, '--console-child', *sys.argv[1:]]; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')"
        )
        child = [sys.executable, "-c", code]
    key_ms, idle_ms, _work = tui.keystrokes(keys, n, child=child, ready_timeout=600)
    return list(key_ms), list(idle_ms)


def report_keys(label: str, key_ms: list[float], idle_ms: list[float]) -> bool:
    p95 = pct(key_ms, 95)
    good = p95 <= BUDGET_LAG_P95_MS
    print(
        f"  {label}keystroke: p50 {statistics.median(key_ms):.1f} ms  p95 {p95:.1f} ms  max "
        f"{max(key_ms):.1f} ms over {len(key_ms)} keys   budget p95 ≤ "
        f"{BUDGET_LAG_P95_MS:g} ms   {'PASS' if good else 'FAIL'}   (load {os.getloadavg()[0]:.1f})"
    )
    print(
        f"  {label}background (no key; same wait for the next chunk): p50 "
        f"{statistics.median(idle_ms):.1f} ms  p95 {pct(idle_ms, 95):.1f} ms"
    )
    return good


BUDGET_ACP_P95_MS = 50.0


async def acp_turn_latency(turns: int) -> list[float]:
    """Milliseconds from `session/prompt` sent to the turn's end seen, per turn."""
    from acp import PROTOCOL_VERSION, text_block
    from acp.client.connection import ClientSideConnection

    from corral.supervisor.acp.client import CorralClient
    from corral.supervisor.acp.files import WorktreeFiles
    from corral.supervisor.acp.terminals import Terminals
    from corral.supervisor.acp.wire import StdioWire

    fake = Path(__file__).resolve().parents[1] / "tests" / "fakes" / "acp_agent.py"
    work = Path(tempfile.mkdtemp(prefix="corral-bench-acp-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(fake), "quick", cwd=work,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    said: list[Any] = []
    files = WorktreeFiles(work)

    async def never(*_: Any) -> Any:
        raise RuntimeError("the bench agent asks no permission")

    client = CorralClient(files, Terminals(files), said.append, never)
    wire = StdioWire(proc.stdout, proc.stdin, on_malformed=lambda _l: None, on_sent=lambda *_: None)
    conn = ClientSideConnection(client, wire)  # type: ignore[arg-type]
    latencies: list[float] = []
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        for _ in range(turns):
            began = time.perf_counter()
            reply = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            client.flush()
            assert reply.stop_reason == "end_turn" and said
            latencies.append((time.perf_counter() - began) * 1000)
    finally:
        await conn.close()
        proc.kill()
        await proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    return latencies


def acp_stream_lines(lines: int) -> bytes:
    """What the `stream` agent writes, `lines` times: a line of speech in
    three pieces, and every tenth a tool call started and completed."""
    out = []
    for i in range(1, lines + 1):

        def update(body: dict[str, Any]) -> str:
            msg = {"jsonrpc": "2.0", "method": "session/update"}
            msg["params"] = {"sessionId": "s1", "update": body}
            return json.dumps(msg)

        if i % 10 == 0:
            call = {"toolCallId": f"c{i}", "title": f"Edit file {i}", "kind": "edit"}
            out.append(update({"sessionUpdate": "tool_call", "status": "pending", **call}))
            out.append(
                update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": f"c{i}",
                        "status": "completed",
                    }
                )
            )
        for piece in ("streaming line ", f"{i}: reading, ", "thinking, editing\n"):
            chunk = {"type": "text", "text": piece}
            out.append(update({"sessionUpdate": "agent_message_chunk", "content": chunk}))
    return ("\n".join(out) + "\n").encode()


async def acp_update_cost(lines: int, fast: bool) -> tuple[float, int, int]:
    """CPU seconds the real wire, the SDK and corral's client spend on
    `lines` lines of a streaming agent (fed from memory), with the pieces of
    speech past the SDK (`fast`, StdioWire.on_chunk) or through it (before);
    also the updates read and the events they became."""
    from acp.client.connection import ClientSideConnection

    from corral.supervisor.acp.client import CorralClient
    from corral.supervisor.acp.files import WorktreeFiles
    from corral.supervisor.acp.terminals import Terminals
    from corral.supervisor.acp.wire import StdioWire, quiet_unrecorded_spans

    quiet_unrecorded_spans()
    data = acp_stream_lines(lines)
    reader = asyncio.StreamReader(limit=1 << 24)
    reader.feed_data(data)
    reader.feed_eof()
    said: list[Any] = []
    files = WorktreeFiles(Path(tempfile.gettempdir()))

    async def never(*_: Any) -> Any:
        raise RuntimeError("no permission is asked")

    client = CorralClient(files, Terminals(files), said.append, never)
    client.in_turn = True
    wire = StdioWire(reader, None, on_malformed=lambda _l: None, on_sent=lambda *_: None)  # type: ignore[arg-type]
    if fast:
        wire.on_chunk = client.chunk
    began = time.process_time()
    conn = ClientSideConnection(client, wire)  # type: ignore[arg-type]
    while not reader.at_eof() or len(said) < lines * 1.2:
        await asyncio.sleep(0)
        if reader.at_eof() and time.process_time() - began > 60:
            break
    spent = time.process_time() - began
    await conn.close()
    return spent, data.count(b"\n"), len(said)


def report_acp_updates(lines: int) -> None:
    for fast in (False, True):
        spent, updates, events = asyncio.run(acp_update_cost(lines, fast))
        how = "pieces of speech past the SDK (now)" if fast else "every update through the SDK"
        print(
            f"  {how}: {spent / updates * 1e6:.0f} µs of CPU per update "
            f"({updates} updates, {events} events, load {os.getloadavg()[0]:.1f})"
        )


def report_acp(turns: int) -> bool:
    report_acp_updates(2000)
    ms = asyncio.run(acp_turn_latency(turns))
    p95 = pct(ms, 95)
    good = p95 <= BUDGET_ACP_P95_MS
    print(
        f"  ACP turn end seen (scripted agent, {turns} turns): p50 {statistics.median(ms):.1f} ms, "
        f"p95 {p95:.1f} ms   budget p95 ≤ {BUDGET_ACP_P95_MS:g} ms   {'PASS' if good else 'FAIL'}"
    )
    return good


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--console-child":
        console_child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--acp-console-child":
        acp_console_child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 s of phases, not 90 s")
    parser.add_argument(
        "--agents", type=int, help="stand-in agents (100; 50 ACP sessions with --acp-console)"
    )
    parser.add_argument("--seconds", type=float, help="seconds of phases (90; 30 with --quick)")
    parser.add_argument(
        "--console",
        action="store_true",
        help="also time keystroke → repaint in a real console watching N agents in panes",
    )
    parser.add_argument(
        "--acp", action="store_true", help="only ACP turn-end latency (scripted agent)"
    )
    parser.add_argument(
        "--acp-console",
        action="store_true",
        help="only keystroke → repaint in a real console with N ACP sessions streaming",
    )
    parser.add_argument(
        "--keys", type=int, help="keystrokes with --console/--acp-console (60; 40 with --quick)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="with --acp-console, write the console's cProfile stats (its loop while the keys "
        "are timed) there",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="with --acp-console, split the slowest keys into their hops (bench/key_trace.py)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="with --console or --acp-console, first time the console of this other checkout "
        "(its build/view, made by `make view`), for a before/after in one run",
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    if args.acp:
        print("status truth over ACP: turn end from the protocol's stopReason")
        return 0 if report_acp(40 if args.quick else 200) else 1
    if args.acp_console:
        n = args.agents or 50
        print(
            f"keystroke → repaint: the console (a pty, 200x50) with {n} ACP sessions, each "
            f"agent (the scripted ACP agent, confined) streaming a line every "
            f"{ACP_STREAM_SECS:g} s and a tool call every tenth over the protocol"
        )
        keys = args.keys or (40 if args.quick else 60)
        if args.against is not None:  # the other checkout first (e.g. main: before/after)
            print(f"  {args.against}:")
            before = acp_console_keys(keys, n, args.against.resolve(), floor=False)
            report_keys(f"{args.against}: ", before[0], before[1])
            print("  this checkout:")
        if args.profile:
            os.environ[ACP_PROFILE_ENV] = str(args.profile.resolve())
        key_ms, idle_ms, floor_ms = acp_console_keys(keys, n, trace=args.trace)
        good = report_keys("", key_ms, idle_ms)
        f50, f95 = statistics.median(floor_ms), pct(floor_ms, 95)
        print(
            f"  floor (bare Textual app, a {n}-row DataTable, nothing streaming, same run): "
            f"p50 {f50:.1f} ms  p95 {f95:.1f} ms; the console against it: p95 "
            f"{pct(key_ms, 95) / max(f95, 0.01):.1f}×"
        )
        return 0 if good else 1
    args.agents = args.agents or 100
    seconds = args.seconds or (30.0 if args.quick else 90.0)
    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]
    print(
        f"status truth: {args.agents} stand-in agents in real tmux panes ({version}), "
        f"{os.cpu_count()} CPUs, load {load:.1f} at start; medians and p95 over the run"
    )
    work = Path(tempfile.mkdtemp(prefix="corral-bench-status-"))
    try:
        code = asyncio.run(run(args.agents, seconds, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.console:
        print(
            f"keystroke → repaint: the console (a pty, 200x50) with {args.agents} sessions whose "
            "custom: stand-ins stream under a busy marker in real tmux panes"
        )
        keys = args.keys or (40 if args.quick else 60)
        if args.against is not None:
            # the same measurement on another checkout first (e.g. main: before/after)
            before = console_keys(keys, args.agents, args.against.resolve())
            report_keys(f"{args.against}: ", *before)
            print("  this checkout:")
        good = report_keys("", *console_keys(keys, args.agents))
        code = code or (0 if good else 1)
    return code


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
