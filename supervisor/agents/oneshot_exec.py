"""The first program in a one-shot agent's pane: it puts the prompt where
the command line asked for it, then becomes the agent (exec, same pid).

Why a launcher: tmux refuses a command line longer than its message size
(about 16 KiB), and a repair prompt carrying check output can be longer. So
the prompt travels in a private file, and this program (run by path, stdlib
only, no shell) reads it and either substitutes it for `{prompt}` inside the
agent's arguments (each word stays one argument, byte for byte) or, with
`--stdin`, makes the file the agent's standard input.

    python oneshot_exec.py PROMPT_FILE [--stdin] -- ARGV...
"""

from __future__ import annotations

import os
import sys

PROMPT = b"{prompt}"


def main(args: list[bytes]) -> int:
    """Exec the agent; returns only when that is impossible (status 127)."""
    if b"--" not in args or not args:
        print("usage: oneshot_exec.py PROMPT_FILE [--stdin] -- ARGV...", file=sys.stderr)
        return 2
    split = args.index(b"--")
    options, argv = args[:split], args[split + 1 :]
    if not options or not argv:
        print("oneshot_exec.py: a prompt file and a command are required", file=sys.stderr)
        return 2
    prompt_file, stdin = options[0], b"--stdin" in options[1:]
    try:
        with open(prompt_file, "rb") as fh:
            prompt = fh.read()
        argv = [argv[0], *(word.replace(PROMPT, prompt) for word in argv[1:])]
        if stdin:
            fd = os.open(prompt_file, os.O_RDONLY)
            os.dup2(fd, 0)
            os.close(fd)
        os.execvp(argv[0], argv)
    except OSError as exc:
        name = os.fsdecode(argv[0])
        print(f"corral: cannot start the one-shot agent {name!r}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main([os.fsencode(a) for a in sys.argv[1:]]))
