"""`Hosts`: the configured hosts (`[[hosts]]`), by name. The places, with
their connections and remote tmux servers, are built only when a host is
configured: a supervisor with none never loads the hosts' machinery."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorralError
from ..models import CoderSession
from .settings import HostSettings
from .unreachable import HostUnreachable

if TYPE_CHECKING:
    from .place import HostPlace

log = logging.getLogger("corral.hosts")


class Hosts:
    """The configured hosts, by name."""

    def __init__(self, settings: list[HostSettings], state_dir: Path) -> None:
        self.places: dict[str, HostPlace] = {}
        if settings:
            from .place import HostPlace

            self.places = {h.name: HostPlace(h, state_dir) for h in settings}

    def get(self, name: str) -> HostPlace:
        place = self.places.get(name)
        if place is None:
            known = ", ".join(sorted(self.places)) or "none"
            raise CorralError(
                f"no host named {name!r} is configured (configured: {known}); add it as "
                "[[hosts]] in the config file"
            )
        return place

    def __iter__(self) -> Iterator[HostPlace]:
        return iter(self.places.values())

    def discard(self, session: CoderSession) -> None:
        """Remove a delivered session's worktree and its refs (base, exam) from its host
        (a host that does not answer keeps them; nothing else depends on them)."""
        if not session.host or not session.remote_worktree or session.host not in self.places:
            return
        place = self.places[session.host]
        try:
            mirror = place.mirror_path(Path(session.repo))
            place.remove(mirror, session.remote_worktree)
            place.conn.run(
                ["git", "-C", mirror, "update-ref", "-d", f"refs/corral/base/{session.id}"]
            )
            place.conn.run(  # the exams verified there (`HostTree.send`)
                [
                    "sh",
                    "-c",
                    'git -C "$1" for-each-ref --format="delete %(refname)" "$2" '
                    '| git -C "$1" update-ref --stdin',
                    "sh",
                    mirror,
                    f"refs/corral/exam/{session.id}/",
                ]
            )
        except (CorralError, HostUnreachable) as exc:
            log.warning(
                "cannot remove the worktree of %s on host %s: %s", session.id, place.name, exc
            )

    def close(self) -> None:
        for place in self.places.values():
            place.close()
