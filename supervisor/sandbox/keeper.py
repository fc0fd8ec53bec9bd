"""The pane keeper: nothing an unconfined agent starts outlives it.

Run as a pane's first process (`python -I -S keeper.py -- agent args…`,
standard library only, and only its C modules where the Python ones cost
start time: it adds about 15 ms to the agent's start). It makes itself a child
subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so whatever the agent leaves
behind — `setsid`, double-forked, `nohup`ed — is re-parented to it instead of
to init and stays a descendant of the pane's process. It runs the agent as
its child in a process group of its own that it makes the terminal's
foreground group, the way a shell starts a job: keystrokes, pastes, Ctrl-C
and window-size changes reach the agent as if it were the pane's program,
and the pane's current command is the agent's. When the agent exits, the
keeper stops what remains of its tree (SIGTERM, a short grace, SIGKILL,
until nothing is left) and exits with the agent's status — a signal death
as the same signal — so the pane's exit status is the agent's.

A SIGTERM, SIGHUP, SIGINT or SIGQUIT sent to the keeper (the pane being
killed) goes on to the agent's group, and the tree is stopped as above once
the agent exits. Only SIGKILL of the keeper itself leaves its descendants
to init; corral stops a pane with SIGTERM first.
"""

import _signal as signal  # not `signal`: its enums cost more than the rest of the start
import os
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
GRACE = 0.5  # seconds the agent's leftovers get between SIGTERM and SIGKILL
POLL = 0.02
KILL_ROUNDS_SECS = 3.0  # SIGKILL rounds stop after this (a process that never dies)
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores these; the agent gets the defaults


def become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER) through `_ctypes` alone: the `ctypes`
    package costs as much to import as the rest of the keeper's start."""
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Int

        class Libc:
            _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]  # None: this process

        prctl = Function(("prctl", Libc()))  # type: ignore[arg-type]  # a handle is enough
        return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (ImportError, OSError, AttributeError, TypeError):
        return False


def _children(pid: int) -> list[int] | None:
    """`pid`'s children from /proc/<pid>/task/*/children (None: not offered)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            return None
        except OSError:
            continue
    return found


def _scan(root: int) -> list[int]:
    """Processes under `root` by parent pid, reading every /proc/<pid>/stat."""
    parents: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def descendants(root: int) -> list[int]:
    """Processes under `root`: walked from its children lists where the
    kernel offers them (cheap: nothing to read when none is left), else by
    scanning /proc."""
    found: list[int] = []
    todo = [root]
    while todo:
        children = _children(todo.pop())
        if children is None:
            return _scan(root)
        found += children
        todo += children
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:  # noqa: SIM105 - contextlib would add its imports to the start
            os.kill(pid, sig)
        except OSError:
            pass


def stop_leftovers() -> None:
    """SIGTERM every descendant, wait a short grace, then SIGKILL rounds
    until none is left (a forking one is caught by the next round)."""
    me = os.getpid()
    left = descendants(me)
    if not left:
        return
    signal_all(left, signal.SIGTERM)
    signal_all(left, signal.SIGCONT)  # a stopped process cannot act on TERM
    deadline = time.monotonic() + GRACE
    while left and time.monotonic() < deadline:
        time.sleep(POLL)
        reap()
        left = descendants(me)
    deadline = time.monotonic() + KILL_ROUNDS_SECS
    while left and time.monotonic() < deadline:
        signal_all(left, signal.SIGKILL)
        time.sleep(POLL)
        reap()
        left = descendants(me)
    reap()


def exit_as(status: int) -> None:
    """Exit the way the agent did: its code, or death by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the agent dumped, not us
        except (ImportError, OSError, ValueError):
            pass
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def run(argv: list[str]) -> None:
    if not argv:
        sys.stderr.write("keeper: no command\n")
        os._exit(127)
    become_subreaper()
    tty = 0 if os.isatty(0) else None
    foreground = tty is not None and os.tcgetpgrp(tty) == os.getpgrp()
    child = 0

    def forward(sig: int, _frame: object) -> None:
        if child:
            try:
                os.killpg(child, sig)
            except OSError:
                signal_all([child], sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    child = os.fork()
    if child == 0:
        try:
            for sig in (*FORWARDED, *RESTORED):
                signal.signal(sig, signal.SIG_DFL)
            os.setpgid(0, 0)
            if foreground and tty is not None:
                signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # we are a background group yet
                os.tcsetpgrp(tty, os.getpid())
                signal.signal(signal.SIGTTOU, signal.SIG_DFL)
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    try:  # noqa: SIM105 - as above
        os.setpgid(child, child)  # also here: whichever of the two runs first
    except OSError:
        pass
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    child = 0
    stop_leftovers()
    exit_as(status)


if __name__ == "__main__":
    args = sys.argv[1:]
    run(args[1:] if args[:1] == ["--"] else args)
