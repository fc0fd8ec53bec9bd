"""The suite's parallel lanes (tests/conftest.py) keep `make test` short
without breaking what a lane is for: the real agent CLIs stay one lane, a
file's tests that share a module fixture (an sshd) stay together, and every
other slow test can run on any worker; lanes go out longest first, and
xdist's own reorder by test count is off so that order holds.

It collects real test files in a worker's shoes (PYTEST_XDIST_WORKER set,
as each xdist worker collects) and reads the order the workers send."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# what each worker hands the controller: the collection, in order, with lanes
DUMP = """
import json, os

def lane_of(item):  # as xdist's loadgroup reads it: the xdist_group, else the test alone
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker else item.nodeid

def pytest_collection_finish(session):
    lanes = [[item.nodeid, lane_of(item)] for item in session.items]
    reorder = getattr(session.config.option, "loadscopereorder", None)
    with open(os.environ["LANES_OUT"], "w") as out:
        json.dump({"lanes": lanes, "reorder": reorder}, out)
"""

SLOW_ALONE = "tests/integration/test_cheats_node.py"  # 38 slow tests, no module fixture
SSHD_FILE = "tests/integration/test_host_sessions.py"  # slow tests sharing a module sshd
AGENT_FILE = "tests/e2e/test_real_opencode.py"  # a real agent CLI: the agent-clis lane
FAST_FILE = "tests/unit/test_states.py"  # fast tests only


def collected(tmp_path: Path, *args: str) -> dict[str, object]:
    (tmp_path / "lanes_dump.py").write_text(DUMP)
    out = tmp_path / "lanes.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "PYTEST_XDIST_WORKER": "gw0",
        "LANES_OUT": str(out),
    }
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "lanes_dump"),
            *("--collect-only", f"--basetemp={tmp_path / 'base'}", *args),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result: dict[str, object] = json.loads(out.read_text())
    return result


@pytest.mark.slow
@pytest.mark.timeout(600)  # a real collection in a subprocess, slow on a loaded machine
def test_slow_tests_spread_while_shared_fixtures_and_agent_clis_keep_their_lane(
    tmp_path: Path,
) -> None:
    got = collected(tmp_path, "--dist", "loadgroup", FAST_FILE, SSHD_FILE, SLOW_ALONE, AGENT_FILE)
    lanes: list[list[str]] = got["lanes"]  # type: ignore[assignment]
    lane = dict((nodeid.split("@")[0], name) for nodeid, name in lanes)

    alone = [n for n in lane if n.startswith(SLOW_ALONE)]
    assert len(alone) >= 30
    assert all(lane[n] == n for n in alone), "a slow test without a module fixture runs alone"
    assert {lane[n] for n in lane if n.startswith(SSHD_FILE)} == {SSHD_FILE}
    assert {lane[n] for n in lane if n.startswith(AGENT_FILE)} == {"agent-clis"}
    assert {lane[n] for n in lane if n.startswith(FAST_FILE)} == {FAST_FILE}

    # longest first: the shared sshd's lane (18 slow tests), the agent CLIs'
    # (5 here), the lone slow tests, and the fast file last; each lane's
    # tests stay together
    order = [name for _, name in lanes]
    firsts = list(dict.fromkeys(order))
    assert firsts[0] == SSHD_FILE and firsts[1] == "agent-clis"
    assert firsts[-1] == FAST_FILE
    assert len(firsts) == len({*order}), "a lane's tests are contiguous"
    # xdist would otherwise re-sort lanes by test count (the fast file first)
    assert got["reorder"] is False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_fast_suite_keeps_files_whole(tmp_path: Path) -> None:
    got = collected(tmp_path, "--dist", "loadgroup", "-m", "not slow", FAST_FILE, SSHD_FILE)
    lanes: list[list[str]] = got["lanes"]  # type: ignore[assignment]
    assert len(lanes) > 100
    assert {name for _, name in lanes} == {FAST_FILE}
