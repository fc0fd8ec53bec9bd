"""The provider class that serves a model, chosen by its kind (`anthropic`,
`openai`, `cli:claude`, `cli:codex`). A provider's module, and the HTTP stack
under it (`http.client`, `urllib.request`, `email`), loads when a model of
that kind is first built: an owner that never calls a model never loads them.
Also what the catalog and the config show of a URL."""

from __future__ import annotations

from .base import ModelProvider
from .endpoints import DEFAULT_ANTHROPIC_BASE_URL as DEFAULT_ANTHROPIC_BASE_URL
from .endpoints import DEFAULT_OPENAI_BASE_URL as DEFAULT_OPENAI_BASE_URL
from .endpoints import display_url as display_url  # where the catalog reads it


def build_provider(
    kind: str, base_url: str, model: str, key: str | None, *, key_hint: str
) -> ModelProvider:
    """The provider of `kind` for `model` at `base_url` (for a CLI kind, the
    CLI's path, empty for the one on PATH)."""
    if kind.startswith("cli:"):
        from .cli_oneshot import CliOneShotProvider

        return CliOneShotProvider(
            "claude" if kind == "cli:claude" else "codex", base_url or None, model
        )
    if kind == "openai":
        from .openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(base_url, model, key, key_hint=key_hint)
    from .anthropic import AnthropicProvider

    return AnthropicProvider(base_url, model, key, key_hint=key_hint)
