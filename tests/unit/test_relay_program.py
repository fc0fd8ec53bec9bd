"""The network relay runs from bytecode kept beside its source: inside the
sandbox only the source's folder is visible, so an operator's
PYTHONPYCACHEPREFIX must not move it (every confined agent lost its network
under `make test`, which sets one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from corral.supervisor.sandbox import netstart


def test_the_relay_bytecode_sits_beside_its_source_whatever_the_cache_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(netstart, "_compiled", {})
    program = netstart.relay_program(sys.executable)
    assert program.parent.parent == netstart.RELAY.parent
    assert not (tmp_path / "elsewhere").exists()
    if program != netstart.RELAY:  # the bytecode could be written: it is fresh and loads
        assert program.suffix == ".pyc" and program.stat().st_size > 16
