"""The tmux pane backend against a real tmux server.

Every test gets its own private server (socket under tmp_path) that is killed
at teardown, so no test can touch a real tmux server or another test's.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.panes.base import PaneError, PaneGone, PaneHandle, PaneSpec, Screen
from corral.supervisor.panes.sweep import PasteCheck, paste_needle, pid_alive, session_members
from corral.supervisor.panes.tmux import (
    OWNER_OPTION,
    SMALL_BATCH,
    TmuxBackend,
    standalone_ansi,
    strip_ansi,
)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

PY = sys.executable

# A program that turns on bracketed paste, reads its terminal raw and reports
# what arrives: one "PASTE:<repr>" line per bracketed paste, "ENTER" for a
# carriage return, "CHAR:<repr>" for anything else. Every byte also goes to
# the log file named by its first argument.
READER = r"""
import os, sys, tty
log = open(sys.argv[1], "ab", buffering=0)
fd = sys.stdin.fileno()
tty.setraw(fd)
os.write(1, b"\x1b[?2004hREADY\r\n")
buf = b""
while True:
    data = os.read(fd, 4096)
    if not data:
        break
    log.write(data)
    buf += data
    while buf:
        if buf.startswith(b"\x1b[200~"):
            end = buf.find(b"\x1b[201~")
            if end < 0:
                break
            os.write(1, b"PASTE:" + repr(buf[6:end]).encode() + b"\r\n")
            buf = buf[end + 6 :]
        elif buf.startswith(b"\x1b") and len(buf) < 6 and b"\x1b[200~".startswith(buf):
            break
        elif buf.startswith(b"\r"):
            os.write(1, b"ENTER\r\n")
            buf = buf[1:]
        else:
            os.write(1, b"CHAR:" + repr(buf[:1]).encode() + b"\r\n")
            buf = buf[1:]
"""

# Reads like READER but shows nothing: a paste into it never "lands".
SILENT = r"""
import os, sys, tty
log = open(sys.argv[1], "ab", buffering=0)
tty.setraw(0)
os.write(1, b"\x1b[?2004hSILENT\r\n")
while True:
    data = os.read(0, 4096)
    if not data:
        break
    log.write(data)
"""


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def make_spec(
    tmp_path: Path,
    argv: list[str],
    session_id: str = "s1",
    incarnation: int = 1,
    env: dict[str, str] | None = None,
    **kw: Any,
) -> PaneSpec:
    return PaneSpec(
        session_id=session_id,
        incarnation=incarnation,
        name=f"corral-{session_id}",
        cwd=kw.pop("cwd", tmp_path),
        argv=argv,
        env=base_env(tmp_path) if env is None else env,
        width=kw.pop("width", 100),
        height=kw.pop("height", 30),
    )


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.03)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[TmuxBackend]:
    b = TmuxBackend(socket_dir=tmp_path / "tmux")
    try:
        yield b
    finally:
        b.kill_server()


def screen_of(b: TmuxBackend, h: PaneHandle) -> Screen:
    return b.capture([h])[h.owner]


def shows(b: TmuxBackend, h: PaneHandle, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in screen_of(b, h).lines)


def reader(
    b: TmuxBackend, tmp_path: Path, program: str = READER, **kw: Any
) -> tuple[PaneHandle, Path]:
    script = tmp_path / "reader.py"
    script.write_text(program)
    log = tmp_path / f"input-{kw.get('session_id', 's1')}.log"
    h = b.spawn(make_spec(tmp_path, [PY, str(script), str(log)], **kw))
    ready = "READY" if program is READER else "SILENT"
    wait_until(shows(b, h, ready), what="the reader to start")
    return h, log


def count_runs(b: TmuxBackend, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = b._run

    def counting(argv: list[str], **kw: Any) -> str:
        calls.append(argv)
        return real(argv, **kw)

    monkeypatch.setattr(b, "_run", counting)
    return calls


# -- spawn, sweep, capture ---------------------------------------------------------------


def test_socket_dir_is_private(tmp_path: Path, backend: TmuxBackend) -> None:
    assert (tmp_path / "tmux").stat().st_mode & 0o777 == 0o700
    assert backend.sweep() == {}  # no server yet
    assert not backend.server_running()


def test_sweep_sees_the_pane_with_its_owner_and_command(
    tmp_path: Path, backend: TmuxBackend
) -> None:
    h = backend.spawn(make_spec(tmp_path, ["sleep", "30"], width=90, height=20))
    assert h.backend == "tmux" and h.pane_id.startswith("%") and h.owner == "s1:1"
    infos = backend.sweep()
    info = infos["s1:1"]
    assert info.handle == h
    assert info.alive and info.exit_status is None
    assert info.current_command == "sleep"
    assert (info.width, info.height) == (90, 20)
    assert abs(info.activity - time.time()) < 5
    opt = backend._run(["show-options", "-p", "-v", "-t", h.pane_id, OWNER_OPTION])
    assert opt.strip() == "s1:1"
    name = backend._run(["display-message", "-p", "-t", h.pane_id, "#{window_name}"])
    assert name.strip() == "corral-s1"


def test_activity_is_the_sweep_time_while_output_is_recent(
    tmp_path: Path, backend: TmuxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    import corral.supervisor.panes.tmux as tmux_module

    backend.spawn(make_spec(tmp_path, ["sh", "-c", "echo hi; exec sleep 30"]))
    first = backend.sweep()["s1:1"].activity
    second = backend.sweep()["s1:1"].activity
    assert second > first  # tmux's whole second is ambiguous: keep capturing
    later = time.time() + 10  # ten seconds on, the whole second tmux recorded is reported
    monkeypatch.setattr(tmux_module, "time", types.SimpleNamespace(time=lambda: later))
    settled = backend.sweep()["s1:1"].activity
    assert settled == int(settled) and first - 2 < settled <= first
    assert backend.sweep()["s1:1"].activity == settled


def test_capture_plain_and_ansi_in_one_invocation(
    tmp_path: Path, backend: TmuxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    coloured = (
        'printf "start\\n\\033[31mred \\033[1mbold\\n still red\\033[0m plain\\n"; exec sleep 30'
    )
    a = backend.spawn(make_spec(tmp_path, ["sh", "-c", coloured], session_id="a"))
    b = backend.spawn(
        make_spec(tmp_path, ["sh", "-c", "echo second; exec sleep 30"], session_id="b")
    )
    wait_until(shows(backend, a, "plain"))
    wait_until(shows(backend, b, "second"))
    imposter = PaneHandle("tmux", b.pane_id, "someone:9")

    calls = count_runs(backend, monkeypatch)
    screens = backend.capture([a, b, imposter])
    assert len(calls) == 1  # all panes in one tmux invocation
    assert set(screens) == {"a:1", "b:1"}

    sa = screens["a:1"]
    assert sa.lines[:3] == ["start", "red bold", " still red plain"]
    assert (sa.width, sa.height) == (100, 30) and len(sa.lines) == 30
    assert (sa.cursor_x, sa.cursor_y) == (0, 3)
    assert "\x1b[31m" in sa.ansi[1] and "bold" in sa.ansi[1]
    # the style carried into the next line is re-opened there, and closed
    assert sa.ansi[2].startswith("\x1b[31;1m") and "plain" in sa.ansi[2]
    assert [strip_ansi(line) for line in sa.ansi] == sa.lines
    assert screens["b:1"].tail(1) == ["second"]

    calls.clear()
    backend.sweep()
    assert len(calls) == 1


def test_capture_of_many_panes_and_one_that_vanished(
    tmp_path: Path, backend: TmuxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles = [
        backend.spawn(
            make_spec(
                tmp_path, ["sh", "-c", f"echo pane {i}; exec sleep 30"], f"p{i}", height=5 + i
            )
        )
        for i in range(SMALL_BATCH + 2)
    ]
    for i, h in enumerate(handles):
        wait_until(shows(backend, h, f"pane {i}"))
    calls = count_runs(backend, monkeypatch)
    screens = backend.capture(handles)
    assert len(calls) == 1
    for i, h in enumerate(handles):
        assert screens[h.owner].lines[0] == f"pane {i}"
        assert len(screens[h.owner].lines) == screens[h.owner].height == 5 + i
    # a pane that went away between the sweep and the capture costs a retry
    backend.kill(handles[3], timeout=1)
    calls.clear()
    screens = backend.capture(handles)
    assert set(screens) == {h.owner for h in handles} - {handles[3].owner}
    assert len(calls) == 3  # the failed chain, one list-panes, the retry
    assert screens[handles[4].owner].lines[0] == "pane 4"
    assert backend.capture([handles[3], PaneHandle("tmux", "%999", "x:1")]) == {}


def test_scrollback_has_history_then_screen(tmp_path: Path, backend: TmuxBackend) -> None:
    h = backend.spawn(
        make_spec(tmp_path, ["sh", "-c", "seq 1 200; exec sleep 30"], height=10, width=40)
    )
    wait_until(shows(backend, h, "200"))
    lines = backend.scrollback(h, 150)
    assert lines[-1] == "200"
    assert len(lines) == 150 + 9  # 150 of history, 9 on screen (the 10th is blank)
    assert lines[0] == str(200 - 158)
    with pytest.raises(PaneGone):
        backend.scrollback(PaneHandle("tmux", h.pane_id, "other:1"))


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.mark.slow
def test_a_streaming_pane_keeps_the_history_corral_reads_not_megabytes_more(
    tmp_path: Path, backend: TmuxBackend
) -> None:
    """A pane keeps what corral reads back (the console's history view: 2,000
    lines) and no more: with 20,000 lines of history each streaming pane grew
    the tmux server by ~10 MB (the budget is 2 MB per session)."""
    quiet = backend.spawn(make_spec(tmp_path, ["sleep", "60"], session_id="s0", width=200))
    pid = backend.server_pid()
    assert pid is not None and quiet.pid
    before = _rss_kb(pid)
    printing = (
        "seq -f 'streaming narration line %g: reading, thinking, editing' 25000; exec sleep 60"
    )
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", printing], width=200, height=50))
    wait_until(shows(backend, h, "line 25000:"), timeout=30, what="the last line")
    grown_mb = (_rss_kb(pid) - before) / 1024
    assert grown_mb < 3, f"the tmux server grew {grown_mb:.1f} MB for one pane's history"
    lines = backend.scrollback(h, 2000)
    assert len(lines) >= 2000 and lines[-1].endswith("line 25000: reading, thinking, editing")


def test_exited_program_keeps_screen_and_status(tmp_path: Path, backend: TmuxBackend) -> None:
    # (the first program outlives its output by a moment, as real ones do: one
    # that exits within milliseconds of its start can, under load, die before
    # tmux has read its pty, and tmux then shows an empty screen)
    ok = backend.spawn(
        make_spec(tmp_path, ["sh", "-c", "echo bye; sleep 0.3; exit 3"], session_id="ok")
    )
    sig = backend.spawn(make_spec(tmp_path, ["sh", "-c", "kill -TERM $$"], session_id="sig"))
    infos = wait_until(
        lambda: (i := backend.sweep()) and not i["ok:1"].alive and not i["sig:1"].alive and i
    )
    assert infos["ok:1"].exit_status == 3
    assert infos["sig:1"].exit_status == 128 + 15
    # the last screen stays readable (tmux may scroll it by a line to add its
    # "Pane is dead" notice, so look in the history too; the notice itself is
    # not asserted: tmux draws it only once it reaps the program, and under
    # load it can lose that SIGCHLD for good, when the status comes from the
    # zombie instead)
    assert "bye" in backend.scrollback(ok, 10)
    with pytest.raises(PaneGone, match="exited"):
        backend.send_text(ok, "hello")
    backend.kill(ok)
    backend.kill(sig)
    assert backend.sweep() == {}


# -- environment ------------------------------------------------------------------------------


def test_environment_is_exactly_the_spec(tmp_path: Path, backend: TmuxBackend) -> None:
    first = backend.spawn(make_spec(tmp_path, ["sleep", "30"], session_id="first"))
    # a credential-shaped variable in the server's global environment …
    backend._run(["set-environment", "-g", "SECRET_TOKEN", "leaked"])
    show = "import os; print(sorted(os.environ)); print('T=[%s] F=[%s]' % (os.environ.get('SECRET_TOKEN'), os.environ.get('FOO')))"
    env = base_env(tmp_path, FOO="bar baz;", TERM="xterm-256color")
    h = backend.spawn(
        make_spec(tmp_path, [PY, "-c", show + "; import time; time.sleep(30)"], "two", env=env)
    )
    wait_until(shows(backend, h, "F=["))
    text = "\n".join(screen_of(backend, h).lines)
    # … does not reach the pane; the spec's variables do, verbatim
    assert "T=[None] F=[bar baz;]" in text
    assert str(sorted(env)) in text.replace("\n", "")
    backend.kill(first)


def test_spawn_sets_term_when_the_spec_has_none(tmp_path: Path, backend: TmuxBackend) -> None:
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", 'echo "TERM=$TERM"; exec sleep 30']))
    wait_until(shows(backend, h, "TERM="))
    assert any(line.startswith("TERM=") and len(line) > 5 for line in screen_of(backend, h).lines)


def test_spawn_failures_leave_nothing(tmp_path: Path, backend: TmuxBackend) -> None:
    with pytest.raises(PaneError, match="does not exist"):
        backend.spawn(make_spec(tmp_path, ["sleep", "1"], cwd=tmp_path / "missing"))
    with pytest.raises(PaneError, match="not found"):
        backend.spawn(make_spec(tmp_path, ["no-such-program-corral"]))
    with pytest.raises(PaneError, match="empty"):
        backend.spawn(make_spec(tmp_path, []))
    assert not backend.server_running()  # nothing was created, not even the server

    h = backend.spawn(make_spec(tmp_path, ["sleep", "30"]))
    with pytest.raises(PaneError, match="not found"):
        backend.spawn(make_spec(tmp_path, ["./nope"], session_id="s2"))
    with pytest.raises(PaneError, match="does not exist"):
        backend.spawn(make_spec(tmp_path, ["sleep", "1"], "s3", cwd=tmp_path / "gone"))
    windows = backend._run(["list-windows", "-a", "-F", "#{pane_id}"]).split()
    assert windows == [h.pane_id]


def test_spawn_rolls_back_when_setup_fails(
    tmp_path: Path, backend: TmuxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.spawn(make_spec(tmp_path, ["sleep", "30"], session_id="keep"))
    real = backend._run

    def failing(argv: list[str], **kw: Any) -> str:
        if "resize-window" in argv:
            raise PaneError("injected failure")
        return real(argv, **kw)

    monkeypatch.setattr(backend, "_run", failing)
    with pytest.raises(PaneError, match="removed it"):
        backend.spawn(make_spec(tmp_path, ["sleep", "30"], session_id="bad"))
    monkeypatch.undo()
    assert set(backend.sweep()) == {"keep:1"}
    assert len(backend._run(["list-windows", "-a", "-F", "#{pane_id}"]).split()) == 1


def test_odd_names_owners_and_directories(tmp_path: Path, backend: TmuxBackend) -> None:
    odd = tmp_path / "dir #{pane_id} ;"
    odd.mkdir()
    sid = "we,ird}#%d;"
    script = "pwd; exec sleep 30"
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", script], session_id=sid, cwd=odd))
    assert h.owner == f"{sid}:1"
    wait_until(shows(backend, h, "dir #{pane_id} ;"))
    assert backend.sweep()[h.owner].handle.pane_id == h.pane_id
    backend.send_keys(h, ["x"])  # the guard inside tmux matched the odd owner
    backend.resize(h, 80, 12)
    backend.kill(h, timeout=1)
    assert backend.sweep() == {}


# -- sending ----------------------------------------------------------------------------------


def test_multiline_text_arrives_as_one_bracketed_paste_then_enter(
    tmp_path: Path, backend: TmuxBackend
) -> None:
    h, log = reader(backend, tmp_path)
    backend.send_text(h, "line one\nline two\n  three")
    lines = wait_until(
        lambda: (s := screen_of(backend, h).tail(5)) and "ENTER" in s and s, what="Enter"
    )
    assert lines[-2:] == ["PASTE:b'line one\\rline two\\r  three'", "ENTER"]
    assert log.read_bytes() == b"\x1b[200~line one\rline two\r  three\x1b[201~\r"

    backend.send_text(h, "no enter", enter=False)
    backend.send_keys(h, ["z"])  # keys arrive in order: no Enter can come after this one
    wait_until(lambda: "CHAR:b'z'" in screen_of(backend, h).tail(1), what="the barrier key")
    assert screen_of(backend, h).tail(2) == ["PASTE:b'no enter'", "CHAR:b'z'"]

    backend.send_text(h, "cannot \x1b[201~escape")  # the text cannot end its own paste
    wait_until(lambda: screen_of(backend, h).tail(2) == ["PASTE:b'cannot escape'", "ENTER"])


def test_paste_that_never_shows_gets_no_enter(tmp_path: Path, backend: TmuxBackend) -> None:
    h, log = reader(backend, tmp_path, SILENT)
    with pytest.raises(PaneError, match="did not show up"):
        backend.send_text(h, "invisible", confirm_timeout=0.4)
    backend.send_keys(h, ["z"])  # keys arrive in order: an Enter would come before it
    wait_until(lambda: log.read_bytes().endswith(b"z"), what="the barrier key")
    assert log.read_bytes() == b"\x1b[200~invisible\x1b[201~z"  # and no \r


def test_send_keys(tmp_path: Path, backend: TmuxBackend) -> None:
    h, log = reader(backend, tmp_path)
    backend.send_keys(h, ["1", "-", "Enter", "Escape", "C-c"])
    wait_until(lambda: log.read_bytes().endswith(b"\x03"))
    assert log.read_bytes() == b"1-\r\x1b\x03"


def test_changed_owner_blocks_every_side_effect(tmp_path: Path, backend: TmuxBackend) -> None:
    h, log = reader(backend, tmp_path)
    backend._run(["set-option", "-p", "-t", h.pane_id, OWNER_OPTION, "s1:2"])  # a new incarnation
    with pytest.raises(PaneGone):
        backend.send_text(h, "must not arrive")
    with pytest.raises(PaneGone):
        backend.send_keys(h, ["Enter"])
    with pytest.raises(PaneGone):
        backend.resize(h, 50, 10)
    with pytest.raises(PaneGone):
        backend.kill(h, timeout=0.5)
    assert backend.capture([h]) == {}
    # a key from the pane's new owner arrives after anything the refused calls sent
    backend.send_keys(PaneHandle("tmux", h.pane_id, "s1:2"), ["z"])
    wait_until(lambda: log.read_bytes(), what="the new owner's key")
    assert log.read_bytes() == b"z"
    info = backend.sweep()["s1:2"]
    assert info.alive and info.handle.pane_id == h.pane_id and info.width == 100

    # and the side effects on a pane that is gone
    backend.kill(PaneHandle("tmux", h.pane_id, "s1:2"), timeout=1)
    with pytest.raises(PaneGone):
        backend.send_text(h, "x")
    with pytest.raises(PaneGone):
        backend.send_keys(h, ["x"])
    backend.kill(h)  # gone: not an error


def test_a_server_left_with_no_session_means_the_pane_is_gone(
    tmp_path: Path, backend: TmuxBackend
) -> None:
    """Between its last pane closing and its exit, a tmux server answers
    "no current target": every side effect on the old pane is PaneGone and a
    capture is empty, never a tmux error (CI saw this race once)."""
    h, _log = reader(backend, tmp_path)
    backend._run(["set-option", "-g", "exit-empty", "off"])  # hold the race open
    backend.kill(h, timeout=1)
    wait_until(lambda: not backend.sweep(), what="the last pane to go")
    assert backend.capture([h]) == {}
    with pytest.raises(PaneGone):
        backend.send_text(h, "x")
    with pytest.raises(PaneGone):
        backend.send_keys(h, ["x"])
    backend.kill(h)  # gone: not an error


def test_resize_changes_the_pane_size(tmp_path: Path, backend: TmuxBackend) -> None:
    h = backend.spawn(
        make_spec(
            tmp_path,
            ["sh", "-c", "trap 'stty size' WINCH; echo trapped; while :; do sleep 0.05; done"],
        )
    )
    wait_until(shows(backend, h, "trapped"), what="the program to handle WINCH")
    backend.resize(h, 70, 15)
    info = backend.sweep()["s1:1"]
    assert (info.width, info.height) == (70, 15)
    wait_until(shows(backend, h, "15 70"), what="the program to see the new size")


# -- killing -----------------------------------------------------------------------------------


def test_kill_stops_a_term_ignoring_group_within_the_deadline(
    tmp_path: Path, backend: TmuxBackend
) -> None:
    # the shell and its background child both ignore SIGTERM; the child runs
    # in a process group of its own as well (set -m)
    script = "trap '' TERM; sleep 1000 & set -m; sleep 1001 & echo started; wait"
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", script]))
    wait_until(shows(backend, h, "started"))
    assert h.pid is not None
    members = wait_until(lambda: len(m := session_members(h.pid)) >= 3 and m)
    t0 = time.monotonic()
    backend.kill(h, timeout=0.5)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5 + 1.0
    assert not any(pid_alive(pid) for pid in members)
    assert session_members(h.pid) == {}
    assert backend.sweep() == {}


def test_kill_of_a_cooperative_program_is_quick(tmp_path: Path, backend: TmuxBackend) -> None:
    keep = backend.spawn(make_spec(tmp_path, ["sleep", "30"], session_id="keep"))
    h = backend.spawn(make_spec(tmp_path, ["sleep", "30"]))
    t0 = time.monotonic()
    backend.kill(h, timeout=5)
    assert time.monotonic() - t0 < 1.0
    assert not pid_alive(h.pid or 0)
    assert set(backend.sweep()) == {"keep:1"}
    backend.kill(h)  # again: gone, not an error
    backend.kill(keep)
    assert not backend.server_running()  # the last window took the server with it


# -- restart: a new backend finds the old panes ------------------------------------------------


def test_a_new_backend_readopts_panes_by_owner_marker(tmp_path: Path) -> None:
    old = TmuxBackend(socket_dir=tmp_path / "tmux")
    try:
        h = old.spawn(make_spec(tmp_path, ["sh", "-c", "echo adopted; exec sleep 30"]))
        old.close()
        new = TmuxBackend(socket_dir=tmp_path / "tmux")
        info = new.sweep()["s1:1"]
        assert info.handle.pane_id == h.pane_id and info.handle.pid == h.pid and info.alive
        wait_until(lambda: "adopted" in new.capture([info.handle])["s1:1"].lines)
        new.kill(info.handle, timeout=1)
        assert new.sweep() == {}
    finally:
        old.kill_server()


def test_attach_argv_attaches_a_terminal(tmp_path: Path, backend: TmuxBackend) -> None:
    from ptyprocess import PtyProcess

    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", "echo attach-me; exec sleep 30"]))
    argv = backend.attach_argv(h)
    assert argv is not None and argv[-2:] == ["-t", h.pane_id]
    env = dict(os.environ, TERM="xterm")
    env.pop("TMUX", None)
    proc = PtyProcess.spawn(argv, env=env, dimensions=(30, 100))
    try:
        seen = b""
        deadline = time.monotonic() + 5
        while b"attach-me" not in seen and time.monotonic() < deadline:
            seen += proc.read(4096)
        assert b"attach-me" in seen
    finally:
        proc.terminate(force=True)


# -- pure helpers --------------------------------------------------------------------------------


def test_standalone_ansi_reopens_and_closes_styles() -> None:
    lines = ["\x1b[31mred", "still", "\x1b[1;38;5;100mmore\x1b[22m", "\x1b[39mplain", "x"]
    out = standalone_ansi(lines)
    assert out[0] == "\x1b[31mred\x1b[0m"
    assert out[1] == "\x1b[31mstill\x1b[0m"
    assert out[2] == "\x1b[31m\x1b[1;38;5;100mmore\x1b[22m\x1b[0m"
    assert out[3] == "\x1b[38;5;100m\x1b[39mplain"
    assert out[4] == "x"


def test_paste_check() -> None:
    assert paste_needle("first\n  the last   line \n\n") == "thelastline"
    assert paste_needle("x" * 50) == "x" * 24
    before = Screen(lines=["> old prompt", ""], cursor_y=1, width=40)
    check = PasteCheck("new prompt", before)
    assert not check.landed(before)
    assert check.landed(Screen(lines=["> old prompt", "> new prompt"], cursor_y=1, width=40))
    assert not check.landed(Screen(lines=["> old prompt", "> something"], cursor_y=1, width=40))
    # the same text already on screen: it must show up again, near the cursor
    again = PasteCheck("old prompt", before)
    assert not again.landed(Screen(lines=["> old prompt", "> "], cursor_y=1, width=40))
    assert again.landed(Screen(lines=["> old prompt", "> old prompt"], cursor_y=1, width=40))
    # a wrapped paste, and an agent's placeholder for a long paste
    wrapped = PasteCheck("a long line that wraps", Screen(lines=["", ""], width=10))
    assert wrapped.landed(Screen(lines=["a long lin", "e that wra", "ps"], cursor_y=2, width=10))
    long = PasteCheck("x\n" * 100, before)
    assert long.landed(Screen(lines=["> old prompt", "> [Pasted text #1 +100 lines]"], cursor_y=1))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux procfs")
def test_a_dead_pane_whose_program_tmux_never_reaped_still_reports_its_exit() -> None:
    """Under load tmux can lose the SIGCHLD of one of two panes exiting
    together: the pane is dead, the program a zombie, and tmux shows no exit
    status. The sweep reads the zombie's status instead of calling it alive."""
    import signal

    from corral.supervisor.panes.tmux import _unreaped

    children = []
    for how in ("signal", "exit"):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            if how == "signal":
                os.kill(os.getpid(), signal.SIGTERM)
            os._exit(3)
        children.append(pid)
    try:
        wait_until(lambda: all(_unreaped(pid)[0] is False for pid in children))
        assert _unreaped(children[0]) == (False, 128 + signal.SIGTERM)
        assert _unreaped(children[1]) == (False, 3)
        assert _unreaped(os.getpid()) == (True, None)  # running: alive
    finally:
        for pid in children:
            os.waitpid(pid, 0)
    assert _unreaped(children[0]) == (True, None)  # reaped: tmux will have the status
