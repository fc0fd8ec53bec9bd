"""The `corral` entry point: the parser, and one dispatch to each subcommand's
module. `corral hook` is dispatched before anything else is imported: agents
run it on every hook and it must return in milliseconds.

Every refusal is one line on stderr that says what to do, and exit code 2.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs the hook milliseconds
if TYPE_CHECKING:
    import argparse


READER_GONE = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader went away


def main(argv: list[str] | None = None) -> int:
    """The entry point. When whoever reads stdout goes away (`corral sessions |
    head`), every command ends quietly: stdout is pointed at /dev/null (so the
    interpreter's last flush cannot fail again) and the exit code is 141."""
    try:
        code = _main(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return READER_GONE


def _main(args: list[str]) -> int:
    if args[:1] == ["hook"]:
        from .hook import run_hook

        return run_hook(args[1:])
    if args == ["status", "--tmux"]:
        # tmux runs this every few seconds: skip building the whole parser
        # (most of the command's time); `corral status --help` still parses
        from .status import status

        return status(tmux=True)
    if args == ["sessions", "--json"]:
        # scripts poll this: skip building the whole parser (it imports the
        # models for other subcommands, most of the command's time); the same
        # dispatch as parsed, so its errors read the same
        from types import SimpleNamespace

        from corral.supervisor.stored_rows import roomy_stdout

        roomy_stdout()  # megabytes of JSON: fewer hand-offs to the reader
        if _served_listing():
            return 0
        parsed = SimpleNamespace(command="sessions", json=True, sessions_repo=None)
        return dispatch(parsed)  # type: ignore[arg-type]
    return dispatch(build_parser().parse_args(args))


# the function `corral sessions --json` escapes its listing with, by name:
# the kept listing is served only if it was made with it (a unit test keeps
# this name the function's)
LISTING_FINISH = "corral.tui.cli.output.json_bytes"


def _served_listing() -> bool:
    """`corral sessions --json` with no owner, its listing kept from an
    earlier call and nothing it was made from changed (the store, corral's
    code, the config file, which read fine then): written straight from the
    kept file, with nothing else imported (`stored_rows.serve_kept_listing`).
    Anything else goes the full way, which says what is wrong."""
    import os
    from pathlib import Path

    from corral.supervisor.paths import config_stamp, control_socket, default_state_dir
    from corral.supervisor.stored_rows import serve_kept_listing

    override = os.environ.get("CORRAL_HOME", "").strip()
    if override and not Path(override).expanduser().is_absolute():
        return False  # a bad CORRAL_HOME: the full way says so
    try:
        state_dir = default_state_dir()
    except (RuntimeError, KeyError):  # no home directory to be found: the full way says so
        return False
    if control_socket(state_dir).exists():
        return False  # an owner may run: the full way asks it for the live rows
    source = Path(__file__).with_name("output.py")
    also = ("config", config_stamp(), True)
    return serve_kept_listing(state_dir, LISTING_FINISH, source, also)


def dispatch(args: argparse.Namespace) -> int:
    from corral.supervisor.errors import CorralError, DiskFullError, disk_full, is_disk_full

    from .common import fail

    try:
        return _run(args)
    except Exception as exc:
        if is_disk_full(exc):  # wherever it was found: one line, the state dir and its space
            from corral.supervisor.paths import default_state_dir

            from .common import DISK_FULL
            from .output import say

            said = exc if isinstance(exc, DiskFullError) else disk_full(default_state_dir())
            say(f"corral: {said}", file=sys.stderr)
            return DISK_FULL
        if isinstance(exc, CorralError):
            return fail(str(exc))
        raise
    except KeyboardInterrupt:
        return 130


# commands that load the whole config themselves, and refuse a broken one
LOADS_CONFIG = ("doctor", "run", "serve", "demo", "mcp", "web", "hosts", None)


def _run(args: argparse.Namespace) -> int:
    if args.command not in LOADS_CONFIG:
        from .common import warn_if_config_broken

        warn_if_config_broken()
    if args.command == "doctor":
        from .doctor import doctor

        return doctor()
    if args.command == "sessions":
        from .sessions import list_sessions

        return list_sessions(as_json=args.json, repo=args.sessions_repo)
    if args.command == "status":
        from .status import status

        return status(tmux=args.tmux)
    if args.command == "demo":
        from .console import run_demo

        return run_demo(pace=args.pace, backend=args.backend)
    if args.command == "hosts":
        from .hosts import list_hosts

        return list_hosts()
    if args.command == "agents":
        from .agents import list_agents

        return list_agents()
    if args.command == "panes":
        from .panes import list_panes, stop

        if args.panes_command == "stop":
            return stop(args.which, strays=args.strays, every=args.all)
        return list_panes()
    if args.command == "worktrees":
        from .worktrees import list_worktrees, prune

        if args.worktrees_command == "prune":
            return prune(dry_run=args.dry_run, force=args.force, yes=args.yes)
        return list_worktrees(as_json=args.json)
    if args.command == "run":
        from .run import main_run

        return main_run(args)
    if args.command in (
        "get",
        "watch",
        "answer",
        "confirm",
        "approve",
        "reject",
        "cancel",
        "split",
        "rename",
        "archive",
        "unarchive",
        "retry",
        "revive",
        "delete",
        "push",
        "pr",
    ):
        from .client import dispatch as client_dispatch

        return client_dispatch(args)
    if args.command in ("mode", "model", "option"):
        from .mode import run_mode

        return run_mode(args)
    if args.command == "tasks":
        from .tasks import run_tasks

        return run_tasks(args)
    if args.command in ("adopt", "release"):
        from .adopt import run_adopt, run_release

        return run_adopt(args) if args.command == "adopt" else run_release(args)
    if args.command == "verify":
        from .verify import run_verify

        return run_verify(args)
    if args.command == "log":
        from .log import run_log

        return run_log(args)
    if args.command == "msg":
        from .msg import send

        return send(args)
    if args.command == "context":
        from .context import export

        return export(args)
    if args.command == "serve":
        from .serve import serve

        return serve(backend=args.backend)
    if args.command == "mcp":
        from .mcp import main_mcp

        return main_mcp(backend=args.backend)
    from pathlib import Path

    if args.command == "web":
        from .web import serve as serve_web

        return serve_web(Path(args.repo or Path.cwd()), args.port, args.backend)

    from .console import run_console

    return run_console(Path(args.repo) if args.repo else Path.cwd(), backend=args.backend)


def build_parser() -> argparse.ArgumentParser:
    import argparse
    from typing import Any

    class VersionAction(argparse.Action):
        """`--version`, looked up only when asked (keeps start-up fast)."""

        def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any):
            super().__init__(option_strings, dest=dest, nargs=0, help="show the version and exit")

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            from .common import corral_version
            from .output import say

            say(f"corral {corral_version()}")
            parser.exit()

    parser = argparse.ArgumentParser(
        prog="corral",
        description="A console for supervising many coding agents: contracts, runtime "
        "verification and diff approval, one screen.",
    )
    parser.add_argument("--version", action=VersionAction)
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
    sub.add_parser("hosts", help="check the configured [[hosts]] over SSH: tmux, git, agents")
    panes = sub.add_parser(
        "panes", help="list agent panes on corral's tmux server (strays included), or stop them"
    )
    panes_sub = panes.add_subparsers(dest="panes_command")
    stop = panes_sub.add_parser("stop", help="stop agent panes (the agent, then its window)")
    stop.add_argument("which", nargs="*", help="owner marker, session id (or label) or pane id")
    stop.add_argument("--strays", action="store_true", help="every pane no session claims")
    stop.add_argument("--all", action="store_true", help="every corral pane")
    sessions = sub.add_parser("sessions", help="list sessions (live from the owner, else stored)")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    sessions.add_argument(
        "--repo", dest="sessions_repo", help="only sessions on this repository (a path in it)"
    )
    status_p = sub.add_parser(
        "status", help="one line: how many sessions need you, run and finished"
    )
    status_p.add_argument(
        "--tmux",
        action="store_true",
        help="for tmux's status-right: styled, and empty when nothing is in progress",
    )
    trees = sub.add_parser("worktrees", help="list corral's worktrees, or prune orphans")
    trees.add_argument("--json", action="store_true", help="print JSON")
    trees_sub = trees.add_subparsers(dest="worktrees_command")
    prune = trees_sub.add_parser("prune", help="remove worktrees no session needs")
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed")
    prune.add_argument(
        "--force", action="store_true", help="also remove dirty and unknown worktrees"
    )
    prune.add_argument(
        "--yes", action="store_true", help="remove without asking (a script must say so)"
    )
    web = sub.add_parser("web", help="serve the console in a browser on 127.0.0.1, behind a token")
    web.add_argument("--repo", default=argparse.SUPPRESS, help="the git repository")
    web.add_argument("--port", type=int, default=8421, help="the port (default 8421)")
    from .common import RUN_ENGINES, RUN_EXIT_CODES

    run = sub.add_parser(
        "run",
        help="run one session headless (events on stdout)",
        description="Run one session headless: its events on stdout, and an exit code "
        "that says where it ended.",
        epilog=RUN_ENGINES + "\n\n" + RUN_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--repo", default=argparse.SUPPRESS, help="the git repository")
    run.add_argument("--intent", required=True, help="what the task should achieve")
    run.add_argument("--contract", help="a contract JSON file (default: conventions lane)")
    run.add_argument(
        "--context",
        metavar="FILE",
        help="a context pack (`corral context <session> -o FILE`) the agent gets with the task",
    )
    run.add_argument(
        "--check",
        action="append",
        metavar="CMD",
        help="a shell command that must exit 0 for the task to be done (repeatable): the "
        "contract's checks, instead of drafted ones or --contract (the drafted setup stays)",
    )
    run.add_argument(
        "--setup",
        action="append",
        metavar="CMD",
        help="a setup command (repeatable), run with the network before the checks, in "
        "place of the drafted setup or the contract's (e.g. --setup '\"$CORRAL_ENV/bin/python\" "
        "-m pip install X'; $CORRAL_ENV is the checks' environment)",
    )
    run.add_argument(
        "--setup-add",
        action="append",
        metavar="CMD",
        help="a setup command (repeatable) run after the drafted setup or the contract's: what "
        "a check that cannot run needs installed (its fix says the line)",
    )
    run.add_argument(
        "--no-setup", action="store_true", help="no setup: the checks run as the checkout is"
    )
    run.add_argument(
        "--hidden-check",
        action="append",
        metavar="FILE[:DEST]",
        help="a check held back from the agent (repeatable): FILE is read now and kept in "
        "corral's state dir, put at DEST (default: its name, at the repository's top) only "
        "in corral's verification checkout; a .py file runs with the contract's pytest, a "
        ".js/.mjs/.cjs test with node --test, a .sh script with sh",
    )
    run.add_argument(
        "--engine",
        "--agent",
        dest="engine",
        default="auto",
        help="auto, native, <agent>, custom:<command line>, oneshot:<command line> or a "
        "one-shot preset (see engines below)",
    )
    run.add_argument(
        "--model",
        help="pin a model: a configured [[llm.models]] name (kept through drafting, revision "
        "and repairs, never swapped for another), or a model name the agent knows (an ACP "
        "agent: one it offers, asked for with session/set_model); auto: none",
    )
    run.add_argument("--base", help="base revision (default: your checkout as it is)")
    run.add_argument(
        "--host",
        help="run the agent, its worktree and the checks on this [[hosts]] host (see "
        "`corral hosts`); the verified result is fetched home for review",
    )
    run.add_argument(
        "--judge",
        action="append",
        metavar="PATH",
        help="a file that judges the work besides the ones corral finds (repeatable; with "
        "--contract or --check): verification puts it back as it was before the checks run",
    )
    run.add_argument(
        "--not-judge",
        action="append",
        metavar="PATH",
        help="a path (or folder) corral must not treat as judging the work (repeatable; with "
        "--contract or --check)",
    )
    run.add_argument("--yes", action="store_true", help="confirm the contract without asking")
    run.add_argument(
        "--deliver",
        choices=["branch", "checkout", "none"],
        default="none",
        help="deliver a verified diff (default: stop at the approval gate)",
    )
    run.add_argument("--json", action="store_true", help="events as JSON lines")
    sub.add_parser(
        "serve",
        help="own the state dir headless: control socket + MCP, until SIGTERM",
        description="Own the state dir headless (servers, CI) until SIGTERM: run its "
        "sessions and serve the control socket (corral sessions, approve, msg, run as a "
        "client, a second console) and MCP over HTTP on 127.0.0.1 behind a token. Logs go "
        "to serve.log in the state dir.",
    )
    sub.add_parser(
        "mcp",
        help="an MCP server on stdio (bridges to the owner, or becomes it)",
        description="An MCP server on stdio for an MCP client (an editor, an agent): its "
        "tools start, poll and cancel corral runs and read sessions. It bridges to the "
        "state dir's owner when one runs, else owns the state dir itself. Gates stay "
        "human: no tool confirms for the operator unless the config allows it, and none "
        "approves or delivers.",
    )
    from .client import add_parsers

    add_parsers(sub)
    from .msg import add_parser as add_msg_parser

    add_msg_parser(sub)
    from .context import add_parser as add_context_parser

    add_context_parser(sub)
    from .mode import add_parser as add_mode_parser

    add_mode_parser(sub)
    from .tasks import add_parser as add_tasks_parser

    add_tasks_parser(sub)
    from .adopt import add_parsers as add_adopt_parsers

    add_adopt_parsers(sub)
    from .verify import add_parser as add_verify_parser

    add_verify_parser(sub)
    from .log import add_parser as add_log_parser

    add_log_parser(sub)
    run.add_argument(
        "--on-question",
        choices=["ask", "approve", "deny"],
        default="ask",
        help="agent questions: ask (read stdin), approve (yes once), deny",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
