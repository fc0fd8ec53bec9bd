"""`corral hosts`: each configured host checked over SSH, one line each."""

from __future__ import annotations

from corral.supervisor.doctor import host_reports
from corral.supervisor.paths import config_path, default_state_dir

from .output import say


def list_hosts() -> int:
    """Exit 0 when every host can run agents, 1 when one cannot."""
    reports = host_reports(default_state_dir())
    if not reports:
        say(f"no hosts configured: add [[hosts]] (name, destination) to {config_path()}")
        return 0
    for report in reports:
        say(report.line())
    return 0 if all(r.ok for r in reports) else 1
