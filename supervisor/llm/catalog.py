"""The models corral may use, in their default order: `[[llm.models]]`
entries of the config file, or the single `[llm]` table as a one-entry list.

    [llm]
    order = ["local", "sonnet"]          # the default order (else as listed)

    [[llm.models]]
    name = "sonnet"                      # what pins and journals call it
    provider = "anthropic"               # openai | anthropic | cli:claude | cli:codex
    base_url = "https://api.anthropic.com"
    model = "claude-sonnet-4-5"          # the id sent to the server (and to agents)
    api_key_env = "ANTHROPIC_API_KEY"    # the NAME of the variable holding the key
    tools = true                         # it can call tools (built-in engine, discussions)
    price_in = 3.0                       # USD per million input tokens (optional)
    price_out = 15.0                     # USD per million output tokens (optional)

A name must be unique; keys live only in the environment. With entries, the
CORRAL_LLM_* variables (which describe one model) are ignored; without them
the single `[llm]` model, overridden by those variables, is the only entry.
"""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..paths import config_path
from .base import ModelProvider, Usage
from .config import DEFAULT_BASE_URL, PROVIDERS, USUAL_KEY_ENV, LLMConfig, load_llm_config
from .providers import build_provider, display_url

AUTO = "auto"


class ModelEntry(BaseModel):
    """One `[[llm.models]]` entry as written (never a key: its variable's name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    provider: str
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    tools: bool = True
    price_in: float | None = Field(default=None, ge=0)
    price_out: float | None = Field(default=None, ge=0)

    @property
    def remote(self) -> bool:
        """Served over HTTP (a credential can be rejected), not an agent CLI."""
        return not self.provider.startswith("cli:")

    @property
    def effective_base_url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL.get(self.provider, "")

    @property
    def key_var(self) -> str:
        return self.api_key_env or USUAL_KEY_ENV.get(self.provider, "")

    def key(self, env: Mapping[str, str]) -> str | None:
        var = self.key_var
        value = env.get(var, "").strip() if var else ""
        return value or None

    def cost(self, usage: Usage) -> float | None:
        """USD for `usage` at the configured prices; None when unpriced."""
        if self.price_in is None and self.price_out is None:
            return None
        return (
            usage.input_tokens * (self.price_in or 0.0)
            + usage.output_tokens * (self.price_out or 0.0)
        ) / 1_000_000


@dataclass(frozen=True)
class ModelCatalog:
    """The configured models in their default order (the fallback order)."""

    entries: tuple[ModelEntry, ...] = ()
    source: str = "default"

    def get(self, name: str) -> ModelEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]


def catalog_from_config(cfg: LLMConfig) -> ModelCatalog:
    """The single `[llm]` model as a one-entry catalog (empty when none)."""
    return ModelCatalog(_entries_from_legacy(cfg), cfg.provider_source)


def _entries_from_legacy(cfg: LLMConfig) -> tuple[ModelEntry, ...]:
    if not cfg.configured:
        return ()
    if not cfg.model and not cfg.provider.startswith("cli:"):
        raise ConfigError(
            f"the {cfg.provider} model provider needs a model name: set CORRAL_LLM_MODEL "
            "or model in [llm] of ~/.config/corral/config.toml"
        )
    name = cfg.model or cfg.provider
    return (
        ModelEntry(
            name=name,
            provider=cfg.provider,
            base_url=cfg.base_url,
            model=cfg.model,
            api_key_env=cfg.api_key_source or cfg.api_key_env,
        ),
    )


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def load_catalog(env: Mapping[str, str] | None = None, path: Path | None = None) -> ModelCatalog:
    """The configured models. A broken entry is a ConfigError naming it."""
    env = dict(os.environ) if env is None else dict(env)
    path = path or config_path(env)
    section: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ConfigError(f"{path}: cannot be read as TOML ({exc})") from exc
        raw = data.get("llm", {})
        section = raw if isinstance(raw, dict) else {}
    raw_models = section.get("models")
    if not raw_models:
        legacy = load_llm_config(env, path)
        return ModelCatalog(_entries_from_legacy(legacy), legacy.provider_source)
    if not isinstance(raw_models, list):
        raise ConfigError(f"{path}: llm.models must be a list of [[llm.models]] tables")
    entries: list[ModelEntry] = []
    for i, raw in enumerate(raw_models, start=1):
        if isinstance(raw, dict) and "api_key" in raw:
            raise ConfigError(
                f"{path}: [[llm.models]] entry {i} must not hold the key itself; put it in an "
                "environment variable and name that variable in api_key_env"
            )
        try:
            entry = ModelEntry.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"{path}: [[llm.models]] entry {i}: {_problems(exc)}") from exc
        if entry.provider not in PROVIDERS or entry.provider == "none":
            raise ConfigError(
                f"{path}: model {entry.name!r}: unknown provider {entry.provider!r}; use one of "
                f"{', '.join(p for p in PROVIDERS if p != 'none')}"
            )
        if not entry.model and entry.remote:
            raise ConfigError(f"{path}: model {entry.name!r} needs a model id (model = …)")
        if any(e.name == entry.name for e in entries):
            raise ConfigError(f"{path}: the model name {entry.name!r} is used twice")
        entries.append(entry)
    order = section.get("order")
    if order is not None:
        if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
            raise ConfigError(f"{path}: llm.order must be a list of model names")
        by_name = {e.name: e for e in entries}
        unknown = [n for n in order if n not in by_name]
        if unknown:
            raise ConfigError(
                f"{path}: llm.order names {', '.join(map(repr, unknown))}, which no "
                "[[llm.models]] entry is called"
            )
        listed = list(dict.fromkeys(order))
        entries = [by_name[n] for n in listed] + [e for e in entries if e.name not in listed]
    return ModelCatalog(tuple(entries), f"{path} [[llm.models]]")


def provider_for(entry: ModelEntry, env: Mapping[str, str] | None = None) -> ModelProvider:
    """The provider serving `entry`, with its key read from the environment now."""
    env = os.environ if env is None else env
    if entry.provider.startswith("cli:"):
        return build_provider(entry.provider, entry.base_url, entry.model, None, key_hint="")
    hint = entry.key_var or "the key's variable (api_key_env)"
    return build_provider(
        entry.provider, entry.effective_base_url, entry.model, entry.key(env), key_hint=hint
    )


@dataclass(frozen=True)
class EntryCheck:
    """What `corral doctor` says about one model: never the key's value."""

    entry: ModelEntry
    key: str  # "key from X: set" / "key from X: not set" / "no key"
    reach: str  # what was tried and how it went
    ok: bool


def check_entry(
    entry: ModelEntry, env: Mapping[str, str] | None = None, *, timeout: float = 2.0
) -> EntryCheck:
    """Key present (by variable name) and reachable: a TCP connect to the
    server's host and port (no request is sent, so nothing is billed)."""
    env = os.environ if env is None else env
    var = entry.key_var
    if entry.provider.startswith("cli:"):
        import shutil

        binary = entry.base_url or entry.provider.removeprefix("cli:")
        found = shutil.which(binary) if os.sep not in binary else binary
        reach = f"CLI {found}" if found else f"CLI {binary} not found on PATH"
        return EntryCheck(entry, "key: the CLI's own sign-in", reach, bool(found))
    key_set = entry.key(env) is not None
    key = f"key from {var}: {'set' if key_set else 'not set'}" if var else "no key variable"
    url = entry.effective_base_url
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    where = display_url(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return EntryCheck(entry, key, f"TCP connect to {where}: failed ({reason})", False)
    key_ok = key_set or entry.provider == "openai"  # local OpenAI-compatible servers need none
    return EntryCheck(entry, key, f"TCP connect to {where}: ok", key_ok)


def describe_entry(check: EntryCheck) -> str:
    e = check.entry
    caps = "tools" if e.tools else "no tools"
    price = ""
    if e.price_in is not None or e.price_out is not None:
        price = f", ${e.price_in or 0:g}/${e.price_out or 0:g} per M tokens in/out"
    model = e.model or "(CLI default model)"
    return f"{e.provider} {model} ({caps}{price}); {check.key}; {check.reach}"
