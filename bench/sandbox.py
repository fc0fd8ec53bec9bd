"""Sandboxed check overhead: the median of N trivial checks (`true`) run the
way corral runs contract checks (`run_check` in a real worktree), inside the
bubblewrap sandbox and unconfined, interleaved in the same loop so both
medians come from one machine state. Budget: ≤ 20 ms of overhead.

In the same loop, the same confined check with the sandbox's mount list
built afresh each time (`forget_kept`: as before it was kept between runs,
`sandbox/witness.py`), for a before/after from one machine state.

In the same loop, the floor: `bwrap --ro-bind / / bash -c true` against
`bash -c true`, each spawned the way run_command spawns a check (asyncio,
output piped), so the overhead reads against what any bubblewrap sandbox costs
on this machine at this load; corral's share is the overhead above it. The
CPU of each (the children's user + system time, per check) is printed beside,
but it leaves out what runs in the sandbox's own PID namespace (bubblewrap's
init and the command: the process corral waits for never reaps them), so it
reads low for a confined run: `perf stat -e task-clock` on the printed
command line counts it all (6–9 ms for corral's bwrap against about 4 ms for
the floor's and 1.5 ms for `bash -c true` alone, on this machine). Under
load the wall time follows that CPU: a run gets its share of the cores.

Agent start overhead: an agent whose program is `date +%s%N`, started the
way its pane starts it (`launch_agent`: the command line built, then run),
confined (bubblewrap) and unconfined under the pane keeper, against `date`
alone: the time from building the command line to the moment the agent's
program runs (the clock it prints). Budget: ≤ 50 ms added, each. Exits 1
when a budget is exceeded. Beside them, bubblewrap with the host's network
(no network relay inside): the relay's share is the difference.

Run (from the repo root): .venv/bin/python bench/sandbox.py [--runs 50] [--load 4]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.contracts.checks import run_check, sandboxed_argv
from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.models import ContractCheck
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy
from corral.supervisor.sandbox.agent import launch_agent
from corral.supervisor.sandbox.argv import forget_kept

BUDGET_MS = 20.0
AGENT_BUDGET_MS = 50.0


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


CPU: dict[str, list[float]] = {}  # what → children's CPU ms per run


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (used.ru_utime + used.ru_stime) * 1000


async def timed(
    check: ContractCheck, wt: Path, policy: SandboxPolicy, *, kept: bool = True
) -> float:
    set_active_policy(policy)
    if not kept:
        forget_kept()  # the mount list built again, as before it was kept
    cpu = _children_cpu()
    started = time.perf_counter()
    result = await run_check(check, wt)
    elapsed = (time.perf_counter() - started) * 1000
    what = ("on" if kept else "on, built") if policy.enabled else "off"
    CPU.setdefault(what, []).append(_children_cpu() - cpu)
    assert result.passed, result.output_tail
    return elapsed


async def spawned(argv: list[str], wt: Path, what: str) -> float:
    """One command spawned as run_command spawns a check: ms to its exit."""
    cpu = _children_cpu()
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(wt),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    await proc.communicate()
    elapsed = (time.perf_counter() - started) * 1000
    CPU.setdefault(what, []).append(_children_cpu() - cpu)
    assert proc.returncode == 0, argv
    return elapsed


async def main(runs: int) -> int:
    status = sandbox_status()
    if not status.available:
        print(f"no sandbox can run here: {status.detail}")
        return 1
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        repo, wt = Path(tmp) / "repo", Path(tmp) / "wt"
        repo.mkdir()
        git(repo, "init", "-q")
        git(
            repo,
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "0",
        )
        git(repo, "worktree", "add", "-q", "--detach", str(wt))
        check = ContractCheck(name="noop", command="true")
        state = Path(tmp) / "state"  # the git view lives there, as in a session
        state.mkdir()
        on, off = SandboxPolicy(state_dir=state), SandboxPolicy(enabled=False)
        for policy in (on, off, on, off):  # warm up
            await timed(check, wt, policy)
        bwrap = status.bwrap or "bwrap"
        floor_argv = [bwrap, "--ro-bind", "/", "/", "--", "bash", "-c", "true"]
        confined: list[float] = []
        rebuilt: list[float] = []  # confined, its mount list built every time
        bare: list[float] = []
        floor: list[float] = []
        alone: list[float] = []
        built: list[float] = []  # building the sandbox's command line, in process
        direct: list[float] = []  # that command line spawned alone (its mounts' cost)
        env = scrubbed_env(keep_credentials=False, invoked_by="corral-check")
        CPU.clear()
        for _ in range(runs):
            confined.append(await timed(check, wt, on))
            bare.append(await timed(check, wt, off))
            rebuilt.append(await timed(check, wt, on, kept=False))
            floor.append(await spawned(floor_argv, wt, "floor"))
            alone.append(await spawned(["bash", "-c", "true"], wt, "alone"))
            began = time.perf_counter()
            argv, _env = sandboxed_argv("true", wt, env, policy=on)  # kept: as a check gets it
            built.append((time.perf_counter() - began) * 1000)
            direct.append(await spawned(argv, wt, "corral's bwrap alone"))
        agents = agent_starts(wt, state, runs)
    a, b = statistics.median(confined), statistics.median(bare)
    verdict = "within" if a - b <= BUDGET_MS else "OVER"
    print(f"{runs} trivial checks (`true`), median per check:")
    print(f"  sandboxed   {a:7.2f} ms")
    print(f"  unconfined  {b:7.2f} ms")
    print(f"  overhead    {a - b:7.2f} ms ({verdict} the {BUDGET_MS:g} ms budget)")
    r = statistics.median(rebuilt)
    print(
        f"  sandboxed, its mount list built every check (not kept) {r:7.2f} ms: overhead {r - b:.2f} ms"
    )
    f, g = statistics.median(floor), statistics.median(alone)
    print(
        f"  floor: `bwrap --ro-bind / /` {f:.2f} ms against `bash -c true` {g:.2f} ms: {f - g:.2f} ms"
    )
    print(
        f"  corral's share above the floor {(a - b) - (f - g):6.2f} ms; overhead / floor "
        f"{(a - b) / max(f - g, 0.01):.2f}×"
    )
    d = statistics.median(direct)
    print(
        f"  where it goes: building the sandbox's command line {statistics.median(built):.2f} ms "
        f"(in process); that command line spawned alone {d:.2f} ms, {d - f:.2f} ms above the "
        f"floor's bwrap (its mounts and namespaces); the rest of run_check's confined path "
        f"{a - b - (d - g) - statistics.median(built):.2f} ms"
    )
    print(
        "  CPU per check (children reaped by this process, ms; not the sandbox's own "
        "PID namespace): " + "  ".join(f"{k} {statistics.mean(v):.2f}" for k, v in CPU.items())
    )
    over = a - b > BUDGET_MS
    alone = statistics.median(agents["alone"])
    print(f"{runs} agent starts (program `date`), median until it runs:")
    print(f"  `date` alone {alone:7.2f} ms")
    relay = statistics.median(agents["bubblewrap"]) - statistics.median(agents["no relay"])
    print(
        f"  the network relay's share (bubblewrap against bubblewrap without it): {relay:6.2f} ms"
    )
    for name in ("bubblewrap", "pane keeper"):
        took = statistics.median(agents[name])
        verdict = "within" if took - alone <= AGENT_BUDGET_MS else "OVER"
        over = over or took - alone > AGENT_BUDGET_MS
        print(
            f"  {name:<12} {took:7.2f} ms: adds {took - alone:6.2f} ms "
            f"({verdict} the {AGENT_BUDGET_MS:g} ms budget)"
        )
    return 1 if over else 0


def agent_starts(wt: Path, state: Path, runs: int) -> dict[str, list[float]]:
    """Wall time from building the pane's command to the agent's program
    running (the clock `date` prints as it starts)."""
    found = subprocess.run(["sh", "-c", "command -v date"], capture_output=True, text=True)
    program = [found.stdout.strip() or "/bin/date", "+%s%N"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(state.parent / "home"), "TERM": "xterm"}
    policies = {
        "bubblewrap": SandboxPolicy(state_dir=state),
        # the same without the network relay (the host's network): the relay's share
        "no relay": SandboxPolicy(state_dir=state, network="host"),
        "pane keeper": SandboxPolicy(state_dir=state, agents=False),
    }
    out: dict[str, list[float]] = {"alone": [], **{name: [] for name in policies}}
    sockets = state / "sockets" / "bench"
    sockets.mkdir(parents=True, exist_ok=True)

    def start(policy: SandboxPolicy | None) -> float:
        began = time.time_ns()
        argv = program
        if policy is not None:
            argv = launch_agent(
                program,
                wt,
                env,
                policy=policy,
                choice=None,
                own_dirs=[],
                own_files=[],
                hooks_file=state / "agents" / "bench" / "hooks.jsonl",
                python=sys.executable,
                agent_socket_dir=sockets,  # confined: started by the network relay
            ).argv
        ran = subprocess.run(
            argv, cwd=wt, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True
        )
        return (int(ran.stdout.split()[-1]) - began) / 1e6

    for _ in range(3):  # warm up
        for policy in (None, *policies.values()):
            start(policy)
    for _ in range(runs):
        out["alone"].append(start(None))
        for name, policy in policies.items():
            out[name].append(start(policy))
    return out


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    sys.exit(run_with_load(lambda: asyncio.run(main(parser.parse_args().runs))))
