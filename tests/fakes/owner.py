"""An owner whose session registry the test built and handed in.

A test that must set up what only the supervisor's own services hold (a row
amended as an agent's records would, an event emitted by hand, a store that
fails to save) builds the registry on the state dir and hands it to the
facade, the way the pane manager and the hosts are handed in; everything
else goes through the facade's public methods.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.contracts.drafting import ContractDrafter
from corral.supervisor.session.registry import SessionRegistry
from tests.conftest import hello_contract
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Write


def owner_with_registry(
    state_dir: Path,
    *,
    drafter: ContractDrafter,
    engine: ScriptedEngine | None = None,
    config: SupervisorConfig,
    clock: Callable[[], float] = time.time,
    **kw: Any,
) -> tuple[Supervisor, SessionRegistry]:
    """A supervisor (not yet opened) on `state_dir` and the registry it runs on."""
    registry = SessionRegistry(state_dir, config=config, clock=clock, panes=kw.get("panes"))
    sup = Supervisor(
        state_dir,
        drafter=drafter,
        engines=ScriptedEngines(engine or ScriptedEngine([[Write("hello.txt", "hi\n")]])),
        config=config,
        clock=clock,
        registry=registry,
        **kw,
    )
    return sup, registry


@contextlib.asynccontextmanager
async def opened_with_registry(
    state_dir: Path,
    *,
    drafter: ContractDrafter | None = None,
    engine: ScriptedEngine | None = None,
    config: SupervisorConfig,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[tuple[Supervisor, SessionRegistry]]:
    """`owner_with_registry`, opened for the block and closed after it."""
    sup, registry = owner_with_registry(
        state_dir,
        drafter=drafter or ScriptedDrafter([hello_contract()]),
        engine=engine,
        config=config,
        clock=clock,
    )
    await sup.open()
    try:
        yield sup, registry
    finally:
        await sup.close()
