"""A package.json test script that runs a program the project does not
declare (`expresso`, long gone from its dependencies) is not drafted as a
check that can only say *cannot run*: the runner the test files use runs
them instead, and the contract says so; when they name none, the draft
says which program is missing and how to give the check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.conventions import NOT_VERIFIED_HEADING, draft_contract
from corral.supervisor.contracts.drafting import DraftingError
from tests.unit.test_conventions import stub_bin, write


def _package(root: Path, test: str, **deps: str) -> None:
    manifest = {"name": "p", "scripts": {"test": test}, "devDependencies": deps}
    write(root, "package.json", json.dumps(manifest))


def test_an_undeclared_runner_falls_back_to_the_one_the_tests_require(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _package(root, "expresso -I lib test/*.test.js", tape="^5.0.0")
    write(
        root, "test/a.test.js", "var test = require('tape')\ntest('a', function (t) { t.end() })\n"
    )
    contract = draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm"))
    [check] = contract.checks
    assert check.command == "npx --no tape 'test/**/*.js'"
    assert "test script runs expresso, which the project does not declare" in contract.description
    assert "its test files use tape, which runs them instead" in contract.description


def test_a_declared_runner_keeps_the_test_script(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _package(root, "NODE_ENV=test mocha && tsc --noEmit", mocha="^10", typescript="^5")
    write(root, "test/a.js", "describe('a', () => { it('b', () => {}) })\n")
    [check] = draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm")).checks
    assert check.command == "npm test"


def test_tests_no_known_runner_can_run_say_what_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _package(root, "expresso", should="*")
    write(root, "test/a.js", "module.exports = { 'adds': function () {} }\n")
    with pytest.raises(DraftingError) as raised:
        draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm"))
    words = str(raised.value)
    assert "expresso" in words and "--check" in words


def test_beside_another_runner_the_missing_program_is_said(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _package(root, "expresso", should="*")
    write(root, "Makefile", "test:\n\t./run\n")
    contract = draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm", "make"))
    assert [c.command for c in contract.checks] == ["make test"]
    _, _, gaps = contract.description.partition(NOT_VERIFIED_HEADING)
    assert "test script runs expresso, which the project does not declare" in gaps


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_the_fallback_to_node_test_really_runs_the_tests(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _package(root, "expresso", should="*")
    write(
        root,
        "test/a.test.js",
        "const test = require('node:test')\nconst assert = require('assert')\n"
        "test('adds', () => assert.equal(1 + 1, 2))\n"
        "test('already broken', () => assert.equal(1, 2))\n",
    )
    [check] = draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm")).checks
    assert check.command == "node --test test"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    base = await run_check(check, root, env=env, untouched=True)
    assert base.passed, base.output_tail
    assert base.already_failing == ["already broken"]


def test_a_posttest_audit_is_left_out_of_the_drafted_npm_test(tmp_path: Path) -> None:
    """minimist's shape: `posttest: aud --production` asks the registry for
    advisories, which a check (offline) cannot reach: npm's own
    --ignore-scripts runs the test script without it, and the draft says so."""
    root = tmp_path / "p"
    manifest = {
        "name": "p",
        "scripts": {
            "pretest": "npm run lint",
            "test": "tape test/*.js",
            "posttest": "aud --production",
        },
        "devDependencies": {"tape": "^5", "aud": "^2"},
    }
    write(root, "package.json", json.dumps(manifest))
    contract = draft_contract(root, "x", path=stub_bin(tmp_path, "node", "npm"))
    [check] = contract.checks
    assert check.command == "npm test --ignore-scripts"
    assert "without its posttest script, which needs the network" in contract.description
