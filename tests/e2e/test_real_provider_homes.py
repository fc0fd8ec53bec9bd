"""Real Claude Code (npm, e2e/node_modules) in two concurrent sessions against
the fake model server: each runs in its own provider home (CLAUDE_CONFIG_DIR
under the session's directory), its conversation and prompt history stay
there, the other session's never appear in it, and the operator's own
~/.claude and ~/.claude.json are not written at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, open_sup, settle
from tests.e2e.test_real_agents import MISSING, agent_env
from tests.fakes.agent_env import claude_launch
from tests.fakes.model_server import FakeModelServer, Reply

__all__ = ["agent_env"]  # the fixture, shared

pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"agent CLIs not installed: {MISSING}"),
]

TASK_A = "Write hello.txt saying hi (session alpha-7f3)"
TASK_B = "Write hello.txt saying hi (session bravo-2c9)"


def snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every file under `roots` (or the root file itself), by path."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        if root.is_file():
            out[str(root)] = root.read_bytes()
        for path in sorted(root.rglob("*")) if root.is_dir() else ():
            out[str(path)] = path.read_bytes() if path.is_file() else None
    return out


def mentions(root: Path, text: str) -> list[str]:
    """Files under `root` whose bytes hold `text`."""
    needle = text.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_two_concurrent_claude_sessions_keep_their_own_homes_and_leave_the_operators_alone(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        operator = [launch.home / ".claude", launch.home / ".claude.json"]
        before = snapshot(*operator)
        sup = await open_sup(tmp_path, "claude")
        try:
            srv.push(Reply("Looking.", delay=2), Reply("Looking.", delay=2))
            a = (await sup.start(TASK_A, repo)).session_id
            b = (await sup.start(TASK_B, repo)).session_id
            await sup.confirm(a)
            await sup.confirm(b)
            for sid in (a, b):
                await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            idents = {
                sid: await eventually(
                    lambda sid=sid: sup.get(sid).session.agent_identity, timeout=30, interval=0.2
                )
                for sid in (a, b)
            }
        finally:
            await sup.close()
            kill_tmux(tmp_path)
    homes = {sid: tmp_path / "state" / "agents" / sid / "provider-home" for sid in (a, b)}
    for sid, identity in idents.items():
        # the conversation is in the session's own home: resume finds it there
        assert (identity.transcript_path or "").startswith(str(homes[sid]) + "/"), identity
        assert Path(identity.transcript_path or "").is_file()
    assert mentions(homes[a], "alpha-7f3") and not mentions(homes[a], "bravo-2c9")
    assert mentions(homes[b], "bravo-2c9") and not mentions(homes[b], "alpha-7f3")
    assert snapshot(*operator) == before  # the operator's ~/.claude was not written
