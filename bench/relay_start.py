"""The network relay's share of a confined agent's start, before and after,
interleaved in one run (so both medians come from one machine state): an
agent whose program is `date +%s%N`, started as its pane starts it
(`launch_agent`), timed from building the command line to `date` running;
against the same sandbox with the host's network (no relay at all).

Variants: the relay of an older commit (`--before REF`: its netrelay.py run
as a script, no watch, as it was), this tree's with perl binding its
listeners (`netbind.pl`) with and without the watch of direct connections,
and this tree's without perl (the relay binds, then execs the agent).

Run (from the repo root): .venv/bin/python bench/relay_start.py [--runs 40] [--before d7d6f62]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.sandbox import SandboxPolicy, netstart, sandbox_status
from corral.supervisor.sandbox import agent as agent_module
from corral.supervisor.sandbox.agent import launch_agent

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def patched(perl: bool, watch: bool, relay: Path | None) -> Iterator[None]:
    saved = (netstart.binder_perl, agent_module.can_watch, netstart.relay_program)
    if not perl:
        netstart.binder_perl = lambda: None
    if not watch:
        agent_module.can_watch = lambda *_: False
    if relay is not None:
        netstart.relay_program = lambda _python: relay
    try:
        yield
    finally:
        netstart.binder_perl, agent_module.can_watch, netstart.relay_program = saved


def main(runs: int, before: str) -> int:
    if not sandbox_status().available:
        print("no sandbox can run here")
        return 1
    # the old relay must be visible inside the sandbox: beside the repo's own files
    old = ROOT / ".venv" / f"netrelay-{before}.py"
    old.write_text(
        subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{before}:supervisor/sandbox/netrelay.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        base = Path(tmp)
        repo = base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "0"], check=True)
        state = base / "state"
        sockets = state / "sockets" / "bench"
        sockets.mkdir(parents=True)
        program = ["/bin/date", "+%s%N"]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), "TERM": "xterm"}

        def argv(network: str = "allowlist", **how: object) -> list[str]:
            with patched(**how):  # type: ignore[arg-type]
                return launch_agent(
                    program,
                    repo,
                    env,
                    policy=SandboxPolicy(state_dir=state, network=network),
                    choice=None,
                    own_dirs=[],
                    own_files=[],
                    hooks_file=state / "agents" / "bench" / "hooks.jsonl",
                    python=sys.executable,
                    agent_socket_dir=sockets,
                ).argv

        variants = {
            "no relay (the host's network)": argv("host", perl=True, watch=True, relay=None),
            f"before: {before}'s relay": argv(perl=False, watch=False, relay=old),
            "after: perl binds, with the watch": argv(perl=True, watch=True, relay=None),
            "after: perl binds, no watch": argv(perl=True, watch=False, relay=None),
            "after: no perl, with the watch": argv(perl=False, watch=True, relay=None),
        }
        took: dict[str, list[float]] = {name: [] for name in variants}

        def start(command: list[str]) -> float:
            began = time.time_ns()
            ran = subprocess.run(
                command,
                cwd=repo,
                env=env,
                check=True,
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
            return (int(ran.stdout.split()[-1]) - began) / 1e6

        for _ in range(3):  # warm up
            for command in variants.values():
                start(command)
        for _ in range(runs):
            for name, command in variants.items():
                took[name].append(start(command))
    old.unlink()
    floor = statistics.median(took["no relay (the host's network)"])
    print(f"{runs} confined agent starts (program `date`), median until it runs:")
    for name, values in took.items():
        median = statistics.median(values)
        print(f"  {name:<36} {median:7.2f} ms (the relay's share {median - floor:+7.2f} ms)")
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--before", default="d7d6f62")
    args = parser.parse_args()
    sys.exit(run_with_load(lambda: main(args.runs, args.before)))
