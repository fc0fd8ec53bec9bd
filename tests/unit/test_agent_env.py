"""What each agent's pane receives: the variables that configure the agent
itself pass when set (even credential-shaped, even holding a credential);
an unrelated secret does not. The operator adds more per agent with
`[agents.<name>] env_allow`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from corral.supervisor.agents.agent_env import NETWORK, PROXIES
from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.agents.settings import AgentSettings, load_agent_settings, with_settings
from corral.supervisor.engines.external import ExternalEngine
from corral.supervisor.engines.registry import AgentEngines
from corral.supervisor.errors import ConfigError
from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.panes.pty import PtyBackend

# Every name here must pass to that agent: the brief's list, each CLI's
# documented variables, and the network settings every agent gets.
DECLARED: dict[str, tuple[str, ...]] = {
    "claude": (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLOUD_ML_REGION",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"),
    "gemini": (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ),
    "aider": (
        "AIDER_MODEL",
        "AIDER_OPENAI_API_KEY",
        "AIDER_ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_API_BASE",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
    ),
    "opencode": (
        "OPENCODE_CONFIG",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "OPENROUTER_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ),
    "custom:my-agent --fast": (),
}

# Secrets no agent is given, plus another vendor's key where it has no use.
UNRELATED: dict[str, str] = {
    "GITHUB_TOKEN": "ghp_" + "a1B2c3D4e5" * 4,
    "DATABASE_URL": "postgres://u:pw@db.example/app",
    "NPM_TOKEN": "plain",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/X",
}
OTHER_VENDOR = {
    "claude": "OPENAI_API_KEY",
    "codex": "ANTHROPIC_API_KEY",
    "gemini": "ANTHROPIC_API_KEY",
    "aider": "GITLAB_TOKEN",
    "opencode": "GITLAB_TOKEN",
    "custom:my-agent --fast": "ANTHROPIC_API_KEY",
}

# Values that would be scrubbed anywhere else: they hold a credential.
SECRET_VALUE = "sk-" + "A1b2C3d4E5" * 3
PROXY_WITH_CREDENTIALS = "http://u:pw@proxy.corp.example:3128"


def env_allow_of(agent: str, tmp_path: Path) -> tuple[str, ...]:
    """The allow-list as the agent's launch plan carries it to the pane."""
    plan = profile_for(agent).plan(
        "/bin/agent", prompt="task", session_dir=tmp_path, hook_cmd="corral hook"
    )
    return plan.env_allow


@pytest.mark.parametrize("agent", list(DECLARED))
def test_each_agent_gets_its_own_variables_and_no_unrelated_secret(
    agent: str, tmp_path: Path
) -> None:
    own = {name: SECRET_VALUE for name in DECLARED[agent]}
    own.update({name: "/etc/ssl/corp.pem" for name in NETWORK})
    proxies = {name: PROXY_WITH_CREDENTIALS for name in PROXIES if name.lower() != "no_proxy"}
    other = {**UNRELATED, OTHER_VENDOR[agent]: SECRET_VALUE}
    env = scrubbed_env(
        {**own, **other, **proxies, "PATH": "/usr/bin"}, allow=env_allow_of(agent, tmp_path)
    )
    assert {name: env.get(name) for name in own} == own
    assert not set(other) & set(env), f"{agent} got {sorted(set(other) & set(env))}"
    assert env["PATH"] == "/usr/bin"
    # the proxy's address reaches the agent, its password does not
    assert {name: env.get(name) for name in proxies} == dict.fromkeys(
        proxies, "http://proxy.corp.example:3128"
    )


def test_a_proxy_password_reaches_an_agent_only_when_the_operator_names_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[agents.claude]\nenv_allow = ["HTTPS_PROXY"]\n', encoding="utf-8")
    profile = with_settings(profile_for("claude"), load_agent_settings(path))
    plan = profile.plan("/bin/agent", prompt="task", session_dir=tmp_path, hook_cmd="corral hook")
    base = {"HTTPS_PROXY": PROXY_WITH_CREDENTIALS, "ALL_PROXY": PROXY_WITH_CREDENTIALS}
    env = scrubbed_env(base, allow=plan.env_allow)
    assert env["HTTPS_PROXY"] == PROXY_WITH_CREDENTIALS  # passed on purpose
    assert env["ALL_PROXY"] == "http://proxy.corp.example:3128"  # not named: address only


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_agent_settings_are_read_from_the_config_file(tmp_path: Path) -> None:
    assert load_agent_settings(tmp_path / "missing.toml") == {}
    path = config(
        tmp_path,
        '[supervisor]\nrepair_invokes = 1\n\n[agents.claude]\nenv_allow = ["MY_GATEWAY_TOKEN"]\n'
        '\n[agents.custom]\nenv_allow = ["MYTOOL_*"]\n',
    )
    assert load_agent_settings(path) == {
        "claude": AgentSettings(env_allow=("MY_GATEWAY_TOKEN",)),
        "custom": AgentSettings(env_allow=("MYTOOL_*",)),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[agents.claud]\nenv_allow = []\n",
            r"\[agents.claud\] names no agent .*use one of claude",
        ),
        ("[agents.claude]\nenv_alow = []\n", r"\[agents.claude\] env_alow: Extra inputs"),
        ('[agents.claude]\nenv_allow = ["A B"]\n', "'A B' is not a variable name"),
        ('[agents.claude]\nenv_allow = ["*"]\n', "would pass every secret"),
        ("agents = 1\n", r"\[agents\] must hold one table per agent"),
        ("[agents\n", "not valid TOML"),
    ],
)
def test_a_malformed_agents_table_is_an_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = config(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as info:
        load_agent_settings(path)
    assert str(path) in str(info.value)


def test_configured_variables_reach_that_agents_pane_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the engine: the settings extend the profile's allow-list in
    the environment the pane is started with."""
    monkeypatch.setenv("MYTOOL_TOKEN", "plain")
    monkeypatch.setenv("GITHUB_TOKEN", "plain")
    monkeypatch.delenv("CORRAL_INVOKED_BY", raising=False)
    settings = load_agent_settings(config(tmp_path, '[agents.custom]\nenv_allow = ["MYTOOL_*"]\n'))
    engines = AgentEngines(
        PaneManager(PtyBackend(), tmp_path / "agents"),
        session_dir=lambda sid: tmp_path / "agents" / sid,
        agent_settings=settings,
    )

    def pane_env(label: str) -> dict[str, str]:
        engine = engines.create(label)
        assert isinstance(engine, ExternalEngine)
        _, env = engine._plan(SimpleNamespace(session_id="s1", model_id=None), "task")  # type: ignore[arg-type]
        return env

    env = pane_env("external:custom:sh -i")
    assert env["MYTOOL_TOKEN"] == "plain" and "GITHUB_TOKEN" not in env
    assert "MYTOOL_TOKEN" not in pane_env("external:demo")


def test_codex_passes_the_key_variables_its_own_config_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Codex model provider's `env_key` (and `env_http_headers`) in
    $CODEX_HOME/config.toml is the agent's own setting: it passes to codex."""
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "azure"\n\n[model_providers.azure]\nname = "Azure"\n'
        'env_key = "AZURE_OPENAI_API_KEY"\nenv_http_headers = { "X-Org" = "CORP_ORG_TOKEN" }\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("CODEX_HOME", str(home))
    base = {"AZURE_OPENAI_API_KEY": "plain", "CORP_ORG_TOKEN": "plain", "GITHUB_TOKEN": "plain"}
    env = scrubbed_env(base, allow=env_allow_of("codex", tmp_path))
    assert env.get("AZURE_OPENAI_API_KEY") == env.get("CORP_ORG_TOKEN") == "plain"
    assert "GITHUB_TOKEN" not in env
    # not for another agent, and an unreadable config adds nothing
    assert "AZURE_OPENAI_API_KEY" not in scrubbed_env(base, allow=env_allow_of("claude", tmp_path))
    (home / "config.toml").write_text("[model_providers\n", encoding="utf-8")
    assert "AZURE_OPENAI_API_KEY" not in scrubbed_env(base, allow=env_allow_of("codex", tmp_path))
