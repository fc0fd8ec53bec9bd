"""The scripted fake model server, and the REAL agent CLIs driven through it.

Unit tests exercise the server over real HTTP (SSE framing, script
consumption, error statuses). The `slow` tests start the real Claude Code and
Codex binaries from e2e/node_modules in a private tmux server, answer their
dialogs by the text of the option (never a blind Enter), and check that the
scripted model's tool call really wrote a file and that the CLI reported the
end of the turn (Claude Code hooks, Codex notify). docs/agent-clis.md has the
screens these tests look for.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import AGENT_CLIS
from tests.fakes.agent_env import (
    AgentLaunch,
    claude_launch,
    claude_print_argv,
    codex_exec_argv,
    codex_launch,
    missing_clis,
)
from tests.fakes.model_server import (
    FakeModelServer,
    HttpError,
    Reply,
    ToolCall,
    anthropic_sse,
    chat_sse,
    gemini_sse,
    openai_sse,
    parse_sse,
    sample_for_schema,
)

# --------------------------------------------------------------------------- HTTP helpers


def post(
    url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


TOOLS_A = [{"name": "Write", "input_schema": {"type": "object"}}]
TOOLS_O = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]


def messages_body(stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "tools": TOOLS_A,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


def responses_body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "stream": True, "tools": TOOLS_O, "input": [], **extra}


def anthropic_text(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(d["delta"].get("text", "") for e, d in events if e == "content_block_delta")


# --------------------------------------------------------------------------- wire formats


def test_anthropic_stream_frames_text_then_tool_use() -> None:
    reply = Reply(
        "Writing it.", [ToolCall("Write", {"file_path": "/x/a.txt", "content": "hi\n"}, "toolu_1")]
    )
    events = parse_sse(b"".join(anthropic_sse(reply, "m")))
    names = [e for e, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    # every event name matches its data's type
    assert all(d["type"] == e for e, d in events)
    starts = [d for e, d in events if e == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use"]
    assert starts[1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Write",
        "input": {},
    }
    assert anthropic_text(events) == "Writing it."
    partial = "".join(
        d["delta"]["partial_json"]
        for e, d in events
        if e == "content_block_delta" and d["index"] == 1
    )
    assert json.loads(partial) == {"file_path": "/x/a.txt", "content": "hi\n"}
    assert names.count("content_block_stop") == 2
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_stream_text_only_ends_turn() -> None:
    events = parse_sse(b"".join(anthropic_sse(Reply("hello"), "m")))
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert [d["content_block"]["type"] for e, d in events if e == "content_block_start"] == ["text"]


def test_openai_stream_frames_message_and_function_call() -> None:
    reply = Reply("Running.", [ToolCall("exec_command", {"cmd": "echo hi > a.txt"}, "call_1")])
    events = parse_sse(b"".join(openai_sse(reply, "m")))
    names = [e for e, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert all(d["type"] == e for e, d in events)
    added = [d["item"]["type"] for e, d in events if e == "response.output_item.added"]
    assert added == ["message", "function_call"]
    assert "".join(d["delta"] for e, d in events if e == "response.output_text.delta") == "Running."
    done = [d["item"] for e, d in events if e == "response.output_item.done"]
    assert done[1]["call_id"] == "call_1" and done[1]["name"] == "exec_command"
    assert json.loads(done[1]["arguments"]) == {"cmd": "echo hi > a.txt"}
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed"
    assert completed["usage"]["total_tokens"] == 15
    assert [o["type"] for o in completed["output"]] == ["message", "function_call"]


def test_sample_for_schema_fills_codex_title_request() -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 5}},
        "required": ["title"],
    }
    assert sample_for_schema(schema, "Fake task") == {"title": "Fake "}


# --------------------------------------------------------------------------- the server


def test_script_turns_are_consumed_in_order_then_done() -> None:
    with FakeModelServer([Reply("one"), Reply("two")]) as srv:
        texts = []
        for _ in range(3):
            status, headers, raw = post(srv.url + "/v1/messages?beta=true", messages_body())
            assert status == 200
            assert headers["Content-Type"].startswith("text/event-stream")
            texts.append(anthropic_text(parse_sse(raw)))
        assert texts == ["one", "two", "done"]
        assert srv.remaining == 0
        assert len(srv.turn_requests) == 3
        assert srv.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]
        assert srv.requests[0].path == "/v1/messages?beta=true"


def test_side_requests_do_not_consume_turns() -> None:
    with FakeModelServer([Reply("main")]) as srv:
        # no tools: a side request (title, topic, quota probe)
        status, _, raw = post(srv.url + "/v1/messages", messages_body(tools=[]))
        assert anthropic_text(parse_sse(raw)) == "Fake task"
        # Codex's title request: structured output, answered with schema-shaped JSON
        title = {
            "format": {
                "type": "json_schema",
                "schema": {"type": "object", "properties": {"title": {"type": "string"}}},
            }
        }
        status, _, raw = post(srv.openai_base_url + "/responses", responses_body(text=title))
        events = parse_sse(raw)
        text = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
        assert json.loads(text) == {"title": "Fake task"}
        status, _, raw = post(srv.url + "/v1/messages/count_tokens", {"messages": []})
        assert status == 200 and json.loads(raw) == {"input_tokens": 100}
        assert srv.remaining == 1
        _, _, raw = post(srv.url + "/v1/messages", messages_body())
        assert anthropic_text(parse_sse(raw)) == "main"
        assert [r.consumed for r in srv.requests] == [False, False, False, True]


def test_codex_turn_metadata_marks_main_requests_without_tools() -> None:
    with FakeModelServer([Reply("main")]) as srv:
        meta = json.dumps({"thread_source": "user"})
        _, _, raw = post(
            srv.openai_base_url + "/responses",
            responses_body(tools=[]),
            {"x-codex-turn-metadata": meta},
        )
        text = "".join(d["delta"] for e, d in parse_sse(raw) if e == "response.output_text.delta")
        assert text == "main"


def test_non_streaming_messages_and_responses() -> None:
    call = ToolCall("Write", {"file_path": "/a", "content": "b"}, "toolu_9")
    with FakeModelServer([Reply("hi", [call]), Reply("plain")]) as srv:
        status, _, raw = post(srv.url + "/v1/messages", messages_body(stream=False))
        msg = json.loads(raw)
        assert status == 200 and msg["type"] == "message" and msg["stop_reason"] == "tool_use"
        assert msg["content"][1] == {
            "type": "tool_use",
            "id": "toolu_9",
            "name": "Write",
            "input": {"file_path": "/a", "content": "b"},
        }
        status, _, raw = post(srv.openai_base_url + "/responses", responses_body(stream=False))
        resp = json.loads(raw)
        assert resp["status"] == "completed"
        assert resp["output"][0]["content"][0]["text"] == "plain"


@pytest.mark.parametrize(
    ("status", "anthropic_type", "openai_code"),
    [
        (401, "authentication_error", "invalid_api_key"),
        (429, "rate_limit_error", "rate_limit_exceeded"),
        (500, "api_error", None),
    ],
)
def test_error_turns_answer_with_the_apis_error_bodies(
    status: int, anthropic_type: str, openai_code: str | None
) -> None:
    with FakeModelServer(
        [HttpError(status, "nope", retry_after=1), HttpError(status), Reply("after")]
    ) as srv:
        code, headers, raw = post(srv.url + "/v1/messages", messages_body())
        assert code == status
        assert json.loads(raw) == {
            "type": "error",
            "error": {"type": anthropic_type, "message": "nope"},
        }
        assert headers.get("retry-after") == "1"
        code, _, raw = post(srv.openai_base_url + "/responses", responses_body())
        assert code == status
        body = json.loads(raw)["error"]
        assert body["code"] == openai_code and body["message"].startswith(f"fake {status}")
        _, _, raw = post(srv.url + "/v1/messages", messages_body())
        assert anthropic_text(parse_sse(raw)) == "after"


def test_repeated_and_sticky_errors() -> None:
    with FakeModelServer([HttpError(500, times=2), Reply("ok now")]) as srv:
        assert [post(srv.url + "/v1/messages", messages_body())[0] for _ in range(3)] == [
            500,
            500,
            200,
        ]
    with FakeModelServer([HttpError(401, times=None)]) as srv:
        assert {post(srv.url + "/v1/messages", messages_body())[0] for _ in range(4)} == {401}
        assert srv.remaining == 1


def test_get_models_unknown_paths_and_head() -> None:
    with FakeModelServer() as srv:
        status, raw = get(srv.url + "/v1/models")
        assert status == 200 and json.loads(raw)["data"][0]["id"] == "fake-model"
        assert get(srv.url + "/nowhere")[0] == 404
        assert post(srv.url + "/v1/other", {})[0] == 404
        req = urllib.request.Request(srv.url + "/", method="HEAD")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
        assert srv.paths() == ["GET /v1/models", "GET /nowhere", "POST /v1/other", "HEAD /"]


def test_tool_results_are_collected_from_both_apis() -> None:
    with FakeModelServer() as srv:
        anthropic_followup = messages_body(
            messages=[
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created"}
                    ],
                },
            ]
        )
        post(srv.url + "/v1/messages", anthropic_followup)
        post(
            srv.openai_base_url + "/responses",
            responses_body(
                input=[{"type": "function_call_output", "call_id": "call_1", "output": "exit 0"}]
            ),
        )
        results = srv.tool_results()
        assert [r.get("content") or r.get("output") for r in results] == ["File created", "exit 0"]


# --------------------------------------------------------------------------- Chat Completions


def chat_text(raw: bytes) -> str:
    return "".join(d["choices"][0]["delta"].get("content") or "" for _, d in parse_sse(raw))


def test_chat_stream_ends_with_finish_reason_usage_and_done() -> None:
    reply = Reply("Running.", [ToolCall("bash", {"cmd": "ls"}, "call_7")])
    raw = b"".join(chat_sse(reply, "m"))
    assert raw.endswith(b"data: [DONE]\n\n") and b"event:" not in raw
    events = parse_sse(raw)  # [DONE] is skipped
    assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
    assert chat_text(raw) == "Running."
    calls = [c for _, d in events for c in d["choices"][0]["delta"].get("tool_calls") or []]
    assert calls == [
        {
            "index": 0,
            "id": "call_7",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
        }
    ]
    last = events[-1][1]
    assert last["choices"][0]["finish_reason"] == "tool_calls" and last["usage"]["total_tokens"]


def test_chat_requests_without_tools_take_script_turns() -> None:
    """Aider sends no tools: every plain chat request is its main loop."""
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with FakeModelServer([Reply("one"), HttpError(401, "bad key"), Reply("two")]) as srv:
        url = srv.openai_base_url + "/chat/completions"
        assert chat_text(post(url, body)[2]) == "one"
        code, _, raw = post(url, body)
        assert code == 401 and json.loads(raw)["error"]["code"] == "invalid_api_key"
        status, _, raw = post(url, {**body, "stream": False})
        msg = json.loads(raw)["choices"][0]
        assert status == 200 and msg["message"]["content"] == "two"
        assert msg["finish_reason"] == "stop"
        followup = [*body["messages"], {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
        post(url, {**body, "messages": followup})
        assert [r.api for r in srv.requests] == ["chat"] * 4
        assert srv.tool_results() == [{"role": "tool", "tool_call_id": "call_1", "content": "ok"}]


# --------------------------------------------------------------------------- Gemini API

TOOLS_G = [{"functionDeclarations": [{"name": "write_file", "parametersJsonSchema": {}}]}]


def gemini_body(**extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": TOOLS_G, **extra}


def gemini_parts(raw: bytes) -> list[dict[str, Any]]:
    return [p for _, d in parse_sse(raw) for p in d["candidates"][0]["content"]["parts"]]


def test_gemini_stream_is_data_lines_with_text_then_function_call() -> None:
    reply = Reply("Writing it.", [ToolCall("write_file", {"file_path": "/x/a", "content": "hi"})])
    raw = b"".join(gemini_sse(reply, "gemini-test"))
    assert b"event:" not in raw  # the Gemini API streams bare `data:` lines
    events = parse_sse(raw)
    parts = gemini_parts(raw)
    assert "".join(p.get("text", "") for p in parts) == "Writing it."
    assert parts[-1] == {
        "functionCall": {"name": "write_file", "args": {"file_path": "/x/a", "content": "hi"}}
    }
    last = events[-1][1]
    assert last["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in last
    assert all("finishReason" not in d["candidates"][0] for _, d in events[:-1])


def test_gemini_requests_share_the_script_with_the_other_apis() -> None:
    path = "/v1beta/models/gemini-test:"
    with FakeModelServer([Reply("anthropic"), Reply("gemini"), HttpError(401, "bad key")]) as srv:
        _, _, raw = post(srv.url + "/v1/messages", messages_body())
        assert anthropic_text(parse_sse(raw)) == "anthropic"
        # Gemini CLI's model router: JSON mode with a schema, a side request
        router = {
            "responseMimeType": "application/json",
            "responseJsonSchema": {
                "type": "object",
                "properties": {"complexity_score": {"type": "integer", "minimum": 1}},
            },
        }
        status, _, raw = post(
            srv.url + path + "generateContent", gemini_body(tools=None, generationConfig=router)
        )
        text = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
        assert status == 200 and json.loads(text) == {"complexity_score": 1}
        status, _, raw = post(srv.url + path + "countTokens", gemini_body())
        assert status == 200 and json.loads(raw) == {"totalTokens": 100}
        status, headers, raw = post(srv.url + path + "streamGenerateContent?alt=sse", gemini_body())
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        assert gemini_parts(raw) == [{"text": "gemini"}]
        status, _, raw = post(srv.url + path + "streamGenerateContent?alt=sse", gemini_body())
        assert status == 401
        assert json.loads(raw) == {
            "error": {"code": 401, "message": "bad key", "status": "UNAUTHENTICATED"}
        }
        assert [r.api for r in srv.requests] == [
            "anthropic",
            "gemini",
            "gemini",
            "gemini",
            "gemini",
        ]
        assert [r.consumed for r in srv.requests] == [True, False, False, True, True]
        assert srv.requests[-1].tool_names == ["write_file"]


def test_gemini_function_responses_are_tool_results() -> None:
    with FakeModelServer() as srv:
        response = {"name": "write_file", "response": {"output": "Successfully created"}}
        history = [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": response}]},
        ]
        for _ in range(2):  # every request repeats the history: one result
            post(
                srv.url + "/v1beta/models/m:streamGenerateContent?alt=sse",
                gemini_body(contents=history),
            )
        assert srv.tool_results() == [response]


def test_push_and_wait_for() -> None:
    with FakeModelServer() as srv:
        srv.push(Reply("pushed", delay=0.2))
        t0 = time.monotonic()
        _, _, raw = post(srv.url + "/v1/messages", messages_body())
        assert time.monotonic() - t0 >= 0.2
        assert anthropic_text(parse_sse(raw)) == "pushed"
        srv.wait_for(lambda s: len(s.turn_requests) == 1, timeout=1)
        with pytest.raises(TimeoutError):
            srv.wait_for(lambda s: len(s.turn_requests) == 2, timeout=0.3)


def test_server_stops_and_frees_its_port() -> None:
    srv = FakeModelServer().start()
    url = srv.url
    srv.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/v1/models", timeout=2)


# --------------------------------------------------------------------------- real CLIs in tmux

NOT_INSTALLED = missing_clis()
needs_clis = pytest.mark.skipif(NOT_INSTALLED is not None, reason=NOT_INSTALLED or "")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
e2e = [pytest.mark.slow, AGENT_CLIS, needs_clis, needs_tmux, pytest.mark.timeout(180)]

CLAUDE_MARK = "❯"
CODEX_MARK = "›"
_NUMBER = re.compile(r"^\d+\.\s+")


class Tmux:
    """A private tmux server (socket in a short temp dir) for one test."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="corral-e2e-"))
        self.sock = str(self.dir / "sock")

    def run(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["tmux", "-S", self.sock, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {proc.stderr.strip()}")
        return proc.stdout

    def start(self, name: str, launch: AgentLaunch) -> str:
        self.run(
            "new-session", "-d", "-s", name, "-x", "120", "-y", "40",
            "-c", str(launch.cwd), launch.shell_command(),
        )  # fmt: skip
        self.run("set-option", "-t", name, "remain-on-exit", "on")
        return name

    def screen(self, target: str) -> str:
        return self.run("capture-pane", "-p", "-t", target)

    def keys(self, target: str, *keys: str) -> None:
        self.run("send-keys", "-t", target, *keys)

    def type(self, target: str, text: str) -> None:
        self.run("send-keys", "-t", target, "-l", text)
        time.sleep(0.3)
        self.keys(target, "Enter")

    def wait_screen(self, target: str, pattern: str, timeout: float = 60.0) -> str:
        rx = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(target)
            if rx.search(screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{pattern!r} not on screen after {timeout}s:\n{screen}")

    def select_option(self, target: str, label: str, marker: str, timeout: float = 15.0) -> None:
        """Move the selection cursor (`marker`) onto the option whose label
        (without its "N. " number) is exactly `label`, then press Enter, and
        see the option leave the screen: a dialog drawn before it takes input
        (seen under load) drops the key, and then Enter is pressed again."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(target)
            lines = screen.splitlines()
            options = []  # (line index, selected?, label)
            for i, line in enumerate(lines):
                text = line.strip()
                selected = text.startswith(marker)
                text = _NUMBER.sub("", text.removeprefix(marker).strip())
                options.append((i, selected, text))
            wanted = [i for i, _, text in options if text == label]
            if wanted:
                target_line = wanted[0]
                near = [i for i, sel, _ in options if sel and abs(i - target_line) <= 8]
                if target_line in near:
                    self.keys(target, "Enter")
                    if self._gone(target, label, marker, min(3.0, deadline - time.monotonic())):
                        return
                    continue
                if near:
                    current = min(near, key=lambda i: abs(i - target_line))
                    self.keys(target, "Down" if target_line > current else "Up")
                    time.sleep(0.3)
                    continue
            time.sleep(0.3)
        raise AssertionError(f"option {label!r} not selectable:\n{screen}")

    def _gone(self, target: str, label: str, marker: str, within: float) -> bool:
        """Whether the option `label` left the screen within `within` seconds."""
        until = time.monotonic() + max(within, 0.0)
        while True:
            lines = [_NUMBER.sub("", ln.strip().removeprefix(marker).strip()) for ln in
                     self.screen(target).splitlines()]  # fmt: skip
            if label not in lines:
                return True
            if time.monotonic() >= until:
                return False
            time.sleep(0.2)

    def kill(self) -> None:
        self.run("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    try:
        yield server
    finally:
        server.kill()


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
    }
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)
    return path


def wait_until(
    predicate: Callable[[], bool],
    what: str,
    timeout: float = 60.0,
    screen: Callable[[], str] | None = None,
) -> None:
    """Poll `predicate`; on a timeout say what was awaited (and the agent's
    screen, given `screen`: a CI failure has only this message)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    shown = f"; screen:\n{screen()}" if screen is not None else ""
    raise AssertionError(f"timed out waiting for {what}{shown}")


def events_named(launch: AgentLaunch, name: str) -> list[dict[str, Any]]:
    return [e for e in launch.events() if e.get("hook_event_name") == name]


def hooks_named(launch: AgentLaunch, name: str) -> list[dict[str, Any]]:
    return [e for e in launch.hook_events() if e.get("hook_event_name") == name]


# ---- Claude Code


class TestClaudeCode:
    pytestmark = e2e

    def test_trust_dialog_then_write_tool_in_default_auto_mode(
        self, tmp_path: Path, tmux: Tmux
    ) -> None:
        repo = git_repo(tmp_path / "repo")
        target = repo / "hello.txt"
        write = ToolCall("Write", {"file_path": str(target), "content": "hi\n"})
        with FakeModelServer(
            [Reply("I'll write the file.", [write]), Reply("Wrote hello.txt.")]
        ) as srv:
            launch = claude_launch(tmp_path / "claude", srv.url, repo, "Write hello.txt")
            pane = tmux.start("claude", launch)
            screen = tmux.wait_screen(pane, r"Yes, I trust this folder")
            assert "Quick safety check: Is this a project you created or one you trust?" in screen
            tmux.select_option(pane, "Yes, I trust this folder", CLAUDE_MARK)
            wait_until(lambda: events_named(launch, "Stop"), "the Stop hook")
            assert target.read_text() == "hi\n"
            stop = events_named(launch, "Stop")[0]
            assert stop["last_assistant_message"] == "Wrote hello.txt."
            assert stop["cwd"] == str(repo) and stop["permission_mode"] == "auto"
            names = launch.event_names()
            assert names[:2] == ["SessionStart", "UserPromptSubmit"]
            assert "PermissionRequest" not in names  # auto mode: no prompt against the fake server
            pre = events_named(launch, "PreToolUse")[0]
            assert pre["tool_name"] == "Write" and pre["tool_input"]["file_path"] == str(target)
            # the CLI sent the Write result back to the model
            assert any(
                "File created successfully" in str(r.get("content")) for r in srv.tool_results()
            )
            assert "Write" in srv.turn_requests[0].tool_names
            tmux.wait_screen(pane, r"Wrote hello\.txt\.")
            # the user's own settings file is untouched by --settings
            assert json.loads((launch.config_dir / "settings.json").read_text()) == {}
            tmux.type(pane, "/exit")
            wait_until(lambda: events_named(launch, "SessionEnd"), "the SessionEnd hook")
            assert events_named(launch, "SessionEnd")[0]["reason"] == "prompt_input_exit"

    def test_permission_prompt_answered_yes_by_text(self, tmp_path: Path, tmux: Tmux) -> None:
        repo = git_repo(tmp_path / "repo")
        target = repo / "hello.txt"
        write = ToolCall("Write", {"file_path": str(target), "content": "approved\n"})
        with FakeModelServer([Reply("Writing.", [write]), Reply("Done writing.")]) as srv:
            launch = claude_launch(
                tmp_path / "claude",
                srv.url,
                repo,
                "Write hello.txt",
                trusted=True,
                permission_mode="manual",
            )
            pane = tmux.start("claude", launch)
            screen = tmux.wait_screen(pane, r"Do you want to create hello\.txt\?")
            assert "No" in screen and "Esc to cancel" in screen
            wait_until(
                lambda: events_named(launch, "PermissionRequest"), "the PermissionRequest hook"
            )
            perm = events_named(launch, "PermissionRequest")[0]
            assert perm["tool_name"] == "Write" and perm["permission_mode"] == "default"
            assert not target.exists()
            tmux.select_option(pane, "Yes", CLAUDE_MARK)
            wait_until(lambda: events_named(launch, "Stop"), "the Stop hook")
            assert target.read_text() == "approved\n"
            assert srv.remaining == 0

    def test_permission_prompt_answered_no_ends_turn_without_stop_hook(
        self, tmp_path: Path, tmux: Tmux
    ) -> None:
        repo = git_repo(tmp_path / "repo")
        bash = ToolCall("Bash", {"command": "touch nope.txt", "description": "Create nope.txt"})
        with FakeModelServer([Reply("Trying.", [bash]), Reply("Never sent.")]) as srv:
            launch = claude_launch(
                tmp_path / "claude",
                srv.url,
                repo,
                "touch it",
                trusted=True,
                permission_mode="manual",
            )
            pane = tmux.start("claude", launch)
            screen = tmux.wait_screen(pane, r"Do you want to proceed\?")
            assert "Bash command" in screen
            tmux.select_option(pane, "No", CLAUDE_MARK)
            tmux.wait_screen(pane, r"manual mode on · \? for shortcuts")
            time.sleep(1.5)
            assert not (repo / "nope.txt").exists()
            names = launch.event_names()
            assert "PermissionRequest" in names and "Stop" not in names
            assert srv.remaining == 1  # the rejection went back with the next prompt only

    def test_skip_permissions_runs_bash_without_prompt(self, tmp_path: Path, tmux: Tmux) -> None:
        repo = git_repo(tmp_path / "repo")
        bash = ToolCall(
            "Bash", {"command": "printf 'from bash\\n' > bash.txt", "description": "Write bash.txt"}
        )
        with FakeModelServer([Reply("Running.", [bash]), Reply("Ran it.")]) as srv:
            launch = claude_launch(
                tmp_path / "claude",
                srv.url,
                repo,
                "Make bash.txt",
                trusted=True,
                skip_permissions=True,
            )
            pane = tmux.start("claude", launch)
            wait_until(lambda: events_named(launch, "Stop"), "the Stop hook")
            assert (repo / "bash.txt").read_text() == "from bash\n"
            assert "PermissionRequest" not in launch.event_names()
            assert events_named(launch, "Stop")[0]["permission_mode"] == "bypassPermissions"
            tmux.wait_screen(pane, r"bypass permissions on")
            result = srv.tool_results()[0]
            assert result["is_error"] is False

    def test_401_shows_invalid_api_key_and_stop_failure(self, tmp_path: Path, tmux: Tmux) -> None:
        repo = git_repo(tmp_path / "repo")
        with FakeModelServer([HttpError(401, "invalid x-api-key", times=None)]) as srv:
            launch = claude_launch(tmp_path / "claude", srv.url, repo, "hello", trusted=True)
            pane = tmux.start("claude", launch)
            tmux.wait_screen(pane, r"Invalid API key · Fix external API key")
            wait_until(lambda: events_named(launch, "StopFailure"), "the StopFailure hook")
            failure = events_named(launch, "StopFailure")[0]
            assert failure["error"] == "authentication_failed"
            assert "Stop" not in launch.event_names()

    def test_print_mode_json(self, tmp_path: Path) -> None:
        repo = git_repo(tmp_path / "repo")
        write = ToolCall("Write", {"file_path": str(repo / "p.txt"), "content": "print\n"})
        with FakeModelServer([Reply("Writing.", [write]), Reply("Finished.")]) as srv:
            launch = claude_launch(tmp_path / "claude", srv.url, repo, None)
            argv = claude_print_argv(launch, "write p.txt", "--permission-mode", "acceptEdits")
            proc = subprocess.run(
                argv,
                cwd=repo,
                env=launch.env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
            result = json.loads(proc.stdout)
            assert result["type"] == "result" and result["subtype"] == "success"
            assert result["result"] == "Finished." and result["is_error"] is False
            assert result["permission_denials"] == []
            assert (repo / "p.txt").read_text() == "print\n"
            assert launch.event_names()[-2:] == ["Stop", "SessionEnd"]


# ---- Codex


class TestCodex:
    pytestmark = e2e

    def test_trust_screen_then_exec_command_writes_file_and_notifies(
        self, tmp_path: Path, tmux: Tmux
    ) -> None:
        repo = git_repo(tmp_path / "repo")
        run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
        with FakeModelServer([Reply("Writing the file.", [run]), Reply("Wrote hello.txt.")]) as srv:
            launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, "Write hello.txt")
            pane = tmux.start("codex", launch)
            screen = tmux.wait_screen(pane, r"Trust and continue")
            assert "Trust this folder?" in screen
            tmux.select_option(pane, "Trust and continue", CODEX_MARK)

            def main() -> list[dict[str, Any]]:
                return [
                    e for e in launch.events() if e.get("input-messages") == ["Write hello.txt"]
                ]

            wait_until(
                lambda: bool(main()),
                "the agent-turn-complete notify",
                screen=lambda: tmux.screen(pane),
            )
            note = main()[0]
            assert note["type"] == "agent-turn-complete"
            assert note["last-assistant-message"] == "Wrote hello.txt."
            assert note["cwd"] == str(repo) and note["client"] == "codex-tui"
            assert (repo / "hello.txt").read_text() == "hi\n"
            assert "exec_command" in srv.turn_requests[0].tool_names
            assert "Process exited with code 0" in srv.tool_results()[0]["output"]
            # the trust decision is persisted in CODEX_HOME/config.toml
            assert 'trust_level = "trusted"' in (launch.config_dir / "config.toml").read_text()
            tmux.wait_screen(pane, r"Wrote hello\.txt\.")

    def test_escalated_command_approval_answered_by_text(self, tmp_path: Path, tmux: Tmux) -> None:
        repo = git_repo(tmp_path / "repo")
        run = ToolCall(
            "exec_command",
            {
                "cmd": "printf 'ok\\n' > esc.txt",
                "sandbox_permissions": "require_escalated",
                "justification": "May I write esc.txt?",
            },
        )
        with FakeModelServer([Reply("Need approval.", [run]), Reply("Wrote esc.txt.")]) as srv:
            launch = codex_launch(
                tmp_path / "codex",
                srv.openai_base_url,
                repo,
                "Write esc.txt",
                trusted=True,
                hooks=True,
            )
            pane = tmux.start("codex", launch)
            screen = tmux.wait_screen(pane, r"Would you like to run the following command\?")
            assert "Reason: May I write esc.txt?" in screen
            assert "No, and tell Codex what to do differently (esc)" in screen
            assert not (repo / "esc.txt").exists()
            # Codex's Claude-style hooks report the pending approval
            wait_until(
                lambda: hooks_named(launch, "PermissionRequest"), "the PermissionRequest hook"
            )
            perm = hooks_named(launch, "PermissionRequest")[0]
            assert perm["tool_name"] == "Bash"
            assert perm["tool_input"] == {
                "command": "printf 'ok\\n' > esc.txt",
                "description": "May I write esc.txt?",
            }
            tmux.select_option(pane, "Yes, proceed (y)", CODEX_MARK)
            wait_until(lambda: (repo / "esc.txt").exists(), "esc.txt")
            wait_until(
                lambda: any(
                    e.get("last-assistant-message") == "Wrote esc.txt." for e in launch.events()
                ),
                "the agent-turn-complete notify",
            )
            tmux.wait_screen(pane, r"You approved codex to run")
            assert srv.remaining == 0
            wait_until(lambda: hooks_named(launch, "Stop"), "the Stop hook")
            assert hooks_named(launch, "Stop")[0]["last_assistant_message"] == "Wrote esc.txt."
            names = [e["hook_event_name"] for e in launch.hook_events()]
            assert names[:2] == ["SessionStart", "UserPromptSubmit"]

    def test_401_is_shown_and_no_turn_complete(self, tmp_path: Path, tmux: Tmux) -> None:
        repo = git_repo(tmp_path / "repo")
        with FakeModelServer([HttpError(401, "Incorrect API key provided", times=None)]) as srv:
            launch = codex_launch(
                tmp_path / "codex", srv.openai_base_url, repo, "hello", trusted=True
            )
            pane = tmux.start("codex", launch)
            screen = tmux.wait_screen(pane, r"unexpected status 401 Unauthorized")
            assert "Incorrect API key provided" in screen
            time.sleep(1)
            assert not [e for e in launch.events() if e.get("input-messages") == ["hello"]]

    def test_exec_json_one_shot(self, tmp_path: Path) -> None:
        repo = git_repo(tmp_path / "repo")
        run = ToolCall("exec_command", {"cmd": "printf 'exec\\n' > e.txt"})
        with FakeModelServer([Reply("Writing.", [run]), Reply("Exec done.")]) as srv:
            launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None)
            proc = subprocess.run(
                codex_exec_argv(launch, "write e.txt"),
                cwd=repo,
                env=launch.env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
            events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
            types = [e["type"] for e in events]
            assert types[0] == "thread.started" and types[-1] == "turn.completed"
            commands = [
                e["item"]
                for e in events
                if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
            ]
            assert commands and commands[0]["exit_code"] == 0
            messages = [
                e["item"]["text"]
                for e in events
                if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
            ]
            assert messages[-1] == "Exec done."
            assert (repo / "e.txt").read_text() == "exec\n"
            assert launch.events()[-1]["client"] == "codex_exec"
