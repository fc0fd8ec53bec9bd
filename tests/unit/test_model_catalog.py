"""Several models in the config file, a pin checked against its engine, and
each agent CLI given the pinned model by its own flag."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from corral.supervisor.agents.base import AgentUnavailable, LaunchPlan
from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.engines.pins import resolve_pin
from corral.supervisor.errors import ConfigError, CorralError
from corral.supervisor.events import ModelFallbackData, parse_event
from corral.supervisor.llm.catalog import check_entry, load_catalog
from corral.supervisor.llm.chain import ModelChain
from corral.supervisor.models import CoderSession

CONFIG = """
[llm]
order = ["big", "local"]

[[llm.models]]
name = "local"
provider = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5-coder:14b"
tools = false

[[llm.models]]
name = "big"
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "BIG_KEY"
price_in = 3
price_out = 15
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_models_come_in_the_configured_order(tmp_path: Path) -> None:
    catalog = load_catalog({}, write(tmp_path, CONFIG))
    assert catalog.names == ["big", "local"]
    big = catalog.get("big")
    assert big is not None and big.key_var == "BIG_KEY" and big.tools
    assert catalog.get("local") is not None and not catalog.get("local").tools  # type: ignore[union-attr]


def test_the_single_llm_table_is_a_one_entry_list(tmp_path: Path) -> None:
    path = write(tmp_path, '[llm]\nprovider = "openai"\nmodel = "m1"\n')
    catalog = load_catalog({}, path)
    assert catalog.names == ["m1"] and catalog.entries[0].provider == "openai"
    env = {"CORRAL_LLM_PROVIDER": "anthropic", "CORRAL_LLM_MODEL": "m2"}
    assert load_catalog(env, tmp_path / "absent.toml").names == ["m2"]
    assert load_catalog({}, tmp_path / "absent.toml").entries == ()


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ('[[llm.models]]\nname = "big"\nprovider = "openai"\nmodel = "x"\n', "used twice"),
        ('[[llm.models]]\nname = "k"\nprovider = "openai"\nmodel = "x"\napi_key = "s"\n', "key"),
        ('[[llm.models]]\nname = "w"\nprovider = "bard"\nmodel = "x"\n', "unknown provider"),
    ],
)
def test_a_broken_entry_is_named(tmp_path: Path, extra: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_catalog({}, write(tmp_path, CONFIG + extra))


def test_doctor_checks_reach_by_tcp_connect_and_never_prints_the_key(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    text = CONFIG.replace("http://127.0.0.1:11434/v1", f"http://127.0.0.1:{port}/v1")
    catalog = load_catalog({}, write(tmp_path, text))
    try:
        local = check_entry(catalog.get("local"), {})  # type: ignore[arg-type]
        assert local.ok and local.reach == f"TCP connect to http://127.0.0.1:{port}/v1: ok"
    finally:
        listener.close()
    local = check_entry(catalog.get("local"), {})  # type: ignore[arg-type]
    assert not local.ok and "failed" in local.reach
    big = check_entry(catalog.get("big"), {"BIG_KEY": "sk-secret-123"}, timeout=0.2)  # type: ignore[arg-type]
    assert big.key == "key from BIG_KEY: set" and "sk-secret-123" not in repr(big)


def chain(tmp_path: Path) -> ModelChain:
    return ModelChain.from_catalog(load_catalog({}, write(tmp_path, CONFIG)))


def test_the_built_in_engine_refuses_a_model_without_tools(tmp_path: Path) -> None:
    with pytest.raises(CorralError, match=r"'local' cannot call tools.*\(big\), or auto"):
        resolve_pin("local", "native", chain(tmp_path))
    with pytest.raises(CorralError, match=r"unknown model 'gpt-9'.*big, local"):
        resolve_pin("gpt-9", "native", chain(tmp_path))
    assert resolve_pin("auto", "native", chain(tmp_path)) is None


def test_an_agent_gets_the_entry_model_id_or_a_name_it_knows(tmp_path: Path) -> None:
    pin = resolve_pin("big", "external:claude", chain(tmp_path))
    assert pin is not None and pin.model_id == "claude-sonnet-4-5" and pin.entry is not None
    own = resolve_pin("opus", "external:claude", chain(tmp_path))
    assert own is not None and own.model_id == "opus" and own.entry is None
    with pytest.raises(CorralError, match="takes no model from corral"):
        resolve_pin("big", "external:custom:my-agent --x", chain(tmp_path))


@pytest.mark.parametrize(
    ("agent", "flag"),
    [("claude", "--model"), ("codex", "-m"), ("gemini", "-m"), ("aider", "--model")],
)
def test_each_agent_takes_the_pin_by_its_own_flag(agent: str, flag: str) -> None:
    plan = LaunchPlan(argv=[f"/bin/{agent}", "--other", "the task"])
    argv = profile_for(agent).with_model(plan, "m-1").argv
    assert argv == [f"/bin/{agent}", flag, "m-1", "--other", "the task"]
    assert profile_for(agent).with_model(plan, None).argv == plan.argv


def test_a_custom_command_says_it_cannot_take_a_model() -> None:
    plan = LaunchPlan(argv=["my-agent"])
    with pytest.raises(AgentUnavailable, match="takes no model from corral"):
        profile_for("custom:my-agent").with_model(plan, "m-1")


def test_sessions_and_journals_written_before_model_choice_still_load() -> None:
    old = {
        "id": "s1",
        "repo": "/r",
        "intent": "x",
        "state": "merged",
        "model": None,
        "authored_by": ["claude"],
        "cost_usd": None,
    }
    session = CoderSession.model_validate_json(json.dumps(old))
    assert session.model is None and session.model_use == {} and not session.model_pinned
    row = {
        "seq": 3,
        "ts": 1.0,
        "kind": "model_fallback",
        "data": {"from": "a", "to": "b", "reason": "x"},
    }
    event = parse_event({**row, "session_id": "s1"})
    assert (
        isinstance(event.data, ModelFallbackData) and event.data.notice and event.data.detail == ""
    )


def test_a_single_model_without_a_name_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a model name: set CORRAL_LLM_MODEL"):
        load_catalog({"CORRAL_LLM_PROVIDER": "openai"}, tmp_path / "absent.toml")


def test_a_pinned_drafting_request_is_strict_and_names_only_the_pin(tmp_path: Path) -> None:
    from corral.supervisor.contracts.drafting import DraftRequest
    from corral.supervisor.contracts.model_drafter import ModelDrafter

    drafter = ModelDrafter(chain(tmp_path))
    pinned = drafter._for(DraftRequest("s", "x", tmp_path, None, model="local"))
    assert isinstance(pinned, ModelChain) and pinned.strict and pinned.names == ["local"]
    free = drafter._for(DraftRequest("s", "x", tmp_path, None))
    assert isinstance(free, ModelChain) and not free.strict and free.names == ["big", "local"]
    # a name only an agent knows leaves drafting on the default order
    agents = drafter._for(DraftRequest("s", "x", tmp_path, None, model="opus"))
    assert isinstance(agents, ModelChain) and not agents.strict


async def test_a_model_that_failed_a_session_is_skipped_by_its_later_components(
    tmp_path: Path,
) -> None:
    """Drafting hops from a failing model; the built-in engine's view of the
    same session goes to the next model at once, not to the failed one again."""
    from corral.supervisor.llm.base import ModelError, Turn
    from corral.supervisor.llm.catalog import ModelEntry
    from corral.supervisor.llm.chain import Hop, Ledger

    asked: list[str] = []

    class Fake:
        name = "fake"

        def __init__(self, entry: ModelEntry) -> None:
            self.model = entry.model
            self.entry = entry.name

        async def complete(self, *_a: object, **_k: object) -> Turn:
            asked.append(self.entry)
            if self.entry == "big":
                raise ModelError("HTTP 500", kind="server")
            return Turn(text="ok")

    catalog = load_catalog({}, write(tmp_path, CONFIG))
    chain = ModelChain(catalog.entries, factory=Fake)  # type: ignore[arg-type]
    hops: list[Hop] = []
    ledger = Ledger()
    drafting = chain.view(on_hop=hops.append, ledger=ledger)
    await drafting.complete([])
    engine = chain.view(on_hop=hops.append, ledger=ledger)
    await engine.complete([])
    await engine.complete([])
    assert asked == ["big", "local", "local", "local"]
    assert [(h.from_, h.reason) for h in hops] == [("big", "server_error")]
    other = chain.view(ledger=Ledger())  # another session still starts with the first
    await other.complete([])
    assert asked[-2:] == ["big", "local"]
