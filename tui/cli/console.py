"""`corral` (the console on a repository) and `corral demo` (the console on
a generated demo repository, with its own state dir).

Quitting the console leaves an agent running only when its session can
continue (it is re-adopted the next time), and says so on exit. The demo
always cleans up its own: its agents and its private tmux server, on any exit."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .common import fail
from .output import say

log = logging.getLogger("corral.tui.cli.console")

if TYPE_CHECKING:
    from corral.supervisor.api import Supervisor
    from corral.supervisor.remote import OwnerServices, OwnerSurface
    from corral.tui.app import CorralApp


def _launch(app: CorralApp) -> int:
    from corral.supervisor.paths import config_path
    from corral.tui.key_actions import SESSION_KEYS, bindings
    from corral.tui.keymap import KeysError, check, read_keys
    from corral.tui.screens.board import BoardScreen

    where = config_path()
    try:
        keys = check(
            read_keys(where),
            {"board": BoardScreen.BINDINGS, "session": bindings(SESSION_KEYS)},
            where,
        )
    except KeysError as exc:
        return fail(str(exc))
    app.use_keys(keys)
    app.run()
    if app.startup_error:
        return fail(app.startup_error)
    return app.return_code or 0


def say_left_running(supervisor: OwnerSurface) -> None:
    """One line on stderr naming the agents the console left running."""
    from corral.supervisor.states import label

    left = supervisor.left_running
    if not left:
        return
    names = ", ".join(label(sid) for sid in left)
    say(
        f"corral: left {len(left)} agent(s) running ({names}): they come back the next time "
        "corral opens here; `corral panes stop --all` stops them",
        file=sys.stderr,
    )


def run_console(repo: Path, backend: str = "tmux") -> int:
    """Own the state dir and serve it (control socket, MCP); or, when another
    corral owns it and serves, attach to that owner as a live client."""
    from corral.supervisor.interface import repo_root
    from corral.supervisor.paths import default_state_dir, ensure_unowned, owner_running
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    root = repo_root(repo)
    state_dir = default_state_dir()
    if owner_running(state_dir):
        return _attach(state_dir, root)
    ensure_unowned(state_dir)
    log_to_file(state_dir)

    @functools.cache
    def build() -> Supervisor:
        # built once, after the board's first frame (the stored rows paint it): the
        # engines', models' and git modules take longer to import than the
        # board takes to paint
        from corral.supervisor.factory import build_supervisor, default_drafter

        return build_supervisor(state_dir, default_drafter(), backend=backend)

    app = CorralApp(None, build=build, state_dir=state_dir, default_repo=root)

    def serve() -> OwnerServices:
        # made after the board's first frame: the socket's and MCP's modules
        # take a while to import. The console's own discussions, made on first
        # use, are the ones clients reach
        from corral.supervisor.remote import OwnerServices

        return OwnerServices(build(), discussions=lambda: app.owned_discussions)

    app.serve_with = serve
    code = _launch(app)
    if app.built is not None:
        say_left_running(app.built)
    return code


def _attach(state_dir: Path, root: Path) -> int:
    """A second console: the board and session views live from the owner."""
    from corral.supervisor.remote import AttachedSupervisor
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    log_to_file(state_dir)
    # the owner's surface over the socket: the console is typed against it
    attached = AttachedSupervisor(state_dir)
    return _launch(CorralApp(attached, default_repo=root, attached=True))


def _end_on_signal(running: list[CorralApp]) -> Callable[[int, object], None]:
    """SIGTERM and SIGHUP end the demo the way quitting does: the app is asked
    to exit on its own event loop, so its supervisor closes and `finally`
    cleans up. A SystemExit raised on whatever line the signal lands could be
    caught by a task, or leave asyncio's shutdown waiting for a thread that
    never returns. Before the app runs (`running` empty), outside its loop,
    or on a second signal, it exits at once."""
    asked: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or asked or not running:
            raise SystemExit(128 + signum)
        asked.append(signum)
        app = running[0]
        loop.call_soon_threadsafe(lambda: app.exit(return_code=128 + signum))

    return handler


def _own_state_dir() -> Path | None:
    """The operator's own state dir, when it exists (the demo keeps its theme
    there; it never creates one)."""
    from corral.supervisor.paths import default_state_dir

    try:
        path = default_state_dir()
    except Exception as exc:  # a bad CORRAL_HOME: the demo keeps its theme in its temp dir
        log.info("no state dir for the demo's theme: %s", exc)
        return None
    return path if path.is_dir() else None


def run_demo(pace: float = 1.0, backend: str = "tmux") -> int:
    from corral.supervisor.factory import build_demo_supervisor, make_demo_site, stop_demo_site
    from corral.supervisor.interface import seed_demo
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    site = make_demo_site(Path(tempfile.mkdtemp(prefix="corral-demo-")))
    log_to_file(site.state_dir)
    running: list[CorralApp] = []
    # a closed terminal or a kill ends the demo through `finally`, which cleans up
    for sig in (signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _end_on_signal(running))
    try:
        supervisor = build_demo_supervisor(site, backend=backend, pace=pace)
        app = CorralApp(
            supervisor,
            default_repo=site.repo,
            on_ready=lambda _owner: seed_demo(supervisor, site.repo),
            ui_state_dir=_own_state_dir(),  # the theme outlives the demo's temp dir
        )

        def serve() -> OwnerServices:
            # the demo owns its state dir like any console: the README's commands
            # beside it (`corral sessions`, `get`, `approve` …) reach it through
            # its socket, with CORRAL_HOME set to that dir (said at start)
            from corral.supervisor.remote import OwnerServices

            return OwnerServices(
                supervisor, discussions=lambda: app.owned_discussions, mcp_http=False
            )

        app.serve_with = serve
        app.startup_note = (
            f"Other terminals reach this demo with CORRAL_HOME={site.state_dir} "
            "(e.g. corral sessions, corral get <id>)."
        )
        running.append(app)
        code = _launch(app)
    finally:  # also on SIGTERM or a closed terminal: where the demo's files are
        stopped = stop_demo_site(site)
        say(f"corral demo: the demo repository is at {site.repo} (state in {site.state_dir})")
        if stopped:
            say(f"corral demo: stopped its {stopped} agent(s) and its tmux server")
    return code
