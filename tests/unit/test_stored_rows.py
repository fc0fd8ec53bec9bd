"""`corral sessions --json` from the store prints the same bytes whether it
reads the kept summaries with the standard library (the quick path) or
through the models (the full path), and the quick path gives way whenever a
row needs the full one."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.models import SessionSummary
from corral.supervisor.session.summaries import summary_json
from corral.supervisor.store import DB_NAME, Store
from corral.supervisor.stored_board import stored_sessions, stored_sessions_json
from corral.supervisor.stored_rows import DB_NAME as QUICK_DB_NAME
from corral.supervisor.stored_rows import ROW_FIELDS, stored_board_rows, stored_rows_json
from corral.tui.cli.output import json_bytes as output_json_bytes
from tests.unit.test_store_listing import _sessions

REPO_ROOT = Path(__file__).resolve().parents[2]


def _store(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    store = Store(state, summarize=summary_json)
    for session in _sessions(tmp_path):
        store.save_session(session)
    store.close()
    return state


def _full(state: Path) -> bytes:
    return stored_sessions_json(stored_sessions(state).rows)


def test_the_quick_path_knows_the_fields_and_file_of_the_full_one() -> None:
    assert tuple(SessionSummary.model_fields) == ROW_FIELDS
    assert QUICK_DB_NAME == DB_NAME


def test_the_quick_rows_are_the_full_rows_byte_for_byte(tmp_path: Path) -> None:
    state = _store(tmp_path)
    quick = stored_rows_json(state)
    assert quick is not None
    assert quick == _full(state)
    # a vanished worktree reads as null, one still there as its path
    text = quick.decode()
    worktrees = {row["worktree"] for row in json.loads(text)}
    assert str(tmp_path / "removed") not in worktrees
    assert str(tmp_path / "kept-worktree") in worktrees
    assert "délivré ✓" in text  # UTF-8 as it is, not escaped


def test_a_row_without_a_summary_gives_way_to_the_full_path(tmp_path: Path) -> None:
    state = _store(tmp_path)
    with sqlite3.connect(state / DB_NAME) as conn:
        conn.execute("UPDATE sessions SET summary = NULL WHERE id = ?", ("b" * 24,))
    assert stored_rows_json(state) is None
    with sqlite3.connect(state / DB_NAME) as conn:
        conn.execute('UPDATE sessions SET summary = \'{"session_id": "x"}\'')
    assert stored_rows_json(state) is None  # not a whole board row
    assert stored_rows_json(tmp_path / "nothing-here") is None


def test_the_command_prints_every_row_either_way(tmp_path: Path) -> None:
    state = _store(tmp_path)
    env = dict(os.environ, CORRAL_HOME=str(state), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)

    def listed() -> bytes:
        return subprocess.run(
            [sys.executable, "-m", "corral.tui.cli", "sessions", "--json"],
            env=env,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout

    quick = listed()
    assert quick == _full(state) + b"\n"
    with sqlite3.connect(state / DB_NAME) as conn:  # an old row: parsed in full instead
        conn.execute("UPDATE sessions SET summary = NULL WHERE id = ?", ("a" * 24,))
    assert listed() == quick


def test_the_first_board_rows_equal_the_models_rows(tmp_path: Path) -> None:
    """The console's first frame reads the rows without the models: each one
    has a summary's attributes (states as their enums) and equals it."""
    state = _store(tmp_path)
    light = stored_board_rows(state)
    full = stored_sessions(state).rows
    assert light is not None
    assert [r.session_id for r in light] == [r.session_id for r in full]
    for quick, model in zip(light, full, strict=True):
        assert quick == model  # the board keeps the cells it made for it
        assert quick.state is model.state  # an enum, as the board's rules expect
        assert quick.needs_you == model.needs_you
        assert quick.worktree == model.worktree
    changed = full[0].model_copy(update={"intent": "something else"})
    assert light[0] != changed


def test_first_board_rows_give_way_to_the_full_open_on_a_doubtful_row(tmp_path: Path) -> None:
    state = _store(tmp_path)
    with sqlite3.connect(state / DB_NAME) as conn:  # a number where a time belongs
        conn.execute(
            "UPDATE sessions SET summary = json_set(summary, '$.updated_at', 'soon') WHERE id = ?",
            ("b" * 24,),
        )
    assert stored_board_rows(state) is None
    state = _store(tmp_path / "again")
    with sqlite3.connect(state / DB_NAME) as conn:  # a state this version does not know
        conn.execute(
            "UPDATE sessions SET summary = json_set(summary, '$.state', 'levitating') WHERE id = ?",
            ("b" * 24,),
        )
    assert stored_board_rows(state) is None


def test_the_json_listing_builds_no_parser_and_imports_no_models(tmp_path: Path) -> None:
    """`corral sessions --json` is polled by scripts: with every row vouched for
    it imports neither the models nor pydantic (the parser for the other
    subcommands imported them: most of the command's time, 474 ms to 2.6 s
    with 10,000 stored under load)."""
    state = _store(tmp_path)
    env = dict(os.environ, CORRAL_HOME=str(state), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)
    probe = (
        "import sys; from corral.tui.cli.main import main; code = main(['sessions', '--json']); "
        "heavy = [m for m in ('corral.supervisor.models', 'pydantic', 'argparse') "
        "if m in sys.modules]; print('HEAVY', heavy, file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, check=True, timeout=60
    )
    assert done.stdout == _full(state) + b"\n"
    assert "HEAVY []" in done.stderr.decode(), done.stderr.decode()


def test_a_kept_listing_is_served_while_nothing_it_was_made_from_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scripts poll the listing: the second call reads what the first made
    (no parse), and any change to the store or to a worktree's presence makes
    it again, so it never shows a row as it no longer is."""
    import corral.supervisor.stored_rows as quick

    state = _store(tmp_path)
    first = stored_rows_json(state)
    assert first == _full(state)
    real_core = quick._json_core

    def no_parse() -> Any:
        raise AssertionError("the kept listing was not served")

    monkeypatch.setattr(quick, "_json_core", no_parse)
    assert stored_rows_json(state) == first

    # a worktree vanished: its row says so at once
    monkeypatch.setattr(quick, "_json_core", real_core)
    (tmp_path / "kept-worktree").rmdir()
    gone = stored_rows_json(state)
    assert gone != first and gone == _full(state)
    # the store changed (a row written by an owner since): shown at once
    store = Store(state, summarize=summary_json)
    session = _sessions(tmp_path)[0].model_copy(update={"intent": "renamed since"})
    store.save_session(session)
    store.close()
    changed = stored_rows_json(state)
    assert changed is not None and b"renamed since" in changed and changed == _full(state)
    # a damaged cache file is made again, never served
    for kept in (state / quick.CACHE_DIR).iterdir():
        kept.write_bytes(b'{"key": 1}\nnot the listing')
    assert stored_rows_json(state) == changed


def test_the_json_listing_widens_the_pipe_it_writes_to(tmp_path: Path) -> None:
    """Megabytes of JSON through a 64 KB pipe are hundreds of hand-offs to the
    reader, each a wait for a CPU under load: the listing asks for the
    largest pipe it may have."""
    state = _store(tmp_path)
    env = dict(os.environ, CORRAL_HOME=str(state), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)
    import fcntl

    read_end, write_end = os.pipe()
    default = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    most = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    with subprocess.Popen(
        [sys.executable, "-m", "corral.tui.cli", "sessions", "--json"], env=env, stdout=write_end
    ) as proc:
        os.close(write_end)
        out = b""
        while chunk := os.read(read_end, 1 << 16):
            out += chunk
        assert proc.wait(timeout=60) == 0
    widened = fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    os.close(read_end)
    assert out == _full(state) + b"\n"
    assert widened == min(most, 4 << 20) > default


HOSTILE_INTENT = "fix it\x1b]52;c;cm0gLXJmIH4=\x07 now\u202e\x9b31m\u200b"


def test_the_kept_listing_is_the_written_one_so_serving_it_escapes_nothing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serving the kept listing was a read, then the escape of every one of
    15 million characters (most of a served call's ~0.1 s of CPU at 10,000
    stored). The escaped listing is what is kept now: the second call reads
    it and looks at no character, and a hostile intent (a clipboard write,
    a bidi override, a C1 CSI) is as escaped in the served listing as in the
    first one."""
    import corral.supervisor.stored_rows as quick
    import corral.tui.cli.output as output
    from tests.unit.test_safe_text import obeyable

    state = _store(tmp_path)
    store = Store(state, summarize=summary_json)
    store.save_session(_sessions(tmp_path)[0].model_copy(update={"intent": HOSTILE_INTENT}))
    store.close()
    made = stored_rows_json(state, finish=output.json_bytes)
    assert made == output.json_bytes(_full(state))
    assert obeyable(made.decode(), multiline=True) == []
    assert HOSTILE_INTENT in [row["intent"] for row in json.loads(made)]

    def looked_at(_text: str) -> str:
        raise AssertionError("the served listing was escaped again")

    def no_parse() -> Any:
        raise AssertionError("the kept listing was not served")

    monkeypatch.setattr(output, "json_text", looked_at)
    monkeypatch.setattr(quick, "_json_core", no_parse)
    assert stored_rows_json(state, finish=output.json_bytes) == made
    # a caller that asks for the plain listing never gets the escaped one
    monkeypatch.undo()
    assert stored_rows_json(state) == _full(state)
    assert stored_rows_json(state, finish=output.json_bytes) == made


def test_the_command_writes_the_kept_listing_escaped_each_time(tmp_path: Path) -> None:
    """The real command, twice (made, then served): the same escaped bytes,
    and what it keeps is exactly what it wrote."""
    from tests.unit.test_safe_text import obeyable

    state = _store(tmp_path)
    store = Store(state, summarize=summary_json)
    store.save_session(_sessions(tmp_path)[0].model_copy(update={"intent": HOSTILE_INTENT}))
    store.close()
    env = dict(os.environ, CORRAL_HOME=str(state), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)

    def listed() -> bytes:
        return subprocess.run(
            [sys.executable, "-m", "corral.tui.cli", "sessions", "--json"],
            env=env,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout

    first, served = listed(), listed()
    assert first == served
    assert obeyable(served.decode(), multiline=True) == []
    assert HOSTILE_INTENT in [row["intent"] for row in json.loads(served)]
    kept = [p.read_bytes() for p in (state / "cache").iterdir()]
    assert [k.split(b"\n", 1)[1] + b"\n" for k in kept] == [served]


# what a served `corral sessions --json` must not import: before its lean
# start, these were most of a served call's CPU (with reading and writing
# the 15 MB listing through this process)
HEAVY_FOR_A_SERVED_LISTING = (
    "sqlite3",
    "logging",
    "socket",
    "tomllib",
    "corral.supervisor.errors",
    "corral.tui.cli.output",
    "corral.tui.cli.common",
    "corral.tui.cli.sessions",
)
LISTED_WITH_IMPORTS = (
    "import sys; from corral.tui.cli.main import main; code = main(['sessions', '--json']); "
    "sys.stdout.flush(); print('LOADED', sorted(sys.modules), file=sys.stderr); sys.exit(code)"
)


def _listed(env: dict[str, str]) -> tuple[bytes, set[str], str]:
    """The real command's stdout, the modules it loaded, its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", LISTED_WITH_IMPORTS],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    err = done.stderr.decode()
    loaded = err.split("LOADED ", 1)[1].strip()
    return done.stdout, set(json.loads(loaded.replace("'", '"'))), err.split("LOADED ", 1)[0]


def _command_env(state: Path, config: Path) -> dict[str, str]:
    env = dict(os.environ, CORRAL_HOME=str(state), CORRAL_CONFIG=str(config))
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.pop("CORRAL_AGENT_SOCKET", None)
    return env


def test_a_served_listing_is_written_with_nothing_but_its_reader_imported(
    tmp_path: Path,
) -> None:
    """The second call serves what the first kept: the same bytes, written
    from the kept file, importing none of what making it needs."""
    state = _store(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("[sandbox]\nenabled = true\n")
    env = _command_env(state, config)
    made, loaded_making, _ = _listed(env)
    assert made == output_json_bytes(_full(state)) + b"\n"
    assert "corral.tui.cli.sessions" in loaded_making
    served, loaded, said = _listed(env)
    assert served == made and said == ""
    assert not loaded & set(HEAVY_FOR_A_SERVED_LISTING), loaded & set(HEAVY_FOR_A_SERVED_LISTING)


def test_a_config_broken_since_the_listing_was_kept_is_still_said(tmp_path: Path) -> None:
    state = _store(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("[sandbox]\nenabled = true\n")
    env = _command_env(state, config)
    made, _, _ = _listed(env)
    config.write_text("[sandbox\nenabled = \n")
    listed, _, said = _listed(env)
    assert listed == made
    assert "not valid TOML" in said
    _, _, again = _listed(env)  # never kept as fine while it is broken
    assert "not valid TOML" in again
    config.unlink()  # no config: fine again, and served lean once kept so
    _listed(env)
    _, loaded, said = _listed(env)
    assert said == "" and "corral.tui.cli.sessions" not in loaded


def test_an_owner_socket_sends_the_command_the_full_way(tmp_path: Path) -> None:
    """With the state dir's control socket there, an owner may run: its live
    rows, not the kept listing, are the answer (a socket nobody answers on:
    the store's rows, as before)."""
    state = _store(tmp_path)
    env = _command_env(state, tmp_path / "none.toml")
    made, _, _ = _listed(env)
    (state / "control.sock").write_text("")  # stale: nobody answers
    listed, loaded, _ = _listed(env)
    assert listed == made
    assert "corral.tui.cli.sessions" in loaded  # asked the owner first


def test_the_lean_start_names_the_listings_finish_as_the_full_way_does() -> None:
    from corral.tui.cli.main import LISTING_FINISH

    assert f"{output_json_bytes.__module__}.{output_json_bytes.__qualname__}" == LISTING_FINISH
    module = sys.modules[output_json_bytes.__module__]
    main_file = Path(sys.modules["corral.tui.cli.main"].__file__ or "")
    assert Path(module.__file__ or "") == main_file.with_name("output.py")
