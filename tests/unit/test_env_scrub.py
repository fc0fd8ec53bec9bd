"""The environment scrub, one row per variable: its name, its value, and what
the child must see (None: removed). Every row runs `scrubbed_env` on that one
variable, so each row fails on its own when a rule changes."""

from __future__ import annotations

import pytest

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.engines.native import NativeEngine
from corral.supervisor.governance.env_scrub import scrubbed_env

GHP = "ghp_" + "a1B2c3D4e5" * 4  # 40 characters after the prefix
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (name, value, what the child sees: the value, another value, or None = removed)
REMOVED_BY_NAME: list[tuple[str, str, str | None]] = [
    # bare words
    ("API_KEY", "plain", None),
    ("APIKEY", "plain", None),
    ("TOKEN", "plain", None),
    ("SECRET", "plain", None),
    ("SECRETS", "plain", None),
    ("PASSWORD", "plain", None),
    ("PASSWD", "plain", None),
    ("PASS", "plain", None),
    ("PASSPHRASE", "plain", None),
    ("AUTH", "plain", None),
    ("DSN", "plain", None),
    ("COOKIE", "plain", None),
    # suffixes
    ("OPENAI_API_KEY", "plain", None),
    ("MY_APIKEY", "plain", None),
    ("GITHUB_TOKEN", "plain", None),
    ("github_token", "plain", None),  # case does not matter
    ("CI_JOB_TOKEN", "plain", None),
    ("ANTHROPIC_AUTH_TOKEN", "plain", None),
    ("AZURE_CLIENT_SECRET", "plain", None),
    ("DB_PASSWORD", "plain", None),
    ("SMTP_PASSWD", "plain", None),
    ("DB_PASS", "plain", None),
    ("GPG_PASSPHRASE", "plain", None),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/key.json", None),
    ("AZURE_CREDENTIAL", "plain", None),
    ("GITLAB_PAT", "plain", None),
    ("HTTP_AUTHORIZATION", "plain", None),
    ("AZURE_STORAGE_CONNECTION_STRING", "AccountName=a;AccountKey=b", None),
    # keys that are secret keys (a bare *_KEY is not: see the kept rows)
    ("DJANGO_SECRET_KEY", "plain", None),
    ("JWT_PRIVATE_KEY", "plain", None),
    ("MINIO_ACCESS_KEY", "plain", None),
    ("AWS_SECRET_ACCESS_KEY", "plain", None),
    ("AWS_ACCESS_KEY_ID", "plain", None),
    ("PUSHER_AUTH_KEY", "plain", None),
    ("RAILS_MASTER_KEY", "plain", None),
    ("JWT_SIGNING_KEY", "plain", None),
    ("APP_ENCRYPTION_KEY", "plain", None),
    ("NEW_RELIC_LICENSE_KEY", "plain", None),
    ("GITHUB_DEPLOY_KEY", "plain", None),
    # frameworks' signing secrets
    ("SECRET_KEY_BASE", "plain", None),
    ("secret_key_base", "plain", None),
    ("APP_KEY", "base64:plain", None),
    ("LARAVEL_APP_KEY", "plain", None),
    # services: error reporting, webhooks
    ("SENTRY_DSN", "https://abc123@o1.ingest.sentry.io/42", None),
    ("SLACK_WEBHOOK_URL", "https://example.invalid/hook", None),
    ("TEAMS_WEBHOOK", "https://example.invalid/hook", None),
    # package registries
    ("NPM_CONFIG__AUTH", "dXNlcjpwYXNz", None),
    ("npm_config__auth", "dXNlcjpwYXNz", None),
    ("NPM_CONFIG__AUTHTOKEN", "plain", None),
    ("npm_config_//registry.npmjs.org/:_authToken", "plain", None),
    ("npm_config_//npm.corp.example/:_password", "plain", None),
    ("YARN_NPM_AUTH_IDENT", "user:pass", None),
    # databases
    ("PGPASSWORD", "plain", None),
    ("MYSQL_PWD", "plain", None),
    ("REDISCLI_AUTH", "plain", None),
    # sessions and cookies
    ("BW_SESSION", "plain", None),
    ("OP_SESSION_my_team", "plain", None),
    ("SESSION_COOKIE", "plain", None),
    # ways to reach the user's own credentials
    ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1", None),
    ("DOCKER_AUTH_CONFIG", "{}", None),
    ("GIT_ASKPASS", "/usr/lib/code/askpass.sh", None),
    ("SSH_ASKPASS", "/usr/bin/ksshaskpass", None),
    ("VSCODE_GIT_ASKPASS_MAIN", "/usr/lib/code/askpass-main.js", None),
]

REMOVED_BY_VALUE: list[tuple[str, str, str | None]] = [
    # URLs whose userinfo holds a password
    ("DATABASE_URL", "postgres://u:pw@h/db", None),
    ("REDIS_URL", "redis://:pw@localhost:6379/0", None),
    ("MONGO_URI", "mongodb+srv://admin:hunter2@cluster0.example.net/db", None),
    ("PIP_INDEX_URL", "https://__token__:abc@pypi.example/simple", None),
    ("UPSTREAM", "https://x-access-token:abc@github.com/o/r.git", None),
    ("MIRRORS", "https://a.example https://u:pw@b.example/x", None),
    # well-known token formats under innocent names
    ("MY_VAR", GHP, None),
    ("MY_VAR", "github_pat_" + "A1b2C3d4E5" * 4, None),
    ("MY_VAR", "glpat-" + "x1Y2z3W4v5" * 2, None),
    ("MY_VAR", "xoxb-1234567890-abcdefghij", None),
    ("MY_VAR", "xoxp-1234567890-abcdefghij", None),
    ("MY_VAR", "sk-" + "A1b2C3d4E5" * 3, None),
    ("MY_VAR", "sk-ant-api03-" + "A1b2C3d4E5" * 3, None),
    ("MY_VAR", "sk_live_" + "A1b2C3d4E5" * 2, None),
    ("MY_VAR", "sk_test_" + "A1b2C3d4E5" * 3, None),
    ("MY_VAR", "rk_live_" + "A1b2C3d4E5" * 3, None),
    ("MY_VAR", "rk_test_" + "A1b2C3d4E5" * 3, None),
    ("PAYMENTS", "--key=sk_live_" + "A1b2C3d4E5" * 3 + " --mode=x", None),
    ("MY_VAR", "whsec_" + "A1b2C3d4E5" * 3, None),
    ("MY_VAR", "AKIAIOSFODNN7EXAMPLE", None),
    ("MY_VAR", "ASIAIOSFODNN7EXAMPLE", None),
    ("MY_VAR", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", None),
    ("MY_VAR", "npm_" + "A1b2C3d4E5" * 3 + "A1b2C3", None),
    ("MY_VAR", "pypi-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 5, None),
    ("MY_VAR", "hf_" + "A1b2C3d4E5" * 3 + "A1b2", None),
    ("MY_VAR", JWT, None),
    ("EXTRA_HEADERS", "Authorization: Bearer abcdef0123456789abcdef", None),
    ("MY_VAR", PEM, None),
    ("MY_VAR", "-----BEGIN RSA PRIVATE KEY-----\nMIIE", None),
    ("NOTIFY_URL", "https://hooks.slack.com/services/T000/B000/XXXX", None),
    ("NOTIFY_URL", "https://discord.com/api/webhooks/1/abc", None),
]

# Proxies: the address stays, its credentials go (checks and the built-in shell).
PROXIES: list[tuple[str, str, str | None]] = [
    ("HTTPS_PROXY", "http://u:pw@proxy:3128", "http://proxy:3128"),
    ("https_proxy", "http://u:pw@proxy:3128/", "http://proxy:3128/"),
    ("HTTP_PROXY", "u:pw@proxy:3128", "proxy:3128"),
    ("ALL_PROXY", "socks5://u:pw@socks.example:1080", "socks5://socks.example:1080"),
    ("npm_config_https_proxy", "http://u:pw@proxy:8080", "http://proxy:8080"),
    ("HTTPS_PROXY", "http://" + GHP + "@proxy:3128", "http://proxy:3128"),
    ("HTTPS_PROXY", "http://proxy:3128/?t=" + GHP, None),  # a token elsewhere: removed
    ("HTTPS_PROXY", "http://proxy.example:3128", "http://proxy.example:3128"),
    ("NO_PROXY", "localhost,127.0.0.1,.corp.example", "localhost,127.0.0.1,.corp.example"),
]


def kept(name: str, value: str) -> tuple[str, str, str | None]:
    return (name, value, value)


# What a user needs to work, and names or values that look like secrets but
# are not (decided deliberately).
KEPT: list[tuple[str, str, str | None]] = [
    kept("PATH", "/usr/local/bin:/usr/bin:/bin"),
    kept("HOME", "/home/u"),
    kept("USER", "u"),
    kept("SHELL", "/bin/bash"),
    kept("LANG", "C.UTF-8"),
    kept("LC_ALL", "en_US.UTF-8"),
    kept("TERM", "xterm-256color"),
    kept("COLORTERM", "truecolor"),
    kept("EDITOR", "vim"),
    kept("VISUAL", "code --wait"),
    kept("PAGER", "less"),
    kept("TZ", "Europe/Paris"),
    kept("TMPDIR", "/tmp"),
    kept("XDG_CONFIG_HOME", "/home/u/.config"),
    kept("LS_COLORS", "rs=0:di=01;34:ln=01;36:*.tar=01;31"),
    # *PWD is a password only after an underscore
    kept("PWD", "/home/u/project"),
    kept("OLDPWD", "/home/u"),
    # session names that are not session keys
    kept("DESKTOP_SESSION", "gnome"),
    kept("XDG_SESSION_TYPE", "wayland"),
    kept("XDG_SESSION_ID", "2"),
    kept("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
    kept("TERM_SESSION_ID", "w0t0p0:1234"),
    # a bare *_KEY is a setting, not a secret
    kept("GPG_KEY", "A035C8C19219BA821ECEA86B64E628F8D684696D"),
    kept("CACHE_KEY", "v3-deps"),
    kept("SORT_KEY", "name"),
    kept("KEYBOARD_LAYOUT", "us"),
    kept("XKB_DEFAULT_LAYOUT", "fr"),
    kept("GPG_TTY", "/dev/pts/1"),
    # words that merely contain TOKEN, PASSWORD, AUTH
    kept("TOKENIZERS_PARALLELISM", "false"),
    kept("MAX_TOKENS", "4096"),
    kept("PASSWORD_STORE_DIR", "/home/u/.password-store"),
    kept("GIT_AUTHOR_NAME", "U Ser"),
    kept("PGPASSFILE", "/home/u/.pgpass"),
    kept("AWS_SHARED_CREDENTIALS_FILE", "/home/u/.aws/credentials"),
    kept("AWS_PROFILE", "dev"),
    kept("AWS_REGION", "eu-west-1"),
    kept("KUBECONFIG", "/home/u/.kube/config"),
    # URLs without a password
    kept("DATABASE_URL", "postgres://localhost/db"),
    kept("DATABASE_URL", "postgres://u@h/db"),
    kept("GIT_URL", "ssh://git@github.com/o/r.git"),
    kept("DOCS_URL", "https://example.com:8443/users/@me"),
    kept("GIT_SSH_COMMAND", "ssh -i ~/.ssh/id_ed25519"),
    # near misses of token formats
    kept("DISK_LABEL", "disk-0123456789abcdefghijklmnop"),
    kept("TASK", "ask-0123456789abcdefghijklmnop"),
    kept("SHORT", "sk-abc"),
    kept("STRIPE_PUBLISHABLE", "pk_live_" + "A1b2C3d4E5" * 3),  # published in web pages
    kept("KEYMAP_APP_KEYS", "ctrl+a"),
    kept("NOTE", "Bearer tokens are documented"),
    kept("PUBLIC_KEY_HEADER", "-----BEGIN PUBLIC KEY-----"),
]

ROWS = REMOVED_BY_NAME + REMOVED_BY_VALUE + PROXIES + KEPT


@pytest.mark.parametrize(("name", "value", "want"), ROWS, ids=[f"{n}={v[:24]}" for n, v, _ in ROWS])
def test_scrub_row(name: str, value: str, want: str | None) -> None:
    assert scrubbed_env({name: value}).get(name) == want


def test_allow_passes_a_named_variable_whatever_its_name_or_value() -> None:
    base = {"MY_TOKEN": "plain", "GATEWAY": "https://u:pw@gw.example", "TOOL_KEY_X": GHP}
    out = scrubbed_env(base, allow=("MY_TOKEN", "GATEWAY", "TOOL_*"))
    assert {k: out[k] for k in base} == base
    assert "MY_TOKEN" not in scrubbed_env(base, allow=("my_token",))  # names are exact


def test_keep_credentials_keeps_everything_and_the_git_guards_are_always_set() -> None:
    base = {"GITHUB_TOKEN": "plain", "DATABASE_URL": "postgres://u:pw@h/db"}
    out = scrubbed_env(base, keep_credentials=True, invoked_by="corral-check")
    assert {k: out[k] for k in base} == base
    for env in (out, scrubbed_env(base)):
        assert env["GIT_TERMINAL_PROMPT"] == "0"
        assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("credential.helper", "")
    assert out["CORRAL_INVOKED_BY"] == "corral-check"


AGENT_VARIABLES = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "A1b2C3d4E5" * 3,
    "CLAUDE_CODE_OAUTH_TOKEN": "plain",
    "OPENAI_API_KEY": "sk-" + "A1b2C3d4E5" * 3,
    "GEMINI_API_KEY": "plain",
}


def test_checks_and_the_built_in_shell_get_no_agent_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The strict scrub: no allow-list, proxies without their credentials."""
    for name, value in AGENT_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HTTPS_PROXY", "http://u:pw@proxy:3128")
    env = NativeEngine.shell_env()
    assert not set(AGENT_VARIABLES) & set(env)
    assert env["HTTPS_PROXY"] == "http://proxy:3128"


async def test_a_contract_check_sees_no_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name, value in AGENT_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@h/db")
    monkeypatch.setenv("CORRAL_TEST_VISIBLE", "yes")
    code, output, _ = await run_command("env", tmp_path, 30)  # type: ignore[arg-type]
    assert code == 0 and "CORRAL_TEST_VISIBLE=yes" in output
    for name in (*AGENT_VARIABLES, "DATABASE_URL"):
        assert f"{name}=" not in output
