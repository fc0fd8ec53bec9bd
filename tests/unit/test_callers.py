"""Who a peer is, decided from /proc and never from what it says: a process
under a pane root is that session's agent, however it detached itself
(`setsid`); one in another pid namespace is an agent; one that vanished is
refused as an agent, never taken for the operator; a loopback TCP peer is
found by its socket."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from corral.supervisor.control.callers import (
    Agent,
    CallerClassifier,
    Operator,
    ancestry,
    tcp_peer_pids,
)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A grandchild in its own session: `setsid` under a shell under us."""
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 30 & wait"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def grandchild_of(parent: int) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    chain = ancestry(int(entry))
                except OSError:
                    continue
                if len(chain) > 1 and chain[1] == parent:
                    return int(entry)
        time.sleep(0.02)
    raise AssertionError("no grandchild appeared")


def test_a_process_under_a_pane_root_is_that_sessions_agent_even_after_setsid(
    child: subprocess.Popen[bytes],
) -> None:
    sleeper = grandchild_of(child.pid)
    classifier = CallerClassifier(lambda: {child.pid: "s1"})
    found = classifier.classify_pid(sleeper)
    assert found == Agent("s1", sleeper, found.why) and found.is_agent
    # no pane root above it: the operator
    assert isinstance(CallerClassifier(dict).classify_pid(sleeper), Operator)


def test_doubt_is_never_the_operator() -> None:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    gone = int(proc.stdout)
    classifier = CallerClassifier(dict)
    assert classifier.classify_pid(gone).is_agent  # vanished before it was looked at
    assert classifier.classify_pid(0).is_agent
    assert classifier.classify_pid(None).is_agent


def test_a_process_under_corrals_tmux_server_but_no_known_pane_is_an_agent(
    child: subprocess.Popen[bytes],
) -> None:
    """The server check runs only with a tmux among the ancestors: a fake
    server pid that is not one is never consulted."""
    sleeper = grandchild_of(child.pid)
    asked: list[int] = []

    def server() -> int:
        asked.append(1)
        return child.pid

    assert isinstance(CallerClassifier(dict, server).classify_pid(sleeper), Operator)
    assert asked == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_process_in_another_pid_namespace_is_an_agent() -> None:
    proc = subprocess.Popen(
        ["bwrap", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--proc",
         "/proc", "--dev", "/dev", "sleep", "30"]
    )  # fmt: skip
    try:
        inner = grandchild_of(proc.pid) if _has_grandchild(proc.pid) else proc.pid
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if os.stat(f"/proc/{inner}/ns/pid").st_ino != os.stat("/proc/self/ns/pid").st_ino:
                break
            inner = grandchild_of(proc.pid)
        found = CallerClassifier(dict).classify_pid(inner)
        assert found.is_agent and "namespace" in found.why
        # with its pane root known, it is that session's agent
        assert CallerClassifier(lambda: {proc.pid: "s2"}).classify_pid(inner) == Agent(
            "s2", inner, found.why
        )
    finally:
        proc.kill()
        proc.wait()


def _has_grandchild(parent: int) -> bool:
    try:
        grandchild_of(parent)
    except AssertionError:
        return False
    return True


def test_a_loopback_tcp_peer_is_found_by_its_socket() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = subprocess.Popen(
            [sys.executable, "-c",
             "import socket, sys, time; s = socket.create_connection(('127.0.0.1', "
             f"{server.getsockname()[1]})); print(s.getsockname()[1], flush=True); time.sleep(30)"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            conn, remote = server.accept()
            with conn:
                assert client.stdout is not None
                assert int(client.stdout.readline()) == remote[1]
                assert tcp_peer_pids(server.getsockname(), remote) == [client.pid]
                assert tcp_peer_pids(server.getsockname(), ("127.0.0.1", 1)) == []
        finally:
            client.kill()
            client.wait()


def test_a_tcp_peer_shared_with_an_agent_is_an_agent() -> None:
    """A connection held by two processes (a client that forked) is an
    agent's when either one is an agent: both can write on it. Whichever
    /proc lists first must not decide."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = forking_client(server.getsockname()[1])
        forked = 0
        try:
            conn, remote = server.accept()
            with conn:
                assert client.stdout is not None
                port, forked = (int(word) for word in client.stdout.readline().split())
                assert port == remote[1]
                assert sorted(tcp_peer_pids(server.getsockname(), remote)) == sorted(
                    [client.pid, forked]
                )
                for agent_pid in (client.pid, forked):
                    caller = CallerClassifier(lambda pid=agent_pid: {pid: "s1"}).classify_tcp_peer(
                        server.getsockname(), remote
                    )
                    assert isinstance(caller, Agent) and caller.session_id == "s1", agent_pid
                caller = CallerClassifier(dict).classify_tcp_peer(server.getsockname(), remote)
                assert isinstance(caller, Operator)
        finally:
            client.kill()
            client.wait()
            if forked:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(forked, 9)


def test_a_holder_that_vanishes_mid_read_is_read_again_not_taken_for_an_agent() -> None:
    """A client that forked: its child holds the connection for a moment,
    then exits. When the child vanishes between being listed and being
    read, the holders are read again: the caller is what is left (here the
    operator's process), not an agent for want of a reading."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = forking_client(server.getsockname()[1], reaps=True)
        try:
            conn, remote = server.accept()
            with conn:
                assert client.stdout is not None
                _port, forked = (int(word) for word in client.stdout.readline().split())
                assert forked in tcp_peer_pids(server.getsockname(), remote)
                reads: list[int] = []

                def roots_then_the_child_exits() -> dict[int, str]:
                    reads.append(len(reads))
                    if len(reads) == 1:  # listed, now gone before it is read
                        os.kill(forked, 9)
                        for _ in range(200):
                            if not os.path.exists(f"/proc/{forked}"):
                                break
                            time.sleep(0.005)
                    return {}

                caller = CallerClassifier(roots_then_the_child_exits).classify_tcp_peer(
                    server.getsockname(), remote
                )
                assert isinstance(caller, Operator), caller
                assert len(reads) == 2  # read again once, after the holder vanished
        finally:
            client.kill()
            client.wait()


def forking_client(port: int, *, reaps: bool = False) -> subprocess.Popen[str]:
    """A process that connects to `port` on loopback, then forks, so both hold
    the connection; it prints its local port and its child's pid. `reaps`:
    it waits for its child, so a child killed is gone from /proc at once."""
    wait = "; os.waitpid(pid, 0)" if reaps else ""
    return subprocess.Popen(
        [sys.executable, "-c",
         "import os, socket, time; s = socket.create_connection(('127.0.0.1', "
         f"{port})); pid = os.fork()\n"
         f"if pid: print(s.getsockname()[1], pid, flush=True){wait}\n"
         "time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
