"""Where the providers' APIs are and what of a URL may be shown: a leaf the
provider modules and `providers.py` (which loads them by kind) both import,
so neither imports the other."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def display_url(url: str) -> str:
    """`url` without user info, query or fragment (safe to show)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
