"""Each session's own provider home (`agents/provider_home.py`): the
operator's credentials copied in read-only for the agent's use, their
settings copied once, their history never; nothing written back; a link an
agent leaves in its home is replaced, never written through."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from corral.supervisor.agents.provider_home import (
    CLAUDE_HOME,
    CODEX_HOME,
    GEMINI_HOME,
    OPENCODE_XDG_HOME,
    in_own_home,
    isolate,
    prepare,
    session_env,
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
    for agent in ("custom", "oneshot", "demo"):  # a command line of the operator's own
        assert isolate(agent, tmp_path / "s", pane_env, {"HOME": "/h"}) is None
    assert pane_env == {"HOME": "/h"} and not (tmp_path / "s").exists()


def test_a_gemini_home_takes_its_sign_in_and_settings_but_no_chats(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gemini = home / ".gemini"
    (gemini / "tmp" / "abc123" / "chats").mkdir(parents=True)
    (gemini / "tmp" / "abc123" / "chats" / "session-1.json").write_text('{"private": 1}')
    (gemini / "oauth_creds.json").write_text('{"refresh_token": "r-1"}')
    (gemini / ".env").write_text("GEMINI_API_KEY=k-1\n")
    (gemini / "settings.json").write_text('{"general": {"vimMode": true}}')
    (gemini / "trustedFolders.json").write_text('{"/work/secret": "TRUST_FOLDER"}')
    before = tree(home)
    pane_env: dict[str, str] = {"HOME": str(home)}
    made = isolate("gemini", tmp_path / "agents" / "s1", pane_env, {"HOME": str(home)})
    assert made is not None and pane_env["GEMINI_CLI_HOME"] == str(made)
    assert pane_env["HOME"] == str(home)  # only its config moves
    assert tree(made) == {
        ".gemini/oauth_creds.json": b'{"refresh_token": "r-1"}',
        ".gemini/.env": b"GEMINI_API_KEY=k-1\n",
        ".gemini/settings.json": b'{"general": {"vimMode": true}}',
    }
    assert tree(home) == before


def test_a_link_left_for_a_folder_in_the_home_is_not_written_through(tmp_path: Path) -> None:
    """A hostile agent swaps its home's `.gemini` for a link to a folder of
    the operator's: the next launch writes the credentials into a real
    folder of the session's home, nothing where the link pointed."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / ".env").write_text("GEMINI_API_KEY=k-1\n")
    (home / ".gemini" / "settings.json").write_text("{}")
    victim = tmp_path / "operators-project"
    victim.mkdir()
    (victim / ".env").write_text("DATABASE_URL=the operator's own\n")
    made = prepare(GEMINI_HOME, tmp_path / "agents" / "s1", {"HOME": str(home)})
    shutil.rmtree(made / ".gemini")
    os.symlink(victim, made / ".gemini")
    prepare(GEMINI_HOME, tmp_path / "agents" / "s1", {"HOME": str(home)})
    assert tree(victim) == {".env": b"DATABASE_URL=the operator's own\n"}
    assert not (made / ".gemini").is_symlink()
    assert tree(made) == {".gemini/.env": b"GEMINI_API_KEY=k-1\n", ".gemini/settings.json": b"{}"}


def test_an_opencode_home_moves_every_xdg_dir_and_takes_auth_and_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = tmp_path / "xdg-data" / "opencode"
    (data / "storage" / "session").mkdir(parents=True)
    (data / "storage" / "session" / "ses_1.json").write_text('{"title": "private"}')
    (data / "auth.json").write_text('{"anthropic": {"type": "api", "key": "sk-op"}}')
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text('{"model": "anthropic/x"}')
    (home / ".local" / "state" / "opencode").mkdir(parents=True)
    (home / ".local" / "state" / "opencode" / "prompt-history.jsonl").write_text("my prompt\n")
    cache = home / ".cache" / "opencode"
    (cache / "node_modules" / "evil").mkdir(parents=True)
    (cache / "node_modules" / "evil" / "index.js").write_text("planted by an earlier run")
    (cache / "models.json").write_text('{"anthropic": {}}')
    operator = {"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "xdg-data")}
    before = tree(tmp_path)
    pane_env = dict(operator)
    made = isolate("opencode", tmp_path / "agents" / "s1", pane_env, operator)
    assert made is not None
    assert {k: v for k, v in pane_env.items() if k.startswith("XDG_")} == {
        "XDG_CONFIG_HOME": str(made / ".config"),
        "XDG_DATA_HOME": str(made / ".local/share"),
        "XDG_STATE_HOME": str(made / ".local/state"),
        "XDG_CACHE_HOME": str(made / ".cache"),
    }
    assert tree(made) == {
        ".config/opencode/opencode.json": b'{"model": "anthropic/x"}',
        ".local/share/opencode/auth.json": b'{"anthropic": {"type": "api", "key": "sk-op"}}',
        ".cache/opencode/models.json": b'{"anthropic": {}}',  # its catalogue, not its packages
    }
    assert in_own_home("opencode", tmp_path / "agents" / "s1", pane_env)
    assert {k: v for k, v in tree(tmp_path).items() if "agents" not in k} == before


def test_an_aider_home_is_its_home_with_its_settings_and_sign_in_but_not_dot_env(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / ".aider" / "caches").mkdir(parents=True)
    (home / ".aider" / "analytics.json").write_text('{"uuid": "operator"}')
    (home / ".aider" / "oauth-keys.env").write_text("OPENROUTER_API_KEY=or-1\n")
    (home / ".aider.conf.yml").write_text("model: gpt-x\n")
    (home / ".gitconfig").write_text("[user]\n\tname = Op\n")
    (home / ".env").write_text("AWS_SECRET_ACCESS_KEY=not-for-agents\n")
    before = tree(home)
    pane_env: dict[str, str] = {"HOME": str(home)}
    made = isolate("aider-msg", tmp_path / "agents" / "s1", pane_env, {"HOME": str(home)})
    assert made is not None and pane_env["HOME"] == str(made)
    assert pane_env["PYTHONUSERBASE"] == str(home / ".local")
    assert tree(made) == {
        ".aider/oauth-keys.env": b"OPENROUTER_API_KEY=or-1\n",
        ".aider.conf.yml": b"model: gpt-x\n",
        ".gitconfig": b"[user]\n\tname = Op\n",
    }
    assert tree(home) == before


@pytest.mark.parametrize(
    ("preset", "variable"),
    [
        ("claude-p", "CLAUDE_CONFIG_DIR"),
        ("codex-exec", "CODEX_HOME"),
        ("gemini-p", "GEMINI_CLI_HOME"),
    ],
)
def test_a_one_shot_preset_gets_its_clis_home(tmp_path: Path, preset: str, variable: str) -> None:
    pane_env: dict[str, str] = {"HOME": str(tmp_path / "home")}
    made = isolate(preset, tmp_path / "agents" / "s1", pane_env, dict(pane_env))
    assert made == session_home(tmp_path / "agents" / "s1")
    assert pane_env[variable] == str(made)
    assert in_own_home(preset, tmp_path / "agents" / "s1", pane_env)
    assert not in_own_home(preset, tmp_path / "agents" / "s2", pane_env)


def test_the_session_env_names_the_home_its_agent_ran_in(tmp_path: Path) -> None:
    """Where resume and the usage watch look for a conversation: the
    session's own home once it has one, the operator's before."""
    operator = {"HOME": str(tmp_path / "home")}
    session = tmp_path / "agents" / "s1"
    assert session_env("opencode", session, operator) == operator  # no home yet
    prepare(OPENCODE_XDG_HOME, session, operator)
    seen = session_env("opencode", session, operator)
    assert seen["XDG_DATA_HOME"] == str(session_home(session) / ".local/share")
    assert seen["XDG_STATE_HOME"] == str(session_home(session) / ".local/state")
    assert session_env("aider", session, operator)["HOME"] == str(session_home(session))
    assert session_env("gemini", session, operator)["GEMINI_CLI_HOME"] == str(session_home(session))
