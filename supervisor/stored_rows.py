"""`corral sessions --json` without the engine: the board rows the store keeps
(one JSON summary per session, see store/listing.py), read with the standard
library only.

Starting the command is most of its cost: importing the models, the store and
pydantic takes several times longer than reading 10,000 rows. This module
imports none of them. It prints what the full path would print (the same
rows, newest first, a vanished worktree shown as null, the same JSON) and
gives way to the full path (`None`) whenever it cannot vouch for a row: a row
without a summary, a summary that is not a JSON object with exactly the
fields a board row has, or a store it cannot read.

The console paints its first board from `stored_board_rows` (rows with a
summary's attributes, made without the models) while the supervisor opens.

Part of the public surface: the command line and the console may import it.
"""

from __future__ import annotations

import os
from operator import itemgetter
from pathlib import Path
from types import SimpleNamespace

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: a served listing imports no `typing`
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

DB_NAME = "corral.sqlite3"  # the store's file in the state dir (store/database.py)

# The fields of a board row (`models.SessionSummary`), in order; a unit test
# keeps the two the same.
ROW_FIELDS = (
    "session_id",
    "label",
    "state",
    "intent",
    "repo",
    "engine",
    "requested_engine",
    "engine_ran",
    "authored_by",
    "iterations",
    "max_iterations",
    "created_at",
    "updated_at",
    "live",
    "error",
    "needs_you",
    "needs_you_label",
    "steering_available",
    "question_prompt",
    "auth_message",
    "auth_wait_secs",
    "failure_kind",
    "worktree",
    "result_branch",
    "result_commit",
    "model",
    "discussion_id",
    "next_seq",
    "model_pinned",
    "model_notice",
    "boundary_notice",
    "agent_status",
    "agent_reason",
    "agent_source",
    "changed_since_verification",
    "name",
    "archived",
    "dormant",
    "progress",
    "host",
    "where",
    "adopted",
    "files_changed",
    "lines_added",
    "lines_removed",
    "behind_base",
    "agent_mode",
    "agent_model",
    "agent_options",
    "tokens_in",
    "tokens_out",
    "tokens_cache_write",
    "tokens_cache_read",
    "cost_usd",
    "price_unknown",
    "over_budget",
    "question_reminders",
    "replies_owed",
    "replies_awaited",
    "context_refresh_due",
    "approval_held",
)


def stored_rows_json(
    state_dir: Path, finish: Callable[[bytes], bytes] | None = None, also: tuple[Any, ...] = ()
) -> bytes | None:
    """Every stored session's board row as `corral sessions --json` prints it
    (UTF-8, indented), passed through `finish` when given (the command line's
    escaping of what a terminal would obey), or None when a row needs the
    full path.

    Scripts poll this while no owner runs, so the store does not change
    between calls: the finished listing is kept in the state dir's cache
    folder with what it was made from (the store's files as stat sees them,
    this module, `finish` and its module's file, every worktree path and
    whether it was a directory) and served again while all of that is
    unchanged. With 10,000 stored, making it costs ~0.3 s of CPU (reading,
    parsing, re-indenting and escaping 15 MB); serving it, one read: the
    escaping is kept too, since looking at every one of 15 million characters
    again (~0.1 s) was most of a served call's cost. `also`: what else the
    listing is kept with (the caller's, compared as it is; see
    `serve_kept_listing`)."""
    key = None
    if finish is None:
        key = _cache_key(state_dir, None, None, also)
    else:
        import sys

        source = getattr(sys.modules.get(finish.__module__), "__file__", None)
        if source:  # a `finish` whose source cannot be told keeps nothing
            named = f"{finish.__module__}.{finish.__qualname__}"
            key = _cache_key(state_dir, named, Path(source), also)
    kept = _cached(state_dir, key) if key is not None else None
    if kept is not None:
        return kept
    core = _json_core()
    checked: dict[str, bool] = {}
    rows = _rows(state_dir, core[0], checked)
    if rows is None:
        return None
    listing: bytes = core[1](rows, indent=2)
    if finish is not None:
        listing = finish(listing)
    if key is not None:
        _keep(state_dir, key, checked, listing)
    return listing


PIPE_CEILING = 4 << 20


def roomy_stdout(fd: int = 1) -> None:
    """A listing of 10,000 rows is ~15 MB: through a pipe's default 64 KB
    that is ~240 hand-offs between corral and whoever reads it, each a wait
    for a CPU on a loaded machine. When stdout is a pipe, ask for the largest
    one this process may have (a file or a terminal is left as it is)."""
    import fcntl
    import stat

    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        most = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(most, PIPE_CEILING))
    except (OSError, ValueError, AttributeError):  # not Linux, or not allowed: as it was
        return


CACHE_DIR = "cache"  # in the state dir: derived files, safe to delete
# the listing as the command line writes it, named by the form of its key
# (`_cache_key`'s first item): an older corral on the same state dir keeps its
# own file instead of replacing this one on every call
LISTING_CACHE = "sessions-json.3"


def _cache_key(
    state_dir: Path, finish: str | None, source: Path | None, also: tuple[Any, ...]
) -> list[Any] | None:
    """What the listing is made from, as stat sees it (None: no store):
    the store's files, this module, the `finish` function by name and its
    module's file, and the caller's `also`."""
    db = Path(state_dir) / DB_NAME
    key: list[Any] = [3, ROW_FIELDS]
    sources = [db, db.with_name(DB_NAME + "-wal"), Path(__file__)]
    if finish is not None and source is not None:
        key.append(finish)
        sources.append(source)
    for path in sources:
        try:
            st = path.stat()
        except FileNotFoundError:
            if path == db:
                return None
            key.append(None)
            continue
        except OSError:
            return None
        if path != db and st.st_size == 0:
            key.append(None)  # an empty log is no log (a reader may have made it)
            continue
        key.append([st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])
    key.append(list(also))
    return key


def _kept_head(state_dir: Path, key: list[Any]) -> tuple[Any, int] | None:
    """The kept listing's file, open at the listing (its first byte's
    offset with it), when it was made from exactly what is there now."""
    import json

    try:
        kept = (Path(state_dir) / CACHE_DIR / LISTING_CACHE).open("rb")
    except OSError:
        return None
    try:
        head = kept.readline()
        made = json.loads(head)
        if not isinstance(made, dict) or made.get("key") != json.loads(json.dumps(key)):
            raise ValueError("made from something else")
        checked = made.get("checked")
        if not isinstance(checked, dict):
            raise ValueError("no worktrees noted")
        isdir = os.path.isdir
        if any(isdir(path) != was for path, was in checked.items()):
            raise ValueError("a worktree vanished (or came back): its row changes")
    except (OSError, ValueError):
        kept.close()
        return None
    return kept, len(head)


def _cached(state_dir: Path, key: list[Any]) -> bytes | None:
    """The kept listing when it was made from exactly what is there now."""
    found = _kept_head(state_dir, key)
    if found is None:
        return None
    kept, _ = found
    with kept:
        try:
            return kept.read()  # one copy of 15 MB
        except OSError:
            return None


def serve_kept_listing(
    state_dir: Path, finish: str, source: Path, also: tuple[Any, ...], fd: int = 1
) -> bool:
    """Write the kept listing (made by `stored_rows_json` with the `finish`
    function so named, from `source`, and `also`) and a newline to `fd`,
    straight from its file (`sendfile`: 15 MB never enter this process),
    when it was made from exactly what is there now. False: nothing was
    written (no such listing, or it is not current), the caller makes it.

    The lean start of `corral sessions --json`: before this, a served call
    spent more on imports (the models' errors, sqlite3, a TOML parser, the
    socket module) and on reading and writing 15 MB than on anything else."""
    key = _cache_key(state_dir, finish, source, also)
    found = _kept_head(state_dir, key) if key is not None else None
    if found is None:
        return False
    kept, offset = found
    with kept:
        size = os.fstat(kept.fileno()).st_size
        _copy(kept.fileno(), fd, offset, size)
    os.write(fd, b"\n")
    return True


def _copy(source: int, fd: int, offset: int, end: int) -> None:
    """Bytes `offset`..`end` of file `source` to `fd`: by `sendfile`, or
    (where `fd` takes none: some terminals) read and written."""
    while offset < end:
        try:
            sent = os.sendfile(fd, source, offset, min(end - offset, 1 << 30))
        except OSError as exc:
            import errno

            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            break
        if sent == 0:
            break
        offset += sent
    while offset < end:
        chunk = os.pread(source, min(end - offset, 1 << 20), offset)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
        offset += len(chunk)


def _keep(state_dir: Path, key: list[Any], checked: dict[str, bool], listing: bytes) -> None:
    """Keep the listing for the next call; a state dir corral cannot write to
    keeps nothing (the listing is made each time, as before)."""
    import json

    folder = Path(state_dir) / CACHE_DIR
    head = json.dumps({"key": key, "checked": checked}).encode()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)  # what the listing says is the state dir's
        part = folder / f".{LISTING_CACHE}.{os.getpid()}"
        part.write_bytes(head + b"\n" + listing)
        os.replace(part, folder / LISTING_CACHE)  # readers see the old file or the new one
    except OSError:
        return


_TEXTS = ("session_id", "label", "intent", "repo", "engine")
_NUMBERS = ("iterations", "max_iterations", "created_at", "updated_at")
_STR, _NUMBER = {str}, {int, float}


class StoredRow(SimpleNamespace):
    """A board row as the store keeps it: every attribute of a
    `models.SessionSummary` (the states as their enums), read without loading
    the models. Equal to a summary whose fields are the same, so the board
    keeps the cells it made when the live rows replace these."""

    def __eq__(self, other: object) -> bool:
        # a summary (pydantic) keeps exactly its fields in __dict__
        fields = getattr(other, "__dict__", None)
        return isinstance(fields, dict) and vars(self) == fields

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # mutable, as a summary is


def stored_board_rows(state_dir: Path) -> list[StoredRow] | None:
    """The board rows the store keeps (newest first, a vanished worktree as
    none), or None when a row needs the full path (see `stored_rows_json`)."""
    from .states import CoderState, FailureKind, NeedsYou

    rows = _rows(state_dir, _json_core()[0])
    if rows is None:
        return None
    try:
        for row in rows:
            row["state"] = CoderState(row["state"])
            if row["needs_you"] is not None:
                row["needs_you"] = NeedsYou(row["needs_you"])
            if row["failure_kind"] is not None:
                row["failure_kind"] = FailureKind(row["failure_kind"])
    except (ValueError, TypeError):  # a state this version does not know
        return None
    return [StoredRow(**row) for row in rows]


def stored_summaries(state_dir: Path) -> bytes | None:
    """The kept summaries as one JSON array, unparsed (for a reader that
    validates them in one call), or None when a row has none or the store
    cannot be read."""
    import sqlite3

    path = Path(state_dir) / DB_NAME
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    conn.text_factory = bytes  # the UTF-8 as stored: the JSON parser reads bytes
    try:
        kept = conn.execute("SELECT summary FROM sessions").fetchall()
    except sqlite3.Error:  # no summary column (an old store), no table, a locked file
        return None
    finally:
        conn.close()
    if any(summary is None for (summary,) in kept):
        return None
    return b"[" + b",".join(summary for (summary,) in kept) + b"]"


def _rows(
    state_dir: Path, from_json: Callable[[bytes], Any], checked: dict[str, bool] | None = None
) -> list[dict[str, Any]] | None:
    """The rows, checked and sorted; `checked` gets each worktree path looked
    at and whether it was a directory."""
    seen: dict[str, bool] = {} if checked is None else checked

    def isdir(path: str) -> bool:
        found = seen.get(path)
        if found is None:
            found = seen[path] = os.path.isdir(path)
        return found

    kept = stored_summaries(state_dir)
    if kept is None:
        return None
    # pydantic's JSON core alone (not the models): one parse for every row, and
    # on the way out the bytes the full path writes (`json.dumps(indent=...)`
    # is pure Python and several times slower)
    try:
        rows = from_json(kept)
    except ValueError:
        return None
    texts, numbers = itemgetter(*_TEXTS), itemgetter(*_NUMBERS)
    for row in rows:
        if not isinstance(row, dict) or tuple(row) != ROW_FIELDS:
            return None
        # what rows are sorted and computed with must be what a summary holds
        # (C-level map and itemgetter: this runs for each of 10,000 rows)
        if set(map(type, texts(row))) != _STR or not set(map(type, numbers(row))) <= _NUMBER:
            return None
        worktree = row["worktree"]
        if worktree and not (isinstance(worktree, str) and isdir(worktree)):
            row["worktree"] = None
        where = row["where"]  # a local path, or host:path for a session on a host
        if where and not row["host"] and not (isinstance(where, str) and isdir(where)):
            row["where"] = None
    # newest first, sorted as the full listing sorts (ties keep the store's order)
    rows.sort(key=lambda r: r["updated_at"], reverse=True)
    return rows


def _json_core() -> tuple[Callable[[bytes], Any], Callable[..., bytes]]:
    """pydantic-core's `from_json` and `to_json`, from its compiled module
    loaded on its own: the package's `__init__` imports its schema types first,
    which takes longer than this whole listing's parse (~50 ms). Imported the
    usual way when the compiled module is not where pydantic-core keeps it."""
    import importlib.machinery
    import importlib.util
    import sys

    if "pydantic_core" in sys.modules:  # already imported (the console): use it
        from pydantic_core import from_json, to_json

        return from_json, to_json
    spec = importlib.util.find_spec("pydantic_core")  # finds the folder, runs nothing
    folder = Path(spec.origin).parent if spec is not None and spec.origin else None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES if folder else ():
        assert folder is not None
        path = folder / f"_pydantic_core{suffix}"
        if path.is_file():
            loader = importlib.machinery.ExtensionFileLoader(
                "pydantic_core._pydantic_core", str(path)
            )
            core_spec = importlib.util.spec_from_loader(loader.name, loader)
            if core_spec is None:
                break
            core = importlib.util.module_from_spec(core_spec)
            loader.exec_module(core)
            return core.from_json, core.to_json
    from pydantic_core import from_json as parse
    from pydantic_core import to_json as dump

    return parse, dump
