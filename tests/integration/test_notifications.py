"""Notifications as the operator gets them: the configured hook commands run
once per edge (a session starts needing you, or finishes without the operator
having done it), learn the session from `CORRAL_*` variables, and never run
text an agent or a model wrote; a restarted owner does not repeat old news."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.api import Notice, Supervisor
from corral.supervisor.config import load_config
from corral.supervisor.errors import ConfigError
from corral.supervisor.session.board import Watcher
from corral.supervisor.states import CoderState, LoopFailure
from tests.conftest import SupervisorFactory, eventually, proposed, run_to_gate
from tests.fakes.scripted import Ask, Fail, ScriptedEngine, Write
from tests.integration.conftest import OwnerFactory

LINE = 'printf "%s|%s|%s|%s|%s\\036" "$CORRAL_EVENT" "$CORRAL_SESSION_ID" "$CORRAL_STATE" '
LINE += '"$CORRAL_NEEDS_YOU" "$CORRAL_SESSION_NAME" >> "$0"'


def hooks(log: Path) -> dict[str, object]:
    hook = ["sh", "-c", LINE, str(log)]
    return {"notify": {"desktop": False, "on_needs_you": hook, "on_finished": hook}}


def lines(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    # one record per run, ended by RS (a name may hold newlines)
    return [record.split("|") for record in log.read_text().split("\x1e")[:-1]]


async def logged(log: Path, count: int) -> list[list[str]]:
    """The hook log once it has at least `count` records."""
    await eventually(lambda: len(lines(log)) >= count, timeout=10)
    return lines(log)


async def closed_log(
    sup: Supervisor, watcher: Watcher, sid: str, state: CoderState, log: Path
) -> list[list[str]]:
    """Every hook the owner ran, read once its notifier has had the board push
    of `sid` reaching `state` (it watches from open, so each push reaches it
    before this test's later watcher) and the owner has closed (close waits
    for each hook run it started)."""
    async with asyncio.timeout(10):
        while not any(r.session_id == sid and r.state is state for r in await watcher.get()):
            pass
    await asyncio.sleep(0)  # the notifier's turn with that push, if not taken yet
    await sup.close()
    return lines(log)


async def test_each_edge_runs_its_hook_once_and_the_operators_own_finish_none(
    make_owner: OwnerFactory, repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "hooks.log"
    sup, registry = await make_owner(**hooks(log))
    heard: list[Notice] = []
    assert sup.listen_for_notices(heard.append)
    # the intent is text corral did not write: it must arrive as a value, never run
    pwned = tmp_path / "pwned"
    intent = f"say hi $(touch {pwned}) `touch {pwned}`; touch {pwned}\n\nin hello.txt"
    _, watcher = sup.watch()
    sid = await proposed(sup, repo, intent)
    assert (await logged(log, 1))[0][:4] == ["needs_you", sid, "contract_proposed", "contract"]

    row = await run_to_gate(sup, sid)
    assert row.needs_you is not None
    got = await logged(log, 2)
    assert got[1][:4] == ["needs_you", sid, "needs_approval", "merge"]
    assert got[1][4].startswith("say hi $(touch")  # the name arrived as a value
    assert not pwned.exists()

    registry.notify(sid)  # the same row pushed again (a repaint): no news
    await sup.approve(sid)
    got = await closed_log(sup, watcher, sid, CoderState.MERGED, log)
    assert len(got) == 2, "the operator's own approval (or a repaint) was announced"
    assert [n.kind for n in heard] == ["needs_you", "needs_you"]
    assert "\x1b" not in heard[0].body and "\n" not in heard[0].body


async def test_a_session_that_fails_by_itself_is_announced_as_finished(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "hooks.log"
    engine = ScriptedEngine([[Fail(LoopFailure.EXECUTION, "the agent crashed")]])
    sup = await make_supervisor(engine=engine, **hooks(log))
    _, watcher = sup.watch()
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    got = await closed_log(sup, watcher, sid, CoderState.FAILED, log)
    assert [g[:3] for g in got] == [
        ["needs_you", sid, "contract_proposed"],
        ["finished", sid, "failed"],
    ]


async def test_an_unanswered_question_is_said_again_and_never_announced_as_gone(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """Past the question window the hook runs again for the same question
    (needs you: question), and no "finished" or cleared signal is heard."""
    log = tmp_path / "hooks.log"
    engine = ScriptedEngine([[Ask("Which greeting?", write_answer_to="hello.txt")]])
    sup = await make_supervisor(engine=engine, ask_user_timeout_secs=0.3, **hooks(log))
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    got = await logged(log, 4)  # the contract, the question, then two reminders
    assert [g[:4] for g in got[1:4]] == [["needs_you", sid, "running", "question"]] * 3
    assert sup.get(sid).session.state is CoderState.RUNNING


async def test_a_restarted_owner_does_not_repeat_what_was_already_so(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    log = tmp_path / "hooks.log"
    engine = ScriptedEngine([[Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine, **hooks(log))
    _, watcher = sup.watch()
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    assert len(await closed_log(sup, watcher, sid, CoderState.NEEDS_APPROVAL, log)) == 2

    again = await make_supervisor(engine=engine, **hooks(log))
    _, watcher = again.watch()
    assert again.get(sid).session.state is CoderState.NEEDS_APPROVAL
    await again.cancel(sid)
    got = await closed_log(again, watcher, sid, CoderState.ABANDONED, log)
    assert len(got) == 2, "a restart announced a session already waiting, or the operator's cancel"


def test_a_hook_is_split_without_a_shell_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[notify]\non_needs_you = \"notify-me --urgent 'needs you'\"\n")
    assert load_config(config).notify.on_needs_you == ["notify-me", "--urgent", "needs you"]
    config.write_text('[notify]\non_finished = ""\n')
    try:
        load_config(config)
    except ConfigError as exc:
        assert "notify.on_finished" in str(exc) and "a hook needs a command" in str(exc)
    else:
        raise AssertionError("an empty hook was accepted")


@pytest.mark.slow
def test_corral_run_yes_and_deliver_notify_nothing_the_operator_decided(tmp_path: Path) -> None:
    """`corral run --yes --deliver branch --on-question approve`: the contract
    it confirms, the question it answers and the diff it approves are the
    operator's own decisions, so no "needs you" hook runs for them (it used
    to run for each)."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import init_repo

    root = Path(__file__).resolve().parents[2]
    log = tmp_path / "hooks.log"
    config = tmp_path / "config.toml"
    hook = json.dumps(["sh", "-c", LINE, str(log)])
    config.write_text(f"[notify]\ndesktop = false\non_needs_you = {hook}\non_finished = {hook}\n")
    repo = init_repo(tmp_path / "repo")
    contract = tmp_path / "c.json"
    check = {"name": "noted", "command": "grep -q notes DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes", "checks": [check]}))
    env = dict(os.environ, CORRAL_HOME=str(tmp_path / "home"), CORRAL_CONFIG=str(config))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
    env["PYTHONPATH"] = str(root)
    argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
    argv += ["--intent", "write notes", "--contract", str(contract), "--yes"]
    argv += ["--deliver", "branch", "--engine", "external:demo", "--on-question", "approve"]
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(
            ["tmux", "-S", str(tmp_path / "tmux" / "corral"), "kill-server"], capture_output=True
        )
    assert out.returncode == 0, out.stderr
    assert "Do you want to make this edit" in out.stdout, out.stdout  # asked, and answered
    heard = [(r[0], r[3]) for r in lines(log)]
    assert heard == [], heard


async def test_the_demos_own_confirms_and_answer_are_not_announced(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """The demo confirms two contracts and answers the first one's question
    itself: only what it leaves to the operator is announced (the third
    contract, the second's question)."""
    from corral.supervisor.demo import seed_demo

    log = tmp_path / "hooks.log"
    engine = ScriptedEngine([[Ask("Edit hello.txt?", ["Yes", "No"]), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine, **hooks(log))
    _, watcher = sup.watch()
    ids = await seed_demo(sup, repo)
    await sup.wait_for(ids[1], needs=True, timeout=10)
    assert sup.get(ids[1]).needs_you == "question"
    got = await closed_log(sup, watcher, ids[0], CoderState.NEEDS_APPROVAL, log)
    heard = {(g[1], g[3]) for g in got if g[0] == "needs_you"}
    assert (ids[2], "contract") in heard and (ids[1], "question") in heard
    assert (ids[0], "contract") not in heard and (ids[1], "contract") not in heard
    assert (ids[0], "question") not in heard


async def test_a_hook_gets_an_intents_words_without_its_escape_sequences(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """A hook that echoes CORRAL_SESSION_NAME to a terminal must not retitle
    it or write its clipboard: control, bidi and zero-width characters are
    gone from every CORRAL_* value (the words are kept)."""
    log = tmp_path / "hooks.log"
    sup = await make_supervisor(**hooks(log))
    intent = "fix\x1b]2;owned\x07 it\x1b]52;c;cHduZWQ=\x07 \u202enow\u200b \x9b31m done"
    sid = await proposed(sup, repo, intent)
    name = (await logged(log, 1))[0][4]
    assert name.startswith("fix") and "now" in name and name.endswith("done")
    assert [ch for ch in name if not ch.isprintable()] == []
    await sup.close()
    assert sid
