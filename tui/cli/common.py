"""What every subcommand shares: the refusal line and the version."""

from __future__ import annotations

import sys


def fail(message: str) -> int:
    """Every refusal is one line on stderr that says what to do, and exit 2."""
    print(f"corral: {message}", file=sys.stderr)
    return 2


def corral_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # slow: only when asked

    try:
        return version("corral")
    except PackageNotFoundError:
        return "0+unknown"
