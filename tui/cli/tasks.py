"""`corral tasks [add|rm|runs]`: scheduled tasks, through the owner of the
state dir (it runs them). A task starts a session, sends a message or
revives a session, once (`--at`), every N seconds (`--every`) or on a cron
expression (`--cron`); the owner keeps each task's last 200 runs."""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from corral.supervisor.errors import CorralError

from .client import _client
from .output import say, say_json


def add_parser(sub: Any) -> None:
    tasks = sub.add_parser("tasks", help="scheduled tasks (start / send / revive), via the owner")
    tasks.add_argument("--json", action="store_true", help="print JSON")
    verbs = tasks.add_subparsers(dest="tasks_command")
    add = verbs.add_parser("add", help="schedule a task")
    add.add_argument("name")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="once, at this time (ISO 8601, local) or epoch seconds")
    when.add_argument("--every", type=float, help="every this many seconds")
    when.add_argument("--cron", help='a cron expression, e.g. "0 9 * * 1-5"')
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--start", metavar="INTENT", help="start a session with this intent")
    what.add_argument("--send", nargs=2, metavar=("SESSION", "TEXT"), help="send a message")
    what.add_argument("--revive", metavar="SESSION", help="revive a dormant session")
    add.add_argument("--repo", help="the repository a started session works in")
    add.add_argument("--engine", default="auto", help="the engine a started session uses")
    add.add_argument("--contract", help="a started session's contract (a JSON file, read now)")
    add.add_argument(
        "--check",
        action="append",
        metavar="CMD",
        help="a started session's check: a shell command that must exit 0 (repeatable)",
    )
    rm = verbs.add_parser("rm", help="remove a task (and its runs)")
    rm.add_argument("task")
    for verb, words in (
        ("pause", "pause a task (kept, not run)"),
        ("resume", "resume a paused task"),
        ("run", "run a task now, out of its schedule"),
    ):
        verbs.add_parser(verb, help=words).add_argument("task")
    runs = verbs.add_parser("runs", help="a task's last runs, newest first")
    runs.add_argument("task")


def _contract(file: str | None, checks: list[str] | None) -> str | None:
    """The contract a scheduled start takes, as JSON (its sessions still stop
    at gate 1)."""
    from corral.supervisor.interface import checks_contract, load_contract

    if file and checks:
        raise CorralError("give the contract as --contract FILE or as --check commands, not both")
    if file:
        return load_contract(Path(file)).model_dump_json()
    if checks:
        return checks_contract(checks).model_dump_json()
    return None


def _when(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise CorralError(f"--at {text!r} is neither ISO 8601 nor epoch seconds") from None


def _stamp(at: float | None) -> str:
    return "—" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def run_tasks(args: argparse.Namespace) -> int:
    from corral.supervisor.remote import Calls
    from corral.supervisor.remote import params as p

    with _client() as client:
        if args.tasks_command == "add":
            if args.start:
                action = "start"
                repo = str(Path(args.repo or ".").resolve())
                params = {"intent": args.start, "repo": repo, "engine": args.engine}
                contract = _contract(args.contract, args.check)
                if contract is not None:
                    params["contract"] = contract
            elif args.send:
                action, params = "send", {"target": args.send[0], "text": args.send[1]}
            else:
                action, params = "revive", {"session": args.revive}
            result = client.answer(
                Calls.task_add,
                p.TaskAddParams(
                    name=args.name,
                    action=action,
                    params=params,
                    at=_when(args.at) if args.at else None,
                    every=args.every,
                    cron=args.cron,
                ),
            )
            say(
                f"corral tasks: added {result['id']} ({result['name']}), next run "
                f"{_stamp(result['next_run'])}"
            )
            return 0
        if args.tasks_command == "rm":
            client.request(Calls.task_remove, p.TaskParams(task_id=args.task))
            say(f"corral tasks: removed {args.task}")
            return 0
        if args.tasks_command in ("pause", "resume"):
            paused = args.tasks_command == "pause"
            client.request(Calls.task_pause, p.TaskPauseParams(task_id=args.task, paused=paused))
            say(f"corral tasks: {args.task} {'paused' if paused else 'resumed'}")
            return 0
        if args.tasks_command == "run":
            run = client.answer(Calls.task_run, p.TaskParams(task_id=args.task))
            say(
                f"corral tasks: ran {args.task}: {'ok' if run['ok'] else 'FAILED'}: {run['detail']}"
            )
            return 0 if run["ok"] else 1
        if args.tasks_command == "runs":
            runs = client.answer(Calls.task_runs, p.TaskParams(task_id=args.task))
            if args.json:
                say_json(runs)
            for r in runs:
                say(f"{_stamp(r['at'])}  {'ok   ' if r['ok'] else 'FAIL '} {r['detail']}")
            return 0
        tasks = client.answer(Calls.tasks, p.NoParams())
    if args.json:
        say_json(tasks)
        return 0
    if not tasks:
        say("no scheduled tasks (corral tasks add … schedules one)")
    for t in tasks:
        rule = (
            "once"
            if t["schedule"] == "once"
            else f"every {t['every']:g}s"
            if t["schedule"] == "interval"
            else f"cron {t['cron']}"
        )
        state = (
            "paused"
            if t.get("paused")
            else f"next {_stamp(t['next_run'])}"
            if t["enabled"]
            else "done"
        )
        say(f"{t['id']}  {t['name']:<20} {t['action']:<7} {rule:<22} {state}")
    return 0
