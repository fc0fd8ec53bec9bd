"""Where the foreman places its subtasks: this machine (`local`) and the
configured hosts (`[[hosts]]`), round robin over the places with a free slot.

The rule, in order: the places are `local` (unless `foreman_local = false`)
then each host in config order (unless `foreman_hosts = false`, or the
subtask's agent cannot run on a host); each new subtask goes to the next
place after the last one chosen that has a free slot. A host's slots are its
`max_sessions` less its unfinished sessions and the subtasks placed there
now; this machine has no limit. A re-placement avoids the place that failed
when another has room. With no free slot anywhere, the subtask waits for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

LOCAL = "local"


class Places:
    """The slots of this machine and the hosts, shared by every foreman session."""

    def __init__(
        self,
        hosts: dict[str, int],
        *,
        local: bool,
        busy: Callable[[str], int],
    ) -> None:
        # place name -> its limit (None: no limit), in the rule's order
        self._limits: dict[str, int | None] = {LOCAL: None} if local else {}
        self._limits.update(hosts)
        if not self._limits:
            self._limits[LOCAL] = None  # nothing else to run on
        self._busy = busy  # unfinished sessions on a host (not counting subtasks)
        self._taken: dict[str, int] = {}
        self._last = -1
        self._freed = asyncio.Condition()

    @property
    def names(self) -> list[str]:
        return list(self._limits)

    def taken(self, name: str) -> int:
        """Subtasks placed on `name` now."""
        return self._taken.get(name, 0)

    def free(self, name: str) -> bool:
        limit = self._limits[name]
        if limit is None:
            return True
        return self._busy(name) + self._taken.get(name, 0) < limit

    def _pick(self, avoid: set[str]) -> str | None:
        names = self.names
        order = [names[(self._last + 1 + i) % len(names)] for i in range(len(names))]
        for wanted in (
            [n for n in order if n not in avoid],
            order,
        ):  # elsewhere when possible, else anywhere
            for name in wanted:
                if self.free(name):
                    self._last = names.index(name)
                    return name
        return None

    async def take(self, avoid: set[str] | None = None) -> str:
        """A place with a free slot (its slot taken), waiting for one if need be."""
        async with self._freed:
            while True:
                name = self._pick(avoid or set())
                if name is not None:
                    self._taken[name] = self._taken.get(name, 0) + 1
                    return name
                await self._freed.wait()

    async def give_back(self, name: str) -> None:
        async with self._freed:
            self._taken[name] = max(0, self._taken.get(name, 0) - 1)
            self._freed.notify_all()
