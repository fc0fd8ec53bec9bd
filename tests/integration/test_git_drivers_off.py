"""Git never runs the operator's configured commands on agent-written content
outside the sandbox. The operator's git config defines a filter (clean,
smudge, process), a textconv and external diff command, and a merge driver,
all named `evil`; the agent's change adds a `.gitattributes` applying them to
every file. Verification, the diff shown at gate 2, and delivery to a branch
or to the checkout all run git with those drivers off: the marker each would
create is never made, and what is delivered is the agent's bytes as written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.git.run import git as corral_git
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

ATTRIBUTES = "* filter=evil diff=evil merge=evil\n"


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The operator's ~/.gitconfig defines `evil` drivers that each create
    the marker (outside every sandbox) when git runs them."""
    pwned = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
    home = tmp_path / "home"
    home.mkdir()
    touch = f"touch {pwned}"
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Operator\n\temail = op@example.com\n"
        f'[filter "evil"]\n\tclean = "{touch}; cat"\n\tsmudge = "{touch}; cat"\n'
        f'\tprocess = "{touch}"\n\trequired = true\n'
        f'[diff "evil"]\n\ttextconv = "{touch}; cat"\n\tcommand = "{touch}"\n'
        f'[merge "evil"]\n\tdriver = "{touch}"\n'
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    yield pwned
    pwned.unlink(missing_ok=True)


def test_the_planted_drivers_do_run_under_plain_git(marker: Path, repo: Path) -> None:
    """The attack is real: without corral's switches, git runs them."""
    (repo / ".gitattributes").write_text(ATTRIBUTES)
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A", check=False)  # `process` speaks no protocol: the add fails
    assert marker.exists()


@pytest.mark.parametrize("delivery", ["branch", "checkout"])
async def test_no_operator_driver_runs_on_the_agents_attributes(
    make_supervisor: SupervisorFactory, repo: Path, marker: Path, delivery: str
) -> None:
    (repo / "kept.txt").write_text("the operator's file\n")
    git(repo, "add", "kept.txt")
    git(repo, "commit", "-q", "-m", "kept")
    engine = ScriptedEngine([[Write(".gitattributes", ATTRIBUTES), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("hello", "grep -q hi hello.txt"))]), engine=engine
    )
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=20)
    assert not marker.exists(), "a driver ran while the change was snapshot or verified"
    assert row.state is S.NEEDS_APPROVAL  # verified on a fresh checkout of the change
    detail = sup.get(sid).session
    assert detail.diff is not None and ".gitattributes" in detail.diff.patch
    # gate 2 names the line: the operator's git runs `evil` once this is delivered
    assert detail.diff.attribute_drivers == [".gitattributes: " + ATTRIBUTES.strip()]
    files = await sup.review_files(sid)
    assert {f.path for f in files} == {".gitattributes", "hello.txt"}
    assert not marker.exists(), "a driver ran during verification or the gate-2 diff"

    result = await sup.approve(sid, delivery=delivery)
    assert result.state is S.MERGED
    assert not marker.exists(), f"a driver ran during the {delivery} delivery"
    if delivery == "checkout":
        assert (repo / "hello.txt").read_text() == "hi\n"
        assert (repo / ".gitattributes").read_text() == ATTRIBUTES
        # the checkout now holds the attributes: corral's own later calls there
        corral_git(repo, "status", "--porcelain")
        corral_git(repo, "diff", "HEAD")
        assert not marker.exists()
    else:
        assert result.branch
        assert git(repo, "show", f"{result.branch}:hello.txt") == "hi\n"


def test_only_added_attribute_lines_naming_a_driver_are_listed() -> None:
    from corral.supervisor.git.attributes import driver_lines_in_patch

    patch = (
        "diff --git a/.gitattributes b/.gitattributes\n"
        "--- a/.gitattributes\n+++ b/.gitattributes\n@@ -1 +1,4 @@\n"
        "-*.txt filter=old\n+*.png -diff binary\n+*.c diff=cpp\n+# filter=commented\n"
        "+[attr]evil filter=x\n"
        'diff --git "a/docs/\\033x/.gitattributes" "b/docs/\\033x/.gitattributes"\n'
        '+++ "b/docs/\\033x/.gitattributes"\n@@ -0,0 +1 @@\n+* merge=ours\n'
    )
    assert driver_lines_in_patch(patch) == [
        ".gitattributes: *.c diff=cpp",
        ".gitattributes: [attr]evil filter=x",
        '"docs/\\033x/.gitattributes": * merge=ours',
    ]


def test_a_driver_the_operator_trusts_stays_on(
    marker: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`CORRAL_GIT_TRUSTED_DRIVERS=evil` is the operator's opt-in: then, and
    only then, corral's git runs it (here its clean filter, on `git add`)."""
    (repo / ".gitattributes").write_text("* filter=evil\n")
    (repo / "a.txt").write_text("a\n")
    corral_git(repo, "add", "a.txt")
    assert not marker.exists()
    monkeypatch.setenv("CORRAL_GIT_TRUSTED_DRIVERS", "lfs, evil")
    (repo / "a.txt").write_text("b\n")
    corral_git(repo, "add", "a.txt", check=False)  # the stand-in `process` speaks no protocol
    assert marker.exists()
