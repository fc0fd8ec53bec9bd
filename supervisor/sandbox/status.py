"""Whether a sandbox can run here, decided once per process: a probe runs
`true` under the same namespaces the checks use."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    detail: str  # the bwrap path, or why no sandbox can run
    bwrap: str | None = None

    def describe(self) -> str:
        if self.available:
            return f"bubblewrap ({self.detail}): checks and the built-in shell are confined"
        return (
            f"unavailable ({self.detail}): checks run unconfined, "
            "guarded only by the inspector chain"
        )


PROBE = [
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--tmpfs", "/tmp",
    "true",
]  # fmt: skip


_available: SandboxStatus | None = None
_refused: tuple[float, SandboxStatus] | None = None  # when a probe last failed, and why
REPROBE_SECS = 30.0


def sandbox_status() -> SandboxStatus:
    """Whether bubblewrap can confine here. A working sandbox is remembered;
    a failed probe only for REPROBE_SECS (a bwrap that timed out under load,
    or a PATH that lacked it for a moment, must not leave every later check
    unconfined, nor may a refusing host run the probe for every check)."""
    global _available, _refused
    if _available is not None:
        return _available
    now = time.monotonic()
    if _refused is not None and now - _refused[0] < REPROBE_SECS:
        return _refused[1]
    status = _probe()
    if not status.available and shutil.which("bwrap"):
        # once more, at once (this may run on an event loop): a bwrap that
        # failed for a moment under load must not leave checks unconfined
        status = _probe()
    if status.available:
        _available = status
    else:
        _refused = (now, status)
    return status


def _probe() -> SandboxStatus:
    if not sys.platform.startswith("linux"):
        return SandboxStatus(False, f"not Linux ({sys.platform})")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(False, "bwrap not found: install bubblewrap")
    try:
        probe = subprocess.run(
            [bwrap, *PROBE], capture_output=True, timeout=10, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(False, f"bwrap did not run: {exc}")
    if probe.returncode != 0:
        why = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        first = why[0] if why else f"exit {probe.returncode}"
        low = first.lower()
        if "namespace" in low or "uid map" in low or "permission" in low or "not permitted" in low:
            return SandboxStatus(False, f"user namespaces refused ({first})")
        return SandboxStatus(False, first)
    return SandboxStatus(True, bwrap, bwrap)
