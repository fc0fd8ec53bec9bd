"""One-shot agents (`oneshot:<command line>`) and `custom:` commands that
exit 0, end to end: real scripts in real tmux panes on a private socket,
driven through the supervisor's public API to the approval gate (or to a
failure that says why)."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.engines.external import task_prompt
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.states import CoderState as S
from tests.conftest import events_of, fast_config, git, init_repo, plan_texts

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

NOTES = OutcomeContract(
    description="notes.txt says done",
    checks=[ContractCheck(name="notes_done", command="grep -q done notes.txt", timeout_secs=10)],
)


def script(tmp_path: Path, name: str, body: str) -> Path:
    """A Python script outside the repository (what it records goes to `tmp_path/out`)."""
    path = tmp_path / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "out").mkdir(exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys\nOUT = {str(tmp_path / 'out')!r}\n{body}"
    )
    path.chmod(0o755)
    return path


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Path, Callable[..., object]]]:
    repo = init_repo(tmp_path / "repo")
    opened: list[Supervisor] = []

    # what the scripts record goes outside their worktree: a dir a confined
    # one-shot may write, declared as a sandbox cache (as an operator would)
    (tmp_path / "out").mkdir(exist_ok=True)

    async def open_sup(contract: OutcomeContract = NOTES, **cfg: object) -> Supervisor:
        cfg.setdefault("sandbox", {"writable": [str(tmp_path / "out")]})
        sup = build_supervisor(
            tmp_path / "state",
            FixedDrafter(contract),
            socket_dir=tmp_path / "tmux",
            config=fast_config(**cfg),
        )
        await sup.open()
        opened.append(sup)
        return sup

    yield repo, open_sup
    for sup in opened:
        await sup.close()
    for sock in (tmp_path / "tmux").glob("*"):
        await asyncio.to_thread(
            __import__("subprocess").run,
            ["tmux", "-S", str(sock), "kill-server"],
            capture_output=True,
        )


async def run(
    sup: Supervisor, repo: Path, engine: str, intent: str = "Write done to notes.txt"
) -> str:
    sid = (await sup.start(intent, repo, engine=engine)).session_id
    await sup.confirm(sid)
    return sid


async def test_a_prompt_file_one_shot_reaches_review_verified_by_the_runtime(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(
        tmp_path,
        "writer.py",
        "path = sys.argv[sys.argv.index('--task-file') + 1]\n"
        "task = open(path).read()\n"
        "json.dump({'path': path, 'task': task}, open(os.path.join(OUT, 'got.json'), 'w'))\n"
        "open('notes.txt', 'w').write('done\\n')\n"
        "print('wrote notes.txt')\n",
    )
    sup = await open_sup()
    sid = await run(sup, repo, f"oneshot:{tool} --task-file {{prompt_file}}")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
    assert row.state is S.NEEDS_APPROVAL, row.error
    evaluated = [e.data for e in events_of(sup, sid) if e.kind is EventKind.CONTRACT_EVALUATED]
    assert evaluated[-1].by == "runtime" and evaluated[-1].passed
    # the log names the one-shot command as what was started (not its launcher)
    assert any(getattr(e.data, "started", None) == str(tool) for e in events_of(sup, sid))
    got = json.loads((tmp_path / "out" / "got.json").read_text())
    session = sup.get(sid).session
    assert "Write done to notes.txt" in got["task"] and "notes_done" in got["task"]
    worktree = Path(session.worktree or "")
    # the prompt file is private to corral, never part of the work under review
    assert not Path(got["path"]).resolve().is_relative_to(worktree.resolve())
    assert Path(got["path"]).resolve().is_relative_to((tmp_path / "state").resolve())
    assert [p.path for p in await sup.review_files(sid)] == ["notes.txt"]


async def test_a_failing_one_shot_fails_with_its_status_and_output_tail(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(
        tmp_path,
        "broken.py",
        "for i in range(40):\n    print(f'progress line {i}')\n"
        "print('boom: the widget is broken', flush=True)\nsys.exit(3)\n",
    )
    sup = await open_sup()
    command = f"{tool} {{prompt}}"
    sid = await run(sup, repo, f"oneshot:{command}")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
    assert row.state is S.FAILED
    error = sup.get(sid).session.error or ""
    assert f"one-shot agent '{command}' exited with status 3" in error
    assert "boom: the widget is broken" in error and "progress line 39" in error
    assert "progress line 5\n" not in error  # a tail, not the whole output
    logged = json.dumps([e.model_dump(mode="json") for e in events_of(sup, sid)])
    assert "boom: the widget is broken" in logged and "status 3" in logged


async def test_a_repair_round_reruns_the_command_with_the_failing_checks(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(
        tmp_path,
        "learner.py",
        "prompt = sys.argv[1]\n"
        "with open(os.path.join(OUT, 'runs.log'), 'a') as log:\n"
        "    log.write(json.dumps(prompt) + '\\n')\n"
        "# only the repair prompt carries the failing check's heading\n"
        "right = '## notes_done (exit' in prompt\n"
        "open('notes.txt', 'w').write('done\\n' if right else 'not yet\\n')\n",
    )
    sup = await open_sup(repair_invokes=1)
    sid = await run(sup, repo, f"oneshot:{tool} {{prompt}}")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
    assert row.state is S.NEEDS_APPROVAL, row.error
    runs = [json.loads(line) for line in (tmp_path / "out" / "runs.log").read_text().splitlines()]
    assert len(runs) == 2
    assert "## notes_done (exit 1)" in runs[1] and "Write done to notes.txt" in runs[1]
    assert any("handing them back to the engine" in t for t in plan_texts(sup, sid))
    assert (Path(sup.get(sid).session.worktree or "") / "notes.txt").read_text() == "done\n"


async def test_a_hostile_prompt_arrives_as_one_argument_and_nothing_runs_it(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    canary = tmp_path / "PWNED"
    intent = (
        f'Write done to notes.txt; it\'s "quoted" $(touch {canary}) `touch {canary}` '
        f"$HOME \\n ; rm -rf / {{prompt}} {{prompt_file}}\nsecond line\n\ttabbed 'end"
    )
    tool = script(
        tmp_path,
        "argv.py",
        "json.dump(sys.argv[1:], open(os.path.join(OUT, 'argv.json'), 'w'))\n"
        "open('notes.txt', 'w').write('done\\n')\n",
    )
    sup = await open_sup()
    sid = await run(sup, repo, f"oneshot:{tool} --message {{prompt}} --also=x{{prompt}}x", intent)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
    assert row.state is S.NEEDS_APPROVAL, row.error
    args = json.loads((tmp_path / "out" / "argv.json").read_text())
    expected = task_prompt(intent, NOTES)
    assert args == ["--message", expected, f"--also=x{expected}x"]
    assert not canary.exists()


async def test_without_a_placeholder_the_prompt_arrives_on_stdin(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(
        tmp_path,
        "stdin.py",
        "data = sys.stdin.read()\n"
        "json.dump({'stdin': data, 'argv': sys.argv[1:]}, open(os.path.join(OUT, 'in.json'), 'w'))\n"
        "open('notes.txt', 'w').write('done\\n')\n",
    )
    sup = await open_sup()
    sid = await run(sup, repo, f"oneshot:{tool} --quiet")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
    assert row.state is S.NEEDS_APPROVAL, row.error
    got = json.loads((tmp_path / "out" / "in.json").read_text())
    assert got == {"stdin": task_prompt("Write done to notes.txt", NOTES), "argv": ["--quiet"]}


async def test_a_custom_command_that_does_its_work_and_exits_0_is_verified(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(tmp_path, "quick.py", "open('notes.txt', 'w').write('done\\n')\n")
    sup = await open_sup(repair_invokes=0)
    sid = await run(sup, repo, f"custom:{tool}")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
    assert row.state is S.NEEDS_APPROVAL, row.error
    evaluated = [e.data for e in events_of(sup, sid) if e.kind is EventKind.CONTRACT_EVALUATED]
    assert evaluated[-1].by == "runtime" and evaluated[-1].passed
    assert any("exited with status 0" in t for t in plan_texts(sup, sid))


async def test_cancel_stops_a_running_one_shot_within_five_seconds(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    tool = script(
        tmp_path,
        "slow.py",
        "open(os.path.join(OUT, 'pid'), 'w').write(str(os.getpid()))\n"
        "import time\ntime.sleep(300)\n",
    )
    sup = await open_sup()
    sid = await run(sup, repo, f"oneshot:{tool} {{prompt}}")
    pid_file = tmp_path / "out" / "pid"
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert pid_file.exists()

    def running() -> bool:
        """Whether the tool runs (by its command line: in its sandbox's own pid
        namespace the pid it wrote is not this namespace's)."""
        for proc in Path("/proc").iterdir():
            try:
                if str(tool).encode() in (proc / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
        return False

    assert running()
    began = time.monotonic()
    await sup.cancel(sid)
    row = await sup.wait_for(sid, {S.ABANDONED, S.FAILED}, timeout=10)
    assert row.state is S.ABANDONED
    assert time.monotonic() - began < 5
    for _ in range(100):  # gone (tmux reaps it a moment later)
        if not running():
            break
        await asyncio.sleep(0.05)
    assert not running()


async def test_an_unrunnable_one_shot_is_refused_at_start_with_the_reason(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    _repo, open_sup = world
    sup = await open_sup()
    assert "is not installed here" in (
        sup.engine_refusal("oneshot:no-such-tool-xyz {prompt}") or ""
    )
    assert "no command line" in (sup.engine_refusal("oneshot:   ") or "")
    assert "custom command is empty" in (sup.engine_refusal("custom:") or "")
    assert "cannot read the one-shot command line" in (
        sup.engine_refusal("oneshot:tool 'unbalanced") or ""
    )
    assert "must start with a program" in (sup.engine_refusal("oneshot:{prompt} x") or "")
    assert sup.engine_refusal(f"oneshot:{shlex.quote(sys.executable)} -c pass") is None
    assert [p for p, _label, _example in sup.command_engines()] == ["custom:", "oneshot:", "acp:"]


@pytest.mark.slow
def test_corral_run_with_a_one_shot_agent_end_to_end(tmp_path: Path) -> None:
    from tests.integration.test_cli import corral

    repo = init_repo(tmp_path / "repo")
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(NOTES.model_dump(mode="json")))
    tool = script(
        tmp_path,
        "cli.py",
        "task = open(sys.argv[1]).read()\n"
        "open('notes.txt', 'w').write('done\\n' if 'notes_done' in task else 'no\\n')\n",
    )
    home = tmp_path / "home"
    common = ("run", "--repo", str(repo), "--contract", str(contract), "--yes", "--json")
    out = corral(
        *common,
        "--intent",
        "Write done to notes.txt",
        "--agent",
        f"oneshot:{tool} {{prompt_file}}",
        "--deliver",
        "branch",
        home=home,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "merged" and result["result_branch"]
    assert git(repo, "show", f"{result['result_branch']}:notes.txt") == "done\n"

    failing = script(tmp_path, "fails.py", "print('no model configured'); sys.exit(4)\n")
    out = corral(*common, "--intent", "Try again", "--agent", f"oneshot:{failing}", home=home)
    assert out.returncode == 1
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "exited with status 4" in result["error"] and "no model configured" in result["error"]

    out = corral(*common, "--intent", "x", "--agent", "oneshot:no-such-tool-xyz", home=home)
    assert out.returncode == 2 and "'no-such-tool-xyz' is not installed here" in out.stderr


async def test_a_one_shot_that_finished_while_corral_was_closed_is_verified_on_restart(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    go = tmp_path / "out" / "go"
    tool = script(
        tmp_path,
        "late.py",
        "import time\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
        "open('notes.txt', 'w').write('done\\n')\n"
        "open(os.path.join(OUT, 'finished'), 'w').write('yes')\n",
    )
    first = await open_sup()
    sid = await run(first, repo, f"oneshot:{tool} {{prompt}}")
    deadline = time.monotonic() + 20
    while first.get(sid).session.pane is None or first.agent_pane(sid) is None:
        assert time.monotonic() < deadline, "the one-shot never started"
        await asyncio.sleep(0.1)
    await first.close()  # the command keeps running in its pane
    go.write_text("")
    while not (tmp_path / "out" / "finished").exists():
        assert time.monotonic() < deadline + 20, "the one-shot never finished"
        await asyncio.sleep(0.1)
    # its process exits; tmux keeps the pane and the exit status
    panes = TmuxBackend(socket_dir=tmp_path / "tmux")
    infos = await asyncio.to_thread(panes.sweep)
    while any(info.alive for info in infos.values()):
        assert time.monotonic() < deadline + 30, "the one-shot never exited"
        await asyncio.sleep(0.05)
        infos = await asyncio.to_thread(panes.sweep)
    assert [info.exit_status for info in infos.values()] == [0]

    second = await open_sup()
    row = await second.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert any("had exited while corral was closed" in t for t in plan_texts(second, sid))
