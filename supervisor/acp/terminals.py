"""`terminal/*` served through corral's confined shell: each command runs as
`bash -c` in the sandbox the contract checks use (no network unless the
operator's `[sandbox] shell_network` allows it), in its own process group,
with its working directory inside the worktree. Output is kept up to a byte
limit (the agent's, never above corral's), dropping from the start as the
protocol says; release and kill end the whole group.

The command's private /tmp and /var/tmp are a host scratch dir of its own
(`Grant.scratch`), removed on release: when the command ends, what it wrote
there that its command line names is reported (`on_contained`, see
`contained`), with what its output says is on a read-only file system."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..contracts.checks import sandboxed_argv
from ..errors import swallowed
from ..governance.env_scrub import scrubbed_env
from ..sandbox import active_policy
from ..sandbox.policy import Grant
from .contained import Contained, contained_writes
from .files import Refused, WorktreeFiles

log = logging.getLogger("corral.supervisor.acp.terminals")

MAX_OUTPUT_BYTES = 1024 * 1024
MAX_TERMINALS = 16


@dataclass
class _Terminal:
    proc: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    pump: asyncio.Task[None] | None = None
    line: str = ""
    began: float = 0.0
    scratch: Path | None = None  # its private /tmp and /var/tmp, on the host

    def keep(self, data: bytes) -> None:
        self.output += data
        if len(self.output) > self.limit:
            cut = len(self.output) - self.limit
            # never split a UTF-8 character: drop its continuation bytes too
            while cut < len(self.output) and (self.output[cut] & 0xC0) == 0x80:
                cut += 1
            del self.output[:cut]
            self.truncated = True


class Terminals:
    def __init__(
        self,
        files: WorktreeFiles,
        *,
        network: bool = False,
        on_contained: Callable[[list[Contained]], None] | None = None,
    ) -> None:
        self.files = files
        self.network = network
        self.on_contained = on_contained
        self._open: dict[str, _Terminal] = {}
        self._next = 0

    async def create(
        self,
        command: str,
        args: list[str] | None,
        env: dict[str, str],
        cwd: str | None,
        limit: int | None,
    ) -> str:
        if len(self._open) >= MAX_TERMINALS:
            raise Refused(f"{MAX_TERMINALS} terminals are open already: release one first")
        where = self.files.resolve(cwd) if cwd else self.files.root
        # without args the command is a shell line (Claude Code's adapter sends
        # its Bash tool's whole command so); with args, a program and its words
        line = shlex.join([command, *args]) if args else command
        run_env = scrubbed_env(invoked_by="corral-acp-terminal")
        run_env.update(env)
        scratch = Path(tempfile.mkdtemp(prefix="corral-acp-terminal-"))
        try:
            argv, run_env = sandboxed_argv(
                line,
                where,
                run_env,
                network=self.network,
                policy=active_policy(),
                grant=Grant(scratch=scratch),
            )
            began = time.time()
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(where),
                env=run_env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        cap = MAX_OUTPUT_BYTES if limit is None else max(0, min(limit, MAX_OUTPUT_BYTES))
        term = _Terminal(proc, cap, line=line, began=began, scratch=scratch)
        term.pump = asyncio.get_running_loop().create_task(self._pump(term))
        self._next += 1
        terminal_id = f"term-{self._next}"
        self._open[terminal_id] = term
        return terminal_id

    async def _pump(self, term: _Terminal) -> None:
        assert term.proc.stdout is not None
        while data := await term.proc.stdout.read(65536):
            term.keep(data)
        await term.proc.wait()
        if self.on_contained is None or term.scratch is None:
            return
        with swallowed(log, "looking for an ACP terminal's contained writes"):
            found = contained_writes(
                term.line,
                term.output.decode("utf-8", errors="replace"),
                worktree=self.files.root,
                since=term.began,
                roots=[term.scratch],
            )
            if found:
                self.on_contained(found)

    def _get(self, terminal_id: str) -> _Terminal:
        term = self._open.get(terminal_id)
        if term is None:
            raise Refused(f"no terminal {terminal_id!r} is open")
        return term

    def output(self, terminal_id: str) -> tuple[str, bool, int | None, str | None]:
        """(output so far, truncated, exit code, signal); both None while it runs."""
        term = self._get(terminal_id)
        done = term.pump is not None and term.pump.done()
        code, sig = _status(term.proc.returncode) if done else (None, None)
        return term.output.decode("utf-8", errors="replace"), term.truncated, code, sig

    async def wait(self, terminal_id: str) -> tuple[int | None, str | None]:
        term = self._get(terminal_id)
        if term.pump is not None:
            await asyncio.shield(term.pump)
        return _status(term.proc.returncode)

    async def kill(self, terminal_id: str) -> None:
        term = self._get(terminal_id)
        _kill_group(term.proc)
        if term.pump is not None:
            with swallowed(log, "waiting for a killed ACP terminal's output pump"):
                await asyncio.wait_for(asyncio.shield(term.pump), 5)

    async def release(self, terminal_id: str) -> None:
        await self.kill(terminal_id)
        term = self._open.pop(terminal_id, None)
        if term is not None:
            # no cycle through its pump task: its process is let go while the loop runs
            term.pump = None
            if term.scratch is not None:
                shutil.rmtree(term.scratch, ignore_errors=True)

    async def close(self) -> None:
        for terminal_id in list(self._open):
            await self.release(terminal_id)


def _status(returncode: int | None) -> tuple[int | None, str | None]:
    if returncode is None:
        return None, None
    if returncode < 0:
        return None, signal.Signals(-returncode).name
    return returncode, None


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
