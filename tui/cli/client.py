"""`corral get|watch|answer|approve|reject|cancel <id>` and the lifecycle
`corral rename|archive|unarchive|retry|revive|delete <id>` and `corral push|pr <id>`
(publish a delivered branch): one session, through the
owner of the state dir (a console, `corral serve`, a `corral run`).

Acting needs an owner: with none these say so and exit 2. `get` (like
`corral sessions`) falls back to reading the store read-only, and says the
state is as stored, not live. A session is named by its id, its label
(`corral-1a2b3c4d`) or the end of its id.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from corral.supervisor.errors import CorralError
from corral.supervisor.paths import default_state_dir, owner_running
from corral.supervisor.states import CoderState, label, said

from ..visible import visible
from .output import say, say_json

if TYPE_CHECKING:  # the rest is imported when a command runs: `corral --help` stays quick
    from corral.supervisor.remote import ControlClient


def resolve(ids: list[str], name: str) -> str:
    """The one session id `name` means: an id, a label, or an id's tail."""
    name = name.removeprefix("corral-")
    if name in ids:
        return name
    matches = [sid for sid in ids if sid.endswith(name) or sid.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CorralError(f"no corral session '{name}' (`corral sessions` lists them)")
    raise CorralError(f"'{name}' names {len(matches)} sessions: give more of the id")


def _client(timeout: float | None = 30) -> ControlClient:
    from corral.supervisor.remote import ControlClient, NoOwner

    try:
        return ControlClient(default_state_dir(), timeout=timeout)
    except NoOwner as exc:
        raise CorralError(f"{exc}; acting on a session needs its owner") from None


def get(name: str, *, as_json: bool) -> int:
    state_dir = default_state_dir()
    if owner_running(state_dir):
        from corral.supervisor.remote import Calls, params

        with _client() as client:
            sid = resolve([r.session_id for r in client.list()], name)
            detail: dict[str, Any] = client.answer(Calls.get, params.SessionParams(session_id=sid))
        if as_json:
            say_json(detail)
            return 0
        session = detail["session"]
        say(f"{label(sid)}  {session['state']}  ({'live' if detail['live'] else 'stored'})")
        say(f"  intent: {session['intent']}")
        say(f"  repo:   {session['repo']}")
        if session.get("host"):
            say(f"  host:   {session['host']}")
        identity = session.get("agent_identity") or {}
        if session["state"] == "running" and identity.get("state") == "dormant":
            say("  dormant: its agent stopped and can be revived (corral revive)")
        if detail.get("agent_status"):
            words = agent_words(detail["agent_status"], detail.get("agent_reason"))
            say(f"  agent:  {words}")
        offers = session.get("agent_offers") or {}
        shown = [f"{k} {offers[k]}" for k in ("mode", "model") if offers.get(k)]
        shown += [f"{o['id']}={o['value']}" for o in offers.get("options") or []]
        if shown:  # an ACP agent's, as it announced them (corral mode/model/option)
            say(f"  agent settings: {' · '.join(shown)}")
        if detail.get("needs_you_label"):
            say(f"  needs you: {detail['needs_you_label']}")
        if detail.get("question_prompt"):
            say(f"  question: {detail['question_prompt']}")
        if session.get("result_branch"):
            say(f"  result: {session['result_branch']} {session.get('result_commit') or ''}")
        if session.get("attestation"):
            say(f"  attestation: {session['attestation']}")
        if session.get("error"):
            say(f"  error:  {session['error']}")
        drivers = (session.get("diff") or {}).get("attribute_drivers") or []
        if drivers:
            from ..rows import ATTRIBUTE_DRIVERS_WORDS  # Rich: only when there is one

            say(f"  {ATTRIBUTE_DRIVERS_WORDS}")
            for line in drivers:
                say(f"    {line}")
        _say_judge_changes(detail, indent="  ")
        _say_flaky(detail, indent="  ")
        return 0
    from corral.supervisor.stored_board import stored_sessions

    stored = stored_sessions(state_dir)
    sid = resolve([r.session_id for r in stored.rows], name)
    row = next(r for r in stored.rows if r.session_id == sid)
    if as_json:
        say_json({"owner": None, "stored": row.model_dump(mode="json")})
        return 0
    say(f"{row.label}  {said(row.state)}  (stored: no corral owns {state_dir}, so not live)")
    say(f"  intent: {row.intent}")
    say(f"  repo:   {row.repo}")
    if row.host:
        say(f"  host:   {row.host}")
    if row.dormant:
        say("  dormant: its agent stopped and can be revived (corral revive)")
    if row.result_commit:
        from corral.supervisor.provenance import note_summary

        attested = note_summary(Path(row.repo), row.result_commit)
        if row.result_branch:
            say(f"  result: {row.result_branch} {row.result_commit}")
        if attested:
            say(f"  attestation: {attested}")
    return 0


def agent_words(status: str, reason: str | None) -> str:
    """What the agent does, with its reason where one matters."""
    if status == "unreachable":
        return f"host unreachable: {reason}" if reason else "host unreachable"
    words = "signed out" if status == "auth" else status
    return f"{words}: {reason}" if reason and status in ("waiting", "auth", "error") else words


def watch(name: str, *, as_json: bool, from_seq: int) -> int:
    """Events of one session until it ends (or ctrl+c); exit 0."""
    import asyncio

    return asyncio.run(_watch(name, as_json=as_json, from_seq=from_seq))


async def _watch(name: str, *, as_json: bool, from_seq: int) -> int:
    from corral.supervisor.events import StateChangedData
    from corral.supervisor.remote import AsyncControlClient, NoOwner

    from ..event_text import describe

    try:
        client = await AsyncControlClient.connect(default_state_dir())
    except NoOwner as exc:
        raise CorralError(f"{exc}; watching a session needs its owner") from None
    try:
        sid = resolve([r.session_id for r in await client.list()], name)
        result, sub = await client.subscribe(sid, from_seq)
        if result.events_skipped:
            say(f"corral watch: {result.events_skipped} earlier event(s) are no longer held")
        if sub is None:
            say(f"corral watch: {label(sid)} is {said(result.state)} and not live")
            return 0
        async for event in sub:
            if as_json:
                say_json(event.model_dump(mode="json"), indent=None, ensure_ascii=False, flush=True)
            else:
                say(describe(event).plain, flush=True)
            if isinstance(event.data, StateChangedData) and event.data.to.is_terminal:
                break
        return 0
    finally:
        await client.close()


def split(name: str, file: str | None) -> int:
    """Print a foreman session's split as JSON, or replace it with FILE's."""
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], name)
        if file is None:
            say_json(client.answer(Calls.foreman_split, params.SessionParams(session_id=sid)))
            return 0
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text()
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise CorralError(f"cannot read the split from {file}: {exc}") from None
        if not isinstance(data, dict):
            raise CorralError('the split must be a JSON object: {"subtasks": [...]}')
        result = client.answer(
            Calls.set_foreman_split, params.SplitParams(session_id=sid, split=data)
        )
    say(f"corral split: {label(sid)} → {len(result['subtasks'])} subtask(s)")
    return 0


STILL_WORKING_EVERY_SECS = 10.0


@contextlib.contextmanager
def still_working(what: str, every: float = STILL_WORKING_EVERY_SECS) -> Iterator[None]:
    """A line on stderr every `every` seconds while a long call is waited
    for (a delivery of thousands of files, its re-verification), so a wait
    never looks like a hang; the owner answers when the work has landed."""
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            waited = time.monotonic() - start
            say(
                f"corral {what}: still working ({waited:.0f} s); the owner answers when it has landed",
                file=sys.stderr,
                flush=True,
            )

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


def _say_kinds_changed(client: ControlClient, sid: str, as_json: bool) -> None:
    """Before a delivery writes: the paths whose kind the change alters."""
    from corral.supervisor.remote import Calls, params

    session = client.answer(Calls.get, params.SessionParams(session_id=sid))["session"]
    kinds = (session.get("diff") or {}).get("type_changes") or []
    if not kinds:
        return
    out = sys.stderr if as_json else sys.stdout
    say("corral approve: this change alters what kind of thing these paths are:", file=out)
    for line in kinds:
        say(f"  {line}", file=out)


def act(args: argparse.Namespace) -> int:
    """`answer`, `confirm`, `approve`, `reject`, `cancel`: one call to the owner."""
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        if args.command == "answer":
            result = client.answer(
                Calls.respond,
                params.RespondParams(session_id=sid, text=args.text, steer=args.steer),
            )
        elif args.command == "approve":
            selection: dict[str, list[int] | None] | None = None
            if args.files:
                selection = {path: None for path in args.files}
            if not args.accept_finding:
                _say_kinds_changed(client, sid, args.json)
            if args.accept_judge_changes:
                _say_judge_changes(client.answer(Calls.get, params.SessionParams(session_id=sid)))
            if args.accept_flaky:
                shown = client.answer(Calls.get, params.SessionParams(session_id=sid))
                _say_flaky(shown, out=sys.stderr if args.json else sys.stdout)
            with still_working("approve"):
                result = client.answer(
                    Calls.approve,
                    params.ApproveParams(
                        session_id=sid,
                        delivery=args.delivery,
                        comment=args.comment,
                        selection=selection,
                        accept_finding=args.accept_finding,
                        accept_judge_changes=args.accept_judge_changes,
                        accept_flaky=args.accept_flaky,
                    ),
                )
        elif args.command == "confirm":
            result = client.answer(Calls.confirm, params.ConfirmParams(session_id=sid))
        elif args.command == "reject":
            result = client.answer(
                Calls.reject, params.RejectParams(session_id=sid, comment=args.comment)
            )
        else:
            result = client.answer(Calls.cancel, params.SessionParams(session_id=sid))
    if args.json:
        say_json(result)
    else:
        state = result.get("state") if isinstance(result, dict) else None
        if state in set(CoderState):
            state = said(CoderState(state))  # the word the board says (delivered)
        say(f"corral {args.command}: {label(sid)}" + (f" → {state}" if state else ""))
        if isinstance(result, dict) and result.get("branch"):
            say(f"  branch {result['branch']} {result.get('commit') or ''}")
    return 0


def _say_judge_changes(detail: dict[str, Any], indent: str = "") -> None:
    """What the person accepts (printed before the approve, and by `get`):
    each judge change."""
    changes = (detail.get("session") or {}).get("judge_changes") or []
    changes = [c for c in changes if c.get("what") != "extended"]  # appended tests need no one
    if not changes:
        return
    say(f"{indent}the work changed how it is judged:")
    for c in changes:
        what = [str(c.get("what", ""))]
        if c.get("holds_must_pass"):
            what.append("holds a named test")
        if c.get("detail"):
            what.append(str(c["detail"]))
        say(f"{indent}  {c.get('path', '')} ({'; '.join(what)})")


def _say_flaky(detail: dict[str, Any], indent: str = "", out: TextIO = sys.stdout) -> None:
    """What the person accepts with `--accept-flaky` (printed before the
    approve, on stderr under `--json`, and by `get`): each check that passed
    only on its immediate re-run and the tests that failed first (a hidden
    check's are counted)."""
    results = (detail.get("session") or {}).get("last_check_results") or []
    flaky = [r for r in results if r.get("flaky") and r.get("passed")]
    if not flaky:
        return
    say(
        f"{indent}passed only on an immediate re-run (flaky, or work rigged to fail once):",
        file=out,
    )
    for r in flaky:
        named = "a hidden check" if r.get("hidden") else str(r.get("name", ""))
        tests = f"{len(r['flaky'])} test(s)" if r.get("hidden") else ", ".join(map(str, r["flaky"]))
        say(f"{indent}  {named}: {tests} failed, then passed", file=out)


LIFECYCLE = ("rename", "archive", "unarchive", "retry", "revive", "delete")


def _confirm_delete(client: ControlClient, sid: str, yes: bool) -> None:
    """Deleting cannot be undone: asked once on a terminal, else `--yes` is needed."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CorralError(
            f"corral delete asks before deleting {label(sid)} for good: add --yes to delete "
            "without asking"
        )
    intent = client.get(sid).session.intent.splitlines()[0][:80]
    answer = input(
        f"Delete {label(sid)} ({visible(intent)}) for good? Its worktree, events and record go; "
        "a delivered branch stays. [y/N] "
    )
    if answer.strip().lower() not in ("y", "yes"):
        raise CorralError(f"{label(sid)} was kept (nothing deleted)")


def _deleted_line(sid: str, result: dict[str, Any]) -> str:
    line = f"{label(sid)} is deleted"
    trees = result.get("worktrees_removed") or []
    if trees:
        line += f"; worktree {', '.join(trees)} removed"
    if result.get("branch_kept"):
        line += f"; branch {result['branch_kept']} kept (your result)"
    return line


def lifecycle(args: argparse.Namespace) -> int:
    """`rename`, `archive`, `unarchive`, `retry`, `revive`, `delete`: one call to the
    owner, then one line saying what it did (a refusal is the owner's sentence)."""
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        if args.command == "rename":
            result = client.answer(
                Calls.rename, params.RenameParams(session_id=sid, name=args.name)
            )
            name = result.get("name")
            line = f"{label(sid)} is named “{name}”" if name else f"{label(sid)} has no name now"
        elif args.command in ("archive", "unarchive"):
            result = client.answer(
                Calls.archive,
                params.ArchiveParams(session_id=sid, archived=args.command == "archive"),
            )
            line = (
                f"{label(sid)} left the board (kept in the store; `corral unarchive` brings it back)"
                if result.get("archived")
                else f"{label(sid)} is back on the board"
            )
        elif args.command == "delete":
            _confirm_delete(client, sid, args.yes)
            result = client.answer(Calls.delete, params.SessionParams(session_id=sid))
            line = _deleted_line(sid, result)
        elif args.command == "retry":
            result = client.answer(
                Calls.retry, params.RetryParams(session_id=sid, keep_edits=args.keep_edits)
            )
            new = result["session_id"]
            line = f"{label(sid)} is retried as {label(new)} ({result['state']})"
        else:
            client.request(Calls.revive, params.SessionParams(session_id=sid))
            result = client.answer(
                Calls.get, params.SessionParams(session_id=sid)
            )  # what the revive left it as
            line = f"{label(sid)}'s agent was started again ({result['session']['state']})"
    if args.json:
        say_json(result)
    else:
        say(f"corral {args.command}: {line}")
    return 0


PUBLISH = ("push", "pr")
PUBLISH_WAIT_SECS = 900  # a push of a big branch, then gh: the owner answers when they are done


def publish(args: argparse.Namespace) -> int:
    """`push`: the delivered branch to the remote; `pr`: that, then a pull
    request with gh. Each line is printed once the owner reported it done."""
    from corral.supervisor.remote import Calls, params

    with _client(timeout=PUBLISH_WAIT_SECS) as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        where = params.PushParams(session_id=sid, remote=args.remote)
        if args.command == "push":
            result = client.answer(Calls.push, where)
        else:
            result = client.answer(Calls.pull_request, where)
    if args.json:
        say_json(result)
        return 0 if args.command == "push" or result["opened"] else 2
    if args.command == "push":
        say(
            f"corral push: branch {result['branch']} pushed to {result['remote']} ({result['url']})"
        )
        if result.get("attestations"):
            say(f"corral push: {result['attestations']}")
        return 0
    if not result["opened"]:
        say(
            "corral pr: gh (the GitHub CLI) is not installed here, so no pull request was "
            "opened; push the branch with the command below, then open the pull request on "
            "the forge",
            file=sys.stderr,
        )
        say(result["push_command"])
        return 2
    say(f"corral pr: pull request for {result['branch']} opened: {result['url']}")
    return 0


def add_parsers(sub: Any) -> None:
    get_p = sub.add_parser("get", help="one session, from its owner (or as stored)")
    get_p.add_argument("session", help="session id, label or the end of its id")
    get_p.add_argument("--json", action="store_true", help="print JSON")
    watch_p = sub.add_parser("watch", help="follow one session's events (needs an owner)")
    watch_p.add_argument("session")
    watch_p.add_argument("--json", action="store_true", help="events as JSON lines")
    watch_p.add_argument("--from-seq", type=int, default=0, help="replay from this seq")
    answer = sub.add_parser("answer", help="answer a session's question (or --steer it)")
    answer.add_argument("session")
    answer.add_argument("text", help="the answer (an option's text, or free text)")
    answer.add_argument("--steer", action="store_true", help="guidance, not an answer")
    confirm = sub.add_parser(
        "confirm", help="confirm a session's proposed contract (gate 1): its agent starts"
    )
    confirm.add_argument("session")
    approve = sub.add_parser("approve", help="approve a session's verified diff")
    approve.add_argument("session")
    approve.add_argument("--delivery", choices=["branch", "checkout"], default=None)
    approve.add_argument("--comment")
    approve.add_argument("--files", nargs="+", help="approve only these files (partial)")
    approve.add_argument("--accept-finding", action="store_true", help="accept a no-change finding")
    approve.add_argument(
        "--accept-judge-changes",
        action="store_true",
        help="deliver although the work changed how it is judged (its tests, test "
        "configuration or scripts; printed first): only after you read them",
    )
    approve.add_argument(
        "--accept-flaky",
        action="store_true",
        help="deliver although a check passed only on its immediate re-run (a test failed, "
        "then passed; printed first): only after you read them",
    )
    reject = sub.add_parser("reject", help="reject a session's diff")
    reject.add_argument("session")
    reject.add_argument("--comment")
    cancel = sub.add_parser("cancel", help="cancel a session")
    cancel.add_argument("session")
    split = sub.add_parser(
        "split", help="a foreman session's split at gate 1: print it, or replace it from FILE"
    )
    split.add_argument("session")
    split.add_argument("file", nargs="?", help="the split as JSON ('-' reads stdin)")
    rename = sub.add_parser("rename", help="name a session (shown beside its intent)")
    rename.add_argument("session")
    rename.add_argument("name", help='the short name ("" clears it)')
    archive = sub.add_parser("archive", help="hide a finished session from the board")
    archive.add_argument("session")
    unarchive = sub.add_parser("unarchive", help="bring an archived session back to the board")
    unarchive.add_argument("session")
    retry = sub.add_parser(
        "retry", help="start a failed, rejected or cancelled session's task again (told why)"
    )
    retry.add_argument("session")
    retry.add_argument(
        "--keep-edits",
        action="store_true",
        help="start from the old worktree's files (uncommitted), not afresh",
    )
    revive = sub.add_parser("revive", help="start a dormant session's agent again (resumed)")
    revive.add_argument("session")
    delete = sub.add_parser(
        "delete",
        help="delete a finished session for good: its worktree, events and record "
        "(a delivered branch stays)",
    )
    delete.add_argument("session")
    delete.add_argument("--yes", action="store_true", help="delete without asking")
    push = sub.add_parser("push", help="push a session's delivered branch to the repo's remote")
    push.add_argument("session")
    push.add_argument("--remote", default="origin", help="the remote (default: origin)")
    pr = sub.add_parser(
        "pr", help="push the delivered branch and open a pull request with gh (intent as title)"
    )
    pr.add_argument("session")
    pr.add_argument("--remote", default="origin", help="the remote (default: origin)")
    for p in (
        answer, confirm, approve, reject, cancel, rename, archive, unarchive, retry, revive, delete,
        push, pr,
    ):  # fmt: skip
        p.add_argument("--json", action="store_true", help="print the owner's answer as JSON")


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "get":
        return get(args.session, as_json=args.json)
    if args.command == "watch":
        return watch(args.session, as_json=args.json, from_seq=args.from_seq)
    if args.command == "split":
        return split(args.session, args.file)
    if args.command in LIFECYCLE:
        return lifecycle(args)
    if args.command in PUBLISH:
        return publish(args)
    return act(args)
