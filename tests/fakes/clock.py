"""A clock tests move by hand: the status pipeline reads time through a
`Clock`, so a test says "0.6 s pass" instead of sleeping them."""

from __future__ import annotations

import threading


class FakeClock:
    """Monotonic seconds that move only when `advance` is called (safe to
    read from the sweep's worker thread)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, secs: float) -> None:
        with self._lock:
            self._now += secs
