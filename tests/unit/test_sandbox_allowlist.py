"""What a confined run may see: the allow-list's choices as command lines
(the real sandbox is tried in tests/integration/test_sandbox_secrets.py)."""

from __future__ import annotations

import os
from pathlib import Path

from corral.supervisor.agents.oneshot import oneshot_profile
from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.sandbox import SandboxPolicy, confined_argv
from corral.supervisor.sandbox.allowlist import homes, install_prefix, path_prefixes
from tests.conftest import git, init_repo


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_a_bin_dir_brings_its_prefix_but_never_a_home_or_what_holds_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    nvm = home / ".nvm" / "versions" / "node" / "v20" / "bin"
    local = home / ".local" / "bin"
    own = home / "bin"
    tool = tmp_path / "tools" / "bin"
    for d in (nvm, local, own, tool):
        d.mkdir(parents=True)
    state = home / ".local" / "state" / "corral"
    path = os.pathsep.join(map(str, [nvm, local, own, tool, "relative/bin", "/usr/bin", "/"]))
    anchors = [str(home), str(state)]
    shown = path_prefixes({"PATH": path}, anchors)
    assert str(nvm.parent) in shown  # the node install
    assert str(local) in shown and str(local.parent) not in shown  # ~/.local holds the state
    assert str(own) in shown and str(home) not in shown  # never HOME itself
    assert str(tool.parent) in shown
    assert "/" not in shown and "/usr" not in shown and not any("relative" in p for p in shown)


def test_rustups_proxies_bring_their_toolchains(tmp_path: Path) -> None:
    """`~/.cargo/bin/cargo` is rustup's proxy: without `~/.rustup` (its
    toolchains) a confined `cargo fetch` or `cargo test` cannot run at all."""
    home = tmp_path / "home"
    cargo_bin = home / ".cargo" / "bin"
    cargo_bin.mkdir(parents=True)
    (home / ".rustup" / "toolchains").mkdir(parents=True)
    anchors = [str(home)]
    without_rustup = path_prefixes({"PATH": str(cargo_bin)}, anchors)
    assert without_rustup == [str(cargo_bin.parent)]  # a plain cargo install: nothing more
    (cargo_bin / "rustup").write_text("")
    shown = path_prefixes({"PATH": str(cargo_bin)}, anchors)
    assert shown == [str(cargo_bin.parent), str(home / ".rustup")]
    elsewhere = tmp_path / "rustup-home"
    elsewhere.mkdir()
    env = {"PATH": str(cargo_bin), "RUSTUP_HOME": str(elsewhere)}
    assert path_prefixes(env, anchors) == [str(cargo_bin.parent), str(elsewhere)]
    # never the home itself, whatever RUSTUP_HOME says
    assert path_prefixes({"PATH": str(cargo_bin), "RUSTUP_HOME": str(home)}, anchors) == [
        str(cargo_bin.parent)
    ]


def test_an_agents_program_brings_its_node_modules_tree_or_only_itself(tmp_path: Path) -> None:
    cli = tmp_path / "e2e" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    cli.parent.mkdir(parents=True)
    cli.write_text("")
    link = tmp_path / "e2e" / "node_modules" / ".bin" / "codex"
    link.parent.mkdir()
    link.symlink_to(cli)
    assert install_prefix(str(link), []) == str(tmp_path / "e2e" / "node_modules")
    script = tmp_path / "agent.sh"
    script.write_text("")
    # its dir holds the state dir: only the script itself is shown
    assert install_prefix(str(script), [str(tmp_path / "state")]) == str(script)


def test_the_passwd_home_is_private_whatever_home_says(tmp_path: Path) -> None:
    import pwd

    real = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    assert real in homes({"HOME": str(tmp_path)}) and str(tmp_path.resolve()) in homes(
        {"HOME": str(tmp_path)}
    )
    argv = confined_argv(["true"], tmp_path, SandboxPolicy(), {"HOME": str(tmp_path)})
    assert real in pairs(argv, "--tmpfs") and str(tmp_path.resolve()) in pairs(argv, "--tmpfs")


def test_the_operators_checkout_and_state_are_hidden_even_under_a_shown_dir(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    repo = init_repo(prefix / "repo")  # the checkout sits in a PATH prefix
    state = prefix / "state"
    state.mkdir()
    git(repo, "worktree", "add", "-q", "--detach", str(state / "wt"))
    env = {"HOME": str(tmp_path / "home"), "PATH": str(prefix / "bin")}
    argv = confined_argv(["true"], state / "wt", SandboxPolicy(state_dir=state), env)
    # the prefix would hold the checkout and the state: only its bin dir is shown
    assert str((prefix / "bin").resolve()) in pairs(argv, "--ro-bind")
    assert str(prefix.resolve()) not in pairs(argv, "--ro-bind")


def test_codex_relies_on_corrals_sandbox_when_confined() -> None:
    codex = profile_for("codex")
    assert codex.inside_sandbox(["codex", "--no-daemon", "task"]) == [
        "codex",
        "--sandbox",
        "danger-full-access",
        "--no-daemon",
        "task",
    ]
    exec_ = oneshot_profile("codex-exec")
    argv = ["py", "-I", "launcher", "f", "--", "/x/codex", "exec", "--sandbox", "workspace-write"]
    assert exec_.inside_sandbox(argv)[-2:] == ["--sandbox", "danger-full-access"]
    assert profile_for("claude").inside_sandbox(["claude", "x"]) == ["claude", "x"]


def test_a_one_shot_preset_keeps_its_agents_own_config() -> None:
    env = {"HOME": "/h", "CODEX_HOME": "/c"}
    assert oneshot_profile("codex-exec").own_paths(env) == ([Path("/c")], [])
    assert oneshot_profile("claude-p").own_paths(env)[0] == [Path("/h/.claude")]
    assert oneshot_profile("oneshot:mytool {prompt}").own_paths(env) == ([], [])


def test_an_agent_sees_the_files_its_own_variables_name_and_no_others(tmp_path: Path) -> None:
    from corral.supervisor.sandbox.agent import env_named_files

    metadata = tmp_path / "model-metadata.json"
    metadata.write_text("{}")
    secret = tmp_path / "kubeconfig"
    secret.write_text("token")
    env = {
        "AIDER_MODEL_METADATA_FILE": str(metadata),
        "KUBECONFIG": str(secret),  # not a variable the profile passes on
        "AIDER_MODEL": "openai/x",  # not a path
        "AIDER_CACHE": str(tmp_path),  # a directory: not shown this way
    }
    assert env_named_files(env, ("AIDER_*", "OPENAI_API_KEY")) == (metadata,)
