"""Keys pressed while the console opens its store.

Until the supervisor has opened, the board shows the stored rows and only
keys that look act. A key that would act on a session (`n`, `c`, `enter` …)
is held, and so is every key typed after it, then they are played in order
once the store is open: `n` followed at once by a task's words opens the form
and types the words into it; a `g` typed as part of those words never groups
the board. Nothing is acted on out of order, and nothing typed is lost."""

from __future__ import annotations

from textual import events

# keys that only look: they act at once while the store opens (see the board)
LOOK_KEYS = frozenset(
    {
        "f",
        "g",
        "slash",
        "p",
        "tab",
        "question_mark",
        "q",
        "ctrl+q",
        "ctrl+c",
        "ctrl+p",
        "up",
        "down",
        "pageup",
        "pagedown",
        "home",
        "end",
        "escape",
    }
)
MAX_HELD = 4096  # a paste into a board that is still opening is kept, within reason


class EarlyKeys:
    """The keys held while the store opens, in the order they were pressed."""

    def __init__(self) -> None:
        self.held: list[events.Key] = []

    def hold(self, event: events.Key, *, on_board: bool) -> bool:
        """Whether `event` waits: a key that acts, on the board, and every key
        after one that waits (wherever the focus is then)."""
        if self.held:
            if len(self.held) < MAX_HELD:
                self.held.append(events.Key(event.key, event.character))
            return True
        if on_board and event.key not in LOOK_KEYS:
            self.held.append(events.Key(event.key, event.character))
            return True
        return False

    def take(self) -> list[events.Key]:
        held, self.held = self.held, []
        return held
