"""Adoption: a Claude-like agent the user started in their own tmux server
(a private socket here) is found, adopted, its question answered through
corral, a message pasted at its prompt — and released, cancelled or left at
close without ever being killed."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import EventKind
from corral.supervisor.pane_cleanup import stop_panes
from corral.supervisor.remote import OwnerServices
from corral.supervisor.states import CoderState as S
from tests.conftest import events_of, eventually, fast_config, plan_texts, row_of
from tests.integration.test_external_engine import SLUG, kill_tmux, open_supervisor

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

STANDIN = Path(__file__).parent.parent / "fakes" / "standin_claude.py"
REPO_ROOT = Path(__file__).resolve().parents[2]


class UserServer:
    """The user's own tmux server, with one pane running the stand-in `claude`."""

    def __init__(self, tmp_path: Path, *, in_shell: bool = False) -> None:
        bin_dir = tmp_path / "userbin"
        bin_dir.mkdir()
        claude = bin_dir / "claude"
        claude.write_text(f"#!{sys.executable}\n" + STANDIN.read_text(), encoding="utf-8")
        claude.chmod(0o755)
        self.log = tmp_path / "agent.log"
        self.socket = tmp_path / "user" / "sock"
        self.socket.parent.mkdir(mode=0o700)
        command = f"{claude} {self.log}"
        if in_shell:  # typed at a shell: the shell stays when the agent exits
            command = f"bash --norc -c '{command}; exec bash --norc'"
        self.tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "work", "-x", "120", "-y", "30",
            command,
        )  # fmt: skip
        self.pane_id = self.tmux("list-panes", "-a", "-F", "#{pane_id}").split()[0]

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10
        )
        return out.stdout

    def marker(self) -> str:
        return self.tmux("display-message", "-p", "-t", self.pane_id, "#{@corral_owner}").strip()

    def alive(self) -> bool:
        """The pane is there and its program still runs."""
        out = self.tmux("list-panes", "-a", "-F", "#{pane_id} #{pane_dead} #{pane_pid}")
        for row in out.splitlines():
            pane, dead, pid = row.split()
            if pane == self.pane_id:
                return dead == "0" and Path(f"/proc/{pid}").exists()
        return False

    def heard(self) -> str:
        return self.log.read_text(encoding="utf-8") if self.log.exists() else ""

    def stop(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def user(tmp_path: Path) -> Iterator[UserServer]:
    server = UserServer(tmp_path)
    try:
        yield server
    finally:
        server.stop()
        kill_tmux(tmp_path)


async def _open(tmp_path: Path) -> Supervisor:
    return await open_supervisor(tmp_path, demo_contract(SLUG))


async def _listed(sup: Supervisor, user: UserServer) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = await sup.adoptable([user.socket])
        if found:
            return found[0].target
        await asyncio.sleep(0.1)
    raise AssertionError("the stand-in claude pane was never listed")


@pytest.mark.slow
async def test_an_adopted_pane_is_answered_messaged_and_released_untouched(
    tmp_path: Path, user: UserServer
) -> None:
    sup = await _open(tmp_path)
    try:
        [pane] = await sup.adoptable([user.socket])
        # run by an interpreter: found by the `claude` on its command line
        assert (pane.agent, pane.pane_id) == ("claude", user.pane_id)
        assert pane.where == "work:0.0"
        sid = await sup.adopt(pane.target)
        assert user.marker() == f"{sid}:1"
        assert await sup.adoptable([user.socket]) == []  # ours now
        row = row_of(sup, sid)
        assert row.adopted and row.state is S.RUNNING and row.worktree is None

        row = await sup.wait_for(sid, needs=True, timeout=20)
        assert row.needs_you == "question"
        assert row.question_prompt == "Do you want to make this edit to notes.md?"
        await sup.respond(sid, "Yes")
        await eventually(lambda: "chose: Yes" in user.heard(), timeout=15)
        await eventually(
            lambda: any(e.kind is EventKind.TOOL_CALL for e in events_of(sup, sid)), timeout=5
        )

        await eventually(lambda: row_of(sup, sid).agent_status == "idle", timeout=20)
        await sup.send("operator", sid, "please keep the API stable")
        await eventually(lambda: "please keep the API stable" in user.heard(), timeout=20)
        statuses = [e.data.status for e in events_of(sup, sid) if e.kind is EventKind.MESSAGE]
        await eventually(
            lambda: (
                "accepted"
                in [e.data.status for e in events_of(sup, sid) if e.kind is EventKind.MESSAGE]
            ),
            timeout=10,
        )
        assert statuses[0] == "queued"
        # words typed on its session screen (guidance) go in as they are
        assert row_of(sup, sid).steering_available
        await sup.respond(sid, "and add a docstring", steer=True)
        await eventually(lambda: "heard: and add a docstring" in user.heard(), timeout=20)
        await eventually(
            lambda: (
                [
                    e.data.status
                    for e in events_of(sup, sid)
                    if e.kind is EventKind.OPERATOR_GUIDANCE
                ]
                == ["queued", "delivered"]
            ),
            timeout=10,
        )
        screen = sup.agent_screen(sid)
        assert screen is not None and any("? for shortcuts" in line for line in screen.lines)

        with pytest.raises(CorralError, match="already watched by corral"):
            await sup.adopt(pane.target)

        await sup.release(sid)
        assert user.marker() == ""
        assert user.alive()
        assert row_of(sup, sid).state is S.ABANDONED
        with pytest.raises(CorralError, match="already released"):
            await sup.release(sid)
        assert [p.pane_id for p in await sup.adoptable([user.socket])] == [user.pane_id]
    finally:
        await sup.close()
    assert user.alive()


async def test_cancel_and_close_never_kill_an_adopted_pane(
    tmp_path: Path, user: UserServer
) -> None:
    sup = await _open(tmp_path)
    try:
        target = await _listed(sup, user)
        sid = await sup.adopt(target)
        # `corral panes stop --all` reaches corral's own server only: the
        # adopted pane is not its to stop
        os.environ["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
        try:
            stop_panes(tmp_path / "state", [], every=True)
        finally:
            os.environ.pop("CORRAL_TMUX_SOCKET_DIR")
        assert user.alive() and user.marker() == f"{sid}:1"
        result = await sup.cancel(sid)
        assert result.state is S.ABANDONED
        await eventually(lambda: user.marker() == "", timeout=10)
        assert user.alive()  # and still after close, which waits for any stop it started

        again = await sup.adopt(target)
        with pytest.raises(CorralError, match="adopt it again"):
            await sup.retry(sid)
    finally:
        await sup.close()
    # closing leaves the adoption as it was: the pane runs on, still marked
    assert user.alive() and user.marker() == f"{again}:1"
    assert "chose" not in user.heard()  # nothing was ever typed into it
    reopened = await _open(tmp_path)
    try:  # adopted again after the restart, watched and steered
        row = row_of(reopened, again)
        assert row.state is S.RUNNING and row.adopted and row.live, row.error
        assert any("watched and steered again" in t for t in plan_texts(reopened, again))
        row = await reopened.wait_for(again, needs=True, timeout=20)
        assert row.needs_you == "question"  # its screen is read again
        await reopened.release(again)
        assert user.marker() == "" and user.alive()
    finally:
        await reopened.close()
    assert user.alive()


@pytest.mark.slow
async def test_an_adoption_whose_pane_went_away_ends_at_start_saying_why(
    tmp_path: Path, user: UserServer
) -> None:
    sup = await _open(tmp_path)
    try:
        sid = await sup.adopt(await _listed(sup, user))
    finally:
        await sup.close()
    user.stop()  # the pane is gone while corral was closed
    reopened = await _open(tmp_path)
    try:
        row = row_of(reopened, sid)
        assert row.state is S.ABANDONED
        assert row.error == f"ended when corral started again: its pane {user.pane_id} is gone"
    finally:
        await reopened.close()


async def test_a_crashed_corral_leaves_the_pane_running_and_settles_at_start(
    tmp_path: Path, user: UserServer
) -> None:
    sup = await _open(tmp_path)
    target = await _listed(sup, user)
    await sup.close()
    # an owner that adopts the pane, then dies without closing anything
    script = textwrap.dedent(
        f"""
        import asyncio, os, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from corral.supervisor.demo import demo_contract
        from tests.integration.test_external_engine import SLUG, open_supervisor

        async def main():
            sup = await open_supervisor(Path({str(tmp_path)!r}), demo_contract(SLUG))
            print(await sup.adopt({target!r}), flush=True)
            os._exit(0)

        asyncio.run(main())
        """
    )
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script],
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )
    sid = out.stdout.strip()
    assert user.marker() == f"{sid}:1"  # the marker stays, the store says running
    reopened = await _open(tmp_path)
    try:  # the crash lost nothing: the pane is adopted again
        assert user.marker() == f"{sid}:1" and user.alive()
        row = row_of(reopened, sid)
        assert row.state is S.RUNNING and row.live, row.error
        assert reopened.stray_panes == []  # its marker is a session's, not a stray's
        await reopened.cancel(sid)  # the operator's cancel releases it, untouched
        await eventually(lambda: user.marker() == "", timeout=10)
        assert user.alive()
    finally:
        await reopened.close()
    assert user.alive()


@pytest.mark.slow
async def test_an_agent_that_exits_to_its_shell_ends_the_adoption(tmp_path: Path) -> None:
    user = UserServer(tmp_path, in_shell=True)
    sup = await _open(tmp_path)
    try:
        sid = await sup.adopt(await _listed(sup, user))
        await sup.wait_for(sid, needs=True, timeout=20)
        # the user answers in their own pane, then quits the agent there
        user.tmux("send-keys", "-t", user.pane_id, "1")
        await eventually(lambda: "chose: Yes" in user.heard(), timeout=10)
        user.tmux("send-keys", "-t", user.pane_id, "C-c")
        row = await sup.wait_for(sid, {S.ABANDONED}, timeout=20)
        assert "its agent exited (the pane runs bash now)" in (row.error or "")
        assert user.marker() == "" and user.alive()  # the shell runs on, unmarked
        texts = [e.data.text for e in events_of(sup, sid) if e.kind is EventKind.PLAN_TEXT]
        assert "The question was answered in the pane." in texts
    finally:
        await sup.close()
        user.stop()
        kill_tmux(tmp_path)


async def test_bad_targets_are_refused_with_one_sentence(tmp_path: Path, user: UserServer) -> None:
    sup = await _open(tmp_path)
    try:
        with pytest.raises(CorralError, match="is gone from the tmux server"):
            await sup.adopt(f"{user.socket}:%999")
        shell = user.tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "sleep 60").strip()
        with pytest.raises(CorralError, match="runs no agent CLI corral knows"):
            await sup.adopt(f"{user.socket}:{shell}")
        with pytest.raises(CorralError, match="no agent pane 'nowhere:9\\.9'"):
            await sup.adopt("nowhere:9.9")
        with pytest.raises(CorralError, match="no corral session"):
            await sup.release("nope")
        sid = (await sup.start(SLUG, _repo(tmp_path))).session_id
        with pytest.raises(CorralError, match="not an adopted pane: cancel it instead"):
            await sup.release(sid)
    finally:
        await sup.close()
    assert user.alive()


@pytest.mark.slow
async def test_corral_adopt_and_release_on_the_command_line(user: UserServer) -> None:
    short = Path(tempfile.mkdtemp(prefix="ca", dir="/tmp"))
    sup = build_supervisor(
        short / "state",
        FixedDrafter(demo_contract(SLUG)),
        socket_dir=short / "tmux",
        default_engine="external:demo",
        config=fast_config(),
    )
    await sup.open()
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    try:
        code, out, err = await corral(
            short / "state", "adopt", "--list", "--socket", str(user.socket)
        )
        assert code == 0, err
        target = f"{user.socket}:{user.pane_id}"
        assert target in out and "claude" in out and "work:0.0" in out
        code, out, err = await corral(short / "state", "adopt", target)
        assert code == 0, err
        assert "corral adopt: watching" in out
        [row] = [r for r in sup.list() if r.adopted]
        assert user.marker() == f"{row.session_id}:1"
        code, out, err = await corral(short / "state", "adopt", target)
        assert code == 2 and "already watched by corral" in err
        code, out, err = await corral(short / "state", "release", row.label)
        assert code == 0, err
        assert "keeps running untouched" in out
        assert user.marker() == "" and user.alive()
    finally:
        await services.close()
        await sup.close()
        subprocess.run(
            ["tmux", "-S", str(short / "tmux" / "corral"), "kill-server"], capture_output=True
        )
        shutil.rmtree(short, ignore_errors=True)


async def corral(state: Path, *args: str) -> tuple[int, str, str]:
    env = dict(os.environ, CORRAL_HOME=str(state), PYTHONPATH=str(REPO_ROOT))
    env.pop("CORRAL_SESSION_ID", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "corral.tui.cli", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def _repo(tmp_path: Path) -> Path:
    from corral.supervisor.demo import make_demo_repo

    return make_demo_repo(tmp_path)


if os.environ.get("TMUX"):  # the tests use a private server, never the caller's
    os.environ.pop("TMUX")


@pytest.mark.slow
async def test_the_opt_in_scanner_adopts_a_foreign_agent_pane_and_leaves_a_released_one(
    tmp_path: Path, user: UserServer
) -> None:
    """Off by default: nothing is adopted unasked. On ([adoption] scan): an
    agent pane with no marker on the user's tmux is adopted, saying so; once
    the operator releases it, the scanner leaves it alone."""
    quiet = await open_supervisor(
        tmp_path, demo_contract(SLUG), adoption={"scan_secs": 0.1, "sockets": [str(user.socket)]}
    )
    try:
        await asyncio.sleep(0.6)
        assert quiet.list() == [] and user.marker() == ""  # opt-in: off unless asked
    finally:
        await quiet.close()
    sup = await open_supervisor(
        tmp_path,
        demo_contract(SLUG),
        adoption={"scan": True, "scan_secs": 0.1, "sockets": [str(user.socket)]},
    )
    try:
        await eventually(lambda: len(sup.list()) == 1, timeout=15)
        [row] = sup.list()
        assert row.adopted and row.state is S.RUNNING
        assert user.marker() == f"{row.session_id}:1" and user.alive()
        assert any("Adopted by the scanner" in t for t in plan_texts(sup, row.session_id))
        await sup.release(row.session_id)
        assert user.marker() == ""
        await asyncio.sleep(0.6)  # several rounds of the scanner
        assert user.marker() == "" and len(sup.list()) == 1  # released: left alone
    finally:
        await sup.close()
    assert user.alive()
