"""Each session's own provider home (`agents/provider_home.py`): the
operator's credentials copied in read-only for the agent's use, their
settings copied once, their history never; nothing written back; a link an
agent leaves in its home is replaced, never written through."""

from __future__ import annotations

import json
import os
from pathlib import Path

from corral.supervisor.agents.provider_home import (
    CLAUDE_HOME,
    CODEX_HOME,
    isolate,
    prepare,
    session_home,
)


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def operator_claude(home: Path) -> None:
    claude = home / ".claude"
    (claude / "projects" / "-work-secret").mkdir(parents=True)
    (claude / "projects" / "-work-secret" / "old.jsonl").write_text('{"operator": "history"}\n')
    (claude / "history.jsonl").write_text('{"display": "my private prompt"}\n')
    (claude / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "tok-1"}}')
    (claude / "settings.json").write_text('{"model": "opus"}')
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "customApiKeyResponses": {"approved": ["abc"]},
                "projects": {"/work/secret": {"history": [{"display": "private"}]}},
            }
        )
    )


def test_a_claude_session_home_has_credentials_and_settings_but_no_history(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    operator_claude(home)
    before = tree(home)
    env = {"HOME": str(home)}
    pane_env: dict[str, str] = {"HOME": str(home)}
    made = isolate("claude", tmp_path / "agents" / "s1", pane_env, env)
    assert made == session_home(tmp_path / "agents" / "s1")
    assert pane_env["CLAUDE_CONFIG_DIR"] == str(made)
    got = tree(made)
    assert got[".credentials.json"] == before[".claude/.credentials.json"]
    assert got["settings.json"] == b'{"model": "opus"}'
    state = json.loads(got[".claude.json"])
    assert state["hasCompletedOnboarding"] and state["customApiKeyResponses"]
    assert "projects" not in state  # the operator's per-project history stays theirs
    assert "history.jsonl" not in got and not (made / "projects").exists()
    assert oct((made / ".credentials.json").stat().st_mode & 0o777) == "0o600"
    assert tree(home) == before  # nothing of the operator's was written


def test_two_sessions_get_two_homes_and_a_relaunch_keeps_its_own_changes(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    operator_claude(home)
    env = {"HOME": str(home)}
    one = prepare(CLAUDE_HOME, tmp_path / "agents" / "s1", env)
    two = prepare(CLAUDE_HOME, tmp_path / "agents" / "s2", env)
    assert one != two
    (one / "settings.json").write_text('{"model": "session one trusted this"}')
    (one / "history.jsonl").write_text("one's prompt\n")
    # the operator signs in again: the next launch takes the new token
    (home / ".claude" / ".credentials.json").write_text(
        '{"claudeAiOauth": {"accessToken": "tok-2"}}'
    )
    prepare(CLAUDE_HOME, tmp_path / "agents" / "s1", env)
    assert (one / "settings.json").read_text() == '{"model": "session one trusted this"}'
    assert "tok-2" in (one / ".credentials.json").read_text()
    assert not (two / "history.jsonl").exists()
    assert (two / "settings.json").read_text() == '{"model": "opus"}'


def test_a_link_an_agent_leaves_in_its_home_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    operator_claude(home)
    victim = tmp_path / "operator-file"
    victim.write_text("the operator's own\n")
    made = prepare(CLAUDE_HOME, tmp_path / "agents" / "s1", {"HOME": str(home)})
    (made / ".credentials.json").unlink()
    os.symlink(victim, made / ".credentials.json")
    prepare(CLAUDE_HOME, tmp_path / "agents" / "s1", {"HOME": str(home)})
    assert victim.read_text() == "the operator's own\n"
    assert not (made / ".credentials.json").is_symlink()
    assert "tok-1" in (made / ".credentials.json").read_text()


def test_a_codex_home_follows_codex_home_and_takes_auth_and_config(tmp_path: Path) -> None:
    codex = tmp_path / "operator-codex"
    (codex / "sessions" / "2026" / "01" / "01").mkdir(parents=True)
    (codex / "sessions" / "2026" / "01" / "01" / "rollout-x.jsonl").write_text("{}\n")
    (codex / "auth.json").write_text('{"OPENAI_API_KEY": "sk-op"}')
    (codex / "config.toml").write_text('model = "gpt-x"\n')
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(codex)}
    before = tree(codex)
    made = prepare(CODEX_HOME, tmp_path / "agents" / "s1", env)
    assert tree(made) == {
        "auth.json": b'{"OPENAI_API_KEY": "sk-op"}',
        "config.toml": b'model = "gpt-x"\n',
    }
    assert tree(codex) == before


def test_an_agent_without_a_config_home_is_left_alone(tmp_path: Path) -> None:
    pane_env = {"HOME": "/h"}
    assert isolate("aider", tmp_path / "s", pane_env, {"HOME": "/h"}) is None
    assert pane_env == {"HOME": "/h"} and not (tmp_path / "s").exists()
