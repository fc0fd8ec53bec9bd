"""Sessions on another host, end to end over a real SSH server (Debian's sshd
on 127.0.0.1; the "remote machine" is a directory tree of its own): the
worktree, the agent's pane (a private tmux server there), its hooks, the
checks and the verification all run on the host; the verified commit is
fetched home and delivered here. Also: the connection dying mid-run (and
during a paste: the text arrives once), a host that refuses our key, and a
host's session limit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.hosts.configured import Hosts
from corral.supervisor.hosts.place import HostPlace
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.provenance import Verification
from corral.supervisor.states import CoderState as S
from tests.conftest import events_of, eventually, fast_config, git, plan_texts, row_of
from tests.fakes.sshd import SshServer, sshd_missing, start_sshd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sshd_missing() is not None, reason=str(sshd_missing())),
]

SLUG = "Make slugify() fold accents"

# A small interactive agent (no corral on the host): reads a task, works
# `steps` half-seconds printing, writes hello.txt, shows its prompt again and
# tells corral through $CORRAL_HOOK_CMD (a hook that writes on the host).
AGENT = r"""
import os, select, shlex, subprocess, sys, time
steps = int(sys.argv[1])
def hook(event):
    cmd = shlex.split(os.environ["CORRAL_HOOK_CMD"]) + [event]
    subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False)
print("tiny remote agent")
sys.stdout.write("tiny$ "); sys.stdout.flush()
hook("SessionStart")
while True:
    data = os.read(0, 65536)
    if not data:
        break
    while select.select([0], [], [], 0.5)[0]:
        if not os.read(0, 65536):
            break
    for i in range(steps):
        print(f"working on the task, step {i + 1} of {steps}", flush=True)
        time.sleep(0.5)
    with open("hello.txt", "w") as fh:
        fh.write("hi from " + os.uname().nodename + "\n")
    with open("scratch.txt", "w") as fh:
        fh.write("notes the operator does not want\n")
    print("done: wrote hello.txt")
    sys.stdout.write("tiny$ "); sys.stdout.flush()
    hook("Stop")
"""

HELLO = OutcomeContract(
    checks=[ContractCheck(name="hello", command="grep -q hi hello.txt", timeout_secs=10)]
)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def host(server: SshServer, name: str, **kw: object) -> HostSettings:
    return HostSettings(
        name=name,
        destination=str(kw.pop("destination", server.alias)),
        state_dir=str(server.remote_root / name),
        ssh_options=server.ssh_options(),
        **kw,  # type: ignore[arg-type]
    )


def stop_remote_tmux(settings: HostSettings) -> None:
    for sock in (Path(settings.state_dir) / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def open_supervisor(
    tmp_path: Path,
    contract: OutcomeContract,
    *hosts: HostSettings,
    engine: str = "external:demo",
    pace: float = 0.05,
) -> Supervisor:
    config = fast_config(hosts=list(hosts), max_session_wall_secs=180)
    places = Hosts(config.hosts, tmp_path / "state")  # the test's own, handed in
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        default_engine=engine,
        demo_pace=pace,
        config=config,
        hosts=places,
    )
    PLACES[sup] = places
    await sup.open()
    return sup


# the Hosts each supervisor was built with: the test instruments their live connections
PLACES: weakref.WeakKeyDictionary[Supervisor, Hosts] = weakref.WeakKeyDictionary()


def place_of(sup: Supervisor, name: str) -> HostPlace:
    return PLACES[sup].get(name)


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[list[HostSettings]]:
    made: list[HostSettings] = []
    yield made
    for settings in made:
        stop_remote_tmux(settings)
    for sock in (tmp_path / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def test_a_demo_session_runs_on_the_host_and_its_verified_commit_is_delivered_here(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"box-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), box)
    try:
        sid = (await sup.start(SLUG, repo, host=box.name)).session_id
        session = sup.get(sid).session
        assert session.host == box.name
        remote = Path(session.remote_worktree or "")
        assert remote.is_relative_to(Path(box.state_dir)) and (remote / "textkit").is_dir()
        row = row_of(sup, sid)
        assert row.host == box.name and row.where == f"{box.name}:{remote}"
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", row.error
        assert row.question_prompt == "Do you want to make this edit to textkit/slug.py?"
        pane = sup.get(sid).session.pane or {}
        assert pane["backend"] == f"ssh:{box.name}" and pane["host"] == box.name
        attach = sup.attach_argv(sid) or []
        assert attach[0] == "ssh" and "-t" in attach and box.destination in attach
        assert "tmux" in attach[-1] and "attach-session" in attach[-1]
        await sup.respond(sid, "Yes")
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert row.state is S.NEEDS_APPROVAL, row.error
        texts = plan_texts(sup, sid)
        assert any(f"on host {box.name} in {remote} (in bubblewrap)" in t for t in texts)
        assert any(f"fetched from host {box.name}" in t for t in texts)
        assert "unicodedata" in (remote / "textkit" / "slug.py").read_text()  # made there
        result = await sup.approve(sid)
        assert result.state is S.MERGED
        delivered = sup.get(sid).session.result_commit
        assert delivered is not None
        assert "unicodedata" in git(repo, "show", f"{delivered}:textkit/slug.py")
        # verified on the host; its attestation re-runs here, without a state dir
        verdict = await Verification(repo).commit(delivered)
        assert verdict.state == "verified", verdict.sentences
        with pytest.raises(CorralError):
            await sup.approve(sid)  # nothing is delivered twice
        await eventually(lambda: not remote.exists(), timeout=15)  # delivered: removed there
    finally:
        await sup.close()


async def test_a_custom_agent_on_the_host_reports_through_its_hooks_and_is_delivered(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"cbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, HELLO, box, engine=f"custom:python3 {script} 2")
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert row.state is S.NEEDS_APPROVAL, row.error
        hooks = (tmp_path / "state" / "agents" / sid / "hooks.jsonl").read_text()
        assert '"event": "Stop"' in hooks  # written on the host, mirrored here by the sweep
        remote = Path(sup.get(sid).session.remote_worktree or "")
        assert (remote / "hello.txt").read_text().startswith("hi from")
        # a partial delivery: the approved part is verified again on the host
        result = await sup.approve(sid, selection={"hello.txt": None}, discard_rest=True)
        assert result.state is S.MERGED and result.partial is True
        assert all(r.passed for r in result.verification)
        assert any(
            "Re-running the contract on the approved part" in t for t in plan_texts(sup, sid)
        )
        session = sup.get(sid).session
        assert session.result_branch and session.result_commit
        assert git(repo, "show", f"{session.result_branch}:hello.txt").startswith("hi from")
        files = git(repo, "ls-tree", "--name-only", session.result_branch)
        assert "scratch.txt" not in files
        assert not list((Path(box.state_dir) / "scratch").glob("*"))  # its scratch is gone
    finally:
        await sup.close()


def outage_events(sup: Supervisor, sid: str) -> list[str]:
    """The agent statuses journaled from the first outage on."""
    statuses = [
        e.data.status.value for e in events_of(sup, sid) if e.kind is EventKind.AGENT_STATUS
    ]
    return statuses[statuses.index("unreachable") :] if "unreachable" in statuses else []


async def test_the_connection_dies_mid_run_the_session_waits_unreachable_then_goes_on(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"nbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, HELLO, box, engine=f"custom:python3 {script} 16")
    place = place_of(sup, box.name)
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        here = (await sup.start("write hi into hello.txt", repo)).session_id  # a local one
        await sup.confirm(sid)
        await sup.confirm(here)
        await eventually(lambda: row_of(sup, sid).agent_status == "running", timeout=60)
        master = place.conn.master_pid()
        assert master is not None
        sshd.stop()  # the host stops answering: no new connection either
        os.kill(master, signal.SIGKILL)
        await eventually(lambda: row_of(sup, sid).agent_status == "unreachable", timeout=30)
        row = row_of(sup, sid)
        assert row.state is S.RUNNING and row.needs_you is None  # not failed, no false needs-you
        assert box.name in (row.agent_reason or "")
        # the local session is not held up by the dead host: it reaches review meanwhile
        local = await sup.wait_for(here, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert local.state is S.NEEDS_APPROVAL, local.error
        assert row_of(sup, sid).agent_status == "unreachable"
        # the outage is journaled once, however long its countdown ran
        assert outage_events(sup, sid) == ["unreachable"]
        sshd.restart()
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert place.conn.reconnects >= 1
        assert (Path(sup.get(sid).session.worktree or "") / "hello.txt").exists()  # came home
        after = outage_events(sup, sid)
        assert after.count("unreachable") == 1 and len(after) >= 2, after  # then its recovery
    finally:
        if sshd.proc.poll() is not None:
            sshd.restart()
        await sup.close()


async def test_a_host_that_refuses_our_key_starts_nothing_and_says_why(
    sshd: SshServer, tmp_path: Path
) -> None:
    locked = host(sshd, "locked", destination=sshd.bad_alias)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), locked)
    try:
        with pytest.raises(
            CorralError, match=r"host locked .* refused our SSH key.*authorized_keys"
        ):
            await sup.start(SLUG, repo, host="locked")
        assert sup.list() == []
        assert not list((tmp_path / "state" / "worktrees").glob("*"))
        with pytest.raises(CorralError, match=r"no host named 'nowhere' is configured"):
            await sup.start(SLUG, repo, host="nowhere")
    finally:
        await sup.close()


async def test_a_host_at_its_max_sessions_refuses_another_in_one_sentence(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"mbox-{tmp_path.name[-12:]}".replace("_", "-"), max_sessions=1)
    cleanup.append(box)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), box)
    try:
        first = await sup.start(SLUG, repo, host=box.name)
        assert first.state is S.CONTRACT_PROPOSED
        with pytest.raises(CorralError) as refused:
            await sup.start(SLUG, repo, host=box.name)
        assert str(refused.value) == (
            f"host {box.name} already runs 1 session(s), its max_sessions (1): wait for one "
            "to finish, or raise max_sessions for it in [[hosts]]"
        )
        assert len(sup.list()) == 1
        here = await sup.start(SLUG, repo)  # this machine is not that host
        assert here.state is S.CONTRACT_PROPOSED
        await sup.cancel(first.session_id)
        again = await sup.start(SLUG, repo, host=box.name)  # room again
        assert again.state is S.CONTRACT_PROPOSED
    finally:
        await sup.close()


async def test_after_a_restart_the_pane_on_the_host_is_re_adopted_and_the_run_goes_on(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"rbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    engine = f"custom:python3 {script} 10"
    sup = await open_supervisor(tmp_path, HELLO, box, engine=engine)
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        await eventually(lambda: row_of(sup, sid).agent_status == "running", timeout=60)
    finally:
        await sup.close()
    assert sid in sup.left_running
    sup = await open_supervisor(tmp_path, HELLO, box, engine=engine)
    try:
        assert sup.is_live(sid)
        assert any("was re-adopted" in t for t in plan_texts(sup, sid))
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
        assert row.state is S.NEEDS_APPROVAL, row.error
    finally:
        await sup.close()
    await asyncio.sleep(0)


async def test_a_host_down_at_start_up_shows_its_session_unreachable_not_failed(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"dbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    engine = f"custom:python3 {script} 8"
    sup = await open_supervisor(tmp_path, HELLO, box, engine=engine)
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        await eventually(lambda: row_of(sup, sid).agent_status == "running", timeout=60)
    finally:
        await sup.close()  # stops the master too; the agent runs on there
    sshd.stop()
    try:
        sup = await open_supervisor(tmp_path, HELLO, box, engine=engine)
        try:
            assert sup.is_live(sid)
            assert any("does not answer now" in t for t in plan_texts(sup, sid))
            await eventually(lambda: row_of(sup, sid).agent_status == "unreachable", timeout=30)
            row = row_of(sup, sid)
            assert row.state is S.RUNNING and row.needs_you is None
            sshd.restart()
            row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
            assert row.state is S.NEEDS_APPROVAL, row.error
        finally:
            await sup.close()
    finally:
        if sshd.proc.poll() is not None:
            sshd.restart()


async def test_a_verification_step_waits_for_its_host_to_answer_again(
    sshd: SshServer, tmp_path: Path
) -> None:
    from corral.supervisor.gates.host_tree import on_host
    from corral.supervisor.hosts.connection import HostConnection

    conn = HostConnection(host(sshd, "wbox"), tmp_path / "state", backoff=(0.2, 0.5))
    try:
        conn.run(["true"])
        master = conn.master_pid()
        assert master is not None
        sshd.stop()
        os.kill(master, signal.SIGKILL)

        async def back_soon() -> None:  # once the step has found the host gone
            await eventually(lambda: not conn.reachable, timeout=30)
            sshd.restart()

        comeback = asyncio.ensure_future(back_soon())
        result = await on_host("wbox", lambda: conn.run(["echo", "checked"]), wait=30)
        await comeback
        assert result.text == "checked\n"  # the step ran once the host answered
        sshd.stop()
        conn.close()
        with pytest.raises(CorralError, match=r"host wbox did not answer for 2 s"):
            await on_host("wbox", lambda: conn.run(["true"]), wait=2)
    finally:
        if sshd.proc.poll() is not None:
            sshd.restart()
        conn.close()


def test_corral_run_with_host_delivers_a_branch_made_on_the_host(
    sshd: SshServer, tmp_path: Path
) -> None:
    import json

    from tests.conftest import init_repo
    from tests.integration.test_cli import DELIVER_WITH_THE_DEMO_AGENT, corral

    home = tmp_path / "home"
    home.mkdir()
    remote_state = sshd.remote_root / f"cli-{tmp_path.name}"
    opts = ", ".join(f'"{o}"' for o in sshd.ssh_options())
    (home / "none.toml").write_text(
        f'[[hosts]]\nname = "clibox"\ndestination = "{sshd.alias}"\n'
        f'state_dir = "{remote_state}"\nssh_options = [{opts}]\n'
    )
    repo = init_repo(tmp_path / "repo")
    contract = tmp_path / "c.json"
    check = {"name": "noted", "command": "grep -q 'write notes' DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes", "checks": [check]}))
    try:
        out = corral(
            "run", "--repo", str(repo), "--intent", "write notes", "--contract", str(contract),
            "--host", "clibox", *DELIVER_WITH_THE_DEMO_AGENT, home=home,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        texts = [r["data"].get("text", "") for r in rows if r["kind"] == "plan_text"]
        assert any("on host clibox" in t for t in texts)
        branch = rows[-1]["result_branch"]
        assert "write notes" in git(repo, "show", f"{branch}:DEMO_NOTES.md")
        out = corral(
            "run", "--repo", str(repo), "--intent", "x", "--host", "nowhere",
            "--engine", "external:demo", home=home,
        )  # fmt: skip
        assert out.returncode == 2
        assert "no host named 'nowhere' is configured (configured: clibox)" in out.stderr
    finally:
        stop_remote_tmux(HostSettings(name="clibox", destination="x", state_dir=str(remote_state)))


# -- a paste while the host is down --------------------------------------------------

# An agent with an input line, like the real CLIs: it asks for bracketed
# paste, shows what is typed or pasted on its prompt line, and takes the
# input only on Enter. Every input it took is appended to inputs.log.
LINE_AGENT = r"""
import os, shlex, subprocess, sys, time, tty
def hook(event):
    cmd = shlex.split(os.environ["CORRAL_HOOK_CMD"]) + [event]
    subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False)
def out(text):
    sys.stdout.write(text); sys.stdout.flush()
tty.setcbreak(0)
out("line agent\r\n\x1b[?2004h> ")
hook("SessionStart")
buf, pending, pasting = "", "", False
while True:
    data = os.read(0, 65536)
    if not data:
        break
    pending += data.decode("utf-8", "replace")
    while pending:
        if pending.startswith("\x1b[200~"):
            pasting, pending = True, pending[6:]
            continue
        if pending.startswith("\x1b[201~"):
            pasting, pending = False, pending[6:]
            continue
        if pending.startswith("\x1b") and len(pending) < 6:
            break
        ch, pending = pending[0], pending[1:]
        if ch in "\r\n" and not pasting:
            with open("inputs.log", "a") as fh:
                fh.write(buf + "\n----\n")
            buf = ""
            out("\r\nworking\r\n")
            time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
            with open("hello.txt", "w") as fh:
                fh.write("hi\n")
            out("done\r\n> ")
            hook("Stop")
        else:
            buf += ch
            out("\r\n" if ch in "\r\n" else ch)
"""

# red until the agent took a second input (a repair prompt)
REPAIRED = OutcomeContract(
    checks=[
        ContractCheck(
            name="repaired",
            command="test $(grep -c -- '^----$' inputs.log) -ge 2",
            timeout_secs=10,
        )
    ]
)


def break_before(
    conn: Any, server: SshServer, step: str, needle: bytes = b"still fail (repair round"
) -> dict[str, Any]:
    """Make the host stop answering right before corral's paste of the text
    holding `needle` (a repair prompt; `step` "paste") or right before its
    Enter ("enter"), and answer again 3 s later."""
    real = conn.run
    state: dict[str, Any] = {"pasted": False, "broken": False}

    def run(argv: list[str], **kw: Any) -> Any:
        words = " ".join(argv)
        repair = needle in (kw.get("input") or b"")
        trigger = False
        if not state["broken"]:
            if step == "paste" and "paste-buffer" in words and repair:
                trigger = True
            elif step == "enter" and state["pasted"] and "send-keys" in words:
                trigger = "Enter" in words
        if trigger:
            state["broken"] = True
            master = conn.master_pid()
            server.stop()
            if master is not None:
                os.kill(master, signal.SIGKILL)
            timer = threading.Timer(3.0, server.restart)
            state["timer"] = timer
            timer.start()
        result = real(argv, **kw)
        if "paste-buffer" in words and repair:
            state["pasted"] = True
        return result

    conn.run = run
    return state


@pytest.mark.parametrize(
    "step",
    [
        "paste",
        "enter",
    ],
)
async def test_a_repair_prompt_pasted_while_the_host_is_down_arrives_exactly_once(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings], step: str
) -> None:
    box = host(sshd, f"obox-{step}-{tmp_path.name[-10:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(LINE_AGENT)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, REPAIRED, box, engine=f"custom:python3 {script}")
    place = place_of(sup, box.name)
    state = break_before(place.conn, sshd, step)
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=150)
        assert state["broken"], "the host never went down during the repair paste"
        assert row.state is S.NEEDS_APPROVAL, row.error
        remote = Path(sup.get(sid).session.remote_worktree or "")
        inputs = (remote / "inputs.log").read_text()
        taken = inputs.split("\n----\n")[:-1]
        assert len(taken) == 2, (
            inputs,
            plan_texts(sup, sid),
        )  # the task, then the repair prompt: once
        assert taken[1].startswith("corral re-ran the contract"), inputs
        assert inputs.count("still fail (repair round 1") == 1, inputs
        assert place.conn.reconnects >= 1
    finally:
        if "timer" in state:  # never a server restarted after the test ended
            state["timer"].join()
        if sshd.proc.poll() is not None:
            sshd.restart()
        await sup.close()


# -- `corral panes` reaches the hosts -------------------------------------------------


async def test_panes_on_a_host_are_listed_with_their_host_and_can_be_stopped(
    sshd: SshServer,
    tmp_path: Path,
    cleanup: list[HostSettings],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from corral.supervisor.pane_cleanup import agent_panes, stop_panes

    monkeypatch.setenv("CORRAL_TMUX_SOCKET_DIR", str(tmp_path / "tmux"))
    box = host(sshd, f"pbox-{tmp_path.name[-12:]}".replace("_", "-"))
    locked = host(sshd, "plocked", destination=sshd.bad_alias)
    cleanup.append(box)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), box)
    state = tmp_path / "state"
    try:
        sid = (await sup.start(SLUG, repo, host=box.name)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", row.error
        listing = await asyncio.to_thread(agent_panes, state, [box, locked])
        [pane] = listing.panes
        assert pane.host == box.name and pane.session_id == sid and pane.alive
        assert "plocked" in listing.unreachable  # said, not silently left out
        stopped = await asyncio.to_thread(stop_panes, state, [sid], hosts=[box])
        assert [(s.pane.host, s.gone) for s in stopped] == [(box.name, True)]
        listing = await asyncio.to_thread(agent_panes, state, [box])
        assert listing.panes == [] and listing.unreachable == {}
        assert place_master_alive(sup, box.name)  # the console's own connection kept
        # stopped on purpose, not crashed: the agent is not started again
        row = await sup.wait_for(sid, {S.FAILED}, timeout=60)
        assert "corral panes stop" in (row.error or "")
        assert row.worktree and Path(row.worktree).is_dir()  # the home copy, kept
        listing = await asyncio.to_thread(agent_panes, state, [box])
        assert listing.panes == []
    finally:
        await sup.close()


def place_master_alive(sup: Supervisor, name: str) -> bool:
    return place_of(sup, name).conn.master_pid() is not None


# -- setup commands on a host --------------------------------------------------------

GREET = (
    'mkdir -p "$CORRAL_ENV/bin" && printf "#!/bin/sh\\necho hello from setup\\n" '
    '> "$CORRAL_ENV/bin/greet" && chmod +x "$CORRAL_ENV/bin/greet"'
)
WITH_SETUP = OutcomeContract(
    setup=[GREET],
    checks=[
        ContractCheck(
            name="hello", command="greet | grep -q hello && grep -q hi hello.txt", timeout_secs=10
        )
    ],
)


async def test_a_contract_with_setup_runs_its_setup_on_the_host_and_checks_use_it(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    box = host(sshd, f"sbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    sup = await open_supervisor(tmp_path, WITH_SETUP, box, engine=f"custom:python3 {script} 1")
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        session = sup.get(sid).session
        assert row.state is S.NEEDS_APPROVAL, row.error
        outcome = session.setup_outcome
        assert outcome is not None and outcome.ok and outcome.phase == "verification"
        env = Path(outcome.env_dir)
        assert env.is_relative_to(Path(box.state_dir) / "envs")  # made there, not here
        assert all(r.passed for r in session.last_check_results)  # the checks used it
        # made for the fresh checkout the checks ran in, and gone with it, as the
        # baseline's was: an environment of a tree never serves another tree
        assert not env.exists()
        assert list((Path(box.state_dir) / "envs").iterdir()) == []
    finally:
        await sup.close()


async def test_a_setup_that_fails_on_the_host_says_so_and_no_check_runs(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    from corral.supervisor.gates.host_tree import host_setup

    box = host(sshd, f"fbox-{tmp_path.name[-12:]}".replace("_", "-"))
    sup = await open_supervisor(tmp_path, HELLO, box)
    place = place_of(sup, box.name)
    try:
        wt = Path(box.state_dir) / "wt"
        wt.mkdir(parents=True)
        broken = OutcomeContract(setup=["echo fetching", "exit 7"], checks=HELLO.checks)
        outcome = await host_setup(place, broken, str(wt), 30, "baseline")
        assert outcome is not None and not outcome.ok
        assert outcome.exit_code == 7 and outcome.failed_command == "exit 7"
        assert "fetching" in outcome.output_tail
        # confined: the setup cannot write outside the worktree and its environment
        escape = OutcomeContract(setup=[f"touch {box.state_dir}/escaped"], checks=HELLO.checks)
        if place.facts().bwrap:
            await host_setup(place, escape, str(wt), 30, "baseline")
            assert not (Path(box.state_dir) / "escaped").exists()
    finally:
        await sup.close()


async def test_a_message_pasted_while_the_host_is_down_arrives_once_and_is_accepted(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    from tests.integration.test_session_messages import TEXT, messages_of

    box = host(sshd, f"mbox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    repo = make_demo_repo(tmp_path)
    heard = OutcomeContract(
        checks=[
            ContractCheck(
                name="heard",
                command="grep -q 'public API[ ]unchanged' DEMO_NOTES.md",
                timeout_secs=5,
            )
        ]
    )
    sup = await open_supervisor(tmp_path, heard, box, pace=1.0)
    place = place_of(sup, box.name)
    state = break_before(place.conn, sshd, "paste", TEXT.encode())
    try:
        sid = (await sup.start("write notes", repo, host=box.name)).session_id
        await sup.confirm(sid)
        await eventually(lambda: row_of(sup, sid).agent_status == "running", timeout=60)
        await sup.send("operator", sid, TEXT)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, needs=True, timeout=90)
        if row.needs_you == "question":  # the demo agent asks before its first edit
            await sup.respond(sid, "Yes, and don't ask again this session")
            row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert state["broken"], "the host never went down during the message's paste"
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert messages_of(sup, sid) == [
            ("operator", sid, "queued", None),
            ("operator", sid, "accepted", None),
        ]
        notes = Path(sup.get(sid).session.remote_worktree or "") / "DEMO_NOTES.md"
        assert notes.read_text().count("public API unchanged") == 1
    finally:
        if "timer" in state:  # never a server restarted after the test ended
            state["timer"].join()
        if sshd.proc.poll() is not None:
            sshd.restart()
        await sup.close()


async def test_on_a_host_the_checks_run_on_the_snapshot_not_on_what_the_agent_left_ignored(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    """The agent leaves hello.txt wrong and an ignored file the check would
    read: in a fresh checkout of the worktree's snapshot the ignored file is
    not there, so the check fails, as it would on the delivered branch."""
    box = host(sshd, f"ibox-{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(
        AGENT.replace('fh.write("hi from "', 'fh.write("bye from "').replace(
            'print("done: wrote hello.txt")',
            'open(".gitignore", "a").write("*.ign\\n"); open("answer.ign", "w").write("hi\\n");'
            ' print("done: wrote hello.txt")',
        )
    )
    repo = make_demo_repo(tmp_path)
    sneaky = OutcomeContract(
        checks=[
            ContractCheck(
                name="hello",
                command="cat hello.txt *.ign 2>/dev/null | grep -q hi",
                timeout_secs=10,
            )
        ]
    )
    sup = await open_supervisor(tmp_path, sneaky, box, engine=f"custom:python3 {script} 1")
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)

        def runtime_verdicts() -> list[bool]:
            return [
                e.data.passed
                for e in events_of(sup, sid)
                if e.kind is EventKind.CONTRACT_EVALUATED and e.data.by == "runtime"
            ]

        await eventually(lambda: runtime_verdicts() != [], timeout=90)
        remote = Path(sup.get(sid).session.remote_worktree or "")
        assert (remote / "answer.ign").read_text() == "hi\n"  # the agent left it there
        assert runtime_verdicts()[0] is False
        assert row_of(sup, sid).state is not S.NEEDS_APPROVAL
    finally:
        await sup.close()


@pytest.mark.parametrize("moment", ["spawn", "verifying"])
async def test_an_ssh_drop_at_any_moment_is_an_outage_and_the_session_goes_on(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings], moment: str
) -> None:
    """The connection is cut (the master killed, sshd down for a while) just
    as the agent is being started, or just as the checks run there: the
    session waits for the host and then reaches review; it never fails."""
    box = host(sshd, f"d{moment[:3]}-{tmp_path.name[-10:]}".replace("_", "-"))
    cleanup.append(box)
    script = sshd.remote_root / f"agent-{tmp_path.name}.py"
    script.write_text(AGENT)
    repo = make_demo_repo(tmp_path)
    slow = OutcomeContract(
        checks=[
            ContractCheck(name="hello", command="sleep 2; grep -q hi hello.txt", timeout_secs=30)
        ]
    )
    sup = await open_supervisor(tmp_path, slow, box, engine=f"custom:python3 {script} 2")
    place = place_of(sup, box.name)
    try:
        sid = (await sup.start("write hi into hello.txt", repo, host=box.name)).session_id
        await sup.confirm(sid)
        if moment == "verifying":
            await eventually(
                lambda: any("Runtime verification" in t for t in plan_texts(sup, sid)), timeout=90
            )
        master = place.conn.master_pid()
        sshd.stop()
        if master is not None:
            os.kill(master, signal.SIGKILL)
        # the host stays away until the owner has run into the outage
        await eventually(lambda: not place.conn.reachable, timeout=30)
        assert row_of(sup, sid).state is not S.FAILED, row_of(sup, sid).error
        sshd.restart()
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=150)
        assert row.state is S.NEEDS_APPROVAL, row.error
    finally:
        if sshd.proc.poll() is not None:
            sshd.restart()
        await sup.close()
