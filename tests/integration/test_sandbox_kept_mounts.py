"""The sandbox's mount list is kept between runs (`argv.kept_surroundings`)
and used again only while every path it looked at is as it was. Between two
confined checks, a hostile change to the host — a shown tool dir swapped for
a link to corral's state dir, a hidden credential file made inside a shown
dir — must reach the second check's mounts: a kept list would bind the link
(bubblewrap follows it: the whole state dir would show) or leave the new file
uncovered. Real bubblewrap, real files; the first runs are checked to have
been served from the kept list, so the attack is made on a kept one."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.sandbox import SandboxPolicy, argv, sandbox_status
from tests.conftest import init_repo

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)

SECRET = "SECRET-kept-mounts-7f3a"


@dataclass
class Host:
    tools: Path  # a tool's install prefix: its `bin` is on the run's PATH
    state: Path  # corral's state dir: never shown
    worktree: Path
    env: dict[str, str]
    policy: SandboxPolicy
    built: list[int]  # how many times the mount list was built, not served


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    argv.forget_kept()
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    (tools / "README").write_text("a tool\n")
    state = tmp_path / "state"
    (state / "bin").mkdir(parents=True)
    (state / "secret").write_text(f"{SECRET}\n")
    worktree = init_repo(tmp_path / "wt")
    env = scrubbed_env(keep_credentials=False, invoked_by="corral-check")
    env["PATH"] = f"{tools / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    built = [0]
    making = argv.surroundings

    def counted(*args: object, **kwargs: object) -> argv.Surroundings:
        built[0] += 1
        return making(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(argv, "surroundings", counted)
    policy = SandboxPolicy(state_dir=state, hidden=(tools / "token",))
    yield Host(tools, state, worktree, env, policy, built)
    argv.forget_kept()


def run(host: Host, command: str) -> tuple[int | None, str]:
    code, output, _ = asyncio.run(
        run_command(command, host.worktree, 30, dict(host.env), policy=host.policy)
    )
    return code, output


def kept_twice(host: Host) -> None:
    """Two runs, the second served from the kept mount list."""
    assert run(host, f"cat {host.tools}/README") == (0, "a tool\n")
    assert run(host, f"cat {host.tools}/README") == (0, "a tool\n")
    assert host.built[0] == 1, "the second run built its mount list again: nothing was kept"


def test_a_tool_dir_swapped_for_a_link_never_shows_what_the_link_reaches(host: Host) -> None:
    kept_twice(host)
    shutil.rmtree(host.tools)
    os.symlink(host.state, host.tools)  # PATH's `tools/bin` now resolves into the state dir
    code, output = run(host, f"cat {host.tools}/secret; ls {host.tools}/ {host.state}/")
    assert SECRET not in output
    assert code != 0
    assert host.built[0] == 2


def test_a_hidden_file_made_after_the_list_was_kept_is_covered(host: Host) -> None:
    kept_twice(host)
    (host.tools / "token").write_text(f"{SECRET}\n")
    code, output = run(host, f"cat {host.tools}/token")
    assert SECRET not in output
    assert code != 0
    assert host.built[0] == 2
    code, output = run(host, f"cat {host.tools}/token")  # kept again, still covered
    assert SECRET not in output
    assert code != 0
    assert host.built[0] == 2


def test_a_changed_path_in_the_environment_is_a_new_list(host: Host) -> None:
    kept_twice(host)
    other = host.tools.parent / "other"
    (other / "bin").mkdir(parents=True)
    (other / "NOTE").write_text("other tool\n")
    host.env["PATH"] = f"{other / 'bin'}:{host.env['PATH']}"
    assert run(host, f"cat {other}/NOTE") == (0, "other tool\n")
    assert host.built[0] == 2
