"""A stand-in for Claude Code in a pane the user started: it draws Claude's
edit-permission menu (cursor `❯` on "1. Yes"), takes the choice by arrows
and Enter or by digit, then shows an idle prompt (`? for shortcuts`) and
echoes what is typed or pasted there, one line at a time. Everything it
takes is appended to the log file named by its first argument."""

from __future__ import annotations

import os
import sys
import tty

OPTIONS = [
    "Yes",
    "Yes, allow all edits during this session (shift+tab)",
    "No, and tell Claude what to do differently (esc)",
]
QUESTION = "Do you want to make this edit to notes.md?"


def main() -> None:
    log = open(sys.argv[1], "a", encoding="utf-8")  # noqa: SIM115
    fd = sys.stdin.fileno()
    tty.setraw(fd)

    def out(text: str) -> None:
        os.write(1, text.replace("\n", "\r\n").encode())

    cursor = 0

    def menu() -> None:
        out("\x1b[2J\x1b[H● Update(notes.md)\n\n " + QUESTION + "\n")
        for i, option in enumerate(OPTIONS):
            out((" ❯ " if i == cursor else "   ") + f"{i + 1}. {option}\n")

    menu()
    while True:
        data = os.read(fd, 64)
        if data.endswith((b"\x1b[A", b"\x1bOA")):
            cursor = max(0, cursor - 1)
            menu()
        elif data.endswith((b"\x1b[B", b"\x1bOB")):
            cursor = min(len(OPTIONS) - 1, cursor + 1)
            menu()
        elif data[:1].isdigit() and 1 <= int(data[:1]) <= len(OPTIONS):
            cursor = int(data[:1]) - 1
            break
        elif b"\r" in data:
            break
    log.write(f"chose: {OPTIONS[cursor]}\n")
    log.flush()
    out(f"\x1b[2J\x1b[Hchose: {OPTIONS[cursor]}\n  ? for shortcuts\n> ")
    line = b""
    while True:
        data = os.read(fd, 1024)
        for byte in data:
            char = bytes([byte])
            if char in (b"\r", b"\n"):
                log.write(f"heard: {line.decode('utf-8', 'replace')}\n")
                log.flush()
                line = b""
                out("\n  ? for shortcuts\n> ")
            elif char == b"\x03":
                return
            elif byte >= 32 or byte == 9:
                line += char
                os.write(1, char)


if __name__ == "__main__":
    main()
