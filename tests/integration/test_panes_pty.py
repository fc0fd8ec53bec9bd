"""The pty pane backend: real ptys, real programs, pyte screens."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyte
import pytest

from corral.supervisor.panes.base import PaneError, PaneGone, PaneHandle, Screen
from corral.supervisor.panes.pty import PtyBackend, key_bytes, render_line
from corral.supervisor.panes.sweep import pid_alive, session_members
from tests.integration.test_panes_tmux import PY, READER, SILENT, base_env, make_spec, wait_until


@pytest.fixture
def backend() -> Iterator[PtyBackend]:
    b = PtyBackend(history=100)
    try:
        yield b
    finally:
        b.close()


def screen_of(b: PtyBackend, h: PaneHandle) -> Screen:
    return b.capture([h])[h.owner]


def shows(b: PtyBackend, h: PaneHandle, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in screen_of(b, h).lines)


def reader(b: PtyBackend, tmp_path: Path, program: str = READER) -> tuple[PaneHandle, Path]:
    script = tmp_path / "reader.py"
    script.write_text(program)
    log = tmp_path / "input.log"
    h = b.spawn(make_spec(tmp_path, [PY, str(script), str(log)]))
    wait_until(shows(b, h, "READY" if program is READER else "SILENT"), what="the reader")
    return h, log


def test_sweep_sees_the_pane(tmp_path: Path, backend: PtyBackend) -> None:
    h = backend.spawn(make_spec(tmp_path, ["sleep", "30"], width=90, height=20))
    assert h.backend == "pty" and h.owner == "s1:1" and h.pid
    info = backend.sweep()["s1:1"]
    assert info.handle == h and info.alive and info.exit_status is None
    assert (info.width, info.height) == (90, 20)
    wait_until(lambda: backend.sweep()["s1:1"].current_command == "sleep")
    assert backend.attach_argv(h) is None


def test_capture_plain_and_ansi(tmp_path: Path, backend: PtyBackend) -> None:
    coloured = 'printf "start\\n\\033[31mred \\033[1mbold\\033[0m plain \\033[44m  \\033[0m\\n"; exec sleep 30'
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", coloured], width=40, height=10))
    other = backend.spawn(make_spec(tmp_path, ["sh", "-c", "echo two; exec sleep 30"], "b"))
    wait_until(shows(backend, h, "plain"))
    wait_until(shows(backend, other, "two"))
    screens = backend.capture([h, other, PaneHandle("pty", h.pane_id, "x:1")])
    assert set(screens) == {"s1:1", "b:1"}
    s = screens["s1:1"]
    assert s.lines[:3] == ["start", "red bold plain   ", ""]
    assert (s.width, s.height, s.cursor_x, s.cursor_y) == (40, 10, 0, 2)
    assert s.ansi[1] == "\x1b[31mred \x1b[0m\x1b[1;31mbold\x1b[0m plain \x1b[44m  \x1b[0m"
    last = screens["b:1"]
    assert last.tail(1) == ["two"]


def test_scrollback_keeps_a_bounded_history(tmp_path: Path, backend: PtyBackend) -> None:
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", "seq 1 300; exec sleep 30"], height=10))
    wait_until(shows(backend, h, "300"))
    lines = backend.scrollback(h, 50)
    assert lines[-1] == "300" and len(lines) == 50 + 9
    everything = backend.scrollback(h, 10_000)
    assert len(everything) == 100 + 9  # the history holds 100 lines (fixture)
    assert everything[0] == str(300 - 108)


def test_exited_program_keeps_screen_and_status(tmp_path: Path, backend: PtyBackend) -> None:
    ok = backend.spawn(make_spec(tmp_path, ["sh", "-c", "echo bye; exit 3"], "ok"))
    sig = backend.spawn(make_spec(tmp_path, ["sh", "-c", "kill -TERM $$"], "sig"))
    infos = wait_until(
        lambda: (i := backend.sweep()) and not any(x.alive for x in i.values()) and i
    )
    assert infos["ok:1"].exit_status == 3
    assert infos["sig:1"].exit_status == 128 + 15
    assert "bye" in screen_of(backend, ok).lines
    with pytest.raises(PaneGone, match="exited"):
        backend.send_text(ok, "hi")
    backend.kill(ok)
    backend.kill(sig)
    assert backend.sweep() == {}


def test_environment_is_exactly_the_spec(tmp_path: Path, backend: PtyBackend) -> None:
    env = base_env(tmp_path, FOO="bar baz;")
    show = "import os; print(sorted(os.environ)); print('F=[%s]' % os.environ['FOO']); import time; time.sleep(30)"
    h = backend.spawn(make_spec(tmp_path, [PY, "-c", show], env=env, width=200))
    wait_until(shows(backend, h, "F=["))
    text = "\n".join(screen_of(backend, h).lines)
    assert "F=[bar baz;]" in text
    assert str(sorted([*env, "TERM"])) in text


def test_spawn_failures_leave_nothing(tmp_path: Path, backend: PtyBackend) -> None:
    with pytest.raises(PaneError, match="does not exist"):
        backend.spawn(make_spec(tmp_path, ["sleep", "1"], cwd=tmp_path / "missing"))
    with pytest.raises(PaneError, match="not found"):
        backend.spawn(make_spec(tmp_path, ["no-such-program-corral"]))
    with pytest.raises(PaneError, match="empty"):
        backend.spawn(make_spec(tmp_path, []))
    assert backend.sweep() == {}


def test_multiline_text_arrives_as_one_bracketed_paste_then_enter(
    tmp_path: Path, backend: PtyBackend
) -> None:
    h, log = reader(backend, tmp_path)
    backend.send_text(h, "line one\nline two\n  three")
    wait_until(lambda: "ENTER" in screen_of(backend, h).tail(1), what="Enter")
    assert screen_of(backend, h).tail(2) == ["PASTE:b'line one\\rline two\\r  three'", "ENTER"]
    assert log.read_bytes() == b"\x1b[200~line one\rline two\r  three\x1b[201~\r"
    backend.send_text(h, "cannot \x1b[201~escape", enter=False)
    wait_until(lambda: screen_of(backend, h).tail(1) == ["PASTE:b'cannot escape'"])


def test_plain_paste_when_the_program_did_not_ask_for_brackets(
    tmp_path: Path, backend: PtyBackend
) -> None:
    h = backend.spawn(make_spec(tmp_path, [PY, "-c", "print('got', input())"]))
    backend.send_text(h, "hello there")
    wait_until(shows(backend, h, "got hello there"))


def test_paste_that_never_shows_gets_no_enter(tmp_path: Path, backend: PtyBackend) -> None:
    h, log = reader(backend, tmp_path, SILENT)
    with pytest.raises(PaneError, match="did not show up"):
        backend.send_text(h, "invisible", confirm_timeout=0.4)
    backend.send_keys(h, ["z"])  # keys arrive in order: an Enter would come before it
    wait_until(lambda: log.read_bytes().endswith(b"z"), what="the barrier key")
    assert log.read_bytes() == b"\x1b[200~invisible\x1b[201~z"


def test_send_keys(tmp_path: Path, backend: PtyBackend) -> None:
    h, log = reader(backend, tmp_path)
    backend.send_keys(h, ["1", "-", "Enter", "Escape", "Up", "C-c"])
    wait_until(lambda: log.read_bytes().endswith(b"\x03"))
    assert log.read_bytes() == b"1-\r\x1b\x1b[A\x03"


def test_another_owner_gets_nothing(tmp_path: Path, backend: PtyBackend) -> None:
    h, log = reader(backend, tmp_path)
    stale = PaneHandle("pty", h.pane_id, "s1:0", h.pid)
    with pytest.raises(PaneGone):
        backend.send_text(stale, "must not arrive")
    with pytest.raises(PaneGone):
        backend.send_keys(stale, ["Enter"])
    with pytest.raises(PaneGone):
        backend.resize(stale, 50, 10)
    with pytest.raises(PaneGone):
        backend.kill(stale, timeout=0.5)
    with pytest.raises(PaneGone):
        backend.scrollback(stale)
    assert backend.capture([stale]) == {}
    backend.send_keys(h, ["z"])  # the owner's key arrives after anything the refused calls sent
    wait_until(lambda: log.read_bytes(), what="the owner's key")
    assert log.read_bytes() == b"z"
    assert backend.sweep()["s1:1"].alive


def test_resize_changes_the_pane_size(tmp_path: Path, backend: PtyBackend) -> None:
    script = "trap 'stty size' WINCH; echo trapped; while :; do sleep 0.05; done"
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", script]))
    wait_until(shows(backend, h, "trapped"), what="the program to handle WINCH")
    backend.resize(h, 70, 15)
    info = backend.sweep()["s1:1"]
    assert (info.width, info.height) == (70, 15)
    wait_until(shows(backend, h, "15 70"))
    assert screen_of(backend, h).width == 70


def test_terminal_queries_are_answered(tmp_path: Path, backend: PtyBackend) -> None:
    ask = (
        "import os, sys, tty; tty.setraw(0); os.write(1, b'\\x1b[3;5H\\x1b[6n');"
        "r = os.read(0, 32); os.write(1, b'\\r\\nreply ' + repr(r).encode() + b'\\r\\n');"
        "import time; time.sleep(30)"
    )
    h = backend.spawn(make_spec(tmp_path, [PY, "-c", ask]))
    wait_until(shows(backend, h, "reply"))
    assert any("reply b'\\x1b[3;5R'" in line for line in screen_of(backend, h).lines)


def test_kill_stops_a_term_ignoring_group_within_the_deadline(
    tmp_path: Path, backend: PtyBackend
) -> None:
    script = "trap '' TERM; sleep 1000 & set -m; sleep 1001 & echo started; wait"
    h = backend.spawn(make_spec(tmp_path, ["sh", "-c", script]))
    wait_until(shows(backend, h, "started"))
    assert h.pid is not None
    members = wait_until(lambda: len(m := session_members(h.pid)) >= 3 and m)
    t0 = time.monotonic()
    backend.kill(h, timeout=0.5)
    assert time.monotonic() - t0 < 1.5
    assert not any(pid_alive(pid) for pid in members)
    assert backend.sweep() == {}
    backend.kill(h)  # gone: fine


def test_close_stops_every_pane_and_nothing_is_readopted(tmp_path: Path) -> None:
    b = PtyBackend()
    handles = [b.spawn(make_spec(tmp_path, ["sleep", "30"], f"s{i}")) for i in range(3)]
    b.close()
    assert not any(pid_alive(h.pid or 0) for h in handles)
    assert b.sweep() == {}
    assert PtyBackend().sweep() == {}


# -- pure helpers ---------------------------------------------------------------------------


def test_key_bytes() -> None:
    assert key_bytes("Enter") == "\r"
    assert key_bytes("escape") == "\x1b"
    assert key_bytes("Up") == "\x1b[A" and key_bytes("Up", app_cursor=True) == "\x1bOA"
    assert key_bytes("C-c") == "\x03" and key_bytes("C-Space") == "\x00"
    assert key_bytes("M-x") == "\x1bx"
    assert key_bytes("7") == "7" and key_bytes("hello") == "hello"
    assert key_bytes("PageDown") == key_bytes("NPage") == "\x1b[6~"


def test_render_line_colours_and_wide_characters() -> None:
    screen = pyte.Screen(20, 2)
    stream = pyte.Stream(screen)
    stream.feed("a\x1b[1;91mB\x1b[0;38;5;196mC\x1b[48;2;1;2;3mD\x1b[0m界x")
    plain, ansi = render_line(screen.buffer[0], 20)
    assert plain == "aBCD界x"
    assert ansi == (
        "a\x1b[1;91mB\x1b[0m\x1b[38;2;255;0;0mC\x1b[0m\x1b[38;2;255;0;0;48;2;1;2;3mD\x1b[0m界x"
    )
