"""Whether a sandbox can run here, decided once per process: a probe runs
`true` under the same namespaces the checks use."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
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


@functools.cache
def sandbox_status() -> SandboxStatus:
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
