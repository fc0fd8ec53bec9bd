"""The `corral` command line: the console, the demo, doctor and sessions.

Every refusal is one line on stderr that says what to do, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corral.supervisor.api import stored_summary
from corral.supervisor.config import load_config
from corral.supervisor.errors import CorralError
from corral.supervisor.paths import config_path, default_state_dir
from corral.supervisor.store import Store, read_lock_holder

AGENT_CLIS = ("claude", "codex", "gemini", "aider", "opencode")
MIN_TMUX = (3, 2)


def corral_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # slow: only when asked

    try:
        return version("corral")
    except PackageNotFoundError:
        return "0+unknown"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked (keeps start-up fast)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object):
        super().__init__(option_strings, dest=dest, nargs=0, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        print(f"corral {corral_version()}")
        parser.exit()


def fail(message: str) -> int:
    print(f"corral: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corral",
        description="A console for supervising many coding agents: contracts, runtime "
        "verification and diff approval, one screen.",
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("--repo", help="the git repository to open (default: current directory)")
    parser.add_argument(
        "--backend",
        choices=["tmux", "pty"],
        default="tmux",
        help="where agents run: tmux (default, private server -L corral) or pty",
    )
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="open the console on a generated demo repository")
    demo.add_argument("--pace", type=float, default=1.0, help=argparse.SUPPRESS)
    sub.add_parser("doctor", help="check requirements, agents, models and the state dir")
    sub.add_parser("agents", help="list agent CLIs corral can run here")
    sub.add_parser("panes", help="list agent panes on corral's tmux server (strays included)")
    sessions = sub.add_parser("sessions", help="list stored sessions")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    trees = sub.add_parser("worktrees", help="list corral's worktrees, or prune orphans")
    trees.add_argument("--json", action="store_true", help="print JSON")
    trees_sub = trees.add_subparsers(dest="worktrees_command")
    prune = trees_sub.add_parser("prune", help="remove worktrees no session needs")
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed")
    prune.add_argument(
        "--force", action="store_true", help="also remove dirty and unknown worktrees"
    )
    run = sub.add_parser("run", help="run one session headless (events on stdout)")
    run.add_argument("--repo", default=argparse.SUPPRESS, help="the git repository")
    run.add_argument("--intent", required=True, help="what the task should achieve")
    run.add_argument("--contract", help="a contract JSON file (default: conventions lane)")
    run.add_argument("--engine", default="auto", help="auto, native or external:<agent>")
    run.add_argument("--base", help="base revision (default: your checkout as it is)")
    run.add_argument("--yes", action="store_true", help="confirm the contract without asking")
    run.add_argument(
        "--deliver",
        choices=["branch", "checkout", "none"],
        default="none",
        help="deliver a verified diff (default: stop at the approval gate)",
    )
    run.add_argument("--json", action="store_true", help="events as JSON lines")
    run.add_argument(
        "--on-question",
        choices=["ask", "approve", "deny"],
        default="ask",
        help="agent questions: ask (read stdin), approve (yes once), deny",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "doctor":
            return doctor()
        if args.command == "sessions":
            return list_sessions(as_json=args.json)
        if args.command == "demo":
            return run_demo(pace=args.pace, backend=args.backend)
        if args.command == "agents":
            return list_agents()
        if args.command == "panes":
            return list_panes()
        if args.command == "worktrees":
            from .worktrees_command import list_worktrees, prune

            if args.worktrees_command == "prune":
                return prune(dry_run=args.dry_run, force=args.force)
            return list_worktrees(as_json=args.json)
        if args.command == "run":
            from .run_command import main_run

            return main_run(args)
        return run_console(Path(args.repo) if args.repo else Path.cwd(), backend=args.backend)
    except CorralError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130


# -- console -------------------------------------------------------------------


def _ensure_free(state_dir: Path) -> None:
    holder = read_lock_holder(state_dir)
    if holder is not None:
        raise CorralError(
            f"another corral already owns {state_dir} ({holder.describe()}); switch to that "
            "console, close it first, or set CORRAL_HOME to use a separate state dir"
        )


def _launch(app) -> int:  # type: ignore[no-untyped-def]
    app.run()
    if app.startup_error:
        return fail(app.startup_error)
    return 0


def run_console(repo: Path, backend: str = "tmux") -> int:
    from corral.supervisor.factory import build_supervisor, default_drafter
    from corral.supervisor.git.repo import repo_root
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    root = repo_root(repo)
    state_dir = default_state_dir()
    _ensure_free(state_dir)
    log_to_file(state_dir)
    supervisor = build_supervisor(state_dir, default_drafter(), backend=backend)
    return _launch(CorralApp(supervisor, default_repo=root))


def run_demo(pace: float = 1.0, backend: str = "tmux") -> int:
    from corral.supervisor.demo import DemoDrafter, make_demo_repo, seed_demo
    from corral.supervisor.factory import build_supervisor
    from corral.tui.app import CorralApp
    from corral.tui.guard import log_to_file

    workdir = Path(tempfile.mkdtemp(prefix="corral-demo-"))
    repo = make_demo_repo(workdir)
    state_dir = workdir / "state"
    log_to_file(state_dir)
    supervisor = build_supervisor(
        state_dir,
        DemoDrafter(),
        backend=backend,
        socket_dir=workdir / "tmux",
        default_engine="external:demo",
        demo_pace=pace,
    )
    code = _launch(
        CorralApp(supervisor, default_repo=repo, on_ready=lambda sup: seed_demo(sup, repo))
    )
    print(f"corral demo: the demo repository is at {repo} (state in {state_dir})")
    return code


# -- agents -----------------------------------------------------------------


def list_agents() -> int:
    from corral.supervisor.agents.profiles import PREFERENCE, profile_for

    for name in (*PREFERENCE, "demo"):
        profile = profile_for(name)
        binary = profile.find()
        if binary is None:
            print(f"-- {name:<9} {profile.label:<22} not installed")
            continue
        version = profile.version(binary) or "version unknown"
        print(f"ok {name:<9} {profile.label:<22} {binary} ({version})")
    print("   custom    any command: engine custom:<command line>")
    return 0


def list_panes() -> int:
    """Every pane with corral's owner marker, and the session it belongs to.
    A pane with no matching session is a stray: shown, never killed."""
    from corral.supervisor.factory import make_backend

    state_dir = default_state_dir()
    socket_dir = os.environ.get("CORRAL_TMUX_SOCKET_DIR", "").strip()
    backend = make_backend("tmux", socket_dir=Path(socket_dir) if socket_dir else None)
    infos = backend.sweep()
    store = Store(state_dir, readonly=True)
    try:
        sessions, _ = store.list_sessions()
    finally:
        store.close()
    owners = {(s.pane or {}).get("owner"): s for s in sessions if s.pane}
    if not infos:
        print("no corral panes are running")
    for owner, info in sorted(infos.items()):
        session = owners.get(owner)
        who = f"{session.id[-8:]} {session.state.value}" if session else "STRAY (no session)"
        life = "alive" if info.alive else f"exited ({info.exit_status})"
        print(f"{info.handle.pane_id:<6} {life:<14} {info.current_command:<12} {who}")
    return 0


# -- sessions ---------------------------------------------------------------


def list_sessions(*, as_json: bool) -> int:
    """Readers never need the owner lock: the database is opened read-only."""
    state_dir = default_state_dir()
    store = Store(state_dir, readonly=True)
    try:
        sessions, broken = store.list_sessions()
    finally:
        store.close()
    rows = [stored_summary(s) for s in sessions]
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        if not rows:
            print(f"no stored sessions in {state_dir}")
        now = time.time()
        for r in rows:
            first = r.intent.splitlines()[0] if r.intent else ""
            age = int(max(0, now - r.updated_at))
            print(f"{r.label}  {r.state.value:<17} {age:>7}s ago  {Path(r.repo).name:<16} {first}")
    for sid in broken:
        print(f"corral: stored session {sid} could not be read (left untouched)", file=sys.stderr)
    return 0


# -- doctor -------------------------------------------------------------------


def _version_of(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def _parse_version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def doctor() -> int:
    problems: list[str] = []

    def line(ok: bool | None, what: str, detail: str) -> None:
        mark = {True: "ok ", False: "!! ", None: "-- "}[ok]
        print(f"{mark} {what:<14} {detail}")

    print(f"corral {corral_version()}")
    py = platform.python_version()
    py_ok = sys.version_info >= (3, 11)
    line(py_ok, "python", f"{py} ({sys.executable})")
    if not py_ok:
        problems.append("Python 3.11 or newer is required")

    git_v = _version_of(["git", "--version"]) if shutil.which("git") else None
    line(git_v is not None, "git", git_v or "not found — install git")
    if git_v is None:
        problems.append("git is required: install it (e.g. apt-get install git)")

    tmux_v = _version_of(["tmux", "-V"]) if shutil.which("tmux") else None
    if tmux_v is None:
        line(False, "tmux", "not found — install tmux 3.2 or newer (or use --backend pty)")
        problems.append("tmux 3.2+ is required for agent panes: install it (apt-get install tmux)")
    elif _parse_version(tmux_v) < MIN_TMUX:
        line(False, "tmux", f"{tmux_v} — 3.2 or newer is required")
        problems.append(f"tmux is too old ({tmux_v}); install 3.2 or newer")
    else:
        line(True, "tmux", tmux_v)

    for name in AGENT_CLIS:
        path = shutil.which(name)
        line(True if path else None, f"agent {name}", path or "not installed")

    from corral.supervisor.llm.config import describe, load_llm_config

    try:
        llm = load_llm_config()
        configured = llm.provider not in ("none", "", None)
        line(
            True if configured else None,
            "model",
            describe(llm)
            if configured
            else "none configured: agents, manual and convention contracts still work "
            "(set CORRAL_LLM_PROVIDER to enable model drafting and the built-in engine)",
        )
    except CorralError as exc:
        line(False, "model", str(exc))
        problems.append(f"fix the model configuration: {exc}")

    cfg = config_path()
    try:
        load_config(cfg)
        line(True, "config", f"{cfg}{'' if cfg.exists() else ' (absent: defaults)'}")
    except CorralError as exc:
        line(False, "config", str(exc))
        problems.append(f"fix the config file: {exc}")

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
            store = Store(state_dir, readonly=True)
            sessions, broken = store.list_sessions()
            store.close()
            extra = f", {len(broken)} unreadable" if broken else ""
            line(True, "sessions", f"{len(sessions)} stored{extra}")
        except CorralError as exc:
            line(False, "sessions", str(exc))
            problems.append(str(exc))

    if problems:
        print()
        for p in problems:
            print(f"missing: {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from .entry import main as entry_main

    sys.exit(entry_main())
