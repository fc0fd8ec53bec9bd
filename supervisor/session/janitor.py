"""Retention in practice: finished sessions leave memory after the retention
window, stored sessions beyond the disk limits are forgotten with their
journals, and rejected worktrees are removed after their day. It runs once a
minute and before each new session; the disk part at most once per
`disk_gc_interval_secs`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ..config import SupervisorConfig
from ..store.retention import disk_gc_victims
from ..workspaces import Workspaces
from .registry import SessionRegistry

log = logging.getLogger("corral.supervisor")

SWEEP_EVERY_SECS = 60


class Janitor:
    def __init__(
        self, registry: SessionRegistry, workspaces: Workspaces, config: SupervisorConfig
    ) -> None:
        self._registry = registry
        self._workspaces = workspaces
        self._config = config
        self._last_disk_sweep: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def sweep(self) -> list[str]:
        """Forget what retention allows; returns the ids that left memory."""
        gone = self._registry.forget_finished()
        self._sweep_disk()
        return gone

    def _sweep_disk(self) -> None:
        mono = time.monotonic()
        interval = self._config.disk_gc_interval_secs
        if self._last_disk_sweep is not None and mono - self._last_disk_sweep < interval:
            return
        self._last_disk_sweep = mono
        registry = self._registry
        with contextlib.suppress(RuntimeError):  # no running loop: skip this round
            asyncio.get_running_loop()
            registry.spawn_background(
                asyncio.to_thread(self._workspaces.discard_expired_rejections, registry.clock())
            )
        victims = disk_gc_victims(
            registry.stored_refs(),
            registry.live_ids(),
            now=registry.clock(),
            max_sessions=self._config.retention.max_sessions,
            max_age_days=self._config.retention.max_age_days,
        )
        registry.forget_stored(victims)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_SECS)
            try:
                self.sweep()
            except Exception:
                log.exception("retention sweep failed")
