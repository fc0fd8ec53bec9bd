"""`corral web [--port N]`: serve the console on 127.0.0.1 behind a token
(see `corral.tui.web`); prints the URL once and runs until interrupted."""

from __future__ import annotations

import sys
from pathlib import Path

from .output import say


def serve(repo: Path, port: int, backend: str) -> int:
    from corral.supervisor.interface import repo_root
    from corral.supervisor.paths import default_state_dir
    from corral.tui.web import TokenServer, console_command, new_token, url_of

    root = repo_root(repo)
    state_dir = default_state_dir()
    token = new_token(state_dir)
    server = TokenServer(console_command(root, backend), token, port=port, title="corral")
    say(f"corral web: {url_of(port, token)}", flush=True)
    say(
        f"corral web: listening on 127.0.0.1 only; from another machine: ssh -L {port}:127.0.0.1:"
        f"{port} <this host>, then open the URL there (the token is also in "
        f"{state_dir / 'web-token'}). Ctrl+C stops.",
        file=sys.stderr,
        flush=True,
    )
    server.serve()
    return 0
