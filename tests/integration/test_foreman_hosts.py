"""The foreman across hosts, over a real SSH server (Debian's sshd on
127.0.0.1; two `[[hosts]]` entries point at it with state dirs of their
own, so they are two "machines"): subtasks are placed round robin over this
machine and the hosts, each one on a host runs there like a host session
(worktree from the pushed base, agent in the host's tmux, checks there) and
its verified commit is fetched home before the union; a host that stops
answering gives its subtask up, which is re-placed here."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.hosts.configured import Hosts
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.models import OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, fast_config, git, plan_texts
from tests.fakes.sshd import SshServer, sshd_missing, start_sshd
from tests.integration.test_foreman import AGENT, MODULES, make_repo, module_check, subtask, write
from tests.integration.test_host_sessions import PLACES, place_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sshd_missing() is not None, reason=str(sshd_missing())),
]

# The foreman test's writer agent, which first works N seconds (printing)
# when it runs under directory P (`<<sleep N under P>>`): only on the "host".
SLOW_ON_HOST = AGENT.replace(
    'for secs in re.findall(r"<<sleep (\\d+)>>", text):',
    'for secs, under in re.findall(r"<<sleep (\\d+) under (\\S+)>>", text):\n'
    "    if os.getcwd().startswith(under):\n"
    "        for i in range(int(secs) * 2):\n"
    "            print(f'busy on the host {i}', flush=True)\n"
    "            time.sleep(0.5)\n"
    'for secs in re.findall(r"<<sleep (\\d+)>>", text):',
)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def host(server: SshServer, name: str, **kw: object) -> HostSettings:
    return HostSettings(
        name=name,
        destination=server.alias,
        state_dir=str(server.remote_root / name),
        ssh_options=server.ssh_options(),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[HostSettings]]:
    hosts: list[HostSettings] = []
    yield hosts
    for settings in hosts:
        for sock in (Path(settings.state_dir) / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
    for sock in (tmp_path / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def open_sup(
    tmp_path: Path, contract: OutcomeContract, *hosts: HostSettings, **config: object
) -> Supervisor:
    settings = fast_config(hosts=list(hosts), max_session_wall_secs=240, **config)
    places = Hosts(settings.hosts, tmp_path / "state")  # the test's own, handed in
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        config=settings,
        hosts=places,
    )
    PLACES[sup] = places
    return sup


def engine_for(server: SshServer, tmp_path: Path, source: str = AGENT) -> str:
    script = server.remote_root / f"writer-{tmp_path.name}.py"  # readable on both sides
    script.write_text(source)
    return f"foreman:custom:python3 {script}"


async def run_to_gate(sup: Supervisor, sid: str, timeout: float = 180) -> None:
    await sup.confirm(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED, S.ABANDONED}, timeout=timeout)
    assert row.state is S.NEEDS_APPROVAL, (row.error, sup.journal_path(sid).read_text()[-3000:])


async def test_a_three_way_split_runs_here_and_on_two_hosts_and_delivers_one_diff(
    sshd: SshServer, tmp_path: Path, made: list[HostSettings]
) -> None:
    tag = tmp_path.name[-10:].replace("_", "-")
    one, two = host(sshd, f"one-{tag}"), host(sshd, f"two-{tag}")
    made.extend([one, two])
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract, one, two)
    await sup.open()
    try:
        intent = "set every module: " + " ".join(write(m) for m in MODULES)
        split = {"subtasks": [subtask(m) for m in MODULES]}
        engine = engine_for(sshd, tmp_path)
        sid = (await sup.start(intent, repo, engine=engine, split=split)).session_id
        await run_to_gate(sup, sid)
        ledger = sup.placements(sid)
        assert [(p.subtask, p.host, p.result) for p in ledger] == [
            ("s_a", "local", "integrated"),
            ("s_b", one.name, "integrated"),
            ("s_c", two.name, "integrated"),
        ]
        # the subtasks on the hosts had their worktrees there, made from the pushed base
        assert Path(ledger[1].worktree or "").is_relative_to(Path(one.state_dir))
        assert Path(ledger[2].worktree or "").is_relative_to(Path(two.state_dir))
        texts = plan_texts(sup, sid)
        assert any("round robin over local, " + one.name in t for t in texts)
        assert any("Subtask s_b verified" in t and f"from host {one.name}" in t for t in texts)
        assert sup.list()[0].progress == "3/3 subtasks verified"
        result = await sup.approve(sid, delivery="branch")
        assert result.branch is not None
        body = git(repo, "log", "-1", "--format=%B", result.branch)
        assert "Corral-Placement: subtask=s_a host=local files=mod_a/value.txt" in body
        assert f"Corral-Placement: subtask=s_b host={one.name} files=mod_b/value.txt" in body
        assert f"Corral-Placement: subtask=s_c host={two.name} files=mod_c/value.txt" in body
        changed = git(repo, "diff", "--name-only", "main", result.branch).split()
        assert changed == [f"mod_{m}/value.txt" for m in MODULES]
        assert git(repo, "show", f"{result.branch}:mod_c/value.txt") == "C\n"  # made there
        # landed: the worktrees on the hosts are removed
        await eventually(lambda: not Path(ledger[1].worktree or "").exists(), timeout=15)
    finally:
        await sup.close()
    again = open_sup(tmp_path, contract, one, two)  # the ledger survives a restart
    await again.open()
    try:
        assert [p.host for p in again.placements(sid)] == ["local", one.name, two.name]
    finally:
        await again.close()


async def test_a_host_at_max_sessions_takes_no_more_subtasks_nor_sessions(
    sshd: SshServer, tmp_path: Path, made: list[HostSettings]
) -> None:
    tag = tmp_path.name[-10:].replace("_", "-")
    one = host(sshd, f"lim-{tag}", max_sessions=1)
    made.append(one)
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract, one, foreman_local=False)
    await sup.open()
    try:
        intent = "set every module: " + " ".join(write(m) for m in MODULES)
        slow = f"<<sleep 20 under {one.state_dir}>>"
        split = {"subtasks": [subtask(m, slow) for m in MODULES]}
        engine = engine_for(sshd, tmp_path, SLOW_ON_HOST)
        sid = (await sup.start(intent, repo, engine=engine, split=split)).session_id
        await sup.confirm(sid)
        await eventually(
            lambda: any(p.result == "running" for p in sup.placements(sid)), timeout=60
        )
        with pytest.raises(CorralError, match=rf"host {one.name} already runs 1 session"):
            await sup.start("another task", repo, engine="external:demo", host=one.name)
        # one slot: one subtask runs there, the others wait for it (none runs here)
        rows = sup.placements(sid)
        assert sorted(p.result for p in rows) == ["pending", "pending", "running"]
        assert [p.host for p in rows if p.result == "running"] == [one.name]
        await sup.cancel(sid)
    finally:
        await sup.close()


async def test_a_host_that_stops_answering_gives_up_its_subtask_which_is_re_placed_here(
    sshd: SshServer, tmp_path: Path, made: list[HostSettings]
) -> None:
    tag = tmp_path.name[-10:].replace("_", "-")
    box = host(sshd, f"gone-{tag}")
    made.append(box)
    checks = [module_check("a"), module_check("b")]
    contract = OutcomeContract(checks=checks)
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract, box, foreman_host_wait_secs=3)
    await sup.open()
    place = place_of(sup, box.name)
    try:
        slow = f"<<sleep 40 under {box.state_dir}>>"
        split = {"subtasks": [subtask("a"), subtask("b", slow)]}
        engine = engine_for(sshd, tmp_path, SLOW_ON_HOST)
        sid = (
            await sup.start(f"{write('a')} {write('b')}", repo, engine=engine, split=split)
        ).session_id
        await sup.confirm(sid)

        def running_there() -> bool:
            rows = sup.placements(sid)
            return len(rows) == 2 and rows[1].host == box.name and rows[1].result == "running"

        def agent_there() -> bool:
            for sock in (Path(box.state_dir) / "tmux").glob("*"):
                out = subprocess.run(
                    ["tmux", "-S", str(sock), "list-panes", "-a"], capture_output=True, text=True
                )
                if out.stdout.strip():
                    return True
            return False

        def busy_there() -> bool:  # its task pasted: it sleeps there now
            for sock in (Path(box.state_dir) / "tmux").glob("*"):
                tmux = ["tmux", "-S", str(sock)]
                panes = subprocess.run(
                    [*tmux, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True
                ).stdout.split()
                for pane in panes:
                    screen = subprocess.run(
                        [*tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True
                    ).stdout
                    if "busy on the host" in screen:
                        return True
            return False

        await eventually(running_there, timeout=60)
        await eventually(agent_there, timeout=60, interval=0.2)
        await eventually(busy_there, timeout=60, interval=0.2)
        master = place.conn.master_pid()
        assert master is not None
        sshd.stop()  # the host goes away mid-run
        os.kill(master, signal.SIGKILL)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED, S.ABANDONED}, timeout=120)
        assert row.state is S.NEEDS_APPROVAL, (row.error, sup.journal_path(sid).read_text()[-3000:])
        b = sup.placements(sid)[1]
        assert (b.host, b.result, b.attempt) == ("local", "integrated", 2), b.reason
        assert f"host {box.name}" in (b.first_reason or "")  # the reason names the host
        texts = plan_texts(sup, sid)
        assert any(f"Subtask s_b failed on {box.name}" in t and "Re-placing" in t for t in texts)
    finally:
        if sshd.proc.poll() is not None:
            sshd.restart()
        await sup.close()
