"""`corral doctor`: what corral needs on this host, and whether it is here.
Exit 1 when something required is missing (each named on stderr)."""

from __future__ import annotations

import platform
import sys

from corral.supervisor.doctor import (
    agents_on_path,
    config_status,
    confinement_status,
    host_tool,
    model_checks,
    model_status,
)
from corral.supervisor.errors import CorralError
from corral.supervisor.interface import acp_presets
from corral.supervisor.paths import default_state_dir, read_lock_holder
from corral.supervisor.stored_board import stored_sessions

from .common import corral_version
from .output import say

MARKS = {True: "ok ", False: "!! ", None: "-- "}  # ok, a problem, optional and absent


def line(ok: bool | None, what: str, detail: str) -> None:
    say(f"{MARKS[ok]} {what:<14} {detail}")


def doctor() -> int:
    problems: list[str] = []

    say(f"corral {corral_version()}")
    py_ok = sys.version_info >= (3, 11)
    line(py_ok, "python", f"{platform.python_version()} ({sys.executable})")
    if not py_ok:
        problems.append("Python 3.11 or newer is required")

    git = host_tool("git")
    line(git.version is not None, "git", git.version or "not found — install git")
    if git.version is None:
        problems.append("git is required: install it (e.g. apt-get install git)")

    tmux = host_tool("tmux")
    if tmux.version is None:
        line(False, "tmux", "not found — install tmux 3.2 or newer (or use --backend pty)")
        problems.append("tmux 3.2+ is required for agent panes: install it (apt-get install tmux)")
    elif tmux.too_old:
        line(False, "tmux", f"{tmux.version} — 3.2 or newer is required")
        problems.append(f"tmux is too old ({tmux.version}); install 3.2 or newer")
    else:
        line(True, "tmux", tmux.version)

    sandbox = confinement_status()
    line(True if sandbox.confined else None, "sandbox", sandbox.detail)
    agents_ok = False if sandbox.agents_unconfined else None
    line(True if not sandbox.agents_note else agents_ok, "agents", sandbox.agents)
    if sandbox.agents_note and sandbox.agents.startswith("confined"):
        line(None, "", sandbox.agents_note)  # some agents opted out
    for name, reach in sandbox.network:  # what each may reach when confined
        line(None, f"  {name} net", reach)

    for name, path in agents_on_path():
        line(True if path else None, f"agent {name}", path or "not installed")
    for acp in acp_presets():  # optional: each a way to run an agent over ACP
        shown = acp.binary or f"not installed ({acp.install})"
        line(True if acp.binary else None, f"acp {acp.name}", shown)

    model = model_status()
    if model.error is not None:
        line(False, "model", model.error)
        problems.append(f"fix the model configuration: {model.error}")
    else:
        line(
            True if model.configured else None,
            "model",
            model.description
            if model.configured
            else "none configured: agents, manual and convention contracts still work "
            "(set CORRAL_LLM_PROVIDER to enable model drafting and the built-in engine)",
        )
        for check in model_checks():
            line(check.ok, f"  {check.name}", check.detail)

    config = config_status()
    if config.error is not None:
        line(False, "config", config.error)
        problems.append(f"fix the config file: {config.error}")
    else:
        line(True, "config", f"{config.path}{'' if config.exists else ' (absent: defaults)'}")

    try:
        state_dir = default_state_dir()
    except CorralError as exc:
        line(False, "state dir", str(exc))
        problems.append(str(exc))
    else:
        holder = read_lock_holder(state_dir)
        owner = "free" if holder is None else f"owned by {holder.describe()}"
        line(True, "state dir", f"{state_dir} ({owner})")
        try:
            stored = stored_sessions(state_dir)
            extra = f", {len(stored.unreadable)} unreadable" if stored.unreadable else ""
            line(True, "sessions", f"{len(stored.rows)} stored{extra}")
        except CorralError as exc:
            line(False, "sessions", str(exc))
            problems.append(str(exc))

    if problems:
        say()
        for p in problems:
            say(f"missing: {p}", file=sys.stderr)
        return 1
    return 0
