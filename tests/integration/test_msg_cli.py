"""`corral msg` as an agent runs it from inside its pane: the owner knows
its session from the agent socket it calls on (`CORRAL_AGENT_SOCKET`), not
from what it says (`CORRAL_SESSION_ID`), and a refusal is printed with the
owner's sentence. And `corral tasks`, the owner's scheduled tasks, the same
way."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.models import EventKind
from corral.supervisor.remote import OwnerServices
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, events_of, eventually
from tests.fakes.scripted import ScriptedEngine, Wait

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_state() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cm", dir="/tmp"))
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


SERVICES: dict[Path, OwnerServices] = {}


@pytest.fixture
async def owner(make_supervisor: SupervisorFactory, short_state: Path) -> AsyncIterator[Supervisor]:
    # an agent CLI's session as far as messages go: it runs until released
    engine = ScriptedEngine([[Wait(asyncio.Event())]], label="external:scripted")
    sup = await make_supervisor(engine=engine, state=short_state)
    services = SERVICES[short_state] = OwnerServices(sup, mcp_http=False)
    await services.start()
    yield sup
    await services.close()
    SERVICES.pop(short_state, None)


async def corral_msg(state: Path, sender: str | None, *args: str) -> tuple[int, str, str]:
    return await corral(state, sender, "msg", *args)


async def corral(
    state: Path, sender: str | None, *args: str, claim: bool = False
) -> tuple[int, str, str]:
    """The command line as session `sender`'s agent calls it (through the
    agent socket the owner opens for it when its agent starts), or as the
    operator; `claim`: as the operator, naming `sender` in its environment."""
    env = dict(os.environ, CORRAL_HOME=str(state), PYTHONPATH=str(REPO_ROOT))
    env.pop("CORRAL_SESSION_ID", None)
    env.pop("CORRAL_AGENT_SOCKET", None)
    if sender:
        env["CORRAL_SESSION_ID"] = sender
        if not claim:
            control = SERVICES[state].control
            control.open_agent_socket(sender)
            env["CORRAL_AGENT_SOCKET"] = str(control.agent_socket(sender))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "corral.tui.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.slow
async def test_an_agent_sends_from_its_pane_and_both_sessions_log_it(
    owner: Supervisor, short_state: Path, repo: Path
) -> None:
    sup = owner
    target = (await sup.start("say hi", repo)).session_id
    sender = (await sup.start("say hello", repo)).session_id
    await sup.confirm(target)
    await sup.wait_for(target, {S.RUNNING}, timeout=10)

    code, out, err = await corral_msg(short_state, sender, target[-8:], "the schema changed")
    assert code == 0, err
    assert "queued for corral-" in out

    def logged(sid: str) -> list[tuple[str, str, str]]:
        return [
            (e.data.sender, e.data.target, e.data.text)
            for e in events_of(sup, sid)
            if e.kind is EventKind.MESSAGE
        ]

    await eventually(lambda: logged(target) and logged(sender))
    assert logged(target) == logged(sender) == [(sender, target, "the schema changed")]

    code, out, err = await corral_msg(short_state, sender, "zzzzzzzz", "anyone?")
    assert code != 0
    assert "no corral session 'zzzzzzzz'" in err

    code, out, err = await corral_msg(short_state, None, sender, "you have no agent yet")
    assert code != 0
    assert "has no agent working (state: contract_proposed)" in err

    # naming a session in the environment makes nobody that session: the operator's
    # process sends as the operator
    code, out, err = await corral(short_state, sender, "msg", target[-8:], "as whom?", claim=True)
    assert code == 0, err
    await eventually(lambda: len(logged(target)) == 2)
    assert logged(target)[-1] == ("operator", target, "as whom?")


@pytest.mark.slow
async def test_corral_tasks_adds_lists_and_removes_through_the_owner(
    owner: Supervisor, short_state: Path
) -> None:
    code, out, err = await corral(
        short_state, None, "tasks", "add", "standup", "--cron", "0 9 * * 1-5", "--revive", "abc"
    )
    assert code == 0, err
    assert "added" in out and "next run" in out
    [task] = await owner.tasks()
    assert task.name == "standup" and task.params == {"session": "abc"}
    code, out, err = await corral(short_state, None, "tasks")
    assert code == 0, err
    assert task.id in out and "cron 0 9 * * 1-5" in out and "next " in out
    code, out, err = await corral(
        short_state, None, "tasks", "add", "bad", "--cron", "soon", "--revive", "abc"
    )
    assert code != 0 and "not a cron expression" in err
    code, out, err = await corral(short_state, None, "tasks", "pause", task.id)
    assert code == 0, err
    code, out, err = await corral(short_state, None, "tasks")
    assert task.id in out and "paused" in out
    assert (await owner.tasks())[0].paused
    code, out, err = await corral(short_state, None, "tasks", "resume", task.id)
    assert code == 0 and not (await owner.tasks())[0].paused
    code, out, err = await corral(short_state, None, "tasks", "run", task.id)
    assert code == 1 and "FAILED" in out and "no corral session 'abc'" in out
    assert len(await owner.task_runs(task.id)) == 1
    code, out, err = await corral(short_state, None, "tasks", "rm", task.id)
    assert code == 0, err
    assert await owner.tasks() == []
