"""The corral command line run as a user runs it, in a process of its own
with a private corral home (state dir, config, tmux sockets): for tests of
`corral run`, `corral serve` and the commands that are their clients. Every
tmux server its agents started is killed at the end."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
NO_REPAIRS = "[supervisor]\nrepair_invokes = 0\n"


class Corral:
    """`corral …` with its home in `home` and its config `config` (text)."""

    def __init__(self, home: Path, config: str = NO_REPAIRS) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        (home / "config.toml").write_text(config)
        self.env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(home / "config.toml"))
        self.env.update(CORRAL_TMUX_SOCKET_DIR=str(home / "tmux"), PYTHONPATH=str(ROOT))

    def __call__(
        self, *args: str, cwd: Path, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "corral.tui.cli", *args],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    @contextlib.contextmanager
    def serving(self, cwd: Path) -> Iterator[subprocess.Popen[str]]:
        """A `corral serve` owning the state dir, stopped (SIGTERM) at the end."""
        owner = subprocess.Popen(
            [PY, "-m", "corral.tui.cli", "serve"],
            cwd=cwd,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert owner.stdout is not None
            line = owner.stdout.readline()
            assert line.startswith("corral serve: owns"), line
            yield owner
        finally:
            owner.send_signal(15)
            owner.communicate(timeout=60)

    def kill_tmux(self) -> None:
        """Stop every tmux server the agents of this home started."""
        for socket in (self.home / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)


@contextlib.contextmanager
def corral_home(home: Path, config: str = NO_REPAIRS) -> Iterator[Corral]:
    """A `Corral` whose agents' tmux servers are gone once the block ends."""
    corral = Corral(home, config)
    try:
        yield corral
    finally:
        corral.kill_tmux()
