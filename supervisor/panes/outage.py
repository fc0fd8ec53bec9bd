"""A paste or keys sent to a pane on a host that stopped answering midway.

The host may have taken the text (the paste command ran, the reply was
lost) or not. Sending again blindly could paste it twice; giving up would
fail a run that only lost its network. So the sender waits for the host to
answer again, then looks at the pane and decides from what it shows:

- the text sits on the input line: it was pasted, Enter was not — press it;
- the text shows more often than before and not on the input line: it was
  pasted and sent — done;
- the screen is exactly as before: nothing arrived — send it again;
- anything else: it cannot tell — say so (`PasteUncertain`), never paste twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from enum import Enum

from .base import HostDown, PaneError, PaneGone, PaneHandle, Screen
from .sweep import PasteCheck

HOST_WAIT = 300.0  # seconds a paste waits for its pane's host to answer again


class PasteUncertain(PaneError):
    """The host stopped answering during a paste, and the pane does not show
    whether the text landed: it was not sent again."""


class After(Enum):
    LANDED = "landed"  # pasted and sent
    PRESS_ENTER = "press-enter"  # pasted, Enter not pressed
    RESEND = "resend"  # nothing arrived
    UNKNOWN = "unknown"


def judge(text: str, before: Screen, after: Screen) -> After:
    """What became of a paste of `text` into the pane that showed `before`,
    read from `after` (captured once its host answered again)."""
    check = PasteCheck(text, before)
    if list(after.lines) == list(before.lines):
        return After.RESEND
    if check.at_cursor(after) and not check.at_cursor(before):
        return After.PRESS_ENTER
    if check.landed(after):
        return After.LANDED
    return After.UNKNOWN


async def host_answers(
    capture: Callable[[list[PaneHandle]], dict[str, Screen]],
    handle: PaneHandle,
    reason: str,
    *,
    wait: float = HOST_WAIT,
    poll: float = 1.0,
) -> Screen:
    """The pane's screen once its host answers again (its connection
    reconnects with backoff meanwhile), waiting up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        if time.monotonic() >= deadline:
            raise PaneError(f"its host did not answer for {wait:.0f} s ({reason})")
        await asyncio.sleep(poll)
        try:
            # twice: the first may be a screen the sweep kept from before
            await asyncio.to_thread(capture, [handle])
            screens = await asyncio.to_thread(capture, [handle])
        except HostDown as exc:
            reason = str(exc)
            continue
        screen = screens.get(handle.owner)
        if screen is None:
            raise PaneGone(f"pane {handle.pane_id} is gone or no longer belongs to {handle.owner}")
        return screen
