"""The sandbox's policy as a command line, its config table, and the honest
answer when no sandbox can run (no bwrap, not Linux, opted out)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.supervisor import doctor
from corral.supervisor.config import load_config
from corral.supervisor.contracts.checks import sandboxed_argv
from corral.supervisor.sandbox import SandboxPolicy, confined_argv, status
from corral.supervisor.sandbox.layout import git_layout
from tests.conftest import git, init_repo


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_a_worktree_may_write_itself_and_its_private_git_dir_only(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    policy = SandboxPolicy(writable=(cache,), state_dir=tmp_path / "state")
    (tmp_path / "state").mkdir()
    argv = confined_argv(["true"], tmp_path / "wt", policy, {"HOME": str(home)})

    common = (repo / ".git").resolve()
    binds = pairs(argv, "--bind")
    private = binds.pop(0)  # the worktree's private git dir over its admin dir (gitview)
    assert private.startswith(str(tmp_path / "state"))
    assert argv[argv.index(private) + 1] == str(common / "worktrees" / "wt")
    assert binds == [str((tmp_path / "wt").resolve()), str(cache.resolve())]
    dotgit = str((tmp_path / "wt").resolve() / ".git")
    pointer = argv.index(dotgit)  # the `.git` file read-only, after the worktree's bind
    assert argv[pointer - 2] == "--ro-bind" and argv[pointer - 1].startswith(
        str(tmp_path / "state")
    )
    assert pointer > argv.index(str((tmp_path / "wt").resolve()))
    assert "/" not in pairs(argv, "--ro-bind")  # an allow-list: the root starts empty
    assert "/usr" in pairs(argv, "--ro-bind") or "/usr" in pairs(argv, "--symlink")
    assert str(common) in pairs(argv, "--ro-bind")
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    assert pairs(argv, "--cap-drop") == ["ALL"]
    tmpfs = pairs(argv, "--tmpfs")
    assert "/tmp" in tmpfs and str(home.resolve()) in tmpfs  # the home is empty
    assert argv[-2:] == ["--", "true"]
    assert "--unshare-net" not in confined_argv(["true"], tmp_path / "wt", policy, {}, network=True)


def test_the_layout_of_a_main_checkout_and_of_a_plain_dir(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    assert git_layout(repo).admin is None and git_layout(repo).top == repo.resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_layout(plain).common is None


def test_no_bwrap_or_not_linux_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = status._probe
    monkeypatch.setattr(status.shutil, "which", lambda _name: None)
    assert "bwrap not found" in probe().detail
    monkeypatch.setattr(status.sys, "platform", "darwin")
    assert probe().detail.startswith("not Linux")


def test_refused_namespaces_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status.shutil, "which", lambda _name: "/usr/bin/bwrap")

    def refused(*_a: object, **_k: object) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(
            [], 1, b"", b"bwrap: No permissions to creating new namespace\n"
        )

    monkeypatch.setattr(status.subprocess, "run", refused)
    result = status._probe()
    assert not result.available and "user namespaces refused" in result.detail


def test_an_unavailable_sandbox_runs_the_command_as_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import corral.supervisor.contracts.checks as checks

    monkeypatch.setattr(checks, "sandbox_status", lambda: status.SandboxStatus(False, "nope"))
    assert sandboxed_argv("true", tmp_path, {})[0] == ["bash", "-c", "true"]
    off = SandboxPolicy(enabled=False)
    monkeypatch.undo()
    assert sandboxed_argv("true", tmp_path, {}, policy=off)[0] == ["bash", "-c", "true"]


def test_the_sandbox_table_loads_and_the_opt_out_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[sandbox]\nenabled = false\nwritable = ["~/.cache/pip"]\n')
    config = load_config(path)
    assert config.sandbox.enabled is False and config.sandbox.writable == ["~/.cache/pip"]
    monkeypatch.setenv("CORRAL_CONFIG", str(path))
    report = doctor.confinement_status()
    assert not report.confined and "enabled = false" in report.detail
    path.write_text("[sandbox]\nnetwork = 1\n")
    with pytest.raises(Exception, match="sandbox"):
        load_config(path)


def test_the_agents_setting_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("CORRAL_CONFIG", str(path))
    path.write_text("")
    available = status.sandbox_status().available
    default = doctor.confinement_status()
    assert load_config(path).sandbox.agents is True  # confined unless opted out
    if available:
        assert default.agents == "confined, network by allow-list: every agent"
        assert default.agents_note == ""
    path.write_text("[sandbox]\nagents = false\n")
    report = doctor.confinement_status()
    assert report.agents.startswith("unconfined ([sandbox] agents = false)")
    assert report.agents_note == "agents unconfined: [sandbox] agents = false"
    path.write_text("[agents.codex]\nsandbox = false\n")
    report = doctor.confinement_status()
    if available:
        assert report.agents == "confined, network by allow-list: every agent except codex"
        assert report.agents_note == "agents unconfined: codex (sandbox = false)"
    else:
        assert report.agents_unconfined and "no sandbox can run here" in report.agents
    path.write_text("[sandbox]\nagents = false\n[agents.custom]\nsandbox = true\n")
    assert doctor.confinement_status().agents.endswith(("custom", ")"))
    monkeypatch.setattr(status, "sandbox_status", lambda: status.SandboxStatus(False, "no bwrap"))
    monkeypatch.setattr("corral.supervisor.sandbox.sandbox_status", status.sandbox_status)
    report = doctor.confinement_status()
    assert report.agents_unconfined and "no bwrap" in report.agents
    assert report.agents_note == "agents unconfined: no bwrap"


def test_an_agent_keeps_its_terminal_and_the_network_and_a_check_does_not(
    tmp_path: Path,
) -> None:
    from corral.supervisor.sandbox.policy import Grant

    repo = init_repo(tmp_path / "repo")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".claude").mkdir()
    env = {"HOME": str(home)}
    check = confined_argv(["true"], repo, SandboxPolicy(), env)
    grant = Grant(writable=(home / ".claude",), terminal=True)
    agent = confined_argv(["true"], repo, SandboxPolicy(), env, network=True, grant=grant)
    assert "--new-session" in check and "--new-session" not in agent
    assert "--unshare-net" in check and "--unshare-net" not in agent
    assert "--die-with-parent" in agent and "--unshare-pid" in agent
    real_home = str(home.resolve())
    assert real_home in pairs(check, "--tmpfs") and real_home in pairs(agent, "--tmpfs")
    assert str((home / ".claude").resolve()) in pairs(agent, "--bind")
    assert str((home / ".claude").resolve()) not in pairs(check, "--bind")
    # a writable place holding a credential dir still hides it
    wide = confined_argv(["true"], repo, SandboxPolicy(writable=(home,)), env)
    ssh = str((home / ".ssh").resolve())
    last = len(wide) - 1 - wide[::-1].index(ssh)
    assert wide[last - 1] == "--tmpfs" and last > wide.index(real_home)


def test_an_agent_runs_unconfined_and_says_why_when_no_sandbox_can_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from corral.supervisor.sandbox import agent

    def launch(policy: SandboxPolicy, choice: bool | None) -> agent.AgentLaunch:
        return agent.launch_agent(
            ["claude"],
            tmp_path,
            {"HOME": str(tmp_path)},
            policy=policy,
            choice=choice,
            own_dirs=[tmp_path / ".claude"],
            own_files=[],
            hooks_file=tmp_path / "state" / "hooks.jsonl",
            python="python3",
        )

    kept = ["python3", "-I", "-S", str(agent.KEEPER), "--", "claude"]  # under the pane keeper
    off = launch(SandboxPolicy(agents=False), None)
    assert off.argv == kept and off.account == "unconfined ([sandbox] agents = false)"
    assert launch(SandboxPolicy(), False).account.endswith("for this agent)")
    assert "enabled = false" in launch(SandboxPolicy(enabled=False), True).account
    monkeypatch.setattr(agent, "sandbox_status", lambda: status.SandboxStatus(False, "no bwrap"))
    missing = launch(SandboxPolicy(), None)
    assert missing.argv == kept and not missing.confined
    assert missing.account == "unconfined: no sandbox can run here (no bwrap)"
    assert not (tmp_path / ".claude").exists()  # nothing made for a run that is not confined


def test_a_private_git_view_being_made_beside_another_run_is_not_pruned(tmp_path: Path) -> None:
    """Two confined runs start at once in two checkouts of one repository:
    the second one's prune must not take the directory the first is still
    filling in (its admin file not yet written); an old nameless one goes."""
    import os
    import time

    from corral.supervisor.sandbox.gitview import VIEW_BUILD_SECS, VIEWS, prune_views

    being_made = tmp_path / VIEWS / "a"
    being_made.mkdir(parents=True)
    left_over = tmp_path / VIEWS / "b"
    left_over.mkdir()
    old = time.time() - VIEW_BUILD_SECS - 5
    os.utime(left_over, (old, old))
    removed = prune_views(tmp_path)
    assert being_made.is_dir()
    assert removed == [left_over] and not left_over.exists()
