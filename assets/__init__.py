"""Data shipped with corral: the demo repository and the scripted demo agent.

Read through `corral.assets.path()` so it works from a checkout, an editable
install and an installed wheel alike: each has the assets as plain files
beside this module (importlib.resources would find the same directory, and
costs every process its zip readers)."""

from __future__ import annotations

from pathlib import Path


def path(*parts: str) -> Path:
    """The on-disk path of a shipped asset (wheels install assets as plain files)."""
    return Path(__file__).resolve().parent.joinpath(*parts)
