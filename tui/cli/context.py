"""`corral context <session> [-o FILE]`: a session's context pack (its
conversation, bounded, and a snapshot of its worktree) as JSON, through the
owner of the state dir; `corral run --context FILE` loads one into a new
session (its agent gets it with the task, as quoted history)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from corral.supervisor.errors import CorralError
from corral.supervisor.models import ContextPack
from corral.supervisor.states import label

from .client import _client, resolve
from .output import say

MAX_PACK_FILE_BYTES = 4 * 1024 * 1024


def add_parser(sub: Any) -> None:
    ctx = sub.add_parser(
        "context", help="export a session's context pack (its conversation and worktree)"
    )
    ctx.add_argument("session", help="the session: id, label or the end of its id")
    ctx.add_argument("-o", "--output", help="write it to this file (default: stdout)")


def export(args: argparse.Namespace) -> int:
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        pack = client.answer(Calls.export_context, params.SessionParams(session_id=sid))
    text = json.dumps(pack, indent=2, ensure_ascii=False)
    if args.output:
        out = Path(args.output)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        kept = len(pack["retained_messages"])
        say(f"corral context: {label(sid)}'s context ({kept} messages) written to {out}")
    else:
        say(text)
    return 0


def load_pack(path: str) -> ContextPack:
    """A context pack file, checked: one sentence when it is not one."""
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_PACK_FILE_BYTES:
            raise CorralError(f"{file} is larger than a context pack can be: nothing was started")
        return ContextPack.model_validate_json(file.read_bytes())
    except OSError as exc:
        raise CorralError(f"cannot read the context pack {file}: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CorralError(
            f"{file} is not a corral context pack ({where}: {first['msg']}); export one with "
            "`corral context <session> -o FILE`"
        ) from None
