"""`corral serve`: a headless owner of the state dir (servers, CI). It serves
the control socket and MCP over HTTP, logs to `<state dir>/serve.log`, and
stops cleanly on SIGTERM or ctrl+c: agents whose session can continue keep
running and are re-adopted by the next owner (a later `corral serve` or
console)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

from .console import say_left_running
from .output import say

SERVE_LOG = "serve.log"


def _log_to(state_dir: Path) -> Path:
    from corral.supervisor.paths import ensure_private_dir

    path = ensure_private_dir(state_dir) / SERVE_LOG
    handler = RotatingFileHandler(path, maxBytes=2_000_000, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    logging.getLogger("corral").setLevel(logging.INFO)
    return path


def serve(backend: str = "tmux") -> int:
    from corral.supervisor.paths import default_state_dir, ensure_unowned

    state_dir = default_state_dir()
    ensure_unowned(state_dir)
    log_path = _log_to(state_dir)
    return asyncio.run(_serve(state_dir, backend, log_path))


async def _serve(state_dir: Path, backend: str, log_path: Path) -> int:
    from corral.supervisor.factory import build_supervisor, default_drafter, make_discussions
    from corral.supervisor.remote import OwnerServices

    log = logging.getLogger("corral.serve")
    sup = build_supervisor(state_dir, default_drafter(), backend=backend)
    discussions, _why = make_discussions(state_dir)
    await sup.open()
    services = OwnerServices(sup, discussions=discussions)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    try:
        await services.start()
        for problem in services.problems:
            say(f"corral serve: {problem}", file=sys.stderr, flush=True)
        say(
            f"corral serve: owns {state_dir}; control socket {services.socket_path}; "
            f"MCP {services.mcp_url or 'not served'}; log {log_path}",
            flush=True,
        )
        log.info("serving %s (pid %s)", state_dir, os.getpid())
        await stop.wait()
        log.info("stopping")
    finally:
        await services.close()
        await discussions.close_all()
        await sup.close()
    say_left_running(sup)
    return 0
