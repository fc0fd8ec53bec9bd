"""Hosts over a real SSH server (Debian's sshd on 127.0.0.1): `corral hosts`,
and the one multiplexed connection per host surviving its master's death."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.hosts.connection import HostConnection
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.hosts.unreachable import HostUnreachable
from corral.tui.cli.main import main
from tests.fakes.sshd import SshServer, sshd_missing, start_sshd

pytestmark = pytest.mark.skipif(sshd_missing() is not None, reason=str(sshd_missing()))


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def host(server: SshServer, name: str = "box", *, alias: str | None = None) -> HostSettings:
    return HostSettings(
        name=name,
        destination=alias or server.alias,
        state_dir=str(server.remote_root / name / "state"),
        ssh_options=server.ssh_options(),
    )


@pytest.fixture
def conn(sshd: SshServer, state_dir: Path) -> Iterator[HostConnection]:
    c = HostConnection(host(sshd), state_dir)
    yield c
    c.close()


def test_corral_hosts_reports_each_host_and_names_a_refused_key(
    sshd: SshServer,
    tmp_path: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "config.toml"
    opts = ", ".join(f'"{o}"' for o in sshd.ssh_options())
    config.write_text(
        f"""[[hosts]]
name = "good"
destination = "{sshd.alias}"
state_dir = "{sshd.remote_root / "good"}"
ssh_options = [{opts}]

[[hosts]]
name = "locked"
destination = "{sshd.bad_alias}"
ssh_options = [{opts}]
"""
    )
    monkeypatch.setenv("CORRAL_CONFIG", str(config))
    monkeypatch.setenv("CORRAL_HOME", str(state_dir))
    code = main(["hosts"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1  # one host cannot run agents
    good = next(line for line in out if " good " in line)
    assert good.startswith("✓ good (testhost)")
    assert "tmux 3." in good and "git 2." in good and "agents:" in good and "sandbox:" in good
    locked = next(line for line in out if "locked" in line)
    assert locked.startswith("✗ locked")
    assert "refused our SSH key" in locked and "authorized_keys" in locked
    assert (sshd.remote_root / "good").is_dir()  # the state dir was made on the host


def test_corral_hosts_without_hosts_says_how_to_add_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORRAL_CONFIG", str(tmp_path / "none.toml"))
    assert main(["hosts"]) == 0
    assert "[[hosts]]" in capsys.readouterr().out


def test_arguments_reach_the_host_exactly_and_stdin_flows(conn: HostConnection) -> None:
    words = ["a b", "$HOME", "'q'", "x;rm -rf /nope", "`id`", "*", ""]
    result = conn.run(["printf", "%s|", *words])
    assert result.returncode == 0
    assert result.text == "|".join(words) + "|"
    echoed = conn.run(["cat"], input=b"line one\nline two\n")
    assert echoed.stdout == b"line one\nline two\n"
    assert conn.run(["sh", "-c", "exit 7"]).returncode == 7  # the remote status, not ssh's


def test_commands_share_one_master(conn: HostConnection) -> None:
    conn.run(["true"])
    pid = conn.master_pid()
    assert pid is not None
    for _ in range(3):
        conn.run(["true"])
    assert conn.master_pid() == pid
    assert conn.round_trips == 4


def test_a_killed_master_is_replaced_and_the_command_still_runs(conn: HostConnection) -> None:
    assert conn.run(["echo", "before"]).text == "before\n"
    first = conn.master_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(first):  # gone, or a zombie awaiting its reaper
        assert time.monotonic() < deadline, "the killed master is still running"
        time.sleep(0.02)
    after = conn.run(["echo", "after"])
    assert after.text == "after\n" and after.returncode == 0
    assert after.error == ""  # no complaint about the dead socket leaks out
    second = conn.master_pid()
    assert second is not None and second != first
    assert conn.reconnects == 1
    assert conn.reachable


def test_an_unreachable_host_fails_with_a_sentence_then_fails_fast(
    sshd: SshServer, state_dir: Path
) -> None:
    dead = HostSettings(
        name="gone",
        destination=sshd.alias,
        ssh_options=[*sshd.ssh_options(), "-o", "Port=1"],
    )
    c = HostConnection(dead, state_dir, backoff=(5.0,))
    with pytest.raises(HostUnreachable, match=r"host gone \(testhost\) refused the connection"):
        c.run(["true"])
    started = time.monotonic()
    with pytest.raises(HostUnreachable, match="next attempt in"):
        c.run(["true"])
    assert time.monotonic() - started < 0.5  # no second wait on a dead host
    assert not c.reachable


def test_a_commit_made_on_the_host_is_fetched_home(
    sshd: SshServer, conn: HostConnection, tmp_path: Path
) -> None:
    from corral.supervisor.git.run import GitError
    from corral.supervisor.hosts.fetch import fetch_commit
    from tests.conftest import git, init_repo

    remote_repo = init_repo(sshd.remote_root / f"repo-{tmp_path.name}")
    (remote_repo / "made_there.txt").write_text("on the host\n")
    git(remote_repo, "add", "made_there.txt")
    git(remote_repo, "commit", "-qm", "work done on the host")
    git(remote_repo, "checkout", "-q", "--detach")
    git(remote_repo, "commit", "-q", "--allow-empty", "-m", "unreferenced result")
    commit = git(remote_repo, "rev-parse", "HEAD").strip()
    local = init_repo(tmp_path / "home")
    conn.connect()
    logins = sshd.log.read_text().count("Accepted publickey")
    ref = fetch_commit(conn, str(remote_repo), commit, local)
    assert git(local, "rev-parse", ref).strip() == commit
    assert git(local, "show", f"{commit}:made_there.txt") == "on the host\n"
    # git rode the host's master: no new login on the host
    assert sshd.log.read_text().count("Accepted publickey") == logins
    with pytest.raises(GitError, match=r"cannot fetch 0{12} from .* on host box"):
        fetch_commit(conn, str(remote_repo), "0" * 40, local)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
