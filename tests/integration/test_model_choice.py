"""Choosing models, through the supervisor with fake model servers on
127.0.0.1: the fallback chain and what it journals, pins kept strictly, a
pinned model's rejected key waiting at "sign-in needed", a model whose reply
was not JSON left out of the next attempt, and who wrote the work at what
cost."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from corral.supervisor.contracts.drafting import DraftingError
from corral.supervisor.contracts.model_drafter import ModelDrafter
from corral.supervisor.llm.catalog import ModelEntry
from corral.supervisor.llm.chain import ModelChain
from corral.supervisor.llm.openai_compat import OpenAICompatProvider
from corral.supervisor.llm.retry import RetryPolicy
from corral.supervisor.models import EventKind
from corral.supervisor.session import model_use
from corral.supervisor.session.journal import read_journal
from corral.supervisor.states import CoderState as S
from corral.supervisor.states import NeedsYou
from tests.conftest import SupervisorFactory, git, init_repo, run_to_gate
from tests.fakes.model_server import FakeModelServer, HttpError, Reply

VENV_BIN = str(Path(sys.executable).parent)
GOOD = json.dumps(
    {
        "description": "hello.txt says hi",
        "checks": [{"name": "hello", "command": "grep -q hi hello.txt", "timeout_secs": 10}],
    }
)
REVISED = json.dumps(
    {
        "description": "hello.txt is exactly hi",
        "checks": [
            {"name": "hello", "command": 'test "$(cat hello.txt)" = hi', "timeout_secs": 10}
        ],
    }
)
PRICE_IN, PRICE_OUT = 3.0, 15.0  # USD per million tokens
# the fake server reports 10 tokens in and 5 out for every chat answer
ONE_ANSWER_USD = (10 * PRICE_IN + 5 * PRICE_OUT) / 1_000_000


def entry(name: str, srv: FakeModelServer, *, tools: bool = True) -> ModelEntry:
    return ModelEntry(
        name=name,
        provider="openai",
        base_url=srv.openai_base_url,
        model=f"{name}-id",
        api_key_env=f"KEY_{name.upper()}",
        tools=tools,
        price_in=PRICE_IN,
        price_out=PRICE_OUT,
    )


def provider(e: ModelEntry) -> OpenAICompatProvider:
    """No retries inside one model: a failure hops at once."""
    return OpenAICompatProvider(
        e.effective_base_url, e.model, "sk-test", key_hint=e.key_var, retry=RetryPolicy(0)
    )


@pytest.fixture
def servers() -> Iterator[dict[str, FakeModelServer]]:
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(FakeModelServer())
            for name in ("slow", "denied", "broken", "good")
        }


def drafter(entries: list[ModelEntry]) -> ModelDrafter:
    chain = ModelChain(entries, factory=provider)
    return ModelDrafter(chain, path=VENV_BIN, call_timeout=1.0)


def hops(sup: object, sid: str) -> list[tuple[str, str, str, bool]]:
    path = sup.journal_path(sid)  # type: ignore[attr-defined]
    return [
        (e.data.from_, e.data.to, e.data.reason, e.data.notice)
        for e in read_journal(path, EventKind.MODEL_FALLBACK.value)
    ]


async def test_a_request_falls_back_in_order_and_every_hop_is_journaled(
    make_supervisor: SupervisorFactory, servers: dict[str, FakeModelServer], tmp_path: Path
) -> None:
    slow, denied, good = servers["slow"], servers["denied"], servers["good"]
    slow.push(Reply(GOOD, delay=3.0))
    denied.push(HttpError(401))
    good.push(Reply(GOOD))
    models = [entry("slow", slow), entry("denied", denied), entry("good", good)]
    sup = await make_supervisor(drafter=drafter(models))
    result = await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"))

    assert result.state is S.CONTRACT_PROPOSED
    assert [len(s.requests) for s in (slow, denied, good)] == [1, 1, 1]
    # every hop with its reason; only the rejected key is for the operator
    assert hops(sup, result.session_id) == [
        ("slow", "denied", "timed_out", False),
        ("denied", "good", "auth_rejected", True),
    ]
    [row] = sup.list()
    assert row.model_notice == "model denied rejected its key; good answers instead"
    assert row.model == "good" and not row.model_pinned
    # who wrote it, at what cost: only the model that answered
    session = sup.get(result.session_id).session
    assert list(session.model_use) == ["good"]
    use = session.model_use["good"]
    assert (use.tokens_in, use.tokens_out) == (10, 5)
    assert use.cost_usd == pytest.approx(ONE_ANSWER_USD)
    assert session.cost_usd == pytest.approx(ONE_ANSWER_USD)


async def test_a_pinned_model_is_kept_through_draft_repair_and_revision(
    make_supervisor: SupervisorFactory, servers: dict[str, FakeModelServer], tmp_path: Path
) -> None:
    other, pinned = servers["good"], servers["broken"]
    other.push(Reply(GOOD), Reply(REVISED))
    pinned.push(Reply("no json here"), Reply(GOOD), Reply(REVISED))
    sup = await make_supervisor(drafter=drafter([entry("other", other), entry("pin", pinned)]))
    result = await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"), model="pin")
    assert result.state is S.CONTRACT_PROPOSED
    revised = await sup.revise(result.session_id, "compare the exact bytes")
    assert revised.revised

    # the unparseable reply was repaired on the pinned model, never rotated away
    assert other.requests == []
    assert [r.body["model"] for r in pinned.requests] == ["pin-id"] * 3
    assert hops(sup, result.session_id) == []
    [row] = sup.list()
    assert row.model == "pin" and row.model_pinned


async def test_a_pinned_model_that_fails_is_not_swapped_for_another(
    make_supervisor: SupervisorFactory, servers: dict[str, FakeModelServer], tmp_path: Path
) -> None:
    pinned, other = servers["broken"], servers["good"]
    pinned.push(HttpError(500, times=None))
    other.push(Reply(GOOD))
    sup = await make_supervisor(drafter=drafter([entry("pin", pinned), entry("other", other)]))
    with pytest.raises(DraftingError, match="HTTP 500"):
        await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"), model="pin")
    assert other.requests == [] and len(pinned.requests) == 1
    [row] = sup.list()
    assert row.state is S.FAILED and row.model == "pin"


async def test_a_pinned_model_with_a_rejected_key_waits_at_sign_in_needed(
    make_supervisor: SupervisorFactory,
    servers: dict[str, FakeModelServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(model_use, "AUTH_RETRY_SECS", 0.6)
    pinned, other = servers["denied"], servers["good"]
    pinned.push(HttpError(401), Reply(GOOD))  # the key is fixed before the retry
    other.push(Reply(GOOD))
    sup = await make_supervisor(drafter=drafter([entry("pin", pinned), entry("other", other)]))
    result = await sup.start(
        "Write hi to hello.txt", init_repo(tmp_path / "repo"), model="pin", wait=False
    )
    seen: set[NeedsYou | None] = set()
    for _ in range(200):
        [row] = sup.list()
        seen.add(row.needs_you)
        if row.state is S.CONTRACT_PROPOSED:
            break
        await asyncio.sleep(0.02)
    assert NeedsYou.AUTH in seen  # it waited for a sign-in instead of failing
    assert row.state is S.CONTRACT_PROPOSED and row.needs_you is NeedsYou.CONTRACT
    assert other.requests == [] and len(pinned.requests) == 2
    [auth] = read_journal(sup.journal_path(result.session_id), EventKind.AUTH_REQUIRED.value)
    assert "KEY_PIN" in auth.data.message and "pinned" in auth.data.message


async def test_a_model_whose_reply_is_not_json_is_left_out_of_the_next_attempt(
    make_supervisor: SupervisorFactory, servers: dict[str, FakeModelServer], tmp_path: Path
) -> None:
    broken, good = servers["broken"], servers["good"]
    broken.push(Reply("I think the contract should check hello.txt."), Reply(GOOD))
    good.push(Reply(GOOD))
    sup = await make_supervisor(drafter=drafter([entry("broken", broken), entry("good", good)]))
    result = await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"))
    assert result.state is S.CONTRACT_PROPOSED
    assert (len(broken.requests), len(good.requests)) == (1, 1)  # 2 calls in total
    # the retry carried the repair request to the next model
    assert "could not be used as a contract" in good.requests[0].body["messages"][-1]["content"]
    assert hops(sup, result.session_id) == [("broken", "good", "unparseable_json", False)]


async def test_sessions_json_shows_the_model(
    make_supervisor: SupervisorFactory,
    servers: dict[str, FakeModelServer],
    tmp_path: Path,
    state_dir: Path,
) -> None:
    good = servers["good"]
    good.push(Reply(GOOD))
    sup = await make_supervisor(drafter=drafter([entry("good", good)]))
    await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"), model="good")
    await sup.close()
    from corral.supervisor.stored_board import stored_sessions

    [row] = stored_sessions(state_dir).rows
    data = json.loads(row.model_dump_json())
    assert data["model"] == "good" and data["model_pinned"] is True


async def test_the_delivered_commit_says_which_models_wrote_it_and_their_cost(
    make_supervisor: SupervisorFactory, servers: dict[str, FakeModelServer], tmp_path: Path
) -> None:
    good = servers["good"]
    good.push(Reply(GOOD))
    repo = init_repo(tmp_path / "repo")
    sup = await make_supervisor(drafter=drafter([entry("good", good)]))
    started = await sup.start("Write hi to hello.txt", repo, model="good")
    assert (await run_to_gate(sup, started.session_id)).state is S.NEEDS_APPROVAL
    session = sup.get(started.session_id).session
    assert "model good (pinned)" in session.authorship()
    result = await sup.approve(started.session_id, delivery="branch")
    message = git(repo, "log", "-1", "--format=%B", result.branch or "")
    assert "Corral-Model: good (pinned)" in message.splitlines()
    assert "Corral-Model-Use: good: 10 in / 5 out tokens, $0.0001" in message.splitlines()
    authors = next(line for line in message.splitlines() if line.startswith("Corral-Authored-By"))
    assert "good" in authors


# --- the built-in engine ------------------------------------------------------------------


def native_supervisor_parts(tmp_path: Path, chain: ModelChain) -> dict[str, object]:
    from corral.supervisor.contracts.drafting import FixedDrafter
    from corral.supervisor.engines.registry import AgentEngines
    from tests.conftest import hello_contract

    engines = AgentEngines(
        None, session_dir=lambda sid: tmp_path / "agents" / sid, provider=chain, preference=()
    )
    return {"drafter": FixedDrafter(hello_contract()), "engines": engines}


def write_hello() -> list[object]:
    from corral.supervisor.llm.base import ToolCall as Call
    from corral.supervisor.llm.base import Turn, Usage

    usage = Usage(input_tokens=1000, output_tokens=100)
    return [
        Turn(
            text="",
            tool_calls=(Call("c1", "write_file", {"path": "hello.txt", "content": "hi\n"}),),
            stop_reason="tool_use",
            usage=usage,
        ),
        Turn(text="Wrote it.", usage=usage),
    ]


async def test_the_built_in_engine_falls_back_and_records_who_wrote_it(tmp_path: Path) -> None:
    from corral.supervisor.api import Supervisor
    from corral.supervisor.llm.base import ModelError
    from tests.conftest import fast_config
    from tests.fakes.scripted_llm import ScriptedProvider

    served = {
        "down": ScriptedProvider([ModelError("the server failed (HTTP 503)", kind="server")]),
        "up": ScriptedProvider(write_hello()),
    }
    entries = [
        ModelEntry(name="down", provider="openai", model="down-id", price_in=1.0, price_out=2.0),
        ModelEntry(name="up", provider="openai", model="up-id", price_in=PRICE_IN, price_out=2.0),
    ]
    chain = ModelChain(entries, factory=lambda e: served[e.name])
    sup = Supervisor(
        tmp_path / "state", config=fast_config(), **native_supervisor_parts(tmp_path, chain)
    )
    await sup.open()
    try:
        started = await sup.start("Write hi to hello.txt", init_repo(tmp_path / "repo"))
        assert started.engine == "native"
        await sup.confirm(started.session_id)
        row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        session = sup.get(started.session_id).session
        assert session.authored_by == ["native", "up"] and session.model == "up"
        use = session.model_use["up"]
        assert (use.tokens_in, use.tokens_out) == (2000, 200)
        assert use.cost_usd == pytest.approx((2000 * PRICE_IN + 200 * 2.0) / 1_000_000)
        assert session.cost_usd == pytest.approx(use.cost_usd)
        assert hops(sup, started.session_id) == [("down", "up", "server_error", False)]
    finally:
        await sup.close()


async def test_the_built_in_engine_refuses_a_pin_that_cannot_call_tools(tmp_path: Path) -> None:
    from corral.supervisor.api import Supervisor
    from corral.supervisor.errors import CorralError
    from tests.conftest import fast_config

    entries = [
        ModelEntry(name="chat", provider="openai", model="chat-id", tools=False),
        ModelEntry(name="coder", provider="openai", model="coder-id"),
    ]
    chain = ModelChain(entries, factory=provider)
    sup = Supervisor(
        tmp_path / "state", config=fast_config(), **native_supervisor_parts(tmp_path, chain)
    )
    await sup.open()
    try:
        with pytest.raises(CorralError, match=r"'chat' cannot call tools.*\(coder\), or auto"):
            await sup.start("x", init_repo(tmp_path / "repo"), engine="native", model="chat")
        assert sup.list() == []  # refused before anything existed
    finally:
        await sup.close()


def test_doctor_lists_each_model_and_checks_it_without_printing_a_key(
    tmp_path: Path, servers: dict[str, FakeModelServer]
) -> None:
    import os
    import subprocess

    good = servers["good"]
    config = tmp_path / "config.toml"
    config.write_text(
        "[llm]\norder = ['up', 'gone']\n"
        "[[llm.models]]\nname = 'gone'\nprovider = 'openai'\nbase_url = 'http://127.0.0.1:9/v1'\n"
        "model = 'g'\ntools = false\n"
        f"[[llm.models]]\nname = 'up'\nprovider = 'anthropic'\nbase_url = '{good.url}'\n"
        "model = 'u'\napi_key_env = 'UP_KEY'\nprice_in = 3\nprice_out = 15\n"
    )
    env = dict(os.environ, CORRAL_HOME=str(tmp_path / "home"), CORRAL_CONFIG=str(config))
    env["UP_KEY"] = "sk-up-SECRET-0000"
    out = subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = out.stdout.splitlines()
    assert any(line.startswith("ok  model") and "2 in order: up, gone" in line for line in lines)
    up = next(line for line in lines if "  up " in line)
    assert up.startswith("ok ") and "key from UP_KEY: set" in up
    assert f"TCP connect to {good.url}: ok" in up and "$3/$15 per M tokens" in up
    gone = next(line for line in lines if "  gone " in line)
    assert gone.startswith("!! ") and "no tools" in gone and "failed" in gone
    assert "sk-up-SECRET" not in out.stdout + out.stderr


def test_run_refuses_a_pin_a_custom_command_cannot_take(tmp_path: Path) -> None:
    import os
    import subprocess

    repo = init_repo(tmp_path / "repo")
    env = dict(os.environ, CORRAL_HOME=str(tmp_path / "home"))
    env["CORRAL_CONFIG"] = str(tmp_path / "none.toml")
    env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
    argv = [sys.executable, "-m", "corral.tui.cli", "run", "--intent", "say hi"]
    argv += ["--engine", "custom:cat", "--model", "opus", "--repo", str(repo)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "takes no model from corral" in out.stderr and "command line" in out.stderr


async def test_the_built_in_engine_waits_for_a_pinned_models_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corral.supervisor.api import Supervisor
    from corral.supervisor.llm.base import ModelError
    from tests.conftest import fast_config
    from tests.fakes.scripted_llm import ScriptedProvider

    monkeypatch.setattr(model_use, "AUTH_RETRY_SECS", 0.5)
    rejected = ModelError("the model server rejected the API key: set KEY_PIN", kind="auth")
    served = {
        "pin": ScriptedProvider([rejected, *write_hello()]),
        "other": ScriptedProvider(write_hello()),
    }
    entries = [
        ModelEntry(name="other", provider="openai", model="other-id"),
        ModelEntry(name="pin", provider="openai", model="pin-id"),
    ]
    chain = ModelChain(entries, factory=lambda e: served[e.name])
    sup = Supervisor(
        tmp_path / "state", config=fast_config(), **native_supervisor_parts(tmp_path, chain)
    )
    await sup.open()
    try:
        started = await sup.start("Write hi", init_repo(tmp_path / "repo"), model="pin")
        await sup.confirm(started.session_id)
        seen: set[NeedsYou | None] = set()
        for _ in range(300):
            [row] = sup.list()
            seen.add(row.needs_you)
            if row.state in (S.NEEDS_APPROVAL, S.FAILED):
                break
            await asyncio.sleep(0.02)
        assert NeedsYou.AUTH in seen and row.state is S.NEEDS_APPROVAL, row.error
        assert served["other"].calls == []  # never swapped for another model
        assert sup.get(started.session_id).session.authored_by == ["native", "pin"]
    finally:
        await sup.close()


async def test_a_pinned_built_in_run_names_only_its_model_where_the_engine_is_chosen(
    tmp_path: Path,
) -> None:
    from corral.supervisor.api import Supervisor
    from tests.conftest import events_of, fast_config
    from tests.fakes.scripted_llm import ScriptedProvider

    entries = [
        ModelEntry(name="first", provider="openai", model="first-id"),
        ModelEntry(name="second", provider="openai", model="second-id"),
    ]
    chain = ModelChain(entries, factory=lambda e: ScriptedProvider(write_hello()))
    sup = Supervisor(
        tmp_path / "state", config=fast_config(), **native_supervisor_parts(tmp_path, chain)
    )
    await sup.open()
    try:
        started = await sup.start(
            "Write hi to hello.txt", init_repo(tmp_path / "repo"), engine="native", model="second"
        )
        reasons = [
            e.data.reason
            for e in events_of(sup, started.session_id)
            if e.kind is EventKind.ENGINE_SELECTED
        ]
        assert reasons == ["native → built-in engine (second, pinned: no other model)"]
    finally:
        await sup.close()
