"""`corral serve` and the command line as its clients, as a user runs them:
`corral run` while an owner runs is its client; `get`/`sessions` read live
rows from the owner and the store when none runs; SIGTERM on `corral serve`
leaves a waiting agent running, and the next `corral serve` re-adopts it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, init_repo

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def site() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="cc", dir="/tmp"))
    yield root
    for sock in (root / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def env_for(site: Path) -> dict[str, str]:
    return dict(
        os.environ,
        CORRAL_HOME=str(site / "home"),
        CORRAL_CONFIG=str(site / "none.toml"),
        CORRAL_TMUX_SOCKET_DIR=str(site / "tmux"),
        PYTHONPATH=str(REPO_ROOT),
    )


def corral(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", *args],
        cwd=str(site),
        env=env_for(site),
        capture_output=True,
        text=True,
        timeout=120,
    )


def serve(site: Path, **env: str) -> subprocess.Popen[str]:
    """A `corral serve` owning `site`'s state dir (`env`: more variables)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "corral.tui.cli", "serve"],
        cwd=str(site),
        env={**env_for(site), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("corral serve: owns"), line + (proc.stderr.read() if proc.stderr else "")
    return proc


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


@pytest.mark.slow
def test_the_command_line_is_a_client_of_corral_serve(site: Path) -> None:
    repo = init_repo(site / "repo")
    contract = site / "c.json"
    check = {"name": "noted", "command": "grep -q 'write notes' DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes", "checks": [check]}))
    # nobody owns the state dir: acting says so, reading says what is stored
    out = corral(site, "cancel", "abc")
    assert out.returncode == 2 and "no corral owns" in out.stderr

    owner = serve(site)
    try:
        home = site / "home"
        assert (home / "control.sock").exists()
        assert oct((home / "control.sock").stat().st_mode & 0o777) == "0o600"
        out = corral(
            site, "run", "--repo", str(repo), "--intent", "write notes", "--contract",
            str(contract), "--engine", "external:demo", "--yes", "--on-question", "approve",
            "--json",
        )  # fmt: skip
        assert out.returncode == 5, out.stderr  # waits at approval, with the owner
        result = json.loads(out.stdout.splitlines()[-1])
        sid = result["session_id"]
        assert result["state"] == "needs_approval"
        # its agent has a socket of its own to the owner
        agent_socket = home / "as" / sid[-12:] / "s"
        assert agent_socket.exists()
        rows = json.loads(corral(site, "sessions", "--json").stdout)
        assert [r["session_id"] for r in rows] == [sid] and rows[0]["live"] is True
        out = corral(site, "get", sid[-8:])
        assert "needs_approval  (live)" in out.stdout and "diff ready" in out.stdout
        # the tmux status-line segment, from the owner's live rows
        out = corral(site, "status", "--tmux")
        assert out.stdout == "#[fg=yellow,bold]corral: 1 need you#[default] · 0 running\n"
        assert corral(site, "status").stdout == "1 need you · 0 in progress · 0 finished\n"
        out = corral(site, "answer", "nosuch", "yes")
        assert out.returncode == 2 and "no corral session 'nosuch'" in out.stderr
        # a second run as a client stops at gate 1; cancel it through the owner
        out = corral(
            site, "run", "--repo", str(repo), "--intent", "other notes", "--contract",
            str(contract), "--engine", "external:demo", "--json",
        )  # fmt: skip
        assert out.returncode == 3, out.stderr
        other = json.loads(out.stdout.splitlines()[-1])["session_id"]
        out = corral(site, "confirm", other[-8:])  # gate 1 from the command line
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("corral confirm: ") and "contract_proposed" not in out.stdout
        out = corral(site, "cancel", other, "--json")
        assert out.returncode == 0 and json.loads(out.stdout)["state"] == "abandoned"
        out = corral(site, "reject", other)
        assert out.returncode == 2 and "nothing to reject" in out.stderr, out.stderr
        # watch replays a finished session's events and ends at its terminal state
        out = corral(site, "watch", other, "--json")
        assert out.returncode == 0, out.stderr
        last = json.loads(out.stdout.splitlines()[-1])
        assert last["kind"] == "state_changed" and last["data"]["to"] == "abandoned"
    finally:
        err = stop(owner)
    # SIGTERM: the waiting agent keeps running for the next owner
    assert "left 1 agent(s) running" in err
    panes = corral(site, "panes").stdout
    assert sid[-8:] in panes and "alive" in panes
    out = corral(site, "get", sid)
    assert "(stored: no corral owns" in out.stdout

    owner = serve(site)
    try:
        deadline = time.monotonic() + 20
        while True:
            detail = json.loads(corral(site, "get", sid, "--json").stdout)
            if detail["live"]:
                break  # re-adopted
            assert time.monotonic() < deadline, detail
            time.sleep(0.2)
        assert detail["session"]["pane"]["pane_id"] in panes  # the same pane, re-adopted
        assert agent_socket.exists()  # served again by the owner that took it over
        out = corral(site, "approve", sid, "--delivery", "branch", "--json")
        assert out.returncode == 0, out.stderr
        approved = json.loads(out.stdout)
        assert approved["state"] == "merged"
        assert "write notes" in git(repo, "show", f"{approved['branch']}:DEMO_NOTES.md")
        deadline = time.monotonic() + 20
        while agent_socket.parent.exists():  # its agent ended: its socket went with it
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        stop(owner)


@pytest.mark.slow
def test_sigterm_with_clients_coming_and_going_stops_serve_without_a_traceback(
    site: Path,
) -> None:
    import socket

    owner = serve(site)
    path = str(site / "home" / "control.sock")
    try:
        watchers = []
        for _ in range(3):  # a watch stream left open, and clients that vanish mid-call
            conn = socket.socket(socket.AF_UNIX)
            conn.connect(path)
            conn.sendall(b'{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}\n')
            watchers.append(conn)
        for method in ("list", "watch", "get"):
            gone = socket.socket(socket.AF_UNIX)
            gone.connect(path)
            gone.sendall(b'{"jsonrpc":"2.0","id":2,"method":"%s","params":{}}\n' % method.encode())
            gone.close()
        watchers.pop().close()
        for method in ("engines", "search"):  # asked, then half-closed: answers still owed
            owed = socket.socket(socket.AF_UNIX)
            owed.connect(path)
            owed.sendall(
                b'{"jsonrpc":"2.0","id":3,"method":"%s","params":{"query":"x"}}\n' % method.encode()
            )
            owed.shutdown(socket.SHUT_WR)
            watchers.append(owed)
        err = stop(owner)
    finally:
        if owner.poll() is None:
            owner.kill()
    logged = (site / "home" / "serve.log").read_text()
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert "Traceback" not in logged and "CancelledError" not in logged, logged
