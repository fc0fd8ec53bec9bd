"""The built-in engine's governance: the shell rules, worktree confinement,
operator policy files (parse errors, narrowing) and the recursion marker."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.governance.chain import default_chain
from corral.supervisor.governance.confinement import PathEscape, confine
from corral.supervisor.governance.env_scrub import invoked_by_chain
from corral.supervisor.governance.policy_files import (
    PolicyFileError,
    global_policy_path,
    load_operator_policy,
    parse_policy_file,
    worktree_policy_files,
)
from corral.supervisor.governance.shell_words import normalize_argv, split_commands
from corral.supervisor.governance.tool_request import ToolRequest


@pytest.fixture
def wt(tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    path.mkdir()
    return path


def verdict(wt: Path, command: str, policy=None) -> str | None:  # type: ignore[no-untyped-def]
    denial = default_chain(policy).check(ToolRequest("shell", {"command": command}, wt))
    return None if denial is None else denial.reason


DENIED = [
    # publication and remote mutation
    "git push",
    "git -C . push --force origin main",
    "FOO=1 git push",
    "echo $(git push)",
    "echo `git push`",
    "bash -lc 'cd sub && git push'",
    "timeout 30 git push",
    "git remote add upstream https://example.com/x.git",
    "git remote set-url origin git@example.com:x.git",
    "gh pr create --fill",
    "gh release create v1",
    "gh api -X POST repos/o/r/issues",
    "gh api repos/o/r/issues -f title=x",
    "npm publish",
    "yarn npm publish",
    "python -m twine upload dist/*",
    "twine upload dist/*",
    "cargo publish",
    "docker push registry/app:1",
    "poetry publish --build",
    "uv publish",
    "python setup.py sdist upload",
    "./gradlew publish",
    "scp out.tar user@host:/srv/",
    # history rewrite
    "git update-ref refs/heads/main HEAD~1",
    "git branch -D main",
    "git branch -f main HEAD",
    "git tag -d v1",
    "git rebase main feature",
    "git filter-branch --tree-filter true HEAD",
    "git reflog expire --expire=now --all",
    "git checkout -B main",
    # privilege
    "sudo make install",
    "su -c id",
    "doas ls",
    "chmod u+s ./tool",
    "chmod 4755 ./tool",
    "chown root ./tool",
    # credentials
    "cat ~/.ssh/id_rsa",
    "cp ~/.aws/credentials creds",
    "cat $HOME/.netrc",
    "cat ~/.config/gcloud/application_default_credentials.json",
    "cat ~/.docker/config.json",
    "cat ../.env",
    "cd ~ && cat .ssh/id_ed25519",
    "gh auth token",
    "cat /home/someone/.ssh/id_rsa",
    # destructive outside the worktree
    "rm -rf /",
    "rm -rf /tmp/x",
    "rm -rf ~",
    "rm -rf ../other",
    "echo x > /etc/hosts",
    "mkfs.ext4 /dev/sdb1",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "find / -name '*.log' -delete",
    "find . -exec rm -rf /etc {} ;",
    "pkill -f python",
    "git worktree remove ../other",
    "git config --global user.email x@example.com",
    "shutdown -h now",
]

ALLOWED = [
    "pytest -q",
    "git status && git diff --stat",
    "git log --oneline -5",
    "git add -A && git diff --cached",
    "git stash list",
    "git reset --hard HEAD",
    "git rebase -i HEAD~2",
    "git update-ref -m msg HEAD abc123",
    "git branch feature",
    "git config --global --get user.name",
    "gh pr view 12",
    "gh api repos/o/r/pulls",
    "npm install && npm test",
    "cargo build",
    "rm -rf build dist",
    "find . -name '*.pyc' -delete",
    "cat .env",
    "env",
    "printenv",
    "echo hi > out.txt 2>&1",
    "python -c 'print(1)' > /dev/null",
    "ls ..",
    "cat <<'EOF' > notes.md\nsudo git push is not how we ship\nEOF\n",
    "chmod 755 script.sh",
    "echo 'unbalanced",
]


@pytest.mark.parametrize("command", DENIED)
def test_the_built_in_rules_deny(wt: Path, command: str) -> None:
    reason = verdict(wt, command)
    assert reason, f"{command!r} should be denied"


@pytest.mark.parametrize("command", ALLOWED)
def test_the_built_in_rules_allow(wt: Path, command: str) -> None:
    assert verdict(wt, command) is None


def test_denials_say_why_and_what_to_do(wt: Path) -> None:
    assert "operator approves the diff" in (verdict(wt, "git push") or "")
    assert "never escalates privileges" in (verdict(wt, "sudo ls") or "")
    assert "never reads credentials" in (verdict(wt, "cat ~/.ssh/id_rsa") or "")
    assert "outside this worktree" in (verdict(wt, "rm -rf /tmp/x") or "")


def test_command_lines_split_into_simple_commands() -> None:
    cmds = split_commands("a 1 && b 2 | c > out; d $(e f)\ng")
    assert [c.argv for c in cmds] == [["a", "1"], ["b", "2"], ["c"], ["d", "$"], ["e", "f"], ["g"]]
    assert cmds[2].redirects == [(">", "out")]
    assert normalize_argv(["env", "-u", "X", "A=1", "nice", "-n", "5", "/usr/bin/git", "push"]) == [
        "git",
        "push",
    ]
    assert normalize_argv(["python3", "-m", "twine", "upload"]) == ["twine", "upload"]


def test_confine_resolves_dotdot_absolute_and_symlinks(wt: Path, tmp_path: Path) -> None:
    (wt / "inner").mkdir()
    (wt / "ok").symlink_to(wt / "inner")
    (wt / "out").symlink_to(tmp_path)
    assert confine(wt, "inner/../a.txt") == (wt / "a.txt").resolve()
    assert confine(wt, str(wt / "inner")) == (wt / "inner").resolve()
    assert confine(wt, "ok/x") == (wt / "inner" / "x").resolve()
    for bad in ("../x", "/etc/passwd", "~/.ssh/id_rsa", "inner/../../x"):
        with pytest.raises(PathEscape, match="outside the worktree"):
            confine(wt, bad)
    with pytest.raises(PathEscape, match="symlink"):
        confine(wt, "out/planted")


def test_file_tools_never_write_into_git_or_the_policy_files(wt: Path) -> None:
    chain = default_chain()
    for path in (".git/config", ".corral/policies/x.toml"):
        denial = chain.check(ToolRequest("write_file", {"path": path, "content": ""}, wt))
        assert denial is not None and "corral's to manage" in denial.reason
    assert chain.check(ToolRequest("read_file", {"path": ".git/HEAD"}, wt)) is None
    denial = chain.check(ToolRequest("find_files", {"pattern": "../**/*.py"}, wt))
    assert denial is not None and "leaves the worktree" in denial.reason


# --- operator policy files ------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_policy_files_narrow_commands_paths_and_tools(wt: Path, tmp_path: Path) -> None:
    global_file = write(tmp_path / "global.toml", '[deny]\ncommands = ["\\\\bcurl\\\\b"]\n')
    write(
        wt / ".corral" / "policies" / "team.toml",
        '[deny]\npaths = ["secrets/", "*.pem"]\ntools = ["ask_user"]\n',
    )
    policy = load_operator_policy(wt, global_file)
    assert [p.name for p in policy.sources] == ["global.toml", "team.toml"]
    assert policy.denied_tools == {"ask_user"}
    chain = default_chain(policy)

    def check(tool: str, **args: object) -> str | None:
        denial = chain.check(ToolRequest(tool, args, wt))
        return None if denial is None else denial.reason

    assert "curl" in (check("shell", command="curl https://example.com") or "")
    assert check("shell", command="echo curling") is None
    assert "secrets/key.txt" in (check("read_file", path="secrets/key.txt") or "")
    assert check("read_file", path="certs/server.pem") is not None
    assert check("shell", command="cat secrets/key.txt") is not None
    assert check("read_file", path="src/main.py") is None
    assert "ask_user" in (check("ask_user", prompt="?") or "")
    assert policy.path_denied((wt / "a" / "b.pem").resolve(), wt) == "*.pem"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[deny\ncommands = [", "Expected"),
        ('[allow]\ncommands = ["git push"]\n', "can only narrow"),
        ('[deny]\ncommand = ["x"]\n', "unknown key [deny] 'command'"),
        ('mode = "strict"\n', "unknown key 'mode'"),
        ('[deny]\ncommands = "rm"\n', "must be a list of strings"),
        ('[deny]\ncommands = ["(unclosed"]\n', "not a valid regular expression"),
        ('[deny]\npaths = [""]\n', "empty pattern"),
    ],
)
def test_a_bad_policy_file_is_named_in_the_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "p.toml", text)
    with pytest.raises(PolicyFileError) as info:
        parse_policy_file(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_the_discussion_spelling_deny_tool_is_understood(tmp_path: Path) -> None:
    rule = parse_policy_file(write(tmp_path / "p.toml", 'deny_tool = ["shell"]\n'))
    assert rule.tools == {"shell"}


def test_policy_locations_and_the_recursion_marker(wt: Path, tmp_path: Path) -> None:
    assert global_policy_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "corral" / "policy.toml"
    )
    assert global_policy_path({}).parts[-3:] == (".config", "corral", "policy.toml")
    write(wt / ".corral" / "policies" / "b.toml", "")
    write(wt / ".corral" / "policies" / "a.toml", "")
    write(wt / ".corral" / "policies" / "notes.md", "")
    assert [p.name for p in worktree_policy_files(wt)] == ["a.toml", "b.toml"]
    assert invoked_by_chain("engine:native", {}) == "corral>engine:native"
    assert (
        invoked_by_chain("engine:native", {"CORRAL_INVOKED_BY": "corral>agent:claude"})
        == "corral>agent:claude>corral>engine:native"
    )
