"""Model providers over real HTTP to fake servers on 127.0.0.1, the agent-CLI
one-shot provider with fake CLIs on PATH, the scripted provider, and the
`[llm]` configuration."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.errors import ConfigError
from corral.supervisor.llm.anthropic import AnthropicProvider
from corral.supervisor.llm.base import Message, ModelError, ToolCall, ToolSpec, Turn, Usage
from corral.supervisor.llm.cli_oneshot import CliOneShotProvider, flatten
from corral.supervisor.llm.config import (
    NO_MODEL,
    LLMConfig,
    describe,
    load_llm_config,
    make_provider,
)
from corral.supervisor.llm.openai_compat import OpenAICompatProvider
from corral.supervisor.llm.retry import RetryPolicy, iter_sse, parse_retry_after
from tests.conftest import eventually
from tests.fakes.llm_fakes import (
    FakeAnthropicServer,
    FakeCall,
    FakeOpenAIServer,
    Reply,
    Status,
    refused_url,
)
from tests.fakes.scripted_llm import ScriptedProvider

KEY = "sk-test-SECRET-0123456789abcdef"
TOOLS = (
    ToolSpec(
        "write_file",
        "Write a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
)
REPO_ROOT = Path(__file__).resolve().parents[2]


class Sleeps:
    """A RetryPolicy.sleep that records the delays and does not wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, secs: float) -> None:
        self.delays.append(secs)


def policy(sleeps: Sleeps, **kw: Any) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, **kw)


def openai(server: FakeOpenAIServer, key: str | None = KEY, **kw: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider(server.base_url, "fake-model", key, **kw)


def anthropic(server: FakeAnthropicServer, key: str | None = KEY, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider(server.base_url, "fake-model", key, **kw)


PROVIDERS = {
    "openai": (FakeOpenAIServer, openai, "CORRAL_LLM_API_KEY (or OPENAI_API_KEY)"),
    "anthropic": (FakeAnthropicServer, anthropic, "CORRAL_LLM_API_KEY (or ANTHROPIC_API_KEY)"),
}

CONVERSATION = [
    Message("system", "You are terse."),
    Message("user", "Write hello.txt"),
    Message("assistant", "Writing.", tool_calls=(ToolCall("call_1", "write_file", {"path": "h"}),)),
    Message("tool", "ok", tool_call_id="call_1", name="write_file"),
    Message("user", "Now say done."),
]


# ---------------------------------------------------------------------------
# Streaming, tool calls, usage


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_text_deltas_stream_in_order_and_assemble(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    text = "Hello from the fake model, streamed in small pieces."
    with server_cls([Reply(text, chunk=5, usage=(21, 9))]) as srv:
        deltas: list[str] = []
        turn = await make(srv).complete(
            [Message("user", "hi")], on_delta=deltas.append, max_tokens=99, timeout=10
        )
    assert turn.text == text
    assert len(deltas) == len(text) // 5 + 1 and "".join(deltas) == text
    assert deltas[0] == "Hello"
    assert turn.stop_reason == "end_turn"
    assert turn.usage == Usage(input_tokens=21, output_tokens=9)
    assert turn.model == "fake-model"
    body = srv.requests[0].body
    assert body["stream"] is True and body["max_tokens"] == 99 and body["temperature"] == 0.0


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_tool_calls_with_split_arguments_parse(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    calls = (
        FakeCall("write_file", {"path": "a.txt", "content": "x\ny"}, id="c1", pieces=4),
        FakeCall("shell", {"command": "ls -la", "timeout_secs": 5}, id="c2", pieces=3),
    )
    with server_cls([Reply("Let me write.", tool_calls=calls)]) as srv:
        turn = await make(srv).complete(CONVERSATION, TOOLS, timeout=10)
    assert turn.text == "Let me write."
    assert turn.stop_reason == "tool_use"
    assert turn.tool_calls == (
        ToolCall("c1", "write_file", {"path": "a.txt", "content": "x\ny"}),
        ToolCall("c2", "shell", {"command": "ls -la", "timeout_secs": 5}),
    )
    body = srv.requests[0].body
    if api == "openai":
        assert body["tools"][0] == {
            "type": "function",
            "function": {
                "name": "write_file",
                "description": "Write a file",
                "parameters": TOOLS[0].parameters,
            },
        }
        assert body["stream_options"] == {"include_usage": True}
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user"]
        assistant = body["messages"][2]
        assert assistant["tool_calls"][0]["function"] == {
            "name": "write_file",
            "arguments": '{"path": "h"}',
        }
        assert body["messages"][3]["tool_call_id"] == "call_1"
    else:
        assert body["system"] == "You are terse."
        assert body["tools"][0]["input_schema"] == TOOLS[0].parameters
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant", "user"]
        assert body["messages"][1]["content"][1] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "write_file",
            "input": {"path": "h"},
        }
        result, follow_up = body["messages"][2]["content"]
        assert result == {"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}
        assert follow_up == {"type": "text", "text": "Now say done."}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_length_stop_is_max_tokens_and_json_answers_are_accepted(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    stop = "length" if api == "openai" else "max_tokens"
    with server_cls([Reply("cut", stop=stop), Reply("whole body", as_json=True)]) as srv:
        provider = make(srv)
        assert (await provider.complete([Message("user", "x")])).stop_reason == "max_tokens"
        deltas: list[str] = []
        turn = await provider.complete([Message("user", "x")], on_delta=deltas.append)
    assert turn.text == "whole body" and deltas == ["whole body"]
    assert turn.usage == Usage(12, 7)


async def test_headers_carry_the_key_and_none_is_sent_without_one() -> None:
    with FakeOpenAIServer([Reply("a"), Reply("b")]) as srv:
        await openai(srv).complete([Message("user", "x")])
        await openai(srv, key=None).complete([Message("user", "x")])
    assert srv.requests[0].header("Authorization") == f"Bearer {KEY}"
    assert srv.requests[1].header("Authorization") is None
    assert srv.requests[0].path == "/v1/chat/completions"
    with FakeAnthropicServer([Reply("a")]) as srv:
        await anthropic(srv).complete([Message("user", "x")])
    req = srv.requests[0]
    assert req.path == "/v1/messages"
    assert req.header("x-api-key") == KEY and req.header("anthropic-version") == "2023-06-01"


# ---------------------------------------------------------------------------
# Errors and retries


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_401_is_auth_naming_the_variable_never_the_key(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server_cls, make, hint = PROVIDERS[api]
    body = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    with server_cls([Status(401, body)]) as srv, pytest.raises(ModelError) as info:
        await make(srv).complete([Message("user", "x")])
    err = info.value
    assert err.kind == "auth" and err.status == 401
    assert str(err) == (
        f"the model server at {srv.base_url} rejected the API key: set {hint} to a valid key"
    )
    assert KEY not in str(err) and KEY not in caplog.text
    assert KEY in srv.all_text()  # it was sent, just never shown
    assert len(srv.requests) == 1  # auth is not retried


async def test_auth_sentence_names_the_variable_the_key_came_from() -> None:
    cfg = load_llm_config(
        env={
            "CORRAL_LLM_PROVIDER": "openai",
            "CORRAL_LLM_MODEL": "m",
            "OPENAI_API_KEY": KEY,
            "CORRAL_CONFIG": "/nonexistent/corral.toml",
        }
    )
    with FakeOpenAIServer([Status(403)]) as srv:
        provider = make_provider(cfg.model_copy(update={"base_url": srv.base_url}))
        assert provider is not None
        with pytest.raises(ModelError, match="set OPENAI_API_KEY to a valid key") as info:
            await provider.complete([Message("user", "x")])
    assert KEY not in str(info.value)
    with (
        FakeOpenAIServer([Status(401)]) as srv,
        pytest.raises(ModelError, match=r"requires an API key: set CORRAL_LLM_API_KEY"),
    ):
        await openai(srv, key=None).complete([Message("user", "x")])


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_429_then_200_succeeds_after_honouring_retry_after(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    sleeps = Sleeps()
    script = [Status(429, retry_after="7"), Status(429), Reply("finally")]
    with server_cls(script) as srv:
        turn = await make(srv, retry=policy(sleeps)).complete([Message("user", "x")])
    assert turn.text == "finally"
    assert sleeps.delays == [7.0, 1.0]  # Retry-After honoured, then 0.5 * 2**1
    assert len(srv.requests) == 3


async def test_retry_after_is_capped_and_the_first_backoff_is_half_a_second() -> None:
    sleeps = Sleeps()
    script = [Status(503, retry_after="9999"), Status(502), Reply("ok")]
    with FakeOpenAIServer(script) as srv:
        turn = await openai(srv, retry=policy(sleeps, max_retry_after=20)).complete(
            [Message("user", "x")]
        )
    assert turn.text == "ok" and sleeps.delays == [20.0, 1.0]
    sleeps = Sleeps()
    with FakeOpenAIServer([Status(500), Reply("ok")]) as srv:
        await openai(srv, retry=policy(sleeps)).complete([Message("user", "x")])
    assert sleeps.delays == [0.5]


async def test_a_real_backoff_sleep_is_short() -> None:
    with FakeOpenAIServer([Status(429, retry_after="0.2"), Reply("ok")]) as srv:
        start = time.monotonic()
        turn = await openai(srv).complete([Message("user", "x")])
        elapsed = time.monotonic() - start
    assert turn.text == "ok" and 0.2 <= elapsed < 2


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_500_four_times_is_a_server_error(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    sleeps = Sleeps()
    with (
        server_cls([Status(500, {"error": {"message": "boom"}})] * 4) as srv,
        pytest.raises(ModelError) as info,
    ):
        await make(srv, retry=policy(sleeps)).complete([Message("user", "x")])
    assert info.value.kind == "server" and info.value.status == 500
    assert "HTTP 500" in str(info.value) and "boom" in str(info.value)
    assert len(srv.requests) == 4 and sleeps.delays == [0.5, 1.0, 2.0]


async def test_429_exhausted_is_rate_limit_and_400_is_not_retried() -> None:
    sleeps = Sleeps()
    with FakeAnthropicServer([Status(429)] * 4) as srv, pytest.raises(ModelError) as info:
        await anthropic(srv, retry=policy(sleeps)).complete([Message("user", "x")])
    assert info.value.kind == "rate_limit" and len(srv.requests) == 4
    with (
        FakeOpenAIServer([Status(400, {"error": {"message": f"bad field {KEY}"}})]) as srv,
        pytest.raises(ModelError) as info,
    ):
        await openai(srv, retry=policy(Sleeps())).complete([Message("user", "x")])
    assert info.value.kind == "bad_request" and len(srv.requests) == 1
    assert "bad field [redacted]" in str(info.value)
    with (
        FakeOpenAIServer([Status(404)]) as srv,
        pytest.raises(ModelError, match=r"404.*no model 'fake-model'") as info,
    ):
        await openai(srv).complete([Message("user", "x")])
    assert info.value.kind == "bad_request"


async def test_an_overloaded_stream_error_before_any_text_is_retried() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    sleeps = Sleeps()
    with FakeAnthropicServer([Reply(error_event=overloaded), Reply("ok")]) as srv:
        turn = await anthropic(srv, retry=policy(sleeps)).complete([Message("user", "x")])
    assert turn.text == "ok" and sleeps.delays == [0.5]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_stream_cut_short_is_a_server_error(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    with server_cls([Reply("half an ans", truncate=True)]) as srv:
        deltas: list[str] = []
        with pytest.raises(ModelError, match="ended the answer early") as info:
            await make(srv, retry=policy(Sleeps())).complete(
                [Message("user", "x")], on_delta=deltas.append
            )
    assert info.value.kind == "server" and "".join(deltas) == "half an ans"
    assert len(srv.requests) == 1  # text already streamed: never retried


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_connection_refused_is_unavailable(api: str) -> None:
    url = refused_url()
    provider = (
        OpenAICompatProvider(url + "/v1", "m", KEY)
        if api == "openai"
        else AnthropicProvider(url, "m", KEY)
    )
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "x")], timeout=5)
    assert info.value.kind == "unavailable"
    assert str(info.value).startswith(f"cannot reach the model server at {url}")
    assert "is it running?" in str(info.value)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_timeout_bounds_the_call(api: str) -> None:
    server_cls, make, _ = PROVIDERS[api]
    with server_cls([Reply("late", delay=5), Reply("stalls", stall=5)]) as srv:
        provider = make(srv)
        for _ in range(2):  # before the head, then mid-stream
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await provider.complete([Message("user", "x")], timeout=0.3)
            assert time.monotonic() - start < 2
            assert info.value.kind == "timeout"
            assert "within 0.3 s" in str(info.value)


async def test_cancelling_a_call_closes_its_connection() -> None:
    with FakeOpenAIServer([Reply("slow", stall=5)]) as srv:
        task = asyncio.create_task(openai(srv).complete([Message("user", "x")]))
        await eventually(lambda: srv.requests)  # the call is in flight, its reply stalled
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_sse_framing_and_retry_after_parsing() -> None:
    lines = [b": comment\n", b"event: a\n", b"data: 1\n", b"data: 2\n", b"\n", b"data: tail\n"]
    assert list(iter_sse(iter(lines))) == [("a", "1\n2"), ("message", "tail")]
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


# ---------------------------------------------------------------------------
# Scripted provider


async def test_scripted_provider_serves_records_and_gates() -> None:
    gate = asyncio.Event()
    err = ModelError("nope", kind="server")
    provider = ScriptedProvider(
        [Turn("abcdefghi"), err, lambda msgs, tools: Turn(f"echo {msgs[-1].content}")], gate=gate
    )
    deltas: list[str] = []
    task = asyncio.create_task(provider.complete([Message("user", "one")], on_delta=deltas.append))
    await eventually(lambda: provider.calls)
    assert len(provider.calls) == 1 and not task.done()  # parked on the gate
    gate.set()
    turn = await task
    assert turn.text == "abcdefghi" and deltas == ["abc", "def", "ghi"]
    assert turn.model == "scripted"
    with pytest.raises(ModelError, match="nope"):
        await provider.complete([Message("user", "two")], TOOLS)
    assert (await provider.complete([Message("user", "three")])).text == "echo three"
    assert provider.calls[1].tools == TOOLS and provider.calls[2].last == "three"
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "four")])
    assert info.value.kind == "unavailable"


# ---------------------------------------------------------------------------
# Agent CLIs, one-shot


def fake_cli(bin_dir: Path, name: str, body: str) -> Path:
    """A python script named `name` in bin_dir; it records its argv and stdin
    to `<bin_dir>/<name>.call.json` before running `body`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    record = bin_dir / f"{name}.call.json"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time, subprocess\n"
        "stdin = '' if sys.stdin.isatty() else sys.stdin.read()\n"
        f"json.dump({{'argv': sys.argv[1:], 'stdin': stdin, 'cwd': os.getcwd()}}, "
        f"open({str(record)!r}, 'w'))\n" + body,
        encoding="utf-8",
    )
    script.chmod(0o755)
    return record


def cli_env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


async def test_claude_one_shot_parses_the_json_result(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": '{"ok": true}',
        "usage": {"input_tokens": 30, "output_tokens": 4},
        "total_cost_usd": 0.0012,
    }
    record = fake_cli(bin_dir, "claude", f"print(json.dumps({result!r}))\n")
    provider = CliOneShotProvider("claude", model="sonnet", env=cli_env(bin_dir))
    deltas: list[str] = []
    turn = await provider.complete(
        [Message("system", "Be strict."), Message("user", "Draft it.")], on_delta=deltas.append
    )
    assert turn.text == '{"ok": true}' and deltas == ['{"ok": true}']
    assert turn.usage == Usage(30, 4, 0.0012) and turn.model == "sonnet"
    call = json.loads(record.read_text())
    assert call["argv"] == [
        "-p",
        "--output-format",
        "json",
        "--model",
        "sonnet",
        "Be strict.\n\nDraft it.",
    ]
    assert call["cwd"] != os.getcwd() and "corral-cli-" in call["cwd"]  # an empty scratch dir
    assert provider.name == "cli:claude"


async def test_a_long_prompt_goes_through_stdin(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    record = fake_cli(bin_dir, "claude", "print(json.dumps({'result': 'ok'}))\n")
    provider = CliOneShotProvider("claude", env=cli_env(bin_dir), max_arg_bytes=10)
    assert (await provider.complete([Message("user", "a prompt longer than ten")])).text == "ok"
    call = json.loads(record.read_text())
    assert call["argv"] == ["-p", "--output-format", "json"]
    assert call["stdin"] == "a prompt longer than ten"


async def test_claude_error_results_map_to_kinds(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bad = {"type": "result", "is_error": True, "result": "Invalid API key · Fix external API key"}
    fake_cli(bin_dir, "claude", f"print(json.dumps({bad!r})); sys.exit(1)\n")
    provider = CliOneShotProvider("claude", env=cli_env(bin_dir))
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "x")])
    assert info.value.kind == "auth"
    assert "Invalid API key" in str(info.value) and "ANTHROPIC_API_KEY" in str(info.value)
    fake_cli(bin_dir, "claude", "print('segfault-ish', file=sys.stderr); sys.exit(3)\n")
    with pytest.raises(ModelError, match="claude CLI failed: segfault-ish") as info:
        await provider.complete([Message("user", "x")])
    assert info.value.kind == "server"


async def test_codex_one_shot_reads_the_final_agent_message(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "thinking"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "final answer"}},
        {"type": "turn.completed", "usage": {"input_tokens": 50, "output_tokens": 6}},
    ]
    lines = "\\n".join(json.dumps(e) for e in events)
    record = fake_cli(bin_dir, "codex", f"print({lines!r}.replace('\\\\n', chr(10)))\n")
    provider = CliOneShotProvider("codex", env=cli_env(bin_dir))
    turn = await provider.complete([Message("user", "go")])
    assert turn.text == "final answer" and turn.usage == Usage(50, 6)
    argv = json.loads(record.read_text())["argv"]
    assert argv[:2] == ["exec", "--json"] and argv[-1] == "go"
    failed = {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}
    fake_cli(bin_dir, "codex", f"print(json.dumps({failed!r})); sys.exit(1)\n")
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "go")])
    assert info.value.kind == "auth" and "codex login" in str(info.value)


async def test_cli_refuses_tools_and_reports_a_missing_binary(tmp_path: Path) -> None:
    provider = CliOneShotProvider("claude", env={"PATH": str(tmp_path)})
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "x")], TOOLS)
    assert info.value.kind == "bad_request"
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "x")])
    assert info.value.kind == "unavailable" and "claude CLI is not installed" in str(info.value)


async def test_cli_timeout_kills_the_process_group(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    pid_file = tmp_path / "child.pid"
    fake_cli(
        bin_dir,
        "claude",
        "child = subprocess.Popen(['sleep', '30'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(30)\n",
    )
    provider = CliOneShotProvider("claude", env=cli_env(bin_dir))
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await provider.complete([Message("user", "x")], timeout=1.0)
    assert info.value.kind == "timeout" and time.monotonic() - start < 5
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as fh:  # a zombie awaiting its reaper is dead
            if fh.read().split()[2] == "Z":
                break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the CLI's child outlived the timeout")


def test_flatten_keeps_a_transcript_for_longer_exchanges() -> None:
    text = flatten(CONVERSATION)
    assert text.startswith("You are terse.\n\nThe conversation so far")
    assert "### User\nWrite hello.txt" in text and "### Tool result\nok" in text


CLAUDE = REPO_ROOT / "e2e" / "node_modules" / ".bin" / "claude"


@pytest.mark.slow
@pytest.mark.skipif(not CLAUDE.exists(), reason="the real claude CLI is not installed in e2e/")
async def test_real_claude_cli_one_shot_against_the_fake_anthropic_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    with FakeAnthropicServer(default=Reply('{"answer": 42}')) as srv:
        path = os.environ.get("PATH", "/usr/bin:/bin")
        node = shutil.which("node")
        if node:
            path = f"{Path(node).parent}{os.pathsep}{path}"
        env = {
            "HOME": str(home),
            "PATH": path,
            "ANTHROPIC_BASE_URL": srv.url,
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        }
        provider = CliOneShotProvider("claude", binary=str(CLAUDE), env=env)
        turn = await provider.complete(
            [Message("system", "Reply with JSON."), Message("user", "What is the answer?")],
            timeout=90,
        )
    assert turn.text == '{"answer": 42}'
    prompts = json.dumps([r.body for r in srv.requests])
    assert "What is the answer?" in prompts


# ---------------------------------------------------------------------------
# Configuration


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_env_overrides_the_file(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        '[supervisor]\nrepair_invokes = 1\n\n[llm]\nprovider = "anthropic"\n'
        'base_url = "http://file.example"\nmodel = "file-model"\n',
    )
    cfg = load_llm_config(env={}, path=path)
    assert (cfg.provider, cfg.base_url, cfg.model) == (
        "anthropic",
        "http://file.example",
        "file-model",
    )
    assert cfg.provider_source == f"{path} [llm]"
    env = {
        "CORRAL_LLM_PROVIDER": "openai",
        "CORRAL_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
        "CORRAL_LLM_MODEL": "qwen",
        "CORRAL_LLM_API_KEY": "  ",  # blank means unset
    }
    cfg = load_llm_config(env=env, path=path)
    assert (cfg.provider, cfg.base_url, cfg.model) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "qwen",
    )
    assert cfg.provider_source == "CORRAL_LLM_PROVIDER" and cfg.api_key is None


def test_key_precedence(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[llm]\nprovider = "openai"\nmodel = "m"\n')
    cfg = load_llm_config(env={"OPENAI_API_KEY": "usual"}, path=path)
    assert cfg.api_key is not None and cfg.api_key.get_secret_value() == "usual"
    assert cfg.api_key_source == "OPENAI_API_KEY"
    env = {"OPENAI_API_KEY": "usual", "CORRAL_LLM_API_KEY": "corral"}
    cfg = load_llm_config(env=env, path=path)
    assert cfg.api_key is not None and cfg.api_key.get_secret_value() == "corral"
    assert cfg.api_key_source == "CORRAL_LLM_API_KEY"
    path = write_config(tmp_path, '[llm]\nprovider = "openai"\nmodel = "m"\napi_key_env = "MINE"\n')
    cfg = load_llm_config(env={"MINE": "mine", "OPENAI_API_KEY": "usual"}, path=path)
    assert cfg.api_key is not None and cfg.api_key.get_secret_value() == "mine"
    cfg = load_llm_config(env={"ANTHROPIC_API_KEY": "other"}, path=path)
    assert cfg.api_key is None  # ANTHROPIC_API_KEY is not an openai key
    assert cfg.key_hint == "CORRAL_LLM_API_KEY (or MINE or OPENAI_API_KEY)"


def test_describe_names_the_source_never_the_key(tmp_path: Path) -> None:
    env = {
        "CORRAL_LLM_PROVIDER": "openai",
        "CORRAL_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
        "CORRAL_LLM_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": KEY,
    }
    cfg = load_llm_config(env=env, path=tmp_path / "missing.toml")
    line = describe(cfg)
    assert line == (
        "openai gpt-4o-mini at http://127.0.0.1:11434/v1 (key from OPENAI_API_KEY: set)"
    )
    for text in (line, repr(cfg), str(cfg), cfg.model_dump_json(), repr(make_provider(cfg))):
        assert KEY not in text
    cfg = load_llm_config(env={"CORRAL_LLM_PROVIDER": "anthropic"}, path=tmp_path / "m.toml")
    assert describe(cfg) == (
        "anthropic (no model set: set CORRAL_LLM_MODEL) at https://api.anthropic.com "
        "(no key: set CORRAL_LLM_API_KEY (or ANTHROPIC_API_KEY))"
    )
    assert describe(load_llm_config(env={}, path=tmp_path / "m.toml")) == NO_MODEL


def test_broken_config_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[llm\nprovider = ")
    with pytest.raises(ConfigError, match=str(path)):
        load_llm_config(env={}, path=path)
    path = write_config(tmp_path, '[llm]\napi_key = "sk-oops"\n')
    with pytest.raises(ConfigError, match="must not hold the key") as info:
        load_llm_config(env={}, path=path)
    assert "sk-oops" not in str(info.value)
    path = write_config(tmp_path, '[llm]\nprovder = "openai"\n')
    with pytest.raises(ConfigError, match=r"\[llm\] provder"):
        load_llm_config(env={}, path=path)
    with pytest.raises(ConfigError, match="unknown model provider 'gemini'"):
        load_llm_config(env={"CORRAL_LLM_PROVIDER": "gemini"}, path=tmp_path / "none.toml")


def test_config_path_comes_from_corral_config(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[llm]\nprovider = "cli:claude"\n')
    cfg = load_llm_config(env={"CORRAL_CONFIG": str(path)})
    assert cfg.provider == "cli:claude"
    provider = make_provider(cfg)
    assert isinstance(provider, CliOneShotProvider) and provider.name == "cli:claude"


def test_make_provider() -> None:
    assert make_provider(LLMConfig()) is None
    with pytest.raises(ConfigError, match="set CORRAL_LLM_MODEL"):
        make_provider(LLMConfig(provider="openai"))
    provider = make_provider(LLMConfig(provider="openai", model="m"))
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.url == "https://api.openai.com/v1/chat/completions"
    provider = make_provider(LLMConfig(provider="anthropic", model="m", base_url="http://x/v1"))
    assert isinstance(provider, AnthropicProvider) and provider.url == "http://x/v1/messages"
    codex = make_provider(LLMConfig(provider="cli:codex"))
    assert isinstance(codex, CliOneShotProvider) and codex.agent == "codex"
