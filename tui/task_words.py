"""What the tasks screen shows and reads: a schedule in a few words
(`every 10m`, `cron 0 9 * * 1-5`, `at 2026-12-03 09:00`) and a task's rule
and state as one short phrase each."""

from __future__ import annotations

import time
from datetime import datetime

from corral.supervisor.errors import CorralError
from corral.supervisor.models import ScheduledTask

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
WHEN_HINT = "every 10m · cron 0 9 * * 1-5 · at 2026-12-03 09:00"


def parse_when(text: str) -> tuple[float | None, float | None, str | None]:
    """(at, every, cron) — one of them set — from the words typed; refuses,
    saying what is understood, anything else."""
    word, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if word == "every" and rest:
        unit = rest[-1] if rest[-1] in UNITS else "s"
        number = rest[:-1] if rest[-1] in UNITS else rest
        try:
            return None, float(number) * UNITS[unit], None
        except ValueError:
            pass
    if word == "cron" and rest:
        return None, None, rest
    if word == "at" and rest:
        try:
            return datetime.fromisoformat(rest).timestamp(), None, None
        except ValueError:
            pass
    raise CorralError(f"{text.strip()!r} is not a schedule: write one like {WHEN_HINT}")


def stamp(at: float | None) -> str:
    return "—" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def rule_text(task: ScheduledTask) -> str:
    if task.schedule == "once":
        return f"once at {stamp(task.at)}"
    if task.schedule == "interval":
        every = task.every or 0
        for unit in ("d", "h", "m"):
            if every >= UNITS[unit] and every % UNITS[unit] == 0:
                return f"every {every / UNITS[unit]:g}{unit}"
        return f"every {every:g}s"
    return f"cron {task.cron}"


def action_text(task: ScheduledTask) -> str:
    p = task.params
    if task.action == "start":
        return f"start “{p.get('intent', '')}” in {p.get('repo', '')}"
    if task.action == "send":
        return f"send to {p.get('target', '')[-8:]}: {p.get('text', '')}"
    return f"revive {p.get('session', '')[-8:]}"


def state_text(task: ScheduledTask) -> str:
    if task.paused:
        return "paused"
    if not task.enabled:
        return "done"
    return f"next {stamp(task.next_run)}"
