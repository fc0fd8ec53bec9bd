"""The setup phase and honest baselines through the `Supervisor` facade, on
real git repos and real (sandboxed) commands: setup runs before the baseline
and before runtime verification, its environment is on the checks' PATH and
reused by the next session; a setup that fails, hangs or cannot reach the
network makes every check *cannot run* with the output tail while the session
waits at gate 1; a check that cannot run at runtime is never sent back to the
agent as a repair — the session asks the operator instead."""

from __future__ import annotations

import json
import time
from pathlib import Path

from corral.supervisor.events import SetupCompletedData
from corral.supervisor.gates.run_loop import STOP, VERIFY_AGAIN
from corral.supervisor.models import CheckVerdict, ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState, FailureKind, NeedsYou
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    plan_texts,
    proposed,
    row_of,
)
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write

S = CoderState

# The setup installs a tool into the environment; the check needs it and
# fails (for the right reason) until hello.txt says hi.
GREET_SETUP = [
    'mkdir -p "$CORRAL_ENV/bin"',
    "printf '#!/bin/sh\\ngrep -q hi hello.txt 2>/dev/null || exit 1\\n' > \"$CORRAL_ENV/bin/greet\"",
    'chmod +x "$CORRAL_ENV/bin/greet"',
    'echo built >> "$CORRAL_ENV/builds"',
]


def greet_contract(setup: list[str] | None = None, timeout: int = 60) -> OutcomeContract:
    return OutcomeContract(
        description="hello.txt says hi",
        setup=GREET_SETUP if setup is None else setup,
        setup_timeout_secs=timeout,
        checks=[ContractCheck(name="greets", command="greet")],
    )


def setup_events(sup: object, sid: str) -> list[SetupCompletedData]:
    return [e.data for e in events_of(sup, sid) if isinstance(e.data, SetupCompletedData)]  # type: ignore[arg-type]


async def test_setup_runs_before_the_baseline_and_its_env_is_on_the_checks_path(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract()]))
    sid = await proposed(sup, repo)
    s = sup.get(sid).session
    assert s.contract is not None and s.contract.setup == GREET_SETUP
    [result] = s.baseline
    # the tool from the environment ran and its assertion failed: the red that proves the work
    assert result.exit_code == 1 and result.verdict is CheckVerdict.FAILS
    assert s.setup_outcome is not None and s.setup_outcome.ok and not s.setup_outcome.cached
    env_dir = Path(s.setup_outcome.env_dir)
    assert env_dir.is_relative_to(sup.state_dir)  # never inside the worktree
    assert s.worktree is not None and not (Path(s.worktree) / "builds").exists()
    [event] = setup_events(sup, sid)
    assert event.outcome.phase == "baseline"


async def test_without_the_setup_the_same_check_cannot_run_and_says_how_to_fix_it(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract(setup=[])]))
    sid = await proposed(sup, repo)
    s = sup.get(sid).session
    [result] = s.baseline
    assert result.exit_code == 127
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason == "command not found: greet"
    assert "/setup" in result.fix
    assert s.setup_outcome is None
    texts = plan_texts(sup, sid)
    assert any("cannot run here (greets: command not found: greet)" in t for t in texts)
    assert row_of(sup, sid).needs_you is NeedsYou.CONTRACT


async def test_a_second_session_reuses_the_environment_without_running_setup(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract()]))
    first = await proposed(sup, repo)
    second = await proposed(sup, repo)
    one = sup.get(first).session.setup_outcome
    two = sup.get(second).session.setup_outcome
    assert one is not None and two is not None
    assert one.env_dir == two.env_dir and two.cached and not one.cached
    assert (Path(two.env_dir) / "builds").read_text().splitlines() == ["built"]
    assert sup.get(second).session.baseline[0].verdict is CheckVerdict.FAILS


async def test_a_changed_manifest_gets_a_fresh_environment(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    from tests.conftest import git

    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract()]))
    first = await proposed(sup, repo)
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-q", "-m", "manifest")
    second = await proposed(sup, repo)
    one = sup.get(first).session.setup_outcome
    two = sup.get(second).session.setup_outcome
    assert one is not None and two is not None
    assert one.env_dir != two.env_dir and not two.cached


async def test_a_failing_setup_makes_every_check_cannot_run_with_its_output(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    setup = ["echo resolving dependencies", "echo 'ERROR: no matching distribution' >&2; exit 3"]
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract(setup=setup)]))
    sid = await proposed(sup, repo)
    s = sup.get(sid).session
    assert s.state is S.CONTRACT_PROPOSED  # waits at gate 1; nothing is lost
    outcome = s.setup_outcome
    assert outcome is not None and not outcome.ok and outcome.exit_code == 3
    assert "no matching distribution" in outcome.output_tail
    assert "resolving dependencies" in outcome.output_tail
    [result] = s.baseline
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason.startswith("setup failed: `echo 'ERROR")
    assert s.baseline_gates_nothing is False
    # a failed environment is never kept for reuse
    assert not Path(outcome.env_dir).exists()
    assert row_of(sup, sid).needs_you is NeedsYou.CONTRACT


async def test_a_hanging_setup_times_out_as_cannot_run(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    setup = ["echo waiting for the index; sleep 60"]
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract(setup=setup, timeout=2)]))
    sid = await proposed(sup, repo)
    s = sup.get(sid).session
    outcome = s.setup_outcome
    assert outcome is not None and outcome.timed_out and not outcome.ok
    assert "waiting for the index" in outcome.output_tail
    assert "setup timed out after 2s" in outcome.output_tail
    assert s.baseline[0].verdict is CheckVerdict.CANNOT_RUN
    assert "timed out" in s.baseline[0].reason
    assert s.state is S.CONTRACT_PROPOSED


async def test_a_setup_that_cannot_reach_its_index_is_cannot_run(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    fetch = (
        "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/simple/')\""
    )
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract(setup=[fetch])]))
    sid = await proposed(sup, repo)
    s = sup.get(sid).session
    assert s.setup_outcome is not None and not s.setup_outcome.ok
    assert "Connection refused" in s.setup_outcome.output_tail
    assert s.baseline[0].verdict is CheckVerdict.CANNOT_RUN
    assert s.state is S.CONTRACT_PROPOSED


async def test_setup_is_revised_verbatim_and_rebaselined(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract(setup=["exit 1"])]))
    sid = await proposed(sup, repo)
    assert sup.get(sid).session.baseline[0].verdict is CheckVerdict.CANNOT_RUN
    result = await sup.revise(sid, "/setup " + "\n".join(GREET_SETUP))
    assert result.revised and result.contract is not None
    assert result.contract.setup == GREET_SETUP
    assert result.baseline[0].verdict is CheckVerdict.FAILS
    cleared = await sup.revise(sid, "/setup")
    assert cleared.contract is not None and cleared.contract.setup == []
    assert cleared.baseline[0].verdict is CheckVerdict.CANNOT_RUN


async def test_setup_runs_again_before_runtime_verification(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([greet_contract()]))
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=20)
    assert row.state is S.NEEDS_APPROVAL
    phases = [e.outcome.phase for e in setup_events(sup, sid)]
    assert phases == ["baseline", "verification"]
    assert sup.get(sid).session.last_check_results[0].verdict is CheckVerdict.PASSES


async def test_a_check_that_cannot_run_at_runtime_asks_the_operator_not_the_agent(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"  # a declared cache: visible inside the sandbox
    tools.mkdir()
    tool = tools / "greeter"
    checks = [ContractCheck(name="greets", command=f"{tool} && grep -q hi hello.txt")]
    engine = ScriptedEngine([[Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([OutcomeContract(description="hi", checks=checks)]),
        engine=engine,
        sandbox={"writable": [str(tools)]},
    )
    sid = await proposed(sup, repo)
    assert sup.get(sid).session.baseline[0].verdict is CheckVerdict.CANNOT_RUN
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=20)
    assert row.needs_you is NeedsYou.QUESTION
    assert row.question_prompt is not None
    assert "cannot run here (greets: command not found" in row.question_prompt
    assert "not the agent's work" in row.question_prompt
    assert len(engine.contexts) == 1  # no repair round was spent on it
    assert not any("handing them back" in t for t in plan_texts(sup, sid))

    # the operator installs the tool and asks for another verification
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    await sup.respond(sid, VERIFY_AGAIN)
    await eventually(lambda: sup.get(sid).session.state is S.NEEDS_APPROVAL, timeout=20)
    assert len(engine.contexts) == 1


async def test_stopping_on_a_check_that_cannot_run_fails_as_configuration(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    checks = [ContractCheck(name="greets", command=f"{tmp_path}/absent-tool")]
    engine = ScriptedEngine([[Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([OutcomeContract(description="hi", checks=checks)]), engine=engine
    )
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=20)
    await sup.respond(sid, STOP)
    await eventually(lambda: sup.get(sid).session.state is S.FAILED, timeout=10)
    s = sup.get(sid).session
    assert s.failure_kind is FailureKind.CONFIGURATION
    assert s.error is not None and "cannot run here" in s.error and "worktree is kept" in s.error
    assert s.worktree is not None and Path(s.worktree).is_dir()
    assert len(engine.contexts) == 1


async def test_a_setup_the_change_breaks_is_the_works_and_goes_back_for_repair(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """The setup read a file the work emptied (as a setup.py reads its version
    from the package): it passed on the untouched tree, so at verification
    the failure is the change's, sent back to the agent with the setup's
    words, never a question to the operator about the environment."""
    from tests.conftest import git

    (repo / "VERSION").write_text("1\n", encoding="utf-8")
    git(repo, "add", "VERSION")
    git(repo, "commit", "-q", "-m", "version")
    reads_version = ['grep -q 1 VERSION || { echo "no version in VERSION"; exit 1; }']
    engine = ScriptedEngine(
        [
            [Write("VERSION", ""), Write("hello.txt", "hi\n")],
            [Write("VERSION", "1\n")],  # the repair round puts it back
        ]
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([greet_contract(setup=[*reads_version, *GREET_SETUP])]),
        engine=engine,
    )
    sid = await proposed(sup, repo)
    assert sup.get(sid).session.baseline[0].verdict is CheckVerdict.FAILS  # hello.txt not yet
    await sup.confirm(sid)
    await eventually(lambda: sup.get(sid).session.state is S.NEEDS_APPROVAL, timeout=30)
    assert len(engine.contexts) == 2
    [broken] = engine.contexts[1].failing_checks
    assert broken.verdict is CheckVerdict.FAILS
    assert broken.reason.startswith("the setup no longer succeeds after the change")
    assert "no version in VERSION" in broken.output_tail  # the setup's own words
    assert row_of(sup, sid).needs_you is not NeedsYou.QUESTION


def test_stored_results_from_before_verdicts_read_as_passes_or_fails() -> None:
    from corral.supervisor.models import CheckResult

    old = json.loads('{"name": "t", "passed": false, "exit_code": 1, "output_tail": "x"}')
    assert CheckResult.model_validate(old).verdict is CheckVerdict.FAILS
    assert CheckResult.model_validate({"name": "t", "passed": True}).verdict is CheckVerdict.PASSES
    # and they write back exactly as they were
    assert json.loads(CheckResult.model_validate(old).model_dump_json()).keys() >= old.keys()
    assert "verdict" not in json.loads(CheckResult.model_validate(old).model_dump_json())
    assert EventKind.SETUP_COMPLETED.value == "setup_completed"


async def test_setup_reaches_the_network_and_writes_its_env_while_checks_cannot(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """A package index stands in as a local TCP server: the setup can fetch
    from it and write the environment; a check can do neither."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"index says hi\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    fetch = (
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', "
        f'{port}), timeout=5); print(s.recv(100).decode())"'
    )
    setup = [f'{fetch} > "$CORRAL_ENV/index.txt"']
    checks = [
        ContractCheck(name="fetch", command=fetch),
        ContractCheck(name="env_read", command='grep -q "index says hi" "$CORRAL_ENV/index.txt"'),
        ContractCheck(name="env_write", command='touch "$CORRAL_ENV/x"'),
    ]
    drafted = OutcomeContract(description="net", setup=setup, checks=checks)
    try:
        sup = await make_supervisor(drafter=ScriptedDrafter([drafted]))
        sid = await proposed(sup, repo)
    finally:
        server.close()
    s = sup.get(sid).session
    assert s.setup_outcome is not None and s.setup_outcome.ok, s.setup_outcome
    passed = {r.name: r.passed for r in s.baseline}
    assert passed == {"fetch": False, "env_read": True, "env_write": False}


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A fresh git checkout holding `files` (committed)."""
    import subprocess

    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


async def test_what_a_setup_writes_into_the_tree_is_copied_into_the_next_checkout(
    tmp_path: Path,
) -> None:
    """A per-worktree kind (node_modules filled by a package manager) is set
    up once: another checkout of the same manifests gets a copy, and a check
    writing into that copy cannot change what the next checkout gets."""
    from corral.supervisor.contracts.environment import Environments

    envs = Environments(tmp_path / "state")
    install = (
        "npm install --no-audit || true; mkdir -p node_modules/dep && "
        'echo v1 > node_modules/dep/index.js && echo run >> "$CORRAL_ENV/runs"'
    )
    contract = OutcomeContract(setup=[install], checks=[ContractCheck(name="c", command="true")])
    files = {"package.json": '{"name": "x"}', "index.js": "1\n"}
    first = checkout(tmp_path / "one", files)
    second = checkout(tmp_path / "two", {**files, "index.js": "2\n"})  # code differs
    one = await envs.prepare(contract, first)
    two = await envs.prepare(contract, second)
    assert one is not None and two is not None and one.outcome.ok and two.outcome.ok
    assert not one.outcome.cached and two.outcome.cached
    assert one.outcome.env_dir == two.outcome.env_dir
    assert (Path(one.outcome.env_dir) / "runs").read_text() == "run\n"  # the setup ran once
    copied = second / "node_modules" / "dep" / "index.js"
    assert copied.read_text() == "v1\n"
    copied.write_text("poisoned\n")  # a check writing into its copy
    third = checkout(tmp_path / "three", files)
    again = await envs.prepare(contract, third)
    assert again is not None and again.outcome.cached
    assert (third / "node_modules" / "dep" / "index.js").read_text() == "v1\n"


async def test_a_command_corral_cannot_read_is_keyed_by_the_whole_tree_and_pruned_when_stale(
    tmp_path: Path,
) -> None:
    from corral.supervisor.contracts.environment import Environments

    envs = Environments(tmp_path / "state")
    build = OutcomeContract(
        setup=["echo built > out.txt"], checks=[ContractCheck(name="c", command="true")]
    )
    install = OutcomeContract(setup=['touch "$CORRAL_ENV/ok"'], checks=build.checks)
    one = checkout(tmp_path / "one", {"a.txt": "1"})
    two = checkout(tmp_path / "two", {"a.txt": "2"})
    runs = [
        await envs.prepare(build, one),
        await envs.prepare(build, two),  # other content: built again
        await envs.prepare(install, one),
    ]
    dirs = [Path(r.outcome.env_dir) for r in runs if r is not None]
    assert len(set(dirs)) == 3 and not any(r.outcome.cached for r in runs if r is not None)
    assert (two / "out.txt").read_text() == "built\n"
    same = checkout(tmp_path / "same", {"a.txt": "1"})
    reused = await envs.prepare(build, same)
    assert reused is not None and reused.outcome.cached
    assert (same / "out.txt").read_text() == "built\n"
    assert envs.prune() == []  # all used just now
    day_later = time.time() + 2 * 24 * 3600
    assert sorted(envs.prune(now=day_later)) == sorted(dirs[:2])
    assert dirs[2].is_dir()  # keyed by manifests: the next session reuses it
