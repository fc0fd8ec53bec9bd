"""Data shipped with corral: the demo repository and the scripted demo agent.

Read through `corral.assets.path()` so it works from a checkout, an editable
install and an installed wheel alike."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def path(*parts: str) -> Path:
    """The on-disk path of a shipped asset (wheels install assets as plain files)."""
    return Path(str(files(__name__).joinpath(*parts)))
