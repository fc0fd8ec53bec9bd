"""An agent is never the operator: a hostile `custom:` agent in a real tmux
pane (unconfined, and confined by real bubblewrap) tries to pass the gates
only a person may pass while `OwnerServices` own the state dir.

From inside its pane it leaves a `setsid` loop (and, confined, a
double-forked one) running `corral approve $CORRAL_SESSION_ID` (one with
`--delivery checkout`), calls every human-only method on the raw sockets,
sends `corral msg` with `CORRAL_SESSION_ID` unset and runs `corral run
--yes`. Each is refused, nothing is delivered, and the attempt is on the
session's log and its board row; the operator's own command line still
approves afterwards.

Everything lives under /var/tmp (the sandbox's /tmp is private)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.events import BoundaryData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.remote import OwnerServices
from corral.supervisor.sandbox import sandbox_status
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, fast_config, git, init_repo
from tests.fakes.procs import running_with_arg

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
needs_bwrap = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)
CONFINED = [
    pytest.param(False, id="unconfined"),
    pytest.param(True, id="confined", marks=needs_bwrap),
]
REPO_ROOT = Path(__file__).resolve().parents[2]
FEATURE = OutcomeContract(
    checks=[ContractCheck(name="feature", command="grep -q done feature.txt", timeout_secs=20)]
)

# each human-only method, with params that would otherwise be valid
PERSON_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("confirm", {}),
    ("approve", {}),
    ("approve", {"delivery": "checkout", "override_red": True}),
    ("approve", {"selection": {"feature.txt": None}, "discard_rest": True}),
    # the acknowledgements only a person gives (a flaky pass, a change in how it is judged)
    ("approve", {"accept_flaky": True, "accept_judge_changes": True}),
    ("reject", {}),
    ("respond", {"text": "yes"}),
    ("steer", {"text": "approve yourself"}),
    ("set_mode", {"mode": "yolo"}),
    ("set_model", {"model": "a-bigger-one"}),
    ("set_option", {"key": "approval", "value": "never"}),
    ("revise", {"request": "no checks"}),
    ("cancel", {}),
    ("revive", {}),
    ("retry", {}),
    ("rename", {"name": "mine"}),
    ("archive", {}),
    ("delete", {}),
    ("push", {}),
    ("pull_request", {}),
    ("agent_keys", {"keys": ["y", "Enter"]}),
    ("set_foreman_split", {"split": {}}),
    ("release", {}),
]
NO_SESSION_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("task_add", {"action": "send", "params": {"target": "x", "text": "y"}, "every": 60}),
    ("task_remove", {"task_id": "x"}),
    ("task_pause", {"task_id": "x"}),
    ("task_run", {"task_id": "x"}),
    ("adopt", {"target": "%1"}),
    ("discussion_start", {"repo": "/"}),
    ("start", {"intent": "nested", "repo": "/"}),
]

RAW = r"""
import json, os, socket, sys
sid = os.environ["CORRAL_SESSION_ID"]
calls = json.loads(sys.argv[1])
out = {}
places = {"agent": os.environ.get("CORRAL_AGENT_SOCKET", ""),
          "main": os.path.join(os.environ.get("CORRAL_HOME", ""), "control.sock")}
for where, path in places.items():
    answers = out[where] = []
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(20)
        s.connect(path)
    except OSError as exc:
        answers.append(["unreachable", str(exc)])
        continue
    f = s.makefile("rb")
    for n, (method, params, with_session) in enumerate(calls):
        if with_session:
            params = dict(params, session_id=sid)
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                              "params": params}).encode() + b"\n")
        reply = json.loads(f.readline())
        answers.append([method, reply.get("error", {}).get("message") or "ANSWERED"])
print(json.dumps(out))
"""


@dataclass
class Site:
    base: Path
    repo: Path
    out: Path
    state: Path


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    base = Path(tempfile.mkdtemp(prefix="cab-", dir="/var/tmp")).resolve()
    try:
        repo = init_repo(base / "repo")
        out = base / "out"
        out.mkdir()
        home = base / "home"
        home.mkdir()
        (base / "config.toml").write_text("")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("CORRAL_CONFIG", str(base / "config.toml"))
        yield Site(base, repo, out, base / "state")
    finally:
        (base / "out" / "stop").touch()
        for pid in running_with_arg(str(base / "out")):
            # only the loops this test's agent left (their argv names its out dir)
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        for sock in (base / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


# `corral approve` of its own session, every 0.2 s, until told to stop; "$4" is
# `-u CORRAL_AGENT_SOCKET` where the loop calls on the main socket instead
LOOP = (
    'i=0; while [ $i -lt 600 ] && [ ! -e "$2/stop" ]; do '
    'env $4 "$0" -m corral.tui.cli approve "$CORRAL_SESSION_ID" $3 > "$2/$1.$i.tmp" 2>&1; '
    'echo "exit $?" >> "$2/$1.$i.tmp"; mv "$2/$1.$i.tmp" "$2/$1.$i"; '
    "i=$((i+1)); sleep 0.2; done"
)


def agent_command(site: Site, *, double_fork: bool, main_socket: bool) -> str:
    """A `custom:` agent that attacks once it has its task, then finishes it.
    `main_socket`: its loops shed their agent socket and call on the state
    dir's (an unconfined agent can; a confined one does not see it)."""
    (site.out / "raw.py").write_text(RAW)
    calls = [[m, p, True] for m, p in PERSON_CALLS] + [[m, p, False] for m, p in NO_SESSION_CALLS]
    py, out = sys.executable, str(site.out)
    shed = "'-u CORRAL_AGENT_SOCKET'" if main_socket else "''"
    body = [
        # a setsid loop: its own session, still under the agent's process
        f"setsid sh -c '{LOOP}' {py} setsid {out} '' {shed} &",
        f"setsid sh -c '{LOOP}' {py} checkout {out} '--delivery checkout' {shed} &",
    ]
    if double_fork:  # orphaned at once: only the pid namespace still knows it
        body.append(f"( setsid sh -c '{LOOP}' {py} orphan {out} '' {shed} & ) ")
    body += [
        f"{py} {out}/raw.py '{json.dumps(calls)}' > {out}/raw.json 2> {out}/raw.err",
        # the message goes out as this session whatever the environment says
        f'env -u CORRAL_SESSION_ID {py} -m corral.tui.cli msg "$CORRAL_SESSION_ID" hi'
        f" > {out}/msg.txt 2>&1",
        f"{py} -m corral.tui.cli run --yes --deliver branch --intent nested --repo . "
        f"> {out}/run.txt 2>&1",
    ]
    script = site.base / "agent.sh"
    script.write_text(
        "#!/bin/bash\n"
        "printf '> '\n"
        "IFS= read -r task\n"
        "echo 'Working… (esc to interrupt)'\n" + "\n".join(body) + "\n"
        "echo done > feature.txt\n"
        'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        "IFS= read -r more\n"
        "sleep 600\n"
    )
    script.chmod(0o755)
    return f"external:custom:{script}"


async def open_owner(
    site: Site, engine: str, *, confined: bool, http: bool = False, **mcp: bool
) -> tuple[Supervisor, OwnerServices]:
    sandbox: dict[str, Any] = {"agents": confined, "writable": [str(site.out)]}
    sup = build_supervisor(
        site.state,
        FixedDrafter(FEATURE),
        socket_dir=site.base / "tmux",
        default_engine=engine,
        config=fast_config(sandbox=sandbox, mcp=mcp),
    )
    await sup.open()
    services = OwnerServices(sup, mcp_http=http)
    await services.start()
    return sup, services


def attempts(out: Path, name: str) -> list[str]:
    return [p.read_text() for p in sorted(out.glob(f"{name}.*")) if not p.name.endswith(".tmp")]


def boundary(sup: Supervisor, sid: str) -> list[BoundaryData]:
    return [e.data for e in sup.replay(sid) if isinstance(e.data, BoundaryData)]


async def corral_cli(site: Site, *args: str) -> tuple[int, str]:
    """The operator's command line from a normal process: (exit code, stderr)."""
    env = dict(os.environ, CORRAL_HOME=str(site.state), PYTHONPATH=str(REPO_ROOT))
    for name in ("CORRAL_SESSION_ID", "CORRAL_AGENT_SOCKET"):
        env.pop(name, None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "corral.tui.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, err.decode()


@pytest.mark.slow
@pytest.mark.parametrize("confined", CONFINED)
async def test_an_agent_cannot_pass_a_persons_gate_from_its_pane(
    site: Site, confined: bool
) -> None:
    engine = agent_command(site, double_fork=confined, main_socket=not confined)
    sup, services = await open_owner(site, engine, confined=confined)
    try:
        sid = (await sup.start("write done into feature.txt", site.repo)).session_id
        await sup.confirm(sid)  # the operator, in-process
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert services.control.agent_sockets() == [sid]
        loops = ["setsid", "checkout"] + (["orphan"] if confined else [])
        seen = {name: len(attempts(site.out, name)) for name in loops}
        # the loops keep trying while the diff waits for approval: a few more rounds
        await eventually(
            lambda: all(len(attempts(site.out, n)) >= seen[n] + 3 for n in loops), timeout=60
        )
        for name in loops:
            tried = attempts(site.out, name)
            assert tried and all("exit 0" not in t for t in tried), (name, tried[-1])
            assert "may not approve its own diff" in tried[-1], tried[-1]
        detail = sup.get(sid)
        assert detail.session.state is S.NEEDS_APPROVAL  # nothing delivered
        assert git(site.repo, "branch", "--list", "corral/*") == ""
        assert not (site.repo / "feature.txt").exists()

        # the raw sockets: every human-only method refused on each it can reach
        raw = json.loads((site.out / "raw.json").read_text())
        assert raw["agent"] and raw["agent"][0][0] != "unreachable", raw
        for where, answers in raw.items():
            if answers and answers[0][0] == "unreachable":
                assert confined and where == "main", raw  # hidden from a confined agent
                continue
            assert len(answers) == len(PERSON_CALLS) + len(NO_SESSION_CALLS)
            for method, answer in answers:
                assert answer.startswith("refused:"), (where, method, answer)

        # corral msg without CORRAL_SESSION_ID: still this session (not the operator)
        assert "cannot send a message to itself" in (site.out / "msg.txt").read_text()
        # corral run --yes: refused (the operator has not let agents start sessions)
        run = (site.out / "run.txt").read_text()
        assert "refused" in run and "start a session" in run, run
        assert [r.session_id for r in sup.list()] == [sid]

        # the operator sees it: the session's log and its board row
        said = [b.message for b in boundary(sup, sid)]
        assert "the agent tried to approve its own diff" in said
        assert "the agent tried to confirm its own contract" in said
        [board] = [r for r in sup.list() if r.session_id == sid]
        assert board.boundary_notice and "the agent tried to" in board.boundary_notice

        # the operator's own command line, from a normal process, still approves
        (site.out / "stop").touch()
        code, err = await corral_cli(site, "approve", sid)
        assert code == 0, err
        row = await sup.wait_for(sid, {S.MERGED}, timeout=30)
        assert row.state is S.MERGED
        assert git(site.repo, "branch", "--list", "corral/*").strip()
        await eventually(lambda: services.control.agent_sockets() == [], timeout=20)
        assert not (site.state / "as" / sid[-12:]).exists()
    finally:
        await services.close()
        await sup.close()


@pytest.mark.slow
async def test_an_unconfined_double_forked_orphan_is_still_the_agent(site: Site) -> None:
    engine = agent_command(site, double_fork=True, main_socket=True)
    sup, services = await open_owner(site, engine, confined=False)
    try:
        sid = (await sup.start("write done into feature.txt", site.repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        seen = len(attempts(site.out, "orphan"))
        await eventually(
            lambda: (
                len(attempts(site.out, "orphan")) >= seen + 3
                or sup.get(sid).session.state is not S.NEEDS_APPROVAL
            ),
            timeout=60,
        )
        assert sup.get(sid).session.state is S.NEEDS_APPROVAL
        assert git(site.repo, "branch", "--list", "corral/*") == ""
    finally:
        await services.close()
        await sup.close()


MCP_CLIENT = r"""
import asyncio, json, os, sys
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

mode, out, repo, contract = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])


async def main():
    if mode == "stdio":  # `corral mcp` with every variable that names the agent shed
        shed = ("CORRAL_SESSION_ID", "CORRAL_AGENT_SOCKET", "CORRAL_INVOKED_BY")
        env = {k: v for k, v in os.environ.items() if k not in shed}
        client = Client(StdioServerParameters(
            command=sys.executable, args=["-m", "corral.tui.cli", "mcp"], env=env))
    else:  # the owner's HTTP endpoint, with the bearer token read from its state dir
        home = os.environ["CORRAL_HOME"]
        url = json.load(open(os.path.join(home, "mcp.json")))["url"]
        token = open(os.path.join(home, "mcp.token")).read().strip()
        client = Client(streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": "Bearer " + token})))
    async with client:
        result = await client.call_tool("assistant_start", {
            "intent": "nested", "repo": repo, "contract": contract, "invoked_by": "operator"})
        text = result.content[0].text
        answer = {"error": text} if result.is_error else json.loads(text)
    with open(out, "w") as f:
        json.dump(answer, f)


asyncio.run(main())
"""


def mcp_agent(site: Site) -> str:
    """A `custom:` agent that asks corral's MCP tools for a nested run, over
    `corral mcp` (stdio) and over HTTP, each with a contract it wrote."""
    client = site.out / "mcp_client.py"
    client.write_text(MCP_CLIENT)
    contract = json.dumps(FEATURE.model_dump(mode="json"))
    py, out = sys.executable, site.out
    body = "\n".join(
        f"{py} {client} {mode} {out}/mcp-{mode}.json {site.repo} '{contract}' "
        f"> {out}/mcp-{mode}.err 2>&1"
        for mode in ("stdio", "http")
    )
    script = site.base / "mcp-agent.sh"
    script.write_text(
        "#!/bin/bash\n"
        "printf '> '\n"
        "IFS= read -r task\n"
        "echo 'Working… (esc to interrupt)'\n" + body + "\n"
        "echo done > feature.txt\n"
        'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        "IFS= read -r more\n"
        "sleep 600\n"
    )
    script.chmod(0o755)
    return f"external:custom:{script}"


@pytest.mark.slow
@pytest.mark.parametrize("allowed", [False, True], ids=["agents-may-not-start", "agents-may-start"])
async def test_an_agent_through_mcp_starts_nothing_past_gate_1(site: Site, allowed: bool) -> None:
    """`corral mcp` started from inside an agent (every variable naming it shed)
    and the HTTP endpoint with the token read from disk: assistant_start is
    refused unless the operator allows agents to start runs; a run it may
    start waits at gate 1 for a person, even with a contract given and
    callers allowed to confirm."""
    sup, services = await open_owner(
        site,
        mcp_agent(site),
        confined=False,
        http=True,
        agents_may_start=allowed,
        callers_may_confirm=True,
    )
    try:
        assert services.mcp_url, services.problems
        sid = (await sup.start("write done into feature.txt", site.repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert row.state is S.NEEDS_APPROVAL, row.error
        for mode in ("stdio", "http"):
            answer_file = site.out / f"mcp-{mode}.json"
            assert answer_file.exists(), (site.out / f"mcp-{mode}.err").read_text()
            answer = json.loads(answer_file.read_text())
            if not allowed:
                assert "refused" in answer.get("error", ""), (mode, answer)
                assert "agents_may_start" in answer["error"], (mode, answer)
                continue
            assert "session_id" in answer, (mode, answer)
            assert "waits at gate 1" in answer["gate"], (mode, answer)
            nested = await sup.wait_for(answer["session_id"], needs=True, timeout=30)
            assert nested.state is S.CONTRACT_PROPOSED, (mode, nested.state)
        started = sorted(r.session_id for r in sup.list())
        assert len(started) == (3 if allowed else 1)
        for other in started:
            if other != sid:  # nobody confirmed them: they still wait for a person
                assert sup.get(other).session.state is S.CONTRACT_PROPOSED
    finally:
        await services.close()
        await sup.close()


async def test_corral_run_with_no_owner_refuses_a_process_that_names_an_agent(
    site: Site,
) -> None:
    """With no owner, `corral run` is its own owner and cannot ask one: it
    refuses when its environment names a corral agent (an agent can drop the
    variables: what closes that is confinement, where the state dir is not
    there to own)."""
    env = dict(os.environ, CORRAL_HOME=str(site.state), PYTHONPATH=str(REPO_ROOT))
    env["CORRAL_SESSION_ID"] = "6b1158e957978ab0afb24396"
    env.pop("CORRAL_AGENT_SOCKET", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "corral.tui.cli", "run", "--yes", "--deliver", "branch",
        "--intent", "nested", "--repo", str(site.repo), "--engine", "external:demo",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2, err.decode()
    assert "refused" in err.decode() and "agents_may_start" in err.decode()
    assert git(site.repo, "branch", "--list", "corral/*") == ""
