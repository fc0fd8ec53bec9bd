"""A made-up agent CLI, `fakecli`, and its profile: what adding an agent to
corral takes (tests/integration/test_new_agent_profile.py).

The CLI takes the task as its last argument, writes hello.txt, shows its
`fake> ` prompt and reports the end of its turn through `$CORRAL_HOOK_CMD
Stop`, as an agent with hooks does."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from corral.supervisor.agents.base import AgentProfile
from corral.supervisor.status import Markers, compile_all

NAME = "fakecli"

PROFILE = AgentProfile(
    name=NAME,
    label="Fake CLI (tests)",
    binaries=(NAME,),
    markers=Markers(
        busy=compile_all(r"^fake: working"),
        waiting=compile_all(r"^fake: allow\?"),
        idle=compile_all(r"^fake> \s*$"),
    ),
    hooks=True,
    install="pip install fakecli  # (made up)",
    network_hosts=("api.fakecli.example",),  # what it may reach when confined
)

PROGRAM = r"""
import os, shlex, subprocess, sys
if sys.argv[1:2] == ["--version"]:
    print("fakecli 0.1.0")
    sys.exit(0)
print("fakecli 0.1.0 (made up for corral's tests)")
sys.stdout.write("fake: working on the task")  # its busy line, gone when the work is done
sys.stdout.flush()
with open("hello.txt", "w") as fh:
    fh.write("hi\n")
print(f"\r\x1b[2Kdone ({len(sys.argv[-1])} characters of task): wrote hello.txt")
sys.stdout.write("fake> ")
sys.stdout.flush()
hook = os.environ.get("CORRAL_HOOK_CMD")
if hook:
    subprocess.run([*shlex.split(hook), "Stop"], stdin=subprocess.DEVNULL, check=False)
while os.read(0, 4096):  # at its prompt until the pane goes
    pass
"""


def install_binary(bin_dir: Path) -> Path:
    """`fakecli` in `bin_dir` (put it on PATH): the program, run by this Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    program = bin_dir / "fakecli.py"
    program.write_text(PROGRAM)
    binary = bin_dir / NAME
    binary.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(program))} "$@"\n'
    )
    binary.chmod(0o755)
    return binary
