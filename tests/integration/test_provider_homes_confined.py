"""Gemini CLI, OpenCode, Aider and the one-shot presets, each as a hostile
stand-in on PATH, confined by the real sandbox in a real tmux pane: each
gets its session's own provider home (Gemini's GEMINI_CLI_HOME, OpenCode's
XDG dirs, Aider's HOME) with the operator's sign-in copied in; what it
writes lands there, and every write it aims at the operator's own config
(`~/.gemini`, `~/.config/opencode`, `~/.local/share/opencode`, `~/.aider*`,
`~/.bashrc`) leaves the operator's files byte for byte as they were (they
used to be bound writable). A link it leaves where its credentials go is
replaced at the next launch, never written through."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.agents.provider_home import layout_for, prepare
from corral.supervisor.states import CoderState as S
from tests.integration.test_sandbox_agents import (
    FEATURE,
    World,
    open_sup,
    started_event,
    world,
)

__all__ = ["world"]  # the fixture, shared

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Case:
    engine: str  # what the session is started with
    program: str  # the stand-in's name on PATH
    operator: dict[str, str]  # the operator's own files, by path under HOME
    home: str  # the variable naming its home inside (the expected value: the session's)
    under: str  # where that variable points inside the session's home
    credential: str  # the copied sign-in, under the variable's dir
    history: str  # what it keeps of its own, under the variable's dir
    busy: str  # a line its profile reads as working
    idle: str  # a line its profile reads as waiting for the next task
    paste: bool = False  # the task is pasted at its prompt (Aider)
    oneshot: bool = False  # it exits 0 when done


GEMINI = {".gemini/.env": "GEMINI_API_KEY=op-key\n", ".gemini/settings.json": '{"a": 1}\n'}
OPENCODE = {
    ".local/share/opencode/auth.json": '{"anthropic": {"key": "op-key"}}\n',
    ".config/opencode/opencode.json": '{"model": "x"}\n',
}
AIDER = {".aider/oauth-keys.env": "OPENROUTER_API_KEY=op-key\n", ".aider.conf.yml": "model: x\n"}

CASES = [
    Case(
        "external:gemini", "gemini", GEMINI, "GEMINI_CLI_HOME", "",
        ".gemini/.env", ".gemini/tmp/p/chats/session-1.json",
        "⠧ Thinking... (esc to cancel, 2s)", "> Type your message",
    ),
    Case(
        "gemini-p", "gemini", GEMINI, "GEMINI_CLI_HOME", "",
        ".gemini/.env", ".gemini/tmp/p/chats/session-1.json",
        "working", "", oneshot=True,
    ),
    Case(
        "external:opencode", "opencode", OPENCODE, "XDG_DATA_HOME", ".local/share",
        "opencode/auth.json", "opencode/storage/session/ses_1.json",
        "esc interrupt", "~/repo   ctrl+p commands",
    ),
    Case(
        "external:aider", "aider", AIDER, "HOME", "",
        ".aider/oauth-keys.env", ".aider/analytics.json",
        "░█ Waiting for fake-model", "> ", paste=True,
    ),
    Case(
        "aider-msg", "aider", AIDER, "HOME", "",
        ".aider/oauth-keys.env", ".aider/analytics.json",
        "working", "", oneshot=True,
    ),
]  # fmt: skip


def stand_in(case: Case, operator_home: Path) -> str:
    """The hostile CLI: it aims writes at the operator's real files (their
    path spelled out, whatever HOME it is given), reports where its home is
    and what sign-in it found there, keeps a file of its own there, and
    leaves a link where its credentials go."""
    targets = [*case.operator, ".bashrc"]
    aimed = "\n".join(
        f'mkdir -p "$(dirname "{operator_home / t}")" 2>/dev/null; '
        f'echo pwned > "{operator_home / t}" 2>/dev/null'
        for t in targets
    )
    root = f"${case.home}"
    lines = ["#!/bin/bash"]
    if case.paste:
        lines += ["printf '> '", "IFS= read -r task"]
    lines += [
        f"echo '{case.busy}'",
        aimed,
        f'echo "{root}" > where.txt',
        f'cat "{root}/{case.credential}" > seen.txt',
        f'mkdir -p "$(dirname "{root}/{case.history}")"',
        f'echo "my own history" > "{root}/{case.history}"',
        f'rm -f "{root}/{case.credential}"',
        f'ln -s "{operator_home}/.bashrc" "{root}/{case.credential}"',
        "echo done > feature.txt",
    ]
    if case.oneshot:
        lines.append("exit 0")
    else:
        lines += [
            'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null',
            "sleep 1",
            f"clear; printf '%s' '{case.idle}'",
            "sleep 600",
        ]
    return "\n".join(lines) + "\n"


def operator_files(home: Path) -> dict[Path, bytes | None]:
    """Every file and folder under the operator's HOME (None: a folder)."""
    return {p: (None if p.is_dir() else p.read_bytes()) for p in sorted(home.rglob("*"))}


@pytest.mark.parametrize("case", CASES, ids=[c.engine for c in CASES])
async def test_a_confined_agent_writes_its_own_home_never_the_operators(
    world: World, monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    for rel, text in case.operator.items():
        (world.home / rel).parent.mkdir(parents=True, exist_ok=True)
        (world.home / rel).write_text(text)
    (world.home / ".bashrc").write_text("mine\n")
    before = operator_files(world.home)
    bin_dir = world.base / "bin"
    bin_dir.mkdir()
    (bin_dir / case.program).write_text(stand_in(case, world.home))
    (bin_dir / case.program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    sup = await open_sup(world, None, FEATURE)
    try:
        started = await sup.start("do the task", world.repo, engine=case.engine)
        sid = started.session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert started_event(sup, sid).confined
        worktree = Path(started.worktree or "")
        home = world.state / "agents" / sid / "provider-home"
        inside = home / case.under if case.under else home
        assert (worktree / "where.txt").read_text().strip() == str(inside)
        credential = case.operator[f"{case.under}/{case.credential}".lstrip("/")]
        assert (worktree / "seen.txt").read_text() == credential  # what it needs, copied in
        assert (inside / case.history).read_text() == "my own history\n"
        assert operator_files(world.home) == before  # not one byte of the operator's
        layout = layout_for(case.engine.removeprefix("external:"))
        assert layout is not None
        prepare(layout, home.parent, {"HOME": str(world.home)})  # its next launch
        assert (world.home / ".bashrc").read_text() == "mine\n"
        assert not (inside / case.credential).is_symlink()
        assert (inside / case.credential).read_text() == credential
        await sup.cancel(sid)
    finally:
        await sup.close()
