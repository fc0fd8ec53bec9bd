#!/usr/bin/env python3
"""corral demo agent: a SCRIPTED stand-in for an interactive coding-agent CLI.

This is not a model. It plays the recipes in recipes.json (chosen by keywords
in the task) so corral's demo and tests can exercise a real terminal program
(raw tty input, bracketed paste, a spinner, permission questions, hooks)
without any model, key or installed agent CLI. Its screen texts imitate
Claude Code so the same status heuristics apply. Stdlib only.

    python3 demo_agent.py [--pace FLOAT] [--yes] [--recipes FILE] [PROMPT...]

Interactive when stdin is a tty; otherwise it runs the task from argv as if
--yes were given, prints plain narration and exits.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
import unicodedata
import uuid
from pathlib import Path

BANNER = "corral demo agent (scripted — not a model)"
PROMPT = "> "
CONTINUATION = "  "
SPINNER_FRAMES = "·✢✳✶✻✽✻✶✳✢"
SPINNER_TEXT = "Working… (esc to interrupt)"
SPINNER_STEP = 0.12  # seconds between spinner frames (independent of --pace)
NARRATION_STEP = 0.8  # seconds between narration lines at pace 1
QUESTION = "Do you want to make this edit to {path}?"
OPTIONS = (
    "Yes",
    "Yes, and don't ask again this session",
    "No, and tell the demo agent what to do differently (esc)",
)
EXIT_COMMANDS = ("/exit", "/quit")
HOOK_TIMEOUT = 5.0
PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
BRACKETED_PASTE_ON = "\x1b[?2004h"
BRACKETED_PASTE_OFF = "\x1b[?2004l"


class Quit(BaseException):
    """Leave the agent (Ctrl-C, Ctrl-D, /exit, end of input)."""

    def __init__(self, reason: str = "prompt_input_exit") -> None:
        super().__init__(reason)
        self.reason = reason


class Terminated(BaseException):
    """SIGTERM / SIGHUP: restore the terminal and exit 128 + signal."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Interrupted(Exception):
    """Esc while working."""


# ---------------------------------------------------------------- output


def out(text: str) -> None:
    """Write to stdout unbuffered; a vanished terminal is not an error."""
    data = text.encode("utf-8", "replace")
    while data:
        try:
            n = os.write(1, data)
        except InterruptedError:
            continue
        except OSError:
            return
        data = data[n:]


def cell_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def rows_of(lines: list[str], columns: int) -> int:
    """Screen rows the lines take up when printed one after another."""
    columns = max(1, columns)
    return sum(max(1, -(-cell_width(line) // columns)) for line in lines)


def terminal_columns() -> int:
    try:
        return os.get_terminal_size(1).columns
    except OSError:
        return 80


def erase_up(rows: int) -> None:
    """Erase the `rows` screen rows ending at the cursor's row; cursor goes to
    the start of the first of them."""
    out("\r" + (f"\x1b[{rows - 1}A" if rows > 1 else "") + "\x1b[J")


# ---------------------------------------------------------------- hooks


class Hooks:
    """Runs `sh -c "$CORRAL_HOOK_CMD <Event>"` with the event as JSON on stdin.
    Synchronous (like Claude Code's hooks), 5 s timeout, errors ignored."""

    def __init__(self, command: str | None, cwd: str) -> None:
        self.command = (command or "").strip()
        self.cwd = cwd
        self.session_id = str(uuid.uuid4())

    def fire(self, event: str, timeout: float = HOOK_TIMEOUT, **fields: object) -> None:
        if not self.command:
            return
        payload = {
            "hook_event_name": event,
            "session_id": self.session_id,
            "cwd": self.cwd,
            **fields,
        }
        shell = "/bin/sh" if os.path.exists("/bin/sh") else "sh"
        try:
            proc = subprocess.Popen(
                [shell, "-c", f"{self.command} {event}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=self.cwd,
                start_new_session=True,
            )
        except Exception:
            return
        finished = False
        try:
            proc.communicate(json.dumps(payload, ensure_ascii=False).encode(), timeout=timeout)
            finished = True
        except Exception:
            pass  # a timeout or a broken hook; a signal (BaseException) propagates
        finally:
            if not finished:  # never leave a hook running behind us
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    proc.wait(timeout=1)


# ---------------------------------------------------------------- input


class Keys:
    """Reads the raw tty and turns bytes into key events:
    ("text", s), ("paste", s), ("enter",), ("esc",), ("up",), ("down",),
    ("backspace",), ("ctrl_c",), ("ctrl_d",), ("ctrl_u",), ("eof",).
    Unknown escape sequences are dropped."""

    ESC_WAIT = 0.05  # how long a lone ESC may wait for the rest of a sequence

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.pending = ""
        self.paste: list[str] | None = None  # inside a bracketed paste

    def _ready(self, timeout: float | None) -> bool:
        try:
            readable, _, _ = select.select([self.fd], [], [], timeout)
        except InterruptedError:
            return False
        return bool(readable)

    def _fill(self) -> bool:
        try:
            data = os.read(self.fd, 4096)
        except InterruptedError:
            return True
        except OSError:
            data = b""
        if not data:
            return False
        self.pending += self.decoder.decode(data)
        return True

    def poll(self, timeout: float | None) -> list[tuple[str, ...]]:
        """Wait up to `timeout` seconds (None: forever) for input."""
        if not self._ready(timeout):
            return []
        if not self._fill():
            return [("eof",)]
        events = self._parse()
        while self.pending and self.paste is None:
            # An incomplete escape sequence: give the rest a moment to arrive.
            if self._ready(self.ESC_WAIT) and self._fill():
                events += self._parse()
                continue
            if self.pending == "\x1b":
                events.append(("esc",))
            self.pending = ""  # a truncated sequence is dropped
        return events

    def _parse(self) -> list[tuple[str, ...]]:
        events: list[tuple[str, ...]] = []
        s, i, n = self.pending, 0, len(self.pending)

        def text(ch: str) -> None:
            if events and events[-1][0] == "text":
                events[-1] = ("text", events[-1][1] + ch)
            else:
                events.append(("text", ch))

        while i < n:
            if self.paste is not None:
                end = s.find(PASTE_END, i)
                if end < 0:
                    keep = _partial_suffix(s[i:], PASTE_END)
                    self.paste.append(s[i : n - keep])
                    i = n - keep
                    break
                self.paste.append(s[i:end])
                events.append(("paste", _clean_paste("".join(self.paste))))
                self.paste = None
                i = end + len(PASTE_END)
                continue
            ch = s[i]
            if ch == "\x1b":
                if i + 1 >= n:
                    break  # maybe the start of a sequence
                nxt = s[i + 1]
                if nxt == "[":  # CSI: parameters, intermediates, final byte
                    j = i + 2
                    while j < n and 0x20 <= ord(s[j]) <= 0x3F:
                        j += 1
                    if j >= n:
                        break
                    seq, i = s[i : j + 1], j + 1
                    if seq == PASTE_START:
                        self.paste = []
                    elif seq == "\x1b[A":
                        events.append(("up",))
                    elif seq == "\x1b[B":
                        events.append(("down",))
                    continue
                if nxt == "O":  # SS3 (application cursor keys)
                    if i + 2 >= n:
                        break
                    final, i = s[i + 2], i + 3
                    if final == "A":
                        events.append(("up",))
                    elif final == "B":
                        events.append(("down",))
                    continue
                if nxt in "]P_^":  # OSC / DCS / APC / PM strings: skip to BEL or ST
                    ends = [k for k in (s.find("\x07", i + 2), s.find("\x1b\\", i + 2)) if k >= 0]
                    if not ends:
                        break
                    k = min(ends)
                    i = k + (1 if s[k] == "\x07" else 2)
                    continue
                events.append(("esc",))  # ESC then something else: Esc, then that key
                i += 1
                continue
            if ch == "\r":
                events.append(("enter",))
                i += 2 if s.startswith("\n", i + 1) else 1
                continue
            if ch == "\n":
                events.append(("enter",))
            elif ch in "\x7f\x08":
                events.append(("backspace",))
            elif ch == "\x03":
                events.append(("ctrl_c",))
            elif ch == "\x04":
                events.append(("ctrl_d",))
            elif ch == "\x15":
                events.append(("ctrl_u",))
            elif ch == "\t" or ord(ch) >= 0x20:
                text(ch)
            i += 1
        self.pending = s[i:]
        return events


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest tail of `text` that starts `marker`."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-k:]):
            return k
    return 0


def _clean_paste(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in "\n\t" or ord(ch) >= 0x20)


class Terminal:
    """Raw-ish tty mode (no echo, no line editing, no signal keys, output
    post-processing kept) plus bracketed paste; restore() undoes both."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.saved = termios.tcgetattr(fd)
        self.active = False

    def enter(self) -> None:
        attrs = termios.tcgetattr(self.fd)
        attrs[0] &= ~(
            termios.BRKINT
            | termios.ICRNL
            | termios.INLCR
            | termios.IGNCR
            | termios.ISTRIP
            | termios.IXON
        )
        attrs[1] |= termios.OPOST | termios.ONLCR
        attrs[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
        attrs[6][termios.VMIN] = 1
        attrs[6][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        self.active = True
        out(BRACKETED_PASTE_ON)

    def restore(self) -> None:
        if not self.active:
            return
        self.active = False
        out(BRACKETED_PASTE_OFF)
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)


# ---------------------------------------------------------------- recipes


def load_recipes(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.setdefault("retry_keywords", ["fail"])
    data.setdefault("retry_narration", "Looking at the failing checks…")
    return data


def one_line(task: str) -> str:
    return " ".join(line.strip() for line in task.strip().splitlines() if line.strip())


def apply_edit(edit: dict, task: str, cwd: Path) -> tuple[Path, str]:
    """The file an edit targets and its new content (not written yet)."""
    target = cwd / edit["path"]
    if "content" in edit:
        return target, edit["content"]
    line = edit["append_line"].replace("{task}", one_line(task))
    try:
        current = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = edit.get("header", "")
    if line in current.splitlines():
        return target, current  # already recorded (a retry)
    if current and not current.endswith("\n"):
        current += "\n"
    return target, current + line + "\n"


# ---------------------------------------------------------------- the agent


class Agent:
    def __init__(
        self, recipes: dict, hooks: Hooks, *, pace: float, auto_yes: bool, interactive: bool
    ) -> None:
        self.recipes = recipes
        self.hooks = hooks
        self.pace = max(0.0, pace)
        self.auto_yes = auto_yes or not interactive
        self.interactive = interactive
        self.cwd = Path(hooks.cwd)
        self.keys = Keys(0) if interactive else None
        self.last: tuple[dict, str] | None = None  # recipe and task of the last real task
        self.spinning = False
        self.frame = 0
        self.frame_at = 0.0

    # -- choosing a recipe

    def choose(self, task: str) -> tuple[dict, str, bool]:
        """(recipe, task text for the recipe, whether this is a retry)."""
        low = task.lower()
        if self.last and any(k.lower() in low for k in self.recipes["retry_keywords"]):
            recipe, original = self.last
            return recipe, original, True
        for recipe in self.recipes["recipes"]:
            if any(k.lower() in low for k in recipe["keywords"]):
                break
        else:
            recipe = self.recipes["fallback"]
        self.last = (recipe, task)
        return recipe, task, False

    # -- screen pieces

    def say(self, line: str) -> None:
        if self.spinning:
            out("\r\x1b[K" + line + "\n")
            self._draw_spinner()
        else:
            out(line + "\n")

    def spinner_on(self) -> None:
        if self.interactive and not self.spinning:
            self.spinning = True
            self._draw_spinner()

    def spinner_off(self) -> None:
        if self.spinning:
            self.spinning = False
            out("\r\x1b[K")

    def _draw_spinner(self) -> None:
        self.frame_at = time.monotonic()
        glyph = SPINNER_FRAMES[self.frame % len(SPINNER_FRAMES)]
        out(f"\r\x1b[K{glyph} {SPINNER_TEXT}")

    def wait(self, seconds: float) -> None:
        """Sleep `seconds * pace`, animating the spinner; Esc interrupts."""
        end = time.monotonic() + seconds * self.pace
        if self.keys is None:
            time.sleep(max(0.0, end - time.monotonic()))
            return
        while (left := end - time.monotonic()) > 0:
            for event in self.keys.poll(min(left, SPINNER_STEP)):
                if event[0] == "esc":
                    raise Interrupted
                if event[0] == "ctrl_c":
                    raise Quit("prompt_input_exit")
                if event[0] == "eof":
                    raise Quit("other")
                # Anything else typed while working is ignored.
            if self.spinning and time.monotonic() - self.frame_at >= SPINNER_STEP:
                self.frame += 1
                self._draw_spinner()

    # -- one task

    def run_task(self, task: str) -> str:
        """Work on one task; returns "done", "declined" or "interrupted"."""
        self.hooks.fire("UserPromptSubmit", prompt=task)
        recipe, subject, retry = self.choose(task)
        self.spinner_on()
        try:
            if retry:
                self.say("● " + self.recipes["retry_narration"])
            self.wait(NARRATION_STEP)
            for line in recipe["narration"]:
                self.say("● " + line)
                self.wait(NARRATION_STEP)
            for edit in recipe["edits"]:
                target, content = apply_edit(edit, subject, self.cwd)
                rel = edit["path"]
                self.say(f"● Write({rel})")
                tool_input = {"file_path": str(target), "content": content}
                self.hooks.fire("PreToolUse", tool_name="Write", tool_input=tool_input)
                if not self.auto_yes:
                    self.spinner_off()
                    choice = self.ask(rel)
                    if choice == 3:
                        out("  ⎿  Edit declined.\n\n")
                        return "declined"
                    if choice == 2:
                        self.auto_yes = True
                    self.spinner_on()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")
                lines = content.count("\n") + (0 if content.endswith("\n") else 1)
                self.say(f"  ⎿  Wrote {lines} lines to {rel}")
                self.hooks.fire(
                    "PostToolUse",
                    tool_name="Write",
                    tool_input=tool_input,
                    tool_response={"filePath": str(target), "success": True},
                )
                self.wait(NARRATION_STEP / 2)
            self.spinner_off()
            out(f"● Done: {recipe['summary']}\n\n")
            return "done"
        except Interrupted:
            self.spinner_off()
            out("  ⎿  Interrupted by user\n\n")
            return "interrupted"
        finally:
            self.spinner_off()

    # -- permission question

    def ask(self, path: str) -> int:
        """Show the permission question; returns 1, 2 or 3."""
        assert self.keys is not None
        selected = 0
        columns = terminal_columns()

        def lines() -> list[str]:
            return [QUESTION.format(path=path)] + [
                f"{'❯' if k == selected else ' '} {k + 1}. {label}"
                for k, label in enumerate(OPTIONS)
            ]

        drawn = lines()
        out("\n".join(drawn))
        self.hooks.fire("Notification", message=f"Demo agent needs your permission to edit {path}")
        choice = 0
        while not choice:
            for event in self.keys.poll(None):
                kind = event[0]
                if kind == "text":
                    digits = [ch for ch in event[1] if ch in "123"]
                    if digits:
                        choice = int(digits[0])
                        break
                elif kind in ("up", "down"):
                    selected = (selected + (1 if kind == "down" else -1)) % len(OPTIONS)
                    erase_up(rows_of(drawn, columns))
                    drawn = lines()
                    out("\n".join(drawn))
                elif kind == "enter":
                    choice = selected + 1
                    break
                elif kind == "esc":
                    choice = 3
                    break
                elif kind == "ctrl_c":
                    out("\n")
                    raise Quit("prompt_input_exit")
                elif kind == "eof":
                    raise Quit("other")
        erase_up(rows_of(drawn, columns))
        return choice

    # -- idle prompt

    def read_task(self, finished: str | None = None) -> str:
        """Show the idle prompt and read one task; raises Quit. `finished` is
        the outcome of the task just ended: the Stop hook fires once the
        prompt is on screen (and before any input is read)."""
        assert self.keys is not None
        buf = ""
        columns = terminal_columns()

        def rendered(text: str) -> str:
            return text.replace("\t", "    ").replace("\n", "\n" + CONTINUATION)

        out(PROMPT)
        if finished is not None:
            self.hooks.fire("Stop", stop_hook_active=False, outcome=finished)
        while True:
            for event in self.keys.poll(None):
                kind = event[0]
                before = buf
                if kind in ("text", "paste"):
                    buf += event[1]
                    out(rendered(event[1]))
                    continue
                if kind == "enter":
                    task = buf.strip()
                    if not task:
                        continue
                    out("\n")
                    if task in EXIT_COMMANDS:
                        raise Quit("prompt_input_exit")
                    out("\n")
                    return task
                if kind == "ctrl_c":
                    out("\n")
                    raise Quit("prompt_input_exit")
                if kind == "ctrl_d":
                    if not buf:
                        out("\n")
                        raise Quit("prompt_input_exit")
                    continue
                if kind == "eof":
                    raise Quit("other")
                if kind == "backspace":
                    buf = buf[:-1]
                elif kind == "ctrl_u":
                    buf = buf[: buf.rfind("\n") + 1]
                if buf != before:
                    erase_up(rows_of((PROMPT + rendered(before)).split("\n"), columns))
                    out(PROMPT + rendered(buf))

    # -- sessions

    def echo_task(self, task: str) -> None:
        out(PROMPT + task.replace("\t", "    ").replace("\n", "\n" + CONTINUATION) + "\n\n")

    def banner(self) -> None:
        out(f"✻ {BANNER}\n")
        out(f"  cwd: {self.cwd}\n")
        if self.interactive:
            out("  Type a task and press Enter. Esc interrupts, /exit quits.\n")
        out("\n")

    def run_interactive(self, first_task: str) -> str:
        self.banner()
        self.hooks.fire("SessionStart", source="startup")
        task, outcome = first_task, None
        if task:
            self.echo_task(task)
        while True:
            if task:
                outcome = self.run_task(task)
            task = self.read_task(outcome)
            outcome = None

    def run_once(self, task: str) -> None:
        self.banner()
        self.hooks.fire("SessionStart", source="startup")
        self.echo_task(task)
        outcome = self.run_task(task)
        self.hooks.fire("Stop", stop_hook_active=False, outcome=outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="demo_agent.py",
        description=f"{BANNER}: plays scripted recipes so corral can be demoed and tested "
        "without a model.",
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=1.0,
        help="time scale: 1.0 is demo speed, 0.1 is ten times faster",
    )
    parser.add_argument(
        "--yes", action="store_true", help="never ask permission (also DEMO_AGENT_YES=1)"
    )
    parser.add_argument(
        "--recipes",
        type=Path,
        default=Path(__file__).resolve().with_name("recipes.json"),
        help="recipe file (default: recipes.json next to this script)",
    )
    parser.add_argument("prompt", nargs="*", help="the first task")
    args = parser.parse_args(argv)

    task = " ".join(args.prompt).strip()
    interactive = os.isatty(0)
    try:
        recipes = load_recipes(args.recipes)
    except (OSError, ValueError) as exc:
        print(f"demo agent: cannot read recipes {args.recipes}: {exc}", file=sys.stderr)
        return 2
    if not interactive and not task:
        print("demo agent: stdin is not a terminal; give the task as arguments", file=sys.stderr)
        return 2

    auto_yes = args.yes or os.environ.get("DEMO_AGENT_YES", "") not in ("", "0")
    hooks = Hooks(os.environ.get("CORRAL_HOOK_CMD"), os.getcwd())
    agent = Agent(recipes, hooks, pace=args.pace, auto_yes=auto_yes, interactive=interactive)

    def on_signal(signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        raise Terminated(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    terminal = Terminal(0) if interactive else None
    code, reason = 0, "other"
    try:
        try:
            if terminal is not None:
                terminal.enter()
                agent.run_interactive(task)
            else:
                agent.run_once(task)
        finally:
            agent.spinner_off()
            if terminal is not None:
                terminal.restore()
    except Quit as exc:
        reason = exc.reason
    except Terminated as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    hooks.fire("SessionEnd", timeout=2.0 if code else HOOK_TIMEOUT, reason=reason)
    return code


if __name__ == "__main__":
    sys.exit(main())
