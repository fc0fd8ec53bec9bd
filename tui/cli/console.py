"""`corral` (the console on a repository) and `corral demo` (the console on
a generated demo repository, with its own state dir)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .common import fail

if TYPE_CHECKING:
    from corral.tui.app import CorralApp


def _launch(app: CorralApp) -> int:
    app.run()
    if app.startup_error:
        return fail(app.startup_error)
    return 0


def run_console(repo: Path, backend: str = "tmux") -> int:
    from corral.supervisor.factory import build_supervisor, default_drafter
    from corral.supervisor.housekeeping import ensure_unowned
    from corral.supervisor.interface import repo_root
    from corral.supervisor.paths import default_state_dir
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    root = repo_root(repo)
    state_dir = default_state_dir()
    ensure_unowned(state_dir)
    log_to_file(state_dir)
    supervisor = build_supervisor(state_dir, default_drafter(), backend=backend)
    return _launch(CorralApp(supervisor, default_repo=root))


def run_demo(pace: float = 1.0, backend: str = "tmux") -> int:
    from corral.supervisor.factory import build_demo_supervisor, make_demo_site
    from corral.supervisor.interface import seed_demo
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    site = make_demo_site(Path(tempfile.mkdtemp(prefix="corral-demo-")))
    log_to_file(site.state_dir)
    supervisor = build_demo_supervisor(site, backend=backend, pace=pace)
    code = _launch(
        CorralApp(
            supervisor, default_repo=site.repo, on_ready=lambda sup: seed_demo(sup, site.repo)
        )
    )
    print(f"corral demo: the demo repository is at {site.repo} (state in {site.state_dir})")
    return code
