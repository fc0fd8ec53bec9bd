"""Fixtures for integration tests beyond the shared ones in tests/conftest.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.session.registry import SessionRegistry
from tests.conftest import fast_config
from tests.fakes.owner import opened_with_registry

OwnerFactory = Callable[..., Awaitable[tuple[Supervisor, SessionRegistry]]]


@pytest.fixture
async def make_owner(state_dir: Path) -> AsyncIterator[OwnerFactory]:
    """Like `make_supervisor`, but returns (supervisor, the registry handed
    to it): `await make_owner(drafter=..., engine=..., clock=..., state=...,
    **config_fields)`; each is closed at teardown."""
    async with contextlib.AsyncExitStack() as stack:

        async def factory(
            *, state: Path | None = None, clock: Any = None, **kw: Any
        ) -> tuple[Supervisor, SessionRegistry]:
            given = {k: kw.pop(k) for k in ("drafter", "engine") if k in kw}
            config = kw.pop("config", None) or fast_config(**kw)
            extra = {"clock": clock} if clock is not None else {}
            return await stack.enter_async_context(
                opened_with_registry(state or state_dir, config=config, **given, **extra)
            )

        yield factory
