"""Real Claude Code and Codex run by corral against the fake model server,
which reports known token counts: the board row (and `corral sessions
--json`'s fields) read back exactly what the server reported, from the
agent's own records, priced when the model has a price and "price unknown"
when not; a `[budget]` crossed marks the row."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.config import ModelPrice
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, hello_contract, init_repo, row_of, stored_session
from tests.e2e.support import AGENT_CLIS, kill_tmux, settle, until
from tests.fakes.agent_env import (
    claude_bin,
    claude_launch,
    codex_launch,
    gemini_bin,
    gemini_launch,
    missing_cli,
    missing_clis,
)
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall, Usage

MISSING = missing_clis()
pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"agent CLIs not installed: {MISSING}"),
]

HANDLED = (
    "HOME",
    "TMPDIR",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "CODEX_HOME",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
    "CLAUDE_CODE_TMPDIR",
    "CLAUDE_CODE_MAX_RETRIES",
    "CORRAL_FAKE_OPENAI_KEY",
    "LANG",
)


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    def apply(env: dict[str, str]) -> None:
        for key in HANDLED:
            if key in env:
                monkeypatch.setenv(key, env[key])
        monkeypatch.setenv("PATH", f"{claude_bin().parent}:{os.environ['PATH']}")

    yield apply


async def open_sup(tmp_path: Path, agent: str, **config: object) -> Supervisor:
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine=f"external:{agent}",
        config=fast_config(repair_invokes=0, max_session_wall_secs=120, usage_secs=0.3, **config),
    )
    await sup.open()
    return sup


FIRST = Usage(input=1200, output=340, cache_write=5000, cache_read=0)
SECOND = Usage(input=90, output=25, cache_write=0, cache_read=5000)


async def test_claude_codes_recorded_tokens_reach_the_row_and_cross_the_budget(
    tmp_path: Path, agent_env
) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)  # type: ignore[operator]
        sup = await open_sup(
            tmp_path,
            "claude",
            budget={"per_session_tokens": 10_000},
            # the fake's model, priced by the operator's [prices]
            prices={
                "claude-opus-5-5": ModelPrice(input=3, output=15, cache_write=3.75, cache_read=0.3)
            },
        )
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                    usage=FIRST,
                ),
                Reply("Wrote hello.txt.", usage=SECOND),
            )
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            models = {r.body.get("model") for r in srv.turn_requests}

            def read_back():  # type: ignore[no-untyped-def]
                row = row_of(sup, sid)
                return row if row.tokens_out == FIRST.output + SECOND.output else None

            row = await until(sup, sid, "the transcript's usage on the row", read_back, 20)
            assert row.tokens_in == FIRST.input + SECOND.input
            assert row.tokens_cache_write == FIRST.cache_write + SECOND.cache_write
            assert row.tokens_cache_read == FIRST.cache_read + SECOND.cache_read
            # priced by the operator's [prices]: the fake's model has no list price
            assert models == {"claude-opus-5-5"}
            expected = (
                (FIRST.input + SECOND.input) * 3
                + (FIRST.output + SECOND.output) * 15
                + (FIRST.cache_write + SECOND.cache_write) * 3.75
                + (FIRST.cache_read + SECOND.cache_read) * 0.3
            ) / 1_000_000
            assert row.cost_usd == pytest.approx(expected)
            assert not row.price_unknown
            # 11,655 tokens against a 10,000 budget
            assert row.over_budget == "over budget: 11,655 of 10,000 tokens"
            stored = stored_session(sup.state_dir, sid)
            assert stored is not None and stored.over_budget == row.over_budget
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_codexs_rollout_token_counts_reach_the_row_with_price_unknown(
    tmp_path: Path, agent_env
) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    first = Usage(input=700, output=120)
    second = Usage(input=50, output=30, cache_read=600)
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        agent_env(launch.env)  # type: ignore[operator]
        sup = await open_sup(tmp_path, "codex", budget={"per_session_usd": 0.01})
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            srv.push(
                Reply("Writing the file.", [run], usage=first),
                Reply("Wrote hello.txt.", usage=second),
            )
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error

            def read_back():  # type: ignore[no-untyped-def]
                row = row_of(sup, sid)
                return row if row.tokens_out == first.output + second.output else None

            row = await until(sup, sid, "the rollout's token count on the row", read_back, 20)
            assert row.tokens_in == first.input + second.input
            assert row.tokens_cache_read == second.cache_read
            assert row.tokens_cache_write == 0
            # the fake's model has no price: tokens only, never a made-up cost,
            # and a money budget cannot be judged
            assert row.cost_usd is None and row.price_unknown
            assert row.over_budget is None
            assert sup.get(sid).session.unpriced_models == ["gpt-fake"]
        finally:
            await sup.close()
            kill_tmux(tmp_path)


NO_GEMINI = missing_cli(gemini_bin(), "npm ci --prefix e2e")


@pytest.mark.skipif(NO_GEMINI is not None, reason=f"Gemini CLI: {NO_GEMINI}")
async def test_gemini_clis_chat_record_tokens_reach_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    first = Usage(input=800, output=60)
    second = Usage(input=40, output=20, cache_read=700)
    with FakeModelServer([]) as srv:
        launch = gemini_launch(tmp_path / "gemini", srv.url, repo, None, approval_mode="auto_edit")
        for key, value in launch.env.items():
            if key not in ("PATH", "TERM", "SHELL", "USER"):
                monkeypatch.setenv(key, value)
        bin_dir = tmp_path / "agent-bin"
        bin_dir.mkdir()
        (bin_dir / Path(launch.argv[0]).name).symlink_to(launch.argv[0])
        monkeypatch.setenv("PATH", f"{bin_dir}:{launch.env['PATH']}")
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing it.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                    usage=first,
                ),
                Reply("Wrote hello.txt.", usage=second),
            )
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error

            def read_back():  # type: ignore[no-untyped-def]
                row = row_of(sup, sid)
                return row if row.tokens_out == first.output + second.output else None

            row = await until(sup, sid, "the chat record's tokens on the row", read_back, 20)
            assert row.tokens_in == first.input + second.input
            assert row.tokens_cache_read == second.cache_read
            assert row.price_unknown  # the fake's model has no list price
        finally:
            await sup.close()
            kill_tmux(tmp_path)
