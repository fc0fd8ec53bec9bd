"""The `corral` entry point. `corral hook` is dispatched before anything heavy
is imported: agents run it on every hook and it must return in milliseconds."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:
        from .hook_command import run_hook

        return run_hook(args[1:])
    from .cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
