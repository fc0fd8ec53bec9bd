"""Which model corral drafts with: the `[llm]` table of
`~/.config/corral/config.toml` (`CORRAL_CONFIG` names another file),
overridden by the environment.

    [llm]
    provider = "openai"              # openai | anthropic | cli:claude | cli:codex | none
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen2.5-coder:14b"
    api_key_env = "MY_LLM_KEY"       # the NAME of the variable holding the key

For the `cli:claude` / `cli:codex` providers, `base_url` may name the CLI's
binary (default: `claude` / `codex` on PATH) and `model` is passed as
`--model` when set.

Environment: CORRAL_LLM_PROVIDER, CORRAL_LLM_BASE_URL, CORRAL_LLM_MODEL and
CORRAL_LLM_API_KEY. Without CORRAL_LLM_API_KEY the key comes from the variable
`api_key_env` names, else from the provider's usual variable (OPENAI_API_KEY /
ANTHROPIC_API_KEY). Keys live only in the environment: the file never holds
one, and nothing here prints one.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from ..errors import ConfigError
from ..paths import config_path
from .base import ModelProvider
from .providers import (
    DEFAULT_ANTHROPIC_BASE_URL,
    DEFAULT_OPENAI_BASE_URL,
    build_provider,
    display_url,
)

ProviderName = Literal["openai", "anthropic", "cli:claude", "cli:codex", "none"]
PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "cli:claude", "cli:codex", "none")

NO_MODEL = (
    "no model is configured: set CORRAL_LLM_PROVIDER (openai, anthropic, cli:claude) "
    "or [llm] in ~/.config/corral/config.toml"
)

KEY_ENV = "CORRAL_LLM_API_KEY"
USUAL_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_BASE_URL = {"openai": DEFAULT_OPENAI_BASE_URL, "anthropic": DEFAULT_ANTHROPIC_BASE_URL}


class LLMFile(BaseModel):
    """The `[llm]` table as written (no key: only the name of its variable)."""

    model_config = ConfigDict(extra="forbid")

    provider: str = ""
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    # Several models (`llm.catalog` reads these; this table then describes none).
    models: list[Any] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)


class LLMConfig(BaseModel):
    """The resolved model configuration. `api_key` is a SecretStr (its repr
    and str are masked); `api_key_source` names the variable it came from."""

    model_config = ConfigDict(extra="forbid")

    provider: ProviderName = "none"
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    api_key: SecretStr | None = Field(default=None, repr=False, exclude=True)
    api_key_source: str | None = None
    provider_source: str = "default"  # "CORRAL_LLM_PROVIDER", "<path> [llm]" or "default"

    @property
    def configured(self) -> bool:
        return self.provider != "none"

    @property
    def effective_base_url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL.get(self.provider, "")

    @property
    def key_hint(self) -> str:
        """Exactly which variable(s) to set for a key, for error sentences."""
        if self.api_key_source:
            return self.api_key_source
        names = [KEY_ENV]
        if self.api_key_env:
            names.append(self.api_key_env)
        usual = USUAL_KEY_ENV.get(self.provider)
        if usual and usual not in names:
            names.append(usual)
        if len(names) == 1:
            return names[0]
        return f"{names[0]} (or {' or '.join(names[1:])})"


def _read_file(path: Path) -> LLMFile:
    if not path.exists():
        return LLMFile()
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    section = data.get("llm", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [llm] must be a table")
    if "api_key" in section:
        raise ConfigError(
            f"{path}: [llm] must not hold the key itself; put it in an environment variable "
            "and name that variable in api_key_env"
        )
    try:
        return LLMFile.model_validate(section)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: [llm] {problems}") from exc


def load_llm_config(env: Mapping[str, str] | None = None, path: Path | None = None) -> LLMConfig:
    """The `[llm]` table overridden by CORRAL_LLM_* variables (blank means unset)."""
    env = dict(os.environ) if env is None else dict(env)
    path = path or config_path(env)
    file = _read_file(path)

    def pick(var: str, value: str) -> tuple[str, str | None]:
        override = env.get(var, "").strip()
        return (override, var) if override else (value.strip(), None)

    provider, from_env = pick("CORRAL_LLM_PROVIDER", file.provider)
    provider = provider.lower() or "none"
    source = from_env or (f"{path} [llm]" if file.provider.strip() else "default")
    if provider not in PROVIDERS:
        raise ConfigError(
            f"{source}: unknown model provider {provider!r}; use one of {', '.join(PROVIDERS)}"
        )
    base_url, _ = pick("CORRAL_LLM_BASE_URL", file.base_url)
    model, _ = pick("CORRAL_LLM_MODEL", file.model)
    key_env = file.api_key_env.strip()

    key: str | None = None
    key_source: str | None = None
    candidates = [KEY_ENV, key_env, USUAL_KEY_ENV.get(provider, "")]
    if provider in USUAL_KEY_ENV:
        for var in candidates:
            if var and env.get(var, "").strip():
                key, key_source = env[var].strip(), var
                break
    return LLMConfig(
        provider=provider,  # type: ignore[arg-type]
        base_url=base_url,
        model=model,
        api_key_env=key_env,
        api_key=SecretStr(key) if key else None,
        api_key_source=key_source,
        provider_source=source,
    )


def make_provider(cfg: LLMConfig) -> ModelProvider | None:
    """The provider `cfg` describes; None when no model is configured."""
    if cfg.provider == "none":
        return None
    if cfg.provider in ("cli:claude", "cli:codex"):
        return build_provider(cfg.provider, cfg.base_url, cfg.model, None, key_hint="")
    if not cfg.model:
        raise ConfigError(
            f"the {cfg.provider} model provider needs a model name: set CORRAL_LLM_MODEL "
            "or model in [llm] of ~/.config/corral/config.toml"
        )
    key = cfg.api_key.get_secret_value() if cfg.api_key else None
    return build_provider(
        cfg.provider, cfg.effective_base_url, cfg.model, key, key_hint=cfg.key_hint
    )


def describe(cfg: LLMConfig) -> str:
    """One line for `corral doctor`; names the key's variable, never its value."""
    if cfg.provider == "none":
        return NO_MODEL
    model = cfg.model or "(no model set: set CORRAL_LLM_MODEL)"
    if cfg.provider.startswith("cli:"):
        agent = cfg.provider.removeprefix("cli:")
        binary = cfg.base_url or agent
        found = shutil.which(binary) if os.sep not in binary else binary
        where = f"{agent} CLI at {found}" if found else f"{agent} CLI not found on PATH"
        return f"{cfg.provider} {cfg.model or '(CLI default model)'} via {where}"
    if cfg.api_key_source:
        key = f"key from {cfg.api_key_source}: set"
    elif cfg.api_key_env:
        key = f"key from {cfg.api_key_env}: not set"
    elif cfg.provider == "openai":
        key = f"no key: set {cfg.key_hint} if the server needs one"
    else:
        key = f"no key: set {cfg.key_hint}"
    return f"{cfg.provider} {model} at {display_url(cfg.effective_base_url)} ({key})"
