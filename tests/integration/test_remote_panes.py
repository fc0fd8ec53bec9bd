"""The tmux pane backend on another host, over a real sshd: one ssh round
trip per sweep, screens that arrive with it, keys, kill, re-adoption, and a
host that stops answering."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.supervisor.hosts.connection import HostConnection
from corral.supervisor.hosts.remote_tmux import HostDown, RemoteTmuxBackend
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.panes.base import PaneBackend, PaneHandle, PaneSpec
from tests.fakes.sshd import SshServer, sshd_missing, start_sshd

pytestmark = [
    pytest.mark.skipif(sshd_missing() is not None, reason=str(sshd_missing())),
    pytest.mark.slow,
]

ECHO = 'echo ready; while read -r line; do echo "got:$line"; done'


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def conn(sshd: SshServer, state_dir: Path) -> Iterator[HostConnection]:
    host = HostSettings(name="box", destination=sshd.alias, ssh_options=sshd.ssh_options())
    c = HostConnection(host, state_dir)
    yield c
    c.close()


@pytest.fixture
def backend(conn: HostConnection, tmp_path: Path) -> Iterator[RemoteTmuxBackend]:
    remote_state = tmp_path / "remote-state"
    b = RemoteTmuxBackend(conn, str(remote_state), socket_name=f"t{os.getpid()}")
    yield b
    b.kill_server()


def spec(tmp_path: Path, sid: str, script: str = ECHO) -> PaneSpec:
    return PaneSpec(
        session_id=sid,
        incarnation=1,
        name=f"corral-{sid}",
        cwd=tmp_path,
        argv=["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        width=80,
        height=20,
    )


def wait_for(backend: PaneBackend, handle: PaneHandle, text: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = backend.capture([handle]).get(handle.owner)
        if screen is not None and any(text in line for line in screen.lines):
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never showed in pane {handle.pane_id}")


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def swept_and_captured(backend: RemoteTmuxBackend, owners: list[str]) -> bool:
    """One sweep; True when it captured exactly `owners`."""
    backend.sweep()
    return backend.last_captured == owners


def test_it_is_a_pane_backend(backend: RemoteTmuxBackend) -> None:
    typed: PaneBackend = backend
    assert typed.name == "ssh:box"


def test_spawn_runs_on_the_host_and_the_sweep_is_one_round_trip(
    backend: RemoteTmuxBackend, conn: HostConnection, tmp_path: Path
) -> None:
    handles = [backend.spawn(spec(tmp_path, f"s{i}")) for i in range(3)]
    for h in handles:
        wait_for(backend, h, "ready")
    before = conn.round_trips
    infos = backend.sweep()
    assert conn.round_trips - before == 1
    assert set(infos) == {h.owner for h in handles}
    assert all(i.alive and i.current_command == "sh" for i in infos.values())
    # the sweep brought the screens of the panes that changed: capturing them is free
    screens = backend.capture(handles)
    assert conn.round_trips - before == 1
    assert all("ready" in s.lines for s in screens.values())


def test_quiet_panes_are_not_captured_again(
    backend: RemoteTmuxBackend, conn: HostConnection, tmp_path: Path
) -> None:
    h = backend.spawn(spec(tmp_path, "quiet"))
    wait_for(backend, h, "ready")
    # captured while its activity is "recent" (tmux keeps whole seconds), then no more
    wait_until(lambda: swept_and_captured(backend, []), "a sweep that captures nothing")
    backend.sweep()
    assert backend.last_captured == []  # nothing new on screen, nothing captured
    backend.send_keys(h, ["h", "i", "Enter"])

    def answered() -> bool:
        if not swept_and_captured(backend, [h.owner]):
            return False
        before = conn.round_trips
        lines = backend.capture([h])[h.owner].lines
        assert conn.round_trips == before  # came with the sweep
        return "got:hi" in lines

    wait_until(answered, "its answer, captured by a sweep")


def test_send_text_keys_and_kill(backend: RemoteTmuxBackend, tmp_path: Path) -> None:
    h = backend.spawn(spec(tmp_path, "talk"))
    wait_for(backend, h, "ready")
    backend.send_text(h, "hello host")
    wait_for(backend, h, "got:hello host")
    backend.kill(h, timeout=3)
    assert h.owner not in backend.sweep()
    backend.kill(h)  # a pane that is gone is not an error


def test_a_pane_that_exits_reports_its_status(backend: RemoteTmuxBackend, tmp_path: Path) -> None:
    h = backend.spawn(spec(tmp_path, "exits", "echo bye; exit 3"))
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        info = backend.sweep().get(h.owner)
        if info is not None and not info.alive:
            break
        time.sleep(0.2)
    assert info is not None and not info.alive and info.exit_status == 3


def test_a_new_backend_readopts_the_panes_by_owner(
    backend: RemoteTmuxBackend, conn: HostConnection, tmp_path: Path
) -> None:
    h = backend.spawn(spec(tmp_path, "adopt"))
    wait_for(backend, h, "ready")
    again = RemoteTmuxBackend(conn, backend._remote_state_dir, socket_name=backend.socket_name)
    infos = again.sweep()
    assert infos[h.owner].handle.pane_id == h.pane_id
    again.send_keys(infos[h.owner].handle, ["o", "k", "Enter"])
    wait_for(again, h, "got:ok")


def test_a_missing_directory_or_program_on_the_host_is_a_sentence(
    backend: RemoteTmuxBackend, tmp_path: Path
) -> None:
    bad = spec(tmp_path / "nowhere", "nodir")
    with pytest.raises(Exception, match=r"working directory .*nowhere does not exist there"):
        backend.spawn(bad)
    missing = PaneSpec("noprog", 1, "x", tmp_path, ["no-such-agent-cli"], {"PATH": "/usr/bin"})
    with pytest.raises(Exception, match="'no-such-agent-cli' was not found"):
        backend.spawn(missing)
    assert backend.sweep() == {}  # nothing was left behind


def test_the_sweep_survives_a_killed_master(
    backend: RemoteTmuxBackend, conn: HostConnection, tmp_path: Path
) -> None:
    h = backend.spawn(spec(tmp_path, "survive"))
    wait_for(backend, h, "ready")
    pid = conn.master_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: conn.master_pid() is None, "the master to stop answering")
    assert h.owner in backend.sweep()  # reconnected, same pane still there
    assert conn.reconnects == 1


def test_an_unreachable_host_raises_host_down_not_gone(
    sshd: SshServer, state_dir: Path, tmp_path: Path
) -> None:
    host = HostSettings(
        name="far", destination=sshd.alias, ssh_options=[*sshd.ssh_options(), "-o", "Port=1"]
    )
    far = RemoteTmuxBackend(HostConnection(host, state_dir), str(tmp_path / "r"))
    with pytest.raises(HostDown, match="host far"):
        far.sweep()


async def test_a_custom_agent_on_the_host_reaches_the_board_and_survives_an_outage(
    sshd: SshServer, state_dir: Path, tmp_path: Path
) -> None:
    """The pane manager (what the board reads) drives a `custom:` agent on the
    host; when the host stops answering, its session reads "host unreachable"
    — not exited — and comes back with the same pane."""
    from corral.supervisor.agents.profiles import profile_for
    from corral.supervisor.panes.manager import PaneManager

    good = HostSettings(name="box", destination=sshd.alias, ssh_options=sshd.ssh_options())
    conn = HostConnection(good, state_dir, backoff=(0.0,))  # retried at once
    backend = RemoteTmuxBackend(conn, str(tmp_path / "remote"), socket_name="mgr")
    readings: list[tuple[str, str, str]] = []
    manager = PaneManager(
        backend,
        state_dir / "agents",
        on_status=lambda sid, r: readings.append((sid, r.status.value, r.reason)),
    )
    profile = profile_for(f"custom:sh -c '{ECHO}'")
    try:
        record = await manager.spawn(spec(tmp_path, "agent1"), profile)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            await manager.sweep_once()
            if record.screen is not None and "ready" in record.screen.lines:
                break
        assert record.screen is not None and "ready" in record.screen.lines
        # the network goes: the master dies and the host stops answering
        conn.host = good.model_copy(update={"ssh_options": [*good.ssh_options, "-o", "Port=1"]})
        master = conn.master_pid()
        assert master is not None
        os.kill(master, signal.SIGKILL)
        wait_until(lambda: conn.master_pid() is None, "the master to stop answering")
        await manager.sweep_once()
        assert "host box" in manager.unreachable("agent1")
        assert record.alive and record.exit_status is None  # not failed
        assert record.status.status.value not in ("exited", "crashed")
        sid, status, reason = readings[-1]
        assert (sid, status) == ("agent1", "unreachable")  # what the board shows
        assert "host box" in reason and "refused the connection" in reason
        # the network comes back: the same pane, found again by its owner marker
        conn.host = good
        await manager.send_keys("agent1", ["b", "a", "c", "k", "Enter"])
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            await manager.sweep_once()
            if record.screen is not None and "got:back" in record.screen.lines:
                break
        assert manager.unreachable("agent1") == ""
        assert readings[-1][1] != "unreachable"
        assert record.screen is not None and "got:back" in record.screen.lines
    finally:
        await manager.stop()
        backend.kill_server()
        conn.close()


def test_the_hooks_file_on_the_host_comes_home_with_the_sweep(
    backend: RemoteTmuxBackend, conn: HostConnection, tmp_path: Path
) -> None:
    local = tmp_path / "home" / "hooks.jsonl"
    backend.mirror_hooks("hooked", local)
    remote = Path(backend.remote_hooks_file("hooked"))
    script = (
        f'mkdir -p {remote.parent} && echo ready && read -r x && printf \'{{"event":"Stop"}}\\n\' >> {remote}'
        f' && printf \'{{"event":"Notif\' >> {remote} && read -r y'
        f" && printf 'ication\"}}\\n' >> {remote} && sleep 30"
    )
    h = backend.spawn(spec(tmp_path, "hooked", script))
    wait_for(backend, h, "ready")
    backend.send_keys(h, ["Enter"])
    half = '{"event":"Stop"}\n{"event":"Notif'
    wait_until(lambda: remote.exists() and remote.read_text() == half, "the agent's hook lines")
    before = conn.round_trips
    backend.sweep()
    assert conn.round_trips - before == 1  # the file rode the sweep's round trip
    assert local.read_text() == '{"event":"Stop"}\n'  # a half-written line waits
    backend.send_keys(h, ["Enter"])
    wait_until(lambda: remote.read_text().endswith('ication"}\n'), "the rest of the line")
    backend.sweep()
    assert local.read_text() == '{"event":"Stop"}\n{"event":"Notification"}\n'
    backend.sweep()  # nothing new: nothing appended twice
    assert local.read_text().count("Stop") == 1


def test_an_agent_works_in_a_worktree_made_on_the_host_and_its_commit_comes_home(
    backend: RemoteTmuxBackend, conn: HostConnection, sshd: SshServer, tmp_path: Path
) -> None:
    """The session path on a host in miniature: worktree made there, the agent
    runs and commits there, the result is fetched home and its content is here."""
    from corral.supervisor.git.run import GitError
    from corral.supervisor.hosts.fetch import fetch_commit
    from corral.supervisor.hosts.worktrees import add_worktree, head_commit, remove_worktree
    from tests.conftest import git, init_repo

    repo = init_repo(sshd.remote_root / f"project-{tmp_path.name}")
    tree = str(sshd.remote_root / f"trees-{tmp_path.name}" / "s1")
    base = add_worktree(conn, str(repo), tree)
    assert base == git(repo, "rev-parse", "HEAD").strip()
    agent = (
        "echo working; printf 'made on the host\\n' > result.txt && git add result.txt && "
        "git -c user.name=agent -c user.email=a@example.invalid commit -qm result && echo done"
    )
    h = backend.spawn(
        PaneSpec("wt1", 1, "corral-wt1", Path(tree), ["sh", "-c", agent + "; sleep 30"],
                 {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, 80, 20)
    )  # fmt: skip
    wait_for(backend, h, "done")
    result = head_commit(conn, tree)
    assert result != base
    home = init_repo(tmp_path / "home")
    fetch_commit(conn, str(repo), result, home)
    assert git(home, "show", f"{result}:result.txt") == "made on the host\n"
    backend.kill(h)
    remove_worktree(conn, str(repo), tree)
    assert not Path(tree).exists()
    with pytest.raises(GitError, match=r"cannot make a worktree of /nowhere on host box"):
        add_worktree(conn, "/nowhere", tree)


def test_a_pane_whose_program_the_hosts_tmux_never_reaped_still_reports_its_exit(
    backend: RemoteTmuxBackend, tmp_path: Path
) -> None:
    """tmux on the host can miss an exited program's SIGCHLD (seen under
    load): the pane is dead, its program a zombie, and tmux shows no exit
    status. The sweep reads the zombie's status on the host, so the agent's
    turn ends instead of its pane reading alive for ever. (Here tmux misses
    it for sure: its server starts with SIGCHLD blocked.)"""
    sock = tmp_path / "remote-state" / "tmux" / backend.socket_name
    sock.parent.mkdir(mode=0o700, parents=True)
    blocked = (
        "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD}); "
        "os.execvp('tmux', ['tmux', '-f', '/dev/null', '-S', sys.argv[1], "
        "'new-session', '-d', '-s', 'other', 'sleep 600'])"
    )
    subprocess.run([sys.executable, "-c", blocked, str(sock)], check=True, timeout=10)
    h = backend.spawn(spec(tmp_path, "zombie", "echo bye; exit 7"))
    deadline = time.monotonic() + 8
    info = None
    while time.monotonic() < deadline:
        info = backend.sweep().get(h.owner)
        if info is not None and not info.alive:
            break
        time.sleep(0.2)
    assert info is not None and (info.alive, info.exit_status) == (False, 7)
    wait_for(backend, h, "bye")  # its last screen is kept
