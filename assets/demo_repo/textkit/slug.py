"""URL slugs."""

import re


def slugify(text: str) -> str:
    """Lower-case words joined by dashes."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)
