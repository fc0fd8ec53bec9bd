"""What `corral hosts` says about each host: reachable, tmux and git
versions, which agent CLIs are on the remote PATH, whether bubblewrap is
there, and whether corral's state dir can be made. One remote call per host."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .settings import HostSettings
from .unreachable import HostUnreachable


def remote_path(path: str) -> str:
    """`path` as a word for the remote shell: `~/x` becomes "$HOME"/x, the rest is quoted."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _agents_script() -> str:
    """One line per registered agent CLI (`agents/profiles.py`): its name when
    one of its binaries is on the remote PATH."""
    from ..agents.profiles import registered_profiles

    lines = []
    for profile in registered_profiles():
        found = " || ".join(
            f"command -v {shlex.quote(b)} >/dev/null 2>&1" for b in profile.binaries
        )
        lines.append(f"{{ {found}; }} && printf 'agent=%s\\n' {shlex.quote(profile.name)}")
    return "\n".join(lines)


def probe_script(state_dir: str) -> str:
    return f"""
printf 'tmux=%s\\n' "$(tmux -V 2>/dev/null)"
printf 'git=%s\\n' "$(git --version 2>/dev/null)"
{_agents_script()}
command -v bwrap >/dev/null 2>&1 && printf 'bwrap=yes\\n'
command -v python3 >/dev/null 2>&1 && printf 'python3=yes\\n'
d={remote_path(state_dir)}
if mkdir -p "$d" 2>/dev/null && [ -w "$d" ]; then printf 'state=ok\\n'; else printf 'state=no\\n'; fi
"""


@dataclass
class HostReport:
    name: str
    destination: str
    reachable: bool
    error: str = ""
    tmux: str = ""
    git: str = ""
    agents: list[str] = field(default_factory=list)
    bwrap: bool = False
    python3: bool = False  # agents' hooks (and the demo agent) need it there
    state_dir_ok: bool = False
    state_dir: str = ""

    @property
    def problems(self) -> list[str]:
        """What keeps this host from running agents, as sentences."""
        if not self.reachable:
            return [self.error]
        out = []
        if not self.tmux:
            out.append(f"tmux is not installed on {self.name}: install tmux 3.2 or later there")
        if not self.git:
            out.append(f"git is not installed on {self.name}: install git there")
        if not self.state_dir_ok:
            out.append(f"corral's state dir {self.state_dir} cannot be created on {self.name}")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        """One line for `corral hosts`."""
        if not self.reachable:
            return f"✗ {self.name}: {self.error}"
        agents = ", ".join(self.agents) or "none"
        facts = [
            self.tmux or "no tmux",
            f"git {self.git.removeprefix('git version ')}" if self.git else "no git",
            f"agents: {agents}",
            "sandbox: bwrap" if self.bwrap else "sandbox: none (no bwrap)",
            "python3" if self.python3 else "no python3 (no hooks there)",
        ]
        mark = "✓" if self.ok else "✗"
        text = f"{mark} {self.name} ({self.destination}): " + " · ".join(facts)
        if self.problems:
            text += " — " + "; ".join(self.problems)
        return text


def probe(host: HostSettings, state_dir: Path, *, timeout: float = 15.0) -> HostReport:
    """Check one host (connects, runs one script, leaves the master running)."""
    report = HostReport(host.name, host.destination, False, state_dir=host.state_dir)
    from .connection import HostConnection  # loaded by the probe, not by its report

    conn = HostConnection(host, state_dir, connect_timeout=min(timeout, 10.0))
    try:
        result = conn.run_script(probe_script(host.state_dir), timeout=timeout)
    except HostUnreachable as exc:
        report.error = str(exc)
        return report
    finally:
        conn.close()
    report.reachable = True
    read_report(report, result.text)
    return report


def read_report(report: HostReport, text: str) -> None:
    """Fill `report` from what the probe script printed (`key=value` lines)."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "tmux":
            report.tmux = value.strip()
        elif key == "git":
            report.git = value.strip()
        elif key == "agent":
            report.agents.append(value.strip())
        elif key == "bwrap":
            report.bwrap = True
        elif key == "python3":
            report.python3 = True
        elif key == "state":
            report.state_dir_ok = value.strip() == "ok"
