"""The variables each agent CLI reads to configure itself, passed to its pane
even when credential-shaped: the scrub removes every other secret, but an
agent without its own key, endpoint or cloud sign-in cannot work.

Lists follow each CLI's documented environment variables. Names that are not
credential-shaped pass the scrub anyway; they are listed so the allow-list
says what the agent reads, and so a value holding credentials (a gateway URL
with a password) still reaches the agent. Patterns (`AIDER_*`) follow
`fnmatch`. Anything else the operator's agent needs goes in
`[agents.<name>] env_allow` of the config file (`settings`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

# CA bundles: an agent behind a TLS-inspecting proxy needs them. Proxies pass
# the scrub as addresses (`HTTPS_PROXY`, `ALL_PROXY`, …), their credentials
# removed like everywhere: an agent whose proxy needs its password gets it
# only when the operator names the variable in `[agents.<name>] env_allow`.
PROXIES: tuple[str, ...] = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)
NETWORK: tuple[str, ...] = (
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)

# The AWS SDK's credential chain (Bedrock).
AWS: tuple[str, ...] = (
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)

# Google Cloud's application default credentials (Vertex AI).
GOOGLE_CLOUD: tuple[str, ...] = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "CLOUDSDK_CONFIG",
)

CLAUDE: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_CLIENT_CERT",
    "CLAUDE_CODE_CLIENT_KEY",
    "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION",
    *AWS,
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_SKIP_VERTEX_AUTH",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLOUD_ML_REGION",
    "VERTEX_REGION_CLAUDE_*",
    *GOOGLE_CLOUD,
    *NETWORK,
)

CODEX: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "CODEX_HOME",
    "CODEX_OSS_BASE_URL",
    "CODEX_OSS_PORT",
    *NETWORK,
)


def codex_provider_env(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """The variables Codex's own config names for its model providers
    (`[model_providers.<id>] env_key` and `env_http_headers` in
    `$CODEX_HOME/config.toml`): the operator already told Codex where its key
    is, so corral passes that variable too. A config Codex cannot read adds
    nothing; Codex reports it itself."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex").expanduser()
    try:
        data = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ()
    providers = data.get("model_providers")
    names: list[str] = []
    for provider in providers.values() if isinstance(providers, dict) else ():
        if not isinstance(provider, dict):
            continue
        key = provider.get("env_key")
        if isinstance(key, str) and key:
            names.append(key)
        headers = provider.get("env_http_headers")
        if isinstance(headers, dict):
            names += [v for v in headers.values() if isinstance(v, str) and v]
    return tuple(dict.fromkeys(names))


# Gemini CLI 0.61: key, endpoint overrides (GOOGLE_GEMINI_BASE_URL is how a
# gateway or proxy is named), its settings/trust file locations, telemetry.
GEMINI: tuple[str, ...] = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_CLI_HOME",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_GCA",
    "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
    "GEMINI_SANDBOX",
    "GEMINI_SYSTEM_MD",
    "GEMINI_TELEMETRY_*",
    *GOOGLE_CLOUD,
    *NETWORK,
)

# Aider reads every option as AIDER_<OPTION> (AIDER_MODEL, AIDER_OPENAI_API_KEY,
# …) and any provider's key through LiteLLM's <PROVIDER>_API_KEY names.
# LITELLM_LOCAL_MODEL_COST_MAP=True stops LiteLLM fetching its price list from
# GitHub at start (offline that costs a timeout and a printed error).
AIDER: tuple[str, ...] = (
    "AIDER_*",
    "OPENAI_API_KEY",
    "OPENAI_API_BASE",
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "COHERE_API_KEY",
    "OLLAMA_API_BASE",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "AZURE_API_VERSION",
    "VERTEXAI_PROJECT",
    "VERTEXAI_LOCATION",
    *AWS,
    *GOOGLE_CLOUD,
    *NETWORK,
)

# OpenCode reads each provider's key under the name models.dev gives it (or
# the name its config says, `{env:NAME}`), its own settings as OPENCODE_*
# (OPENCODE_CONFIG_CONTENT gets corral's plugin added, see profiles.py).
OPENCODE: tuple[str, ...] = (
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE_API_KEY",
    "OPENCODE_AUTH_CONTENT",
    "OPENCODE_DISABLE_*",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "AZURE_RESOURCE_NAME",
    "AZURE_API_KEY",
    "GOOGLE_VERTEX_PROJECT",
    "GOOGLE_VERTEX_LOCATION",
    *AWS,
    *GOOGLE_CLOUD,
    *NETWORK,
)

OPENCODE_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def opencode_config_env(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """The variables OpenCode's own config names (`"apiKey": "{env:NAME}"` in
    the user config, OPENCODE_CONFIG, OPENCODE_CONFIG_DIR or
    OPENCODE_CONFIG_CONTENT): the operator already told OpenCode where its key
    is, so corral passes that variable too. A file it cannot read adds nothing;
    a project's own opencode.json is not read (name those in `env_allow`)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME", "~")).expanduser()
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config").expanduser()
    names = ("config.json", "opencode.json", "opencode.jsonc")
    paths = [config_home / "opencode" / name for name in names]
    if env.get("OPENCODE_CONFIG_DIR"):
        paths += [Path(env["OPENCODE_CONFIG_DIR"]).expanduser() / name for name in names]
    if env.get("OPENCODE_CONFIG"):
        paths.append(Path(env["OPENCODE_CONFIG"]).expanduser())
    texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return tuple(dict.fromkeys(OPENCODE_ENV_REF.findall("\n".join(texts))))


# A command line corral knows nothing about: only the network settings.
CUSTOM: tuple[str, ...] = NETWORK
