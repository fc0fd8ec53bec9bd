"""What a hostile agent can learn of a hidden check, from where it really
runs: a `custom:` agent in a real tmux pane, confined by real bubblewrap.

The agent special-cases the visible test's inputs. While corral verifies, a
loop of its own keeps looking for the hidden test in the state dir (its
store and the verification checkouts under `scratch/`), and it reads its own
session (`get`, `history`) through its own control socket before and after
the hidden check failed. The hidden test catches the special-casing; the
agent sees only "a check the operator holds back failed". Then it says the
task cannot be done as specified (its hook, or its control connection): the
session waits for the operator with the reason, sends no repair round, and
the operator's cancel ends it with nothing delivered.

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

from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.contracts.hidden import HELD_BACK, hidden_check_from_file
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import OutcomeContract
from corral.supervisor.remote import OwnerServices
from corral.supervisor.sandbox import sandbox_status
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, git, init_repo
from tests.fakes.procs import running_with_arg
from tests.fakes.scripted import contract

STATUS = sandbox_status()
pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"),
]
PY = sys.executable
SECRET = "HELD_BACK_MARKER_77"
REASON = "test_mul pins mul(2, 3) but the intent asks for every product"
HIDDEN = (
    f"# {SECRET}\nfrom mul import mul\n\n\ndef test_other_inputs():\n    assert mul(7, 8) == 56\n"
)

RAW = r"""
import json, os, socket, sys
sid = os.environ["CORRAL_SESSION_ID"]
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(os.environ["CORRAL_AGENT_SOCKET"])
f = s.makefile("rb")
out = []
for n, (method, params) in enumerate(json.loads(sys.argv[1])):
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                          "params": dict(params, session_id=sid)}).encode() + b"\n")
    out.append(json.loads(f.readline()))
print(json.dumps(out))
"""

READ_PASTE = (
    'IFS= read -r line; printf "%s\\n" "$line" > "$OUT/{name}"\n'
    'while IFS= read -r -t 2 line; do printf "%s\\n" "$line" >> "$OUT/{name}"; done\n'
)


@dataclass
class Site:
    base: Path
    repo: Path
    out: Path
    state: Path


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    base = Path(tempfile.mkdtemp(prefix="chid-", dir="/var/tmp")).resolve()
    try:
        repo = init_repo(base / "repo")
        (repo / "mul.py").write_text("def mul(a, b):\n    raise NotImplementedError\n")
        (repo / "tests").mkdir()
        (repo / "tests" / "test_mul.py").write_text(
            "from mul import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
        )
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "mul, not done")
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
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        for sock in (base / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def agent(site: Site, how: str) -> str:
    """The `custom:` agent: each paste it is given lands in a file of `out`."""
    (site.out / "raw.py").write_text(RAW)
    out, state = site.out, site.state
    if how == "hook":
        report = f'echo "{REASON}" | sh -c "$CORRAL_HOOK_CMD impossible"\n'
    else:
        calls = json.dumps([["report_impossible", {"reason": REASON}]])
        report = f'"$PY" "$OUT/raw.py" \'{calls}\' > "$OUT/reported.json" 2>&1\n'
    peek = (
        '( i=0; while [ $i -lt 900 ] && [ ! -e "$OUT/stop" ]; do '
        'ls -laR "$STATE/hidden" "$STATE/scratch" >> "$OUT/peek.txt" 2>&1; '
        'cat "$STATE"/hidden/* "$STATE"/scratch/*/*.py '
        '>> "$OUT/peek.txt" 2>&1; i=$((i+1)); sleep 0.1; done ) &\n'
    )
    reads = json.dumps([["get", {}], ["history", {}]])
    script = site.base / "agent.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"OUT={out}; STATE={state}; PY={PY}\n"
        "printf '> '\n"
        + READ_PASTE.format(name="task.txt")
        + "echo 'Working… (esc to interrupt)'\n"
        + peek
        + f'"$PY" "$OUT/raw.py" \'{reads}\' > "$OUT/seen1.json" 2>&1\n'
        "cat > mul.py <<'EOF'\n"
        "def mul(a, b):\n"
        "    if (a, b) == (2, 3):\n"
        "        return 6\n"
        "    return 0\n"
        "EOF\n"
        'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        + READ_PASTE.format(name="repair.txt")
        + "echo 'Working… (esc to interrupt)'\n"
        + f'"$PY" "$OUT/raw.py" \'{reads}\' > "$OUT/seen2.json" 2>&1\n'
        + report
        + 'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        'IFS= read -r more; printf "%s\\n" "$more" > "$OUT/third.txt"\n'
        "sleep 600\n"
    )
    script.chmod(0o755)
    return f"external:custom:{script}"


def exam(site: Site) -> OutcomeContract:
    visible = contract(
        ("tests", f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"),
        description="mul(a, b) returns a times b",
    )
    source = site.base / "operator" / "test_zz_secret_mul.py"
    source.parent.mkdir()
    source.write_text(HIDDEN)
    return visible.model_copy(
        update={"hidden_checks": [hidden_check_from_file(str(source), visible)]}
    )


def leaks(text: str, sha: str) -> list[str]:
    return [s for s in (SECRET, "zz_secret", "mul(7, 8)", sha) if s in text]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["hook", "control"])
async def test_a_confined_agent_never_sees_the_hidden_check_that_catches_it(
    site: Site, how: str
) -> None:
    sandbox: dict[str, Any] = {"agents": True, "writable": [str(site.out)]}
    sup = build_supervisor(
        site.state,
        FixedDrafter(exam(site)),
        socket_dir=site.base / "tmux",
        default_engine=agent(site, how),
        config=fast_config(sandbox=sandbox, repair_invokes=2),
    )
    await sup.open()
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    try:
        sid = (await sup.start("make mul(a, b) return a times b", site.repo)).session_id
        [held] = sup.get(sid).session.contract.hidden_checks  # type: ignore[union-attr]
        sha = held.files[0].sha256
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=120)
        assert row.needs_you == "question", (row.state, row.error)
        prompt = row.question_prompt or ""
        assert prompt.startswith(f"the agent says the tests contradict the intent: {REASON}")

        results = {r.name: r for r in sup.get(sid).session.last_check_results}
        assert results["tests"].passed  # the special-casing fooled the visible test
        assert not results["hidden_test_zz_secret_mul"].passed  # the hidden one caught it

        out = site.out
        task, repair = (out / "task.txt").read_text(), (out / "repair.txt").read_text()
        assert "holds back 1 check you cannot see" in task and not leaks(task, sha)
        assert HELD_BACK.split(".")[0] in repair and not leaks(repair, sha)
        assert "never passes by itself" in repair and "$CORRAL_HOOK_CMD impossible" in repair
        # its own connection read its session before and after: no name, command,
        # file or output of the hidden check, only that one is held back
        for name in ("seen1.json", "seen2.json"):
            seen = (out / name).read_text()
            assert '"result"' in seen and not leaks(seen, sha), seen[:500]
        assert '"held_back"' in (out / "seen2.json").read_text()
        # its sandbox never showed the state dir: not the store, not the checkouts
        peek = (out / "peek.txt").read_text()
        assert "No such file or directory" in peek and not leaks(peek, sha), peek[:500]
        if how == "control":
            assert "recorded" in (out / "reported.json").read_text()
        worktree = Path(sup.get(sid).session.worktree or "")
        assert not leaks(
            "\n".join(p.read_text() for p in worktree.rglob("*.py") if p.is_file()), sha
        )

        await asyncio.sleep(2)
        assert not (out / "third.txt").exists()  # no repair round after the report
        await sup.respond(sid, "cancel")
        row = await sup.wait_for(sid, {S.ABANDONED, S.FAILED}, timeout=30)
        assert row.state is S.ABANDONED
        assert git(site.repo, "branch", "--list", "corral/*").strip() == ""
    finally:
        (site.out / "stop").touch()
        await services.close()
        await sup.close()
