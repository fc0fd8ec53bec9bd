"""The corpus's independent re-check compares per-test results, not only
exit codes: a delivered branch whose check stays red as it was on the
untouched tree, but with a test newly failing, is not re-checked ok (it
was, when exit codes alone were compared); and the reading it uses is its
own, knowing each runner form the corpus has."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .reading import newly_failing, read_run
from .session import independent_recheck


def test_each_runner_form_names_its_failing_tests() -> None:
    outputs = {
        "FAILED tests/test_a.py::test_one - assert 1 == 2": "tests/test_a.py::test_one",
        "FAIL: test_two (pkg.tests.T.test_two)": "test_two (pkg.tests.T.test_two)",
        "not ok 3 - test/basic.js # time=707.793ms": "test/basic.js",
        "    --- FAIL: TestSplit (0.00s)": "TestSplit",
        "test tests::doubles ... FAILED": "tests::doubles",
        "  \u2715 distance of empty strings (3 ms)": "distance of empty strings",
        "  1) is-url valid http:": "is-url valid http:",
    }
    for line, name in outputs.items():
        assert read_run(f"noise\n{line}\nmore noise\n").failing == {name}, line


def test_a_tap_todo_or_skip_is_not_a_failure() -> None:
    assert read_run("not ok 1 - later # TODO not yet\nnot ok 2 - off # SKIP\n").failing == set()


def test_counts_alone_compare_where_no_test_is_named() -> None:
    assert newly_failing("10 passing\n1 failing\n", "9 passing\n2 failing\n")[1]
    assert newly_failing("10 passing\n1 failing\n", "11 passing\n1 failing\n") == ([], "")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=c", "-c", "user.email=c@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_a_check_red_on_both_clones_with_a_test_newly_failing_is_not_ok(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    # the "suite": each line of failing.txt is a failing test, as pytest names it
    (repo / "failing.txt").write_text("tests/test_a.py::test_host_dependent\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "untouched")
    _git(repo, "checkout", "-q", "-b", "delivered")
    (repo / "failing.txt").write_text(
        "tests/test_a.py::test_host_dependent\ntests/test_b.py::test_the_broken_one\n"
    )
    _git(repo, "commit", "-q", "-am", "a regression")
    _git(repo, "checkout", "-q", "main")
    contract = {
        "setup": [],
        "checks": [
            {
                "name": "tests",
                "command": "sed 's/^/FAILED /' failing.txt; echo \"$(wc -l < failing.txt) failed\"; exit 1",
            }
        ],
    }
    recheck = independent_recheck(repo, "delivered", contract, tmp_path / "recheck")
    assert not recheck.ok, recheck.why
    assert "tests/test_b.py::test_the_broken_one" in recheck.why
    assert recheck.per_test == ("tests",)
    # the same red on both clones, nothing newly failing: still ok, said so
    same = independent_recheck(repo, "main", contract, tmp_path / "again")
    assert same.ok and same.red_before, same.why
