"""The recorded look-ups behind the kept mount list (`sandbox/witness.py`):
they answer as `os.path` does, and a witness stops holding when anything a
look-up passed through changes — a link deep in a chain of links, a path that
was missing, a directory's permissions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from corral.supervisor.sandbox import witness as fs


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "z" / "bin").mkdir(parents=True)
    (tmp_path / "w" / "bin").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "y").symlink_to(tmp_path / "z")  # absolute
    (tmp_path / "a").symlink_to("x/y")  # relative, through another link
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "file").write_text("f")
    return tmp_path


PATHS = (
    "a",
    "a/bin",
    "a/bin/..",
    "a/../w",
    "x/y/bin",
    "missing/deeper",
    "a/missing",
    "file",
    "file/under",
    "loop1",
    "loop1/x",
    ".",
)


@pytest.mark.parametrize("rel", PATHS)
def test_recorded_look_ups_answer_as_os_path(tree: Path, rel: str) -> None:
    path = str(tree / rel)
    with fs.watching(fs.Witness()):
        assert fs.real(path) == os.path.realpath(path)
        assert fs.isdir(path) == os.path.isdir(path)
        assert fs.exists(path) == os.path.exists(path)
        assert fs.lexists(path) == os.path.lexists(path)
        assert fs.islink(path) == os.path.islink(path)
        assert fs.isfile(path) == os.path.isfile(path)


def watched(path: Path) -> fs.Witness:
    witness = fs.Witness()
    with fs.watching(witness):
        fs.real(path)
        fs.isdir(path)
    assert witness.holds()
    return witness


def test_a_link_deep_in_the_chain_swapped(tree: Path) -> None:
    witness = watched(tree / "a" / "bin")
    (tree / "x" / "y").unlink()
    (tree / "x" / "y").symlink_to(tree / "w")  # neither an ancestor of `a/bin` nor of `z/bin`
    assert not witness.holds()


def test_a_directory_swapped_for_a_link(tree: Path) -> None:
    witness = watched(tree / "z" / "bin")
    (tree / "z" / "bin").rmdir()
    (tree / "z" / "bin").symlink_to(tree / "w" / "bin")
    assert not witness.holds()


def test_a_missing_path_made(tree: Path) -> None:
    witness = fs.Witness()
    with fs.watching(witness):
        assert not fs.lexists(tree / "z" / "token")
    (tree / "z" / "token").write_text("t")
    assert not witness.holds()


def test_a_permission_changed(tree: Path) -> None:
    witness = watched(tree / "z" / "bin")
    os.chmod(tree / "z", 0o700)
    assert not witness.holds()


def test_values_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_TEST_WITNESS", "one")
    witness = fs.Witness()
    with fs.watching(witness):
        assert fs.host_env("CORRAL_TEST_WITNESS") == "one"
    assert witness.holds()
    monkeypatch.setenv("CORRAL_TEST_WITNESS", "two")
    assert not witness.holds()


def test_a_fresh_link_is_racy_and_a_link_loop_never_kept(tree: Path) -> None:
    witness = watched(tree / "a" / "bin")
    assert witness.racy()  # its links were made a moment ago
    assert not witness.racy(now=time.time() + 2 * fs.RACY_SECS)
    looping = fs.Witness()
    with fs.watching(looping):
        fs.real(tree / "loop1")
    assert looping.racy(now=time.time() + 60) and not looping.holds()


def test_without_a_witness_nothing_is_recorded(tree: Path) -> None:
    assert fs.real(tree / "a") == os.path.realpath(tree / "a")
    assert fs.isdir(tree / "a")


def test_a_relative_path_is_resolved_again_from_another_working_dir(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree / "z")
    witness = fs.Witness()
    with fs.watching(witness):
        assert fs.real("bin") == str(tree / "z" / "bin")
    assert witness.holds()
    monkeypatch.chdir(tree / "w")
    assert not witness.holds()
