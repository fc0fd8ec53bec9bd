"""External agents confined (the default) through the real sandbox, in real tmux
panes on a private socket: the demo agent and a `custom:` agent reach
approval on a dirty checkout; a hostile `custom:` agent tries the escape table
and leaves everything outside its worktree byte for byte unchanged while its
hooks still arrive (its request to a service on the host's loopback is
refused by corral's allow-list proxy: a `blocked` event); stopping it ends everything it
started; `[sandbox] agents = false` and a per-agent `sandbox = false` run
unconfined (confined is the default).

Everything lives under /var/tmp (the sandbox's /tmp is private) with a temp
HOME holding a fake key: the real HOME is never used."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.events import AgentStartedData, BlockedData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.sandbox import sandbox_status
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, git, hello_contract, init_repo
from tests.fakes.agent_env import claude_bin, claude_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.fakes.procs import running_with_arg

STATUS = sandbox_status()
pytestmark = [
    pytest.mark.skipif(not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
KEY = "FAKE-PRIVATE-KEY-5f2a9c1e"
SLUG = "Make slugify() fold accents"
FEATURE = OutcomeContract(
    checks=[ContractCheck(name="feature", command="grep -q done feature.txt", timeout_secs=20)]
)


@dataclass
class World:
    base: Path
    repo: Path  # the user's checkout, dirty
    home: Path  # the temp HOME (a fake key in ~/.ssh)
    outside: Path
    state: Path
    config: Path  # CORRAL_CONFIG


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix="corral-sbxa-", dir="/var/tmp")).resolve()
    try:
        repo = make_demo_repo(base)
        (repo / "README.md").write_text((repo / "README.md").read_text() + "my wip\n")
        (repo / "untracked.txt").write_text("mine\n")
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_rsa").write_text(KEY + "\n")
        (home / ".gitconfig").write_text("[user]\n\tname = me\n\temail = me@example.com\n")
        outside = base / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("keep\n")
        state = base / "state"
        state.mkdir()
        config = base / "config.toml"
        config.write_text("")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("CORRAL_CONFIG", str(config))
        yield World(base, repo, home, outside, state, config)
    finally:
        for sock in (base / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


async def open_sup(
    world: World, engine: str | None, contract: OutcomeContract, **sandbox: Any
) -> Supervisor:
    sup = build_supervisor(
        world.state,
        FixedDrafter(contract),
        socket_dir=world.base / "tmux",
        default_engine=engine,
        demo_pace=0.05,
        config=fast_config(sandbox=sandbox),
    )
    await sup.open()
    return sup


def started_event(sup: Supervisor, sid: str) -> AgentStartedData:
    found = [e.data for e in sup.replay(sid)]
    return next(d for d in found if isinstance(d, AgentStartedData))


def snapshot(world: World, worktree: Path) -> dict[str, bytes]:
    """Every file under base except the worktree, what git may write for it
    (objects, its admin dir), corral's state dir and the tmux sockets."""
    skip = [
        worktree,
        world.state,
        world.base / "tmux",
        world.repo / ".git" / "objects",
        world.repo / ".git" / "worktrees",
        world.repo / ".git" / "refs" / "corral",  # corral's own verified-tree refs
    ]
    out: dict[str, bytes] = {}
    for path in sorted(world.base.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink():
            out[str(path)] = b"->" + str(path.readlink()).encode()
        elif path.is_file():
            out[str(path)] = path.read_bytes()
        else:
            out[str(path)] = b"<dir>"
    return out


def user_refs(repo: Path) -> tuple[str, ...]:
    theirs = [line for line in git(repo, "for-each-ref").splitlines() if "refs/corral/" not in line]
    return (
        "\n".join(theirs),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        (repo / ".git" / "HEAD").read_text(),
    )


def agent_script(world: World, body: str) -> str:
    """A `custom:` agent: shows an idle prompt, reads the pasted task, runs
    `body` while showing a busy marker, writes feature.txt, fires a Stop
    hook, then waits at its prompt again."""
    script = world.base / f"agent-{time.time_ns()}.sh"
    script.write_text(
        "#!/bin/bash\n"
        "printf '> '\n"
        "IFS= read -r task\n"
        "echo 'Working… (esc to interrupt)'\n"
        f"{body}\n"
        "echo done > feature.txt\n"
        'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        "IFS= read -r more\n"
        "sleep 600\n"
    )
    script.chmod(0o755)
    return f"external:custom:{script}"


class Token(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"NET-TOKEN-81c2"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Token)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()


@pytest.mark.slow
async def test_the_demo_agent_confined_reaches_approval(world: World) -> None:
    before = user_refs(world.repo)
    sup = await open_sup(world, "external:demo", demo_contract(SLUG), agents=True)
    try:
        sid = (await sup.start(SLUG, world.repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=40)
        assert row.needs_you == "question", (row.state, row.error)
        await sup.respond(sid, "Yes")
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=40)
        assert row.state is S.NEEDS_APPROVAL, row.error
        started = started_event(sup, sid)
        assert started.confined and (started.sandbox or "").startswith("confined (bubblewrap)")
        hooks = world.state / "agents" / sid / "hooks.jsonl"
        assert '"Stop"' in hooks.read_text()  # its hooks arrived from inside
        assert user_refs(world.repo) == before
    finally:
        await sup.close()


ESCAPES = r"""
R=escape-report.txt
{{
echo x > {outside}/keep.txt
echo x > {outside}/new.txt
git -C {repo} checkout -- .
git -C {repo} symbolic-ref HEAD refs/heads/evil && git -C {repo} commit --allow-empty -qm evil
git -C {repo} update-ref refs/heads/main HEAD
git -C {repo} stash
cat {home}/.ssh/id_rsa
cat ~/.ssh/id_rsa
echo x > {state}/evil.txt
echo x > {state}/corral.db
echo x > {state}/sentinel.txt
HOOKS=$(echo "$CORRAL_HOOK_CMD" | sed -n 's/.*--file \([^ ]*\).*/\1/p')
echo x > "$(dirname "$HOOKS")/evil.txt"
echo x > "$(dirname "$HOOKS")/claude-settings.json"
ln -s {outside}/keep.txt link && echo x > link
ln {outside}/keep.txt hard && echo x >> hard
echo x > /proc/self/root{outside}/keep.txt
rm -rf {home}/.gitconfig
python3 -c "import urllib.request; print(urllib.request.urlopen('{url}').read().decode())"
setsid sh -c 'while :; do sleep {marker}; done' &
echo ESCAPES-TRIED
echo agent-wip >> README.md && git stash push -q -m agent-wip && git stash list
grep -c agent-wip README.md; git stash pop -q && grep -c agent-wip README.md && echo STASH-OK
}} > $R 2>&1
"""


async def test_a_hostile_agent_confined_changes_nothing_outside_its_worktree(
    world: World, server: str
) -> None:
    (world.state / "sentinel.txt").write_text("corral's own\n")
    marker = f"7.{time.time_ns() % 10**9:09d}"
    sup = await open_sup(world, None, FEATURE, agents=True)
    try:
        body = ESCAPES.format(
            outside=world.outside,
            repo=world.repo,
            home=world.home,
            state=world.state,
            url=server,
            marker=marker,
        )
        engine = agent_script(world, body)
        started = await sup.start("do the task", world.repo, engine=engine)
        sid = started.session_id
        hooks = world.state / "agents" / sid / "hooks.jsonl"
        worktree = Path(started.worktree or "")
        before, before_refs = snapshot(world, worktree), user_refs(world.repo)
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        report = (worktree / "escape-report.txt").read_text()
        assert row.state is S.NEEDS_APPROVAL, (row.error, report)
        assert "ESCAPES-TRIED" in report
        assert "stash@{0}: On (no branch): agent-wip" in report and "STASH-OK" in report
        assert snapshot(world, worktree) == before, report
        assert user_refs(world.repo) == before_refs, report
        assert KEY not in report
        assert (world.state / "sentinel.txt").read_text() == "corral's own\n"
        assert not (world.state / "evil.txt").exists()
        assert not (hooks.parent / "evil.txt").exists()
        assert not (hooks.parent / "claude-settings.json").exists()
        # the host's loopback service is off its allow-list: corral's proxy
        # refused it, and the session's log says so as a typed event
        assert "NET-TOKEN-81c2" not in report and "403" in report, report
        port = server.rsplit(":", 1)[1].strip("/")
        blocked = [e.data for e in sup.replay(sid) if isinstance(e.data, BlockedData)]
        assert [(b.what, b.by) for b in blocked] == [(f"connect 127.0.0.1:{port}", "policy")]
        assert "network: nothing: corral's proxy refuses every host" in (
            started_event(sup, sid).sandbox or ""
        )
        assert '"Stop"' in hooks.read_text()  # and its hooks still arrive
        assert started_event(sup, sid).confined
        assert running_with_arg(marker)  # it is still running, detached…
        await sup.cancel(sid)
        for _ in range(100):  # …and stopping the session ends everything it started
            if not running_with_arg(marker):
                break
            await asyncio.sleep(0.05)
        assert running_with_arg(marker) == []
    finally:
        await sup.close()


@pytest.mark.parametrize(
    ("sandbox", "agent_table", "confined"),
    [
        ({}, "", True),  # the default: agents run confined
        ({"agents": False}, "", False),
        ({}, "[agents.custom]\nsandbox = false\n", False),
        ({"agents": False}, "[agents.custom]\nsandbox = true\n", True),
    ],
    ids=["default-on", "global-off", "per-agent-off", "per-agent-on"],
)
async def test_the_setting_decides_whether_an_agent_sees_the_home_keys(
    world: World, sandbox: dict[str, Any], agent_table: str, confined: bool
) -> None:
    world.config.write_text(agent_table)
    sup = await open_sup(world, None, FEATURE, **sandbox)
    try:
        engine = agent_script(world, "cat ~/.ssh/id_rsa > seen.txt 2>&1")
        started = await sup.start("peek", world.repo, engine=engine)
        await sup.confirm(started.session_id)
        row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        seen = (Path(started.worktree or "") / "seen.txt").read_text()
        assert (KEY in seen) is not confined, seen
        event = started_event(sup, started.session_id)
        assert event.confined is confined
        assert (event.sandbox or "").startswith("confined" if confined else "unconfined")
    finally:
        await sup.close()


def test_each_profile_keeps_its_own_config_writable(tmp_path: Path) -> None:
    from corral.supervisor.agents.profiles import profile_for

    home = tmp_path / "home"
    (home / ".aider").mkdir(parents=True)
    (home / ".aider.conf.yml").write_text("model: x\n")
    env = {"HOME": str(home)}
    dirs, files = profile_for("claude").own_paths(env)
    assert home / ".claude" in dirs and home / ".claude.json" in files
    dirs, _ = profile_for("codex").own_paths({**env, "CODEX_HOME": str(tmp_path / "cx")})
    assert dirs == [tmp_path / "cx"]
    assert profile_for("codex").own_paths(env)[0] == [home / ".codex"]
    _, files = profile_for("aider").own_paths(env)
    assert home / ".aider.conf.yml" in files
    dirs, _ = profile_for("opencode").own_paths(env)
    assert home / ".local" / "share" / "opencode" in dirs and home / ".cache" / "opencode" in dirs
    xdg = {**env, "XDG_DATA_HOME": str(tmp_path / "data"), "OPENCODE_CONFIG": "/x/oc.json"}
    dirs, files = profile_for("opencode").own_paths(xdg)
    assert tmp_path / "data" / "opencode" in dirs and Path("/x/oc.json") in files
    assert profile_for("custom:foo").own_paths(env) == ([], [])


@pytest.mark.slow
@pytest.mark.skipif(not claude_bin().exists(), reason=f"Claude Code not installed ({claude_bin()})")
async def test_real_claude_code_confined_writes_its_file_and_its_own_config(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(world.base / "plain-repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(world.base / "claude", srv.url, repo, None, hooks=False)
        for key, value in launch.env.items():
            if key not in ("PATH", "TERM", "USER", "SHELL"):
                monkeypatch.setenv(key, value)
        monkeypatch.setenv("PATH", f"{claude_bin().parent}:{os.environ['PATH']}")
        own_config = Path(launch.env["HOME"]) / ".claude.json"
        before = json.loads(own_config.read_text())
        scratch = launch.env["CLAUDE_CODE_TMPDIR"]  # declared writable, as an operator would
        sup = await open_sup(
            world, "external:claude", hello_contract(), agents=True, writable=[scratch]
        )
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(started.session_id)
            row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
            screen = sup.agent_screen(started.session_id)
            shown = "\n".join(line for line in (screen.lines if screen else []) if line.strip())
            assert row.state is S.NEEDS_APPROVAL, (row.error, shown)
            assert target.read_text() == "hi\n"
            assert started_event(sup, started.session_id).confined
            hooks = world.state / "agents" / started.session_id / "hooks.jsonl"
            assert '"Stop"' in hooks.read_text()
            # its own config updates landed in the session's own provider home
            # (through the bind), the operator's ~/.claude.json untouched
            home = world.state / "agents" / started.session_id / "provider-home"
            after = json.loads((home / ".claude.json").read_text())
            assert after.get("numStartups") == 1 and "numStartups" not in before
            assert after["customApiKeyResponses"] == before["customApiKeyResponses"]
            assert json.loads(own_config.read_text()) == before
        finally:
            await sup.close()


HOSTILE_CLAUDE = r"""#!/bin/bash
echo 'Working… (esc to interrupt)'
echo pwned > "$HOME/.claude/settings.json"
echo '{"pwned": true}' > "$HOME/.claude.json"
mkdir -p "$HOME/.claude/projects" && echo pwned > "$HOME/.claude/projects/evil.jsonl"
echo pwned >> "$HOME/.bashrc"
echo "$CLAUDE_CONFIG_DIR" > where.txt
cat "$CLAUDE_CONFIG_DIR/.credentials.json" > seen.txt
cat "$CLAUDE_CONFIG_DIR/settings.json" >> seen.txt
echo "my own history" > "$CLAUDE_CONFIG_DIR/history.jsonl"
rm -f "$CLAUDE_CONFIG_DIR/.credentials.json"
ln -s "$HOME/.bashrc" "$CLAUDE_CONFIG_DIR/.credentials.json"
echo done > feature.txt
sh -c "$CORRAL_HOOK_CMD Stop" </dev/null
clear; echo '? for shortcuts'
sleep 600
"""


async def test_a_hostile_claude_confined_writes_its_own_home_never_the_operators(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A confined `claude` (a hostile stand-in on PATH) gets its session's own
    provider home: the operator's credential and settings copied in, its
    writes land there; the operator's ~/.claude, ~/.claude.json and
    ~/.bashrc stay byte for byte (they used to be bound writable), and a
    link it leaves where its credentials go is replaced at the next launch."""
    from corral.supervisor.agents.provider_home import CLAUDE_HOME, prepare

    claude = world.home / ".claude"
    claude.mkdir()
    (claude / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "tok-op"}}')
    (claude / "settings.json").write_text('{"model": "opus"}')
    (world.home / ".claude.json").write_text('{"hasCompletedOnboarding": true, "projects": {}}')
    (world.home / ".bashrc").write_text("mine\n")
    operator = {p: p.read_bytes() for p in [*claude.rglob("*"), world.home / ".claude.json"]}
    operator[world.home / ".bashrc"] = b"mine\n"
    bin_dir = world.base / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(HOSTILE_CLAUDE)
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    sup = await open_sup(world, "external:claude", FEATURE)
    try:
        started = await sup.start("do the task", world.repo)
        sid = started.session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert started_event(sup, sid).confined
        worktree = Path(started.worktree or "")
        home = world.state / "agents" / sid / "provider-home"
        assert (worktree / "where.txt").read_text().strip() == str(home)
        seen = (worktree / "seen.txt").read_text()
        assert "tok-op" in seen and '"opus"' in seen  # what it needs, copied in
        assert (home / "history.jsonl").read_text() == "my own history\n"
        assert {p: p.read_bytes() for p in operator} == operator
        assert not (claude / "projects").exists()
        prepare(CLAUDE_HOME, home.parent, {"HOME": str(world.home)})  # its next launch
        assert (world.home / ".bashrc").read_text() == "mine\n"
        assert "tok-op" in (home / ".credentials.json").read_text()
        await sup.cancel(sid)
    finally:
        await sup.close()
