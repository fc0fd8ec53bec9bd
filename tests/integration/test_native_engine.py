"""The built-in engine against a scripted model in a real git worktree: tools,
governance, budgets, questions, guidance, model errors and policy files.

The fake provider below serves a list of turns (or errors, or callables that
run while the "model" thinks) and records every request it received.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from corral.supervisor.engines.base import EngineOutcome, RunContext
from corral.supervisor.engines.native import NativeEngine
from corral.supervisor.errors import CorralError
from corral.supervisor.events import (
    BlockedData,
    EventData,
    IterationStartedData,
    ModelUsageData,
    PlanTextData,
    ToolCallData,
    ToolDeniedData,
    ToolResultData,
)
from corral.supervisor.llm.base import Message, ModelError, ToolCall, Turn, Usage
from corral.supervisor.models import CheckResult
from corral.supervisor.states import LoopFailure
from tests.conftest import git, init_repo
from tests.fakes.procs import running_with_arg
from tests.fakes.scripted import contract

# --- a scripted model --------------------------------------------------------


@dataclass
class Request:
    messages: list[Message]
    tools: list[str]
    timeout: float


Step = Turn | BaseException | Callable[[], Any]


class FakeProvider:
    name = "fake"
    model = "fake-1"

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.calls: list[Request] = []

    async def complete(
        self,
        messages,  # type: ignore[no-untyped-def]
        tools=(),
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        on_delta=None,
        timeout: float = 120.0,
    ) -> Turn:
        self.calls.append(Request(list(messages), [t.name for t in tools], timeout))
        if not self.steps:
            raise AssertionError("the fake model has no more turns")
        step = self.steps.pop(0)
        if callable(step) and not isinstance(step, BaseException):
            step = step()
            if inspect.isawaitable(step):
                step = await step
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, Turn)
        return step


_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call-{next(_ids)}", name=name, arguments=arguments)


def turn(*calls: ToolCall, text: str = "", usage: Usage | None = None) -> Turn:
    return Turn(
        text=text,
        tool_calls=calls,
        stop_reason="tool_use" if calls else "end_turn",
        usage=usage or Usage(),
    )


def done(text: str = "Done.") -> Turn:
    return turn(text=text)


def tool_result(provider: FakeProvider, tool_call: ToolCall) -> str:
    """What the model was told about `tool_call` (from any later request)."""
    for request in provider.calls:
        for message in request.messages:
            if message.role == "tool" and message.tool_call_id == tool_call.id:
                return message.content
    raise AssertionError(f"the model never received a result for {tool_call.name}")


# --- a worktree and a context ------------------------------------------------


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "app.py").write_text("def greet():\n    return 'hello'\n", encoding="utf-8")
    (repo / "notes.txt").write_text("x = 1\ny = 2\nx = 1\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(wt), "HEAD")
    return wt


D = TypeVar("D", bound=EventData)


@dataclass
class Recorder:
    events: list[EventData] = field(default_factory=list)
    guidance: list[str] = field(default_factory=list)
    asked: list[tuple[str, list[str]]] = field(default_factory=list)
    withdrawn: int = 0

    def of(self, payload: type[D]) -> list[D]:
        return [data for data in self.events if isinstance(data, payload)]


def make_ctx(
    worktree: Path,
    *,
    round_: int = 1,
    failing: list[CheckResult] | None = None,
    max_iterations: int = 8,
    deadline: float | None = None,
    ask: Callable[[str, list[str]], Awaitable[str]] | None = None,
    session_id: str = "sess-0001",
) -> tuple[RunContext, Recorder]:
    rec = Recorder()

    async def default_ask(prompt: str, options: list[str]) -> str:
        return "yes"

    async def asking(prompt: str, options: list[str]) -> str:
        rec.asked.append((prompt, options))
        return await (ask or default_ask)(prompt, options)

    def take() -> list[str]:
        out = list(rec.guidance)
        rec.guidance.clear()
        return out

    def withdraw() -> None:
        rec.withdrawn += 1

    ctx = RunContext(
        session_id=session_id,
        intent="Make greet() say hi",
        contract=contract(("greets", "grep -q hi app.py"), description="greet says hi"),
        worktree=worktree,
        max_iterations=max_iterations,
        deadline=deadline,
        round=round_,
        failing_checks=failing or [],
        emit=rec.events.append,
        ask_user=asking,
        take_guidance=take,
        iteration_started=lambda n: rec.events.append(
            IterationStartedData(n=n, max=max_iterations)
        ),
        withdraw_question=withdraw,
    )
    return ctx, rec


def engine(provider: FakeProvider, tmp_path: Path, **kw: Any) -> NativeEngine:
    # never read the real ~/.config/corral/policy.toml from a test
    return NativeEngine(provider, global_policy=tmp_path / "no-global-policy.toml", **kw)


async def run(
    provider: FakeProvider, worktree: Path, **ctx_kw: Any
) -> tuple[EngineOutcome, Recorder]:
    ctx, rec = make_ctx(worktree, **ctx_kw)
    outcome = await engine(provider, worktree.parent).run(ctx)
    return outcome, rec


# --- the loop ------------------------------------------------------------------


async def test_a_task_reads_edits_and_ends_with_events_and_summed_usage(worktree: Path) -> None:
    read = call("read_file", path="app.py")
    edit = call("edit_file", path="app.py", old_text="'hello'", new_text="'hi'")
    provider = FakeProvider(
        turn(read, text="Looking at app.py.", usage=Usage(100, 10, 0.01)),
        turn(edit, usage=Usage(150, 20, 0.02)),
        turn(text="greet() now says hi.", usage=Usage(200, 5, None)),
    )
    outcome, rec = await run(provider, worktree)

    assert outcome.failure is None and outcome.nomination is None
    assert outcome.iterations == 3
    assert outcome.authored_by == ["native"]
    assert outcome.cost_usd == pytest.approx(0.03)
    assert (worktree / "app.py").read_text() == "def greet():\n    return 'hi'\n"
    assert "return 'hello'" in tool_result(provider, read)
    assert "edited app.py at line 2" in tool_result(provider, edit)

    system = provider.calls[0].messages[0]
    assert system.role == "system"
    assert "Make greet() say hi" in system.content
    assert "grep -q hi app.py" in system.content
    assert "you cannot declare success" in system.content
    assert "Do not commit, push" in system.content
    assert set(provider.calls[0].tools) == {
        "read_file",
        "list_dir",
        "find_files",
        "grep_files",
        "write_file",
        "edit_file",
        "shell",
        "ask_user",
        "report_no_change",
        "report_impossible",
    }

    assert rec.of(IterationStartedData) == [IterationStartedData(n=i, max=8) for i in (1, 2, 3)]
    calls = rec.of(ToolCallData)
    assert ToolCallData.with_args("read_file", {"path": "app.py"}) in calls
    assert any(e.tool == "edit_file" and e.args.get("old_text") == "<7 chars>" for e in calls)
    assert any(
        e.tool == "edit_file" and "edited app.py" in e.result for e in rec.of(ToolResultData)
    )
    usage = rec.of(ModelUsageData)
    assert [u.tokens_in for u in usage] == [100, 250, 450]
    assert usage[-1].tokens_out == 35
    assert usage[-1].cost_usd == pytest.approx(0.03)
    assert PlanTextData(text="greet() now says hi.") in rec.of(PlanTextData)


async def test_write_file_refuses_an_existing_file_that_was_not_read(worktree: Path) -> None:
    blind = call("write_file", path="app.py", content="oops\n")
    fresh = call("write_file", path="pkg/new.py", content="x = 1\n")
    read = call("read_file", path="app.py")
    informed = call("write_file", path="app.py", content="def greet():\n    return 'hi'\n")
    provider = FakeProvider(turn(blind, fresh), turn(read), turn(informed), done())
    outcome, _rec = await run(provider, worktree)

    assert outcome.failure is None
    refusal = tool_result(provider, blind)
    assert refusal.startswith("error:")
    assert "not read it in this run" in refusal and "read_file it first" in refusal
    assert "created pkg/new.py" in tool_result(provider, fresh)
    assert (worktree / "pkg" / "new.py").read_text() == "x = 1\n"
    assert "replaced app.py" in tool_result(provider, informed)
    assert "'hi'" in (worktree / "app.py").read_text()


async def test_edit_file_needs_a_unique_existing_match(worktree: Path) -> None:
    twice = call("edit_file", path="notes.txt", old_text="x = 1", new_text="x = 3")
    missing = call("edit_file", path="notes.txt", old_text="z = 9", new_text="z = 0")
    no_file = call("edit_file", path="nope.txt", old_text="a", new_text="b")
    provider = FakeProvider(turn(twice, missing, no_file), done())
    await run(provider, worktree)

    assert "not unique: it appears 2 times" in tool_result(provider, twice)
    assert "was not found in notes.txt" in tool_result(provider, missing)
    assert "does not exist" in tool_result(provider, no_file)
    assert (worktree / "notes.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


async def test_paths_that_escape_the_worktree_are_refused(worktree: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    (worktree / "link").symlink_to(secret)
    (worktree / "linkdir").symlink_to(tmp_path)
    dotdot = call("read_file", path="../repo/app.py")
    absolute = call("read_file", path=str(secret))
    via_link = call("read_file", path="link")
    write_out = call("write_file", path="linkdir/planted.txt", content="x")
    listing = call("list_dir", path="..")
    provider = FakeProvider(turn(dotdot, absolute, via_link, write_out, listing), done())
    _outcome, rec = await run(provider, worktree)

    for tool_call in (dotdot, absolute, listing):
        assert "outside the worktree" in tool_result(provider, tool_call)
    for tool_call in (via_link, write_out):
        assert "symlink" in tool_result(provider, tool_call)
    for tool_call in (dotdot, absolute, via_link, write_out, listing):
        assert tool_result(provider, tool_call).startswith("denied by corral policy")
        assert "TOP SECRET" not in tool_result(provider, tool_call)
    assert not (tmp_path / "planted.txt").exists()
    denied = rec.of(ToolDeniedData)
    assert len(denied) == 5


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        ("git push origin HEAD:main", "git push"),
        ("sudo ls /root", "sudo"),
        ("cat ~/.ssh/id_rsa", "~/.ssh"),
        ("rm -rf /tmp/x", "/tmp/x"),
    ],
)
async def test_dangerous_shell_commands_are_denied_with_the_reason(
    worktree: Path, command: str, needle: str
) -> None:
    shell = call("shell", command=command)
    provider = FakeProvider(turn(shell), done())
    _outcome, rec = await run(provider, worktree)

    result = tool_result(provider, shell)
    assert result.startswith("denied by corral policy")
    assert needle in result
    (event,) = [e for e in rec.of(ToolDeniedData) if e.tool == "shell"]
    assert event.args["command"] == command
    assert needle in event.denied


async def test_a_policy_denial_is_a_typed_blocked_notice_as_from_any_agent(
    worktree: Path,
) -> None:
    """The built-in engine says a denial the way an ACP agent's is said: a
    `blocked` event with what, why, and by whom (corral's policy)."""
    shell = call("shell", command="sudo ls /root")
    provider = FakeProvider(turn(shell), done())
    _outcome, rec = await run(provider, worktree)
    [blocked] = rec.of(BlockedData)
    assert blocked.by == "policy" and blocked.what == "shell sudo ls /root"
    assert "sudo" in blocked.why


async def test_shell_runs_in_the_worktree_with_a_scrubbed_marked_environment(
    worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "sekrit-value")
    shell = call(
        "shell",
        command='pwd; echo "chain=$CORRAL_INVOKED_BY"; echo "token=${DEPLOY_TOKEN:-none}"; '
        "git config credential.helper; echo hi > out.txt",
    )
    provider = FakeProvider(turn(shell), done())
    outcome, rec = await run(provider, worktree)

    result = tool_result(provider, shell)
    assert result.startswith("exit code 0")
    assert os.path.realpath(worktree) in result
    assert "chain=" in result and "engine:native" in result
    assert "token=none" in result and "sekrit" not in result
    assert (worktree / "out.txt").read_text() == "hi\n"
    assert outcome.failure is None
    assert any(e.result.startswith("exit 0") for e in rec.of(ToolResultData))


def _running_with_arg(arg: str) -> bool:
    return bool(running_with_arg(arg))


async def test_a_shell_timeout_kills_the_whole_process_group(worktree: Path) -> None:
    # the child is found by its unique argument (inside the sandbox `$!` is a
    # pid of the sandbox's own namespace)
    marker = f"{300 + os.getpid() % 1000}.{time.time_ns() % 10**6}"
    shell = call("shell", command=f"sleep {marker} & sleep 300", timeout_secs=1)
    provider = FakeProvider(turn(shell), done())
    started = time.monotonic()
    await run(provider, worktree)

    assert time.monotonic() - started < 20
    assert "timed out after 1s" in tool_result(provider, shell)
    for _ in range(50):
        if not _running_with_arg(marker):
            break
        await asyncio.sleep(0.05)
    assert not _running_with_arg(marker), "the background child outlived the shell tool's timeout"


async def test_ask_user_parks_on_the_gate_and_returns_the_answer(worktree: Path) -> None:
    async def operator(prompt: str, options: list[str]) -> str:
        return "blue"

    question = call("ask_user", prompt="Which colour?", options=["red", "blue"])
    provider = FakeProvider(turn(question), done())
    ctx, rec = make_ctx(worktree, ask=operator)
    outcome = await engine(provider, worktree.parent).run(ctx)

    assert outcome.failure is None
    assert rec.asked == [("Which colour?", ["red", "blue"])]
    assert tool_result(provider, question) == "blue"


async def test_an_expired_question_hands_the_sentence_to_the_model(worktree: Path) -> None:
    async def nobody(prompt: str, options: list[str]) -> str:
        raise CorralError("no user response within 600s; proceeding without it")

    question = call("ask_user", prompt="Anyone?")
    provider = FakeProvider(turn(question), done())
    ctx, _rec = make_ctx(worktree, ask=nobody)
    await engine(provider, worktree.parent).run(ctx)

    assert tool_result(provider, question) == "no user response within 600s; proceeding without it"


async def test_guidance_queued_during_a_turn_reaches_the_model_next_round(worktree: Path) -> None:
    ctx, rec = make_ctx(worktree)

    def thinking_then_listing() -> Turn:
        rec.guidance.append("use tabs, not spaces")
        return turn(call("list_dir"))

    def finishing_while_more_guidance_arrives() -> Turn:
        rec.guidance.append("also update the README")
        return done("finished")

    provider = FakeProvider(thinking_then_listing, finishing_while_more_guidance_arrives, done())
    outcome = await engine(provider, worktree.parent).run(ctx)

    assert outcome.failure is None
    assert outcome.iterations == 3
    second = provider.calls[1].messages[-1]
    assert second.role == "user" and "use tabs, not spaces" in second.content
    assert "Guidance from the operator" in second.content
    third = provider.calls[2].messages[-1]
    assert third.role == "user" and "also update the README" in third.content
    texts = [e.text for e in rec.of(PlanTextData)]
    assert any("use tabs, not spaces" in t for t in texts)


# --- budgets and model errors --------------------------------------------------


async def test_max_iterations_cuts_the_run_as_budget_exhausted(worktree: Path) -> None:
    provider = FakeProvider(*[turn(call("list_dir")) for _ in range(5)])
    outcome, rec = await run(provider, worktree, max_iterations=2)

    assert outcome.failure is LoopFailure.BUDGET_EXHAUSTED
    assert "all 2 iterations" in (outcome.error or "")
    assert outcome.iterations == 2
    assert len(provider.calls) == 2
    assert [e.n for e in rec.of(IterationStartedData)] == [1, 2]


async def test_the_deadline_cuts_a_model_call_with_the_remaining_time(worktree: Path) -> None:
    async def slow_model() -> Turn:
        await asyncio.sleep(30)
        return done()

    provider = FakeProvider(slow_model)
    started = time.monotonic()
    outcome, _rec = await run(provider, worktree, deadline=time.monotonic() + 0.4)

    assert time.monotonic() - started < 5
    assert outcome.failure is LoopFailure.BUDGET_EXHAUSTED
    assert "wall-clock budget" in (outcome.error or "")
    assert 0 < provider.calls[0].timeout <= 0.4


async def test_a_passed_deadline_ends_before_another_model_call(worktree: Path) -> None:
    provider = FakeProvider(done())
    outcome, _rec = await run(provider, worktree, deadline=time.monotonic() - 1)

    assert outcome.failure is LoopFailure.BUDGET_EXHAUSTED
    assert provider.calls == []


@pytest.mark.parametrize(
    ("kind", "failure"),
    [
        ("auth", LoopFailure.NEEDS_AUTH),
        ("unavailable", LoopFailure.ENGINE_UNAVAILABLE),
        ("server", LoopFailure.INFRASTRUCTURE),
        ("bad_request", LoopFailure.INFRASTRUCTURE),
    ],
)
async def test_model_errors_map_to_typed_failures(
    worktree: Path, kind: str, failure: LoopFailure
) -> None:
    sentence = f"the model said no ({kind}); set OPENAI_API_KEY"
    provider = FakeProvider(ModelError(sentence, kind=kind))  # type: ignore[arg-type]
    outcome, _rec = await run(provider, worktree)

    assert outcome.failure is failure
    assert sentence in (outcome.error or "")
    if kind == "auth":
        assert outcome.error == sentence


# --- findings -----------------------------------------------------------------


async def test_report_no_change_ends_the_run_with_a_nomination(worktree: Path) -> None:
    nominate = call(
        "report_no_change",
        kind="deliberate_behavior",
        summary="greet() says hello on purpose",
        evidence="README documents it",
    )
    provider = FakeProvider(turn(call("read_file", path="app.py")), turn(nominate))
    outcome, _rec = await run(provider, worktree)

    assert outcome.failure is None
    assert outcome.nomination is not None
    assert outcome.nomination.kind == "deliberate_behavior"
    assert outcome.nomination.summary == "greet() says hello on purpose"
    assert outcome.nomination.evidence == "README documents it"
    assert outcome.iterations == 2


async def test_report_no_change_after_an_edit_is_refused_in_the_tool(worktree: Path) -> None:
    edit = call("edit_file", path="app.py", old_text="hello", new_text="hi")
    nominate = call("report_no_change", summary="nothing to do", evidence="none")
    provider = FakeProvider(turn(edit), turn(nominate), done())
    outcome, _rec = await run(provider, worktree)

    assert outcome.nomination is None
    assert outcome.failure is None
    refusal = tool_result(provider, nominate)
    assert "already made a successful edit" in refusal
    assert "edited app.py" in refusal


async def test_a_shell_command_that_changed_the_tree_counts_as_an_edit(worktree: Path) -> None:
    shell = call("shell", command="echo more >> notes.txt")
    nominate = call("report_no_change", summary="nothing to do", evidence="none")
    provider = FakeProvider(turn(shell), turn(nominate), done())
    outcome, _rec = await run(provider, worktree)

    assert outcome.nomination is None
    assert "already made a successful edit" in tool_result(provider, nominate)


# --- repair rounds ------------------------------------------------------------


async def test_a_repair_round_starts_with_the_failing_checks(worktree: Path) -> None:
    failing = [
        CheckResult(
            name="greets",
            passed=False,
            exit_code=1,
            output_tail="line 1\nAssertionError: expected hi",
        )
    ]
    provider = FakeProvider(done())
    await run(provider, worktree, round_=2, failing=failing)

    first_user = provider.calls[0].messages[1]
    assert first_user.role == "user"
    assert first_user.content.startswith("corral re-ran the contract and these checks fail")
    assert "greets (exit code 1)" in first_user.content
    assert "AssertionError: expected hi" in first_user.content


# --- operator policy files ----------------------------------------------------


async def test_a_worktree_policy_file_narrows_an_allowed_command(worktree: Path) -> None:
    policies = worktree / ".corral" / "policies"
    policies.mkdir(parents=True)
    (policies / "team.toml").write_text('[deny]\ncommands = ["^echo hello"]\n', encoding="utf-8")
    narrowed = call("shell", command="echo hello")
    allowed = call("shell", command="echo goodbye")
    provider = FakeProvider(turn(narrowed, allowed), done())
    _outcome, rec = await run(provider, worktree)

    result = tool_result(provider, narrowed)
    assert result.startswith("denied by corral policy (operator policy)")
    assert "team.toml" in result and "^echo hello" in result
    assert "goodbye" in tool_result(provider, allowed)
    assert any("team.toml" in e.denied for e in rec.of(ToolDeniedData))


async def test_a_global_policy_file_can_take_tools_away(worktree: Path, tmp_path: Path) -> None:
    global_file = tmp_path / "policy.toml"
    global_file.write_text('[deny]\ntools = ["shell"]\npaths = ["notes.txt"]\n', encoding="utf-8")
    shell = call("shell", command="ls")
    read = call("read_file", path="notes.txt")
    provider = FakeProvider(turn(shell, read), done())
    ctx, _rec = make_ctx(worktree)
    await NativeEngine(provider, global_policy=global_file).run(ctx)

    assert "shell" not in provider.calls[0].tools
    assert "no tool named 'shell'" in tool_result(provider, shell)
    assert "denies access to notes.txt" in tool_result(provider, read)


async def test_an_unparseable_policy_file_fails_before_any_model_call(worktree: Path) -> None:
    policies = worktree / ".corral" / "policies"
    policies.mkdir(parents=True)
    broken = policies / "broken.toml"
    broken.write_text("[deny\ncommands = [", encoding="utf-8")
    provider = FakeProvider(done())
    outcome, _rec = await run(provider, worktree)

    assert outcome.failure is LoopFailure.CONFIGURATION
    assert (outcome.error or "").startswith(f"{broken}: ")
    assert provider.calls == []


async def test_policy_is_frozen_for_the_sessions_later_rounds(worktree: Path) -> None:
    policies = worktree / ".corral" / "policies"
    policies.mkdir(parents=True)
    rules = policies / "rules.toml"
    rules.write_text('[deny]\ncommands = ["^echo hello"]\n', encoding="utf-8")
    first = call("shell", command="echo hello")
    again = call("shell", command="echo hello")
    provider = FakeProvider(turn(first), done(), turn(again), done())
    native = engine(provider, worktree.parent)
    ctx1, _ = make_ctx(worktree)
    assert (await native.run(ctx1)).failure is None
    rules.write_text("not toml at all [", encoding="utf-8")  # edited mid-session: ignored
    ctx2, _ = make_ctx(worktree, round_=2)
    outcome = await native.run(ctx2)

    assert outcome.failure is None
    assert tool_result(provider, again).startswith("denied by corral policy (operator policy)")


# --- reading tools --------------------------------------------------------------


async def test_reading_tools_list_find_and_grep_inside_the_worktree(worktree: Path) -> None:
    (worktree / "src" / "deep").mkdir(parents=True)
    (worktree / "src" / "deep" / "mod.py").write_text("VALUE = 42\n", encoding="utf-8")
    (worktree / ".gitignore").write_text("build/\n", encoding="utf-8")
    (worktree / "build").mkdir()
    (worktree / "build" / "gen.py").write_text("VALUE = 0\n", encoding="utf-8")
    listing = call("list_dir")
    found = call("find_files", pattern="*.py")
    found_deep = call("find_files", pattern="src/**/*.py")
    grep = call("grep_files", pattern=r"VALUE\s*=", glob="*.py")
    ranged = call("read_file", path="notes.txt", start_line=2, end_line=2)
    provider = FakeProvider(turn(listing, found, found_deep, grep, ranged), done())
    await run(provider, worktree)

    entries = tool_result(provider, listing).splitlines()
    assert "src/" in entries and "app.py" in entries and ".git" not in entries
    assert tool_result(provider, found).splitlines() == ["app.py", "src/deep/mod.py"]
    assert tool_result(provider, found_deep).splitlines() == ["src/deep/mod.py"]
    assert tool_result(provider, grep).splitlines() == ["src/deep/mod.py:1: VALUE = 42"]
    assert tool_result(provider, ranged) == "     2\ty = 2"


async def test_guidance_after_the_last_allowed_turn_does_not_fail_a_finished_run(
    worktree: Path,
) -> None:
    ctx, rec = make_ctx(worktree, max_iterations=1)

    def finishing() -> Turn:
        rec.guidance.append("too late")
        return done()

    provider = FakeProvider(finishing)
    outcome = await engine(provider, worktree.parent).run(ctx)

    assert outcome.failure is None
    assert any("too late" in e.text for e in rec.of(PlanTextData))


async def test_an_http_429_the_model_server_keeps_answering_is_a_blocked_event_by_provider(
    worktree: Path,
) -> None:
    """The built-in loop's kind of "blocked by the provider": the model
    server answers HTTP 429 until the retries are used up; the run fails
    (infrastructure) and says so as a typed `blocked` event, not only in
    its error text."""
    from corral.supervisor.llm.openai_compat import OpenAICompatProvider
    from corral.supervisor.llm.retry import RetryPolicy
    from tests.fakes.llm_fakes import FakeOpenAIServer, Status

    async def no_wait(_: float) -> None:
        return None

    limited = {"error": {"message": "Rate limit reached for requests", "type": "rate_limit"}}
    with FakeOpenAIServer([Status(429, limited)] * 4) as srv:
        provider = OpenAICompatProvider(
            srv.base_url, "fake-model", "sk-x", retry=RetryPolicy(sleep=no_wait)
        )
        outcome, rec = await run(provider, worktree)  # type: ignore[arg-type]
    assert outcome.failure is LoopFailure.INFRASTRUCTURE
    blocked = rec.of(BlockedData)
    assert [b.by for b in blocked] == ["provider"], blocked
    assert "HTTP 429" in blocked[0].why and "Rate limit reached" in blocked[0].why
