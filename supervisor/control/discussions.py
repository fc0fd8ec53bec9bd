"""A discussion as a console holds it: always the owner's.

The owner of a state dir holds each discussion once (one copy, one writer:
two copies saving the same file lose a turn). A console reaches them through
`DiscussionsSurface` whichever process owns: `OwnedDiscussions` when the
console is the owner (in-process, over the very `Discussions` its socket
serves to other clients), `AttachedDiscussions` when another process owns
(each call one `Calls.discussion_*` record on the control socket). Both give
a `DiscussionHandle` whose `events()` is the discussion's event stream:
replayed history, then every client's turns live, pushed by the owner (the
console never polls it).

Every method is a coroutine, so the console awaits the owner off its UI loop.
An attached one refuses at once while its owner is stalled or gone, with the
typed `OwnerStalled` / `OwnerGone`. What an attached handle knows of the
discussion (`model`, `prepared_task`) is what the owner said last: the
answer to a call, or an event of the stream it follows.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..session.journal import SubscriptionDropped
from . import protocol as p
from .client import OwnerGone, OwnerStalled
from .surface import Call, Calls, P, R

if TYPE_CHECKING:
    from ..discuss import Discussion, Discussions, PreparedTask
    from ..discuss.discussion_events import DiscussEvent
    from .client import AsyncControlClient

Json = dict[str, Any]
GONE = "the owner of this state dir went away"


class DiscussionHandle(Protocol):
    """One discussion the owner holds, as a console speaks in it."""

    @property
    def id(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def prepared_task(self) -> PreparedTask | None: ...
    def events(self, from_seq: int = 0) -> AsyncIterator[DiscussEvent]: ...
    async def send(self, text: str) -> int: ...
    async def cancel(self) -> bool: ...
    async def choose_model(self, name: str | None) -> str | None: ...
    async def promote(self) -> PreparedTask: ...
    async def link_session(self, session_id: str) -> None: ...


class DiscussionsSurface(Protocol):
    """What a console may ask of the owner's discussions."""

    async def list(self) -> builtins.list[Json]: ...
    async def start(self, repo: Path) -> DiscussionHandle: ...
    async def resume(self, discussion_id: str) -> DiscussionHandle: ...


# -- the owner's own console: in-process ---------------------------------------------


class OwnedDiscussion:
    """The owner's discussion itself, awaited like an attached one."""

    def __init__(self, discussion: Discussion) -> None:
        self.discussion = discussion

    @property
    def id(self) -> str:
        return self.discussion.id

    @property
    def model(self) -> str | None:
        return self.discussion.model

    @property
    def prepared_task(self) -> PreparedTask | None:
        return self.discussion.prepared_task

    @property
    def linked_sessions(self) -> builtins.list[dict[str, Any]]:
        return self.discussion.linked_sessions

    async def events(self, from_seq: int = 0) -> AsyncIterator[DiscussEvent]:
        sub = self.discussion.subscribe(from_seq)
        try:
            async for event in sub:
                yield event
        finally:
            sub.close()

    async def send(self, text: str) -> int:
        return await self.discussion.send(text)

    async def cancel(self) -> bool:
        return self.discussion.cancel()

    async def choose_model(self, name: str | None) -> str | None:
        self.discussion.choose_model(name)
        return self.discussion.model

    async def promote(self) -> PreparedTask:
        return await self.discussion.promote()

    async def link_session(self, session_id: str) -> None:
        self.discussion.link_session(session_id)


class OwnedDiscussions:
    """The owner's `Discussions` (the ones its socket serves), for its own console."""

    def __init__(self, discussions: Discussions) -> None:
        self.discussions = discussions

    async def list(self) -> builtins.list[Json]:
        return self.discussions.list()

    async def start(self, repo: Path) -> OwnedDiscussion:
        return OwnedDiscussion(await self.discussions.start(repo))

    async def resume(self, discussion_id: str) -> OwnedDiscussion:
        return OwnedDiscussion(await self.discussions.resume(discussion_id))


# -- a console attached to another process's owner -------------------------------------


class OwnerLine(Protocol):
    """How an attached console reaches its owner (`AttachedSupervisor`)."""

    owner_gone: str | None
    owner_stalled: str | None

    def _client(self) -> AsyncControlClient: ...


class AttachedDiscussions:
    """The owner's discussions over the control socket: one record a call."""

    def __init__(self, owner: OwnerLine) -> None:
        self.owner = owner

    def client(self) -> AsyncControlClient:
        """The owner's connection, refused at once while it is stalled or gone
        (the console says which; nothing waits 30 s on a stopped owner)."""
        if self.owner.owner_gone:
            raise OwnerGone(self.owner.owner_gone)
        if self.owner.owner_stalled:
            raise OwnerStalled(self.owner.owner_stalled)
        return self.owner._client()

    async def request(self, call: Call[P, R], params: P) -> R:
        return await self.client().request(call, params)

    async def list(self) -> builtins.list[Json]:
        return await self.request(Calls.discussions_list, p.NoParams())

    async def start(self, repo: Path) -> AttachedDiscussion:
        params = p.DiscussionStartParams(repo=str(Path(repo).resolve()))
        return AttachedDiscussion(self, await self.request(Calls.discussion_start, params))

    async def resume(self, discussion_id: str) -> AttachedDiscussion:
        params = p.DiscussionParams(discussion_id=discussion_id)
        return AttachedDiscussion(self, await self.request(Calls.discussion_resume, params))


class AttachedDiscussion:
    """One discussion the owner holds, as its summary and stream tell it."""

    def __init__(self, owner: AttachedDiscussions, summary: Json) -> None:
        self.owner = owner
        self.id = str(summary["discussion_id"])
        self.model: str | None = summary.get("model")
        self.prepared_task: PreparedTask | None = None  # the stream's `task_prepared` says it

    def _which(self) -> p.DiscussionParams:
        return p.DiscussionParams(discussion_id=self.id)

    async def events(self, from_seq: int = 0) -> AsyncIterator[DiscussEvent]:
        """The owner's events from `from_seq`, then live; a stream that fell
        behind is asked again from the event after the last one read."""
        from ..discuss import PreparedTask
        from ..discuss.discussion_events import DiscussTaskPreparedEvent, DiscussUserMessageEvent

        while True:
            client = self.owner.client()
            sub = await client.subscribe_discussion(self.id, from_seq)
            try:
                async for event in sub:
                    if isinstance(event, DiscussTaskPreparedEvent):
                        task = event.data
                        self.prepared_task = PreparedTask(task.intent, list(task.constraints))
                    elif isinstance(event, DiscussUserMessageEvent) and not event.data.replayed:
                        self.prepared_task = None  # a new turn drops the task (as the owner does)
                    yield event
                if not client.connected:  # said, not left as a transcript that stopped
                    raise OwnerGone(f"{GONE}: this discussion is no longer followed")
                return  # the owner closed the discussion
            except SubscriptionDropped:
                from_seq = sub.last_seq + 1
            finally:
                sub.close()

    async def send(self, text: str) -> int:
        params = p.DiscussionSendParams(discussion_id=self.id, text=text)
        return (await self.owner.request(Calls.discussion_send, params))["seq"]

    async def cancel(self) -> bool:
        return (await self.owner.request(Calls.discussion_cancel, self._which()))["cancelled"]

    async def choose_model(self, name: str | None) -> str | None:
        params = p.DiscussionModelParams(discussion_id=self.id, model=name)
        self.model = (await self.owner.request(Calls.discussion_model, params))["model"]
        return self.model

    async def promote(self) -> PreparedTask:
        from ..discuss import PreparedTask

        task = await self.owner.request(Calls.discussion_promote, self._which())
        self.prepared_task = PreparedTask(str(task["intent"]), list(task.get("constraints", [])))
        return self.prepared_task

    async def link_session(self, session_id: str) -> None:
        params = p.DiscussionLinkParams(discussion_id=self.id, session_id=session_id)
        await self.owner.request(Calls.discussion_link, params)
        self.prepared_task = None


def _owned(d: OwnedDiscussions) -> DiscussionsSurface:
    return d  # mypy proves both answer the console's surface


def _attached(d: AttachedDiscussions) -> DiscussionsSurface:
    return d
