"""Adding an agent CLI is adding its profile: a made-up CLI (`fakecli`,
tests/fakes/fake_cli.py) registered by its profile alone is listed by
`corral agents`, looked for by `corral doctor` and by the host probe (its real
script, run by a real shell), and runs a session end to end in a real tmux
pane — with no other file naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import (
    preference,
    profile_for,
    register,
    registered_profiles,
    unregister,
)
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.doctor import agent_clis, agent_reach, agents_on_path
from corral.supervisor.factory import build_supervisor
from corral.supervisor.hosts.probe import HostReport, probe_script, read_report
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.states import CoderState as S
from corral.tui.cli.main import main as corral_main
from tests.conftest import fast_config, git
from tests.fakes import fake_cli


@pytest.fixture
def fakecli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake CLI on PATH and its profile registered (forgotten after)."""
    binary = fake_cli.install_binary(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    register(fake_cli.PROFILE)
    try:
        yield binary
    finally:
        unregister(fake_cli.NAME)


def test_a_registered_profile_is_listed_by_corral_agents_and_doctor(
    fakecli: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fake_cli.NAME in preference()  # `auto` may pick it
    assert dict(agents_on_path())[fake_cli.NAME] == str(fakecli)
    found = {a.name: a for a in agent_clis()}[fake_cli.NAME]
    assert (found.binary, found.version) == (str(fakecli), "fakecli 0.1.0")
    assert corral_main(["agents"]) == 0
    listed = capsys.readouterr().out
    assert f"ok {fake_cli.NAME:<9} Fake CLI (tests)" in listed and "fakecli 0.1.0" in listed


def test_a_registered_profiles_own_hosts_are_what_it_reaches_confined(
    fakecli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`corral doctor`'s line per agent, from the same allow-list a launch builds."""
    monkeypatch.setenv("CORRAL_CONFIG", str(tmp_path / "none.toml"))
    reach = dict(agent_reach())
    if not reach:
        pytest.skip("agents run on the host's network here: nothing is listed")
    assert "api.fakecli.example" in reach[fake_cli.NAME]
    assert "api.fakecli.example" not in reach["claude"]


def test_a_registered_profile_is_said_not_installed_with_its_install_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register(fake_cli.PROFILE)
    try:
        assert corral_main(["agents"]) == 0
    finally:
        unregister(fake_cli.NAME)
    listed = capsys.readouterr().out
    assert "not installed: pip install fakecli  # (made up)" in listed
    assert fake_cli.NAME not in {p.name for p in registered_profiles()}  # forgotten


def test_the_host_probe_looks_for_a_registered_profile(fakecli: Path, tmp_path: Path) -> None:
    """The probe's own script, run by a real shell with the fake on PATH."""
    out = subprocess.run(
        ["sh", "-c", probe_script(str(tmp_path / "state"))],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    report = HostReport("here", "localhost", True)
    read_report(report, out.stdout)
    assert fake_cli.NAME in report.agents
    on_path = {name for name, path in agents_on_path() if path}
    assert set(report.agents) == on_path  # the probe and doctor look for the same agents


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_registered_profile_runs_a_session_in_a_real_pane(
    fakecli: Path, tmp_path: Path
) -> None:
    assert profile_for(fake_cli.NAME) is fake_cli.PROFILE
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("tiny\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    contract = OutcomeContract(
        checks=[ContractCheck(name="hello", command="grep -q hi hello.txt", timeout_secs=10)]
    )
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        config=fast_config(),
    )
    await sup.open()
    try:
        started = await sup.start(
            "write hi into hello.txt", repo, engine=f"external:{fake_cli.NAME}"
        )
        sid = started.session_id
        await sup.wait_for(sid, needs=True, timeout=30)
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert row.engine == f"external:{fake_cli.NAME}"
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def test_a_profile_cannot_take_a_name_the_engine_names_use() -> None:
    """`custom` and `custom:…`/`acp:…` are engine forms, never an agent's name."""
    from dataclasses import replace

    for name in ("custom", "custom:evil", "acp:x", ""):
        with pytest.raises(ValueError, match="plain name of its own"):
            register(replace(fake_cli.PROFILE, name=name))
    assert "custom" not in preference()
