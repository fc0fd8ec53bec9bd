"""`Discussions`: start / resume / list / close, the open cap and idle expiry."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..contracts.conventions import project_context, summarize_repo
from ..errors import CorralError
from ..git.repo import NotAProject, repo_root
from ..llm.base import ModelProvider
from ..models import ContextPack
from .common import (
    _ID,
    DISCUSSION_IDLE_TTL_SECS,
    DISCUSSIONS_DIR,
    MAX_OPEN_DISCUSSIONS,
    _message_from_json,
    no_open,
    not_a_repo,
    too_many_open,
)
from .discussion import Discussion

# --- the manager ---------------------------------------------------------------------


class Discussions:
    """The open discussions of one console, and the saved ones under
    `<state>/discussions/<id>.json`."""

    def __init__(
        self,
        state_dir: Path,
        provider: ModelProvider | None,
        *,
        clock: Callable[[], float] = time.time,
        idle_ttl: float = DISCUSSION_IDLE_TTL_SECS,
        global_policy: Path | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.global_policy = global_policy  # None: ~/.config/corral/policy.toml
        self.store_dir = self.state_dir / DISCUSSIONS_DIR
        self.provider = provider
        self.clock = clock
        self.idle_ttl = idle_ttl
        self._open: dict[str, Discussion] = {}
        self._reserved = 0

    def __iter__(self) -> Iterator[Discussion]:
        return iter(list(self._open.values()))

    def get(self, discussion_id: str) -> Discussion:
        found = self._open.get(discussion_id)
        if found is None:
            raise CorralError(no_open(discussion_id))
        return found

    def _reserve(self) -> None:
        if len(self._open) + self._reserved >= MAX_OPEN_DISCUSSIONS:
            raise CorralError(too_many_open())
        self._reserved += 1

    async def _open_one(
        self, root: Path, discussion_id: str, created_at: float, saved: dict[str, Any] | None
    ) -> Discussion:
        summary, context = await asyncio.to_thread(_grounding, root)
        disc = Discussion(
            discussion_id=discussion_id,
            repo=root,
            provider=self.provider,
            store_dir=self.store_dir,
            repo_summary=summary,
            context=context,
            created_at=created_at,
            clock=self.clock,
            global_policy=self.global_policy,
        )
        if saved is not None:
            disc._restore(saved)
        return disc

    async def start(
        self, repo: Path | str, *, model: str | None = None, context: ContextPack | None = None
    ) -> Discussion:
        """A new discussion; `model` pins a configured tool-capable model;
        `context`, another session's context pack, is its first message."""
        self.reap_idle()
        self._reserve()  # synchronous: concurrent starts cannot pass the cap
        try:
            root = await asyncio.to_thread(_canonical_root, repo)
            disc = await self._open_one(root, f"disc-{uuid.uuid4().hex}", self.clock(), None)
            disc.choose_model(model)
            if context is not None:
                disc.load_context(context)
            disc.save()
        finally:
            self._reserved -= 1
        self._open[disc.id] = disc
        return disc

    def _load(self, discussion_id: str) -> dict[str, Any]:
        if not _ID.match(discussion_id):
            raise CorralError(f"'{discussion_id}' is not a discussion id (disc-<32 hex>)")
        path = self.store_dir / f"{discussion_id}.json"
        if not path.exists():
            raise CorralError(f"no saved discussion '{discussion_id}'")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("discussion_id") != discussion_id:
                raise ValueError("not a discussion record")
            Path(data["repo"])
            [_message_from_json(row) for row in data.get("messages") or ()]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorralError(
                f"saved discussion '{discussion_id}' is unreadable ({exc}); {path} was left "
                "in place"
            ) from exc
        return data

    async def resume(self, discussion_id: str, *, model: str | None = None) -> Discussion:
        """Reopen a saved discussion: the history is replayed as events (no
        tool runs again) and AGENTS.md / CLAUDE.md are read afresh. Its saved
        pin is kept unless `model` names another (`auto` clears it)."""
        live = self._open.get(discussion_id)
        if live is not None:
            live.touch()
            if model is not None:
                live.choose_model(model)
            return live
        self.reap_idle()
        data = self._load(discussion_id)
        self._reserve()
        try:
            root = await asyncio.to_thread(_canonical_root, data["repo"])
            if str(root) != str(data["repo"]):
                raise CorralError("saved conversation belongs to a different repository")
            disc = await self._open_one(
                root, discussion_id, float(data.get("created_at") or self.clock()), data
            )
            if discussion_id in self._open:  # resumed concurrently
                return self._open[discussion_id]
            if model is not None:
                disc.choose_model(model)
        finally:
            self._reserved -= 1
        self._open[discussion_id] = disc
        return disc

    def list(self) -> list[dict[str, Any]]:
        """Open discussions (newest first), then saved ones that are not
        open; an unreadable file is a row with an `error`."""
        rows = sorted(
            (d.summary() for d in self._open.values()),
            key=lambda r: r["created_at"],
            reverse=True,
        )
        saved: list[dict[str, Any]] = []
        if self.store_dir.is_dir():
            for path in self.store_dir.glob("disc-*.json"):
                did = path.stem
                if did in self._open:
                    continue
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                    saved.append(
                        {
                            "discussion_id": data["discussion_id"],
                            "repo": data["repo"],
                            "created_at": data.get("created_at"),
                            "updated_at": data.get("updated_at"),
                            "turns": data.get("turns", 0),
                            "open": False,
                            "prepared": bool(data.get("prepared_task")),
                            "model": data.get("model"),
                        }
                    )
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    saved.append(
                        {"discussion_id": did, "open": False, "error": f"unreadable: {exc}"}
                    )
        saved.sort(key=lambda r: r.get("updated_at") or 0, reverse=True)
        return rows + saved

    async def close(self, discussion_id: str) -> None:
        disc = self.get(discussion_id)
        del self._open[discussion_id]
        disc.closed = True
        disc.cancel()
        await disc.wait()
        with contextlib.suppress(OSError):
            disc.save()
        disc.events.close_all()

    def reap_idle(self) -> builtins.list[str]:
        """Close discussions idle for longer than the TTL (they stay
        resumable); a turn in flight is not idle."""
        reaped = []
        for disc in list(self._open.values()):
            if not disc.answering and disc.idle_secs() > self.idle_ttl:
                del self._open[disc.id]
                disc._shutdown()
                reaped.append(disc.id)
        return reaped

    async def close_all(self) -> None:
        for did in list(self._open):
            await self.close(did)


def _canonical_root(repo: Path | str) -> Path:
    try:
        canon = Path(os.path.realpath(Path(repo).expanduser()))
    except OSError:
        canon = Path(repo)
    try:
        return repo_root(canon)
    except NotAProject:
        raise
    except CorralError:
        raise CorralError(not_a_repo(canon)) from None


def _grounding(root: Path) -> tuple[str, str]:
    try:
        summary = summarize_repo(root)
    except OSError:
        summary = ""
    try:
        context = project_context(root)
    except OSError:
        context = ""
    return summary, context
