"""Keys your way: the `[keys]` table of the configuration file remaps board
and session keys, action name → key (`approve = "A"`, `search = "ctrl+f"`).

Each remappable binding carries its action's name as its id (`key_actions.py`), so Textual's
keymap moves it, and the footer shows the new key; `?` rewrites its tables
with `help_text`. A table that cannot work is refused at start, in one
sentence: an unknown action, a key kept for the console itself, or two
actions on one key of the same screen (remapped or not)."""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path

from textual.binding import Binding, BindingType
from textual.keys import KEY_NAME_REPLACEMENTS, key_to_character

# keys the console keeps for itself: leaving, the palette, answering by
# number, moving and typing into a terminal
RESERVED = frozenset(
    {
        "escape", "enter", "space", "tab", "ctrl+c", "ctrl+q", "ctrl+p", "ctrl+g", "ctrl+b",
        "up", "down", "left", "right", "home", "end", "pageup", "pagedown",
        *(str(i) for i in range(1, 10)),
    }
)  # fmt: skip
_UNTYPED = frozenset(
    {"escape", "up", "down", "left", "right", "home", "end", "pageup", "pagedown", "delete",
     "insert", "backspace", *(f"f{i}" for i in range(1, 25))}
)  # fmt: skip


def typed(key: str) -> bool:
    """A key that types something (a character, space, enter, tab): what
    prose is made of. A modified key (ctrl+y) or a named one (f5) is not.
    A gate's action remapped onto such a key stays safe: at gate 1 the
    session screen types it into the input, and every gate's question goes
    ahead only on `ctrl+y` (`confirm.py`)."""
    return "+" not in key and key not in _UNTYPED


def action_id(action: str) -> str:
    """A binding's action as the operator reads it: `app.help` → `help`,
    `answer(1)` → `answer` (a remappable key's name is its record's,
    `key_actions.py`)."""
    return action.removeprefix("app.").split("(", 1)[0]


def key_name(key: str) -> str:
    """A key as Textual names it: `?` → `question_mark`, `/` → `slash`."""
    key = key.strip()
    if len(key) == 1 and not key.isalnum():
        name = unicodedata.name(key, key).lower().replace("-", "_").replace(" ", "_")
        return KEY_NAME_REPLACEMENTS.get(name, name)
    return key if len(key) == 1 else key.lower()


def shown(key: str) -> str:
    """A key as a person reads it: `question_mark` → `?`."""
    char = key_to_character(key) if "+" not in key else None
    if char is None and key in _UNICODE_NAME_OF:
        with suppress(KeyError):
            char = unicodedata.lookup(_UNICODE_NAME_OF[key].replace("_", " ").upper())
    return char if char and char.isprintable() and char != " " else key


_UNICODE_NAME_OF = {short: name for name, short in KEY_NAME_REPLACEMENTS.items()}


class KeysError(Exception):
    """A `[keys]` table that cannot work; the message is one sentence."""


def read_keys(path: Path) -> dict[str, str]:
    """The `[keys]` table of the configuration file (empty when none)."""
    if not path.exists():
        return {}
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("keys", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return {}  # the supervisor's own reading says what is wrong with the file
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise KeysError(f'{path}: [keys] maps an action to a key as text, e.g. approve = "A"')
    return {str(k): key_name(v) for k, v in table.items()}


def check(
    keys: dict[str, str], screens: Mapping[str, Sequence[BindingType]], where: Path
) -> dict[str, str]:
    """`keys` when every screen still has one action per key; else KeysError."""
    known: dict[str, dict[str, str]] = {}  # screen -> action id -> its key
    for screen, bindings in screens.items():
        known[screen] = {
            b.id: b.key.split(",")[0]
            for b in bindings
            if isinstance(b, Binding) and b.id is not None
        }
    names = sorted({name for actions in known.values() for name in actions})
    for name, key in keys.items():
        if name not in names:
            raise KeysError(
                f"{where}: [keys] names no action '{name}'; the actions are {', '.join(names)}"
            )
        if key in RESERVED:
            raise KeysError(
                f"{where}: [keys] {name} = '{shown(key)}': that key is kept for the console "
                "itself; choose another"
            )
    for screen, actions in known.items():
        on: dict[str, str] = {}
        for name, default in actions.items():
            key = keys.get(name, default)
            if key in on and on[key] != name:
                raise KeysError(
                    f"{where}: [keys] puts '{on[key]}' and '{name}' both on '{shown(key)}' "
                    f"on the {screen}; give each its own key"
                )
            on[key] = name
        for b in screens[screen]:  # keys of the screen nothing remaps (leave, answer)
            if isinstance(b, Binding) and b.id is None:
                for key in b.key.split(","):
                    taken = next((n for n, k in keys.items() if k == key and n in actions), None)
                    if taken is not None:
                        raise KeysError(
                            f"{where}: [keys] {taken} = '{shown(key)}': that key is "
                            f"'{action_id(b.action)}' on the {screen}; choose another"
                        )
    return keys


def help_text(text: str, keys: dict[str, str], screens: Mapping[str, Sequence[BindingType]]) -> str:
    """The help's tables with remapped keys: in each screen's section, a key
    cell's default key is replaced by the one `[keys]` gave its action."""
    if not keys:
        return text
    sections = re.split(r"(?m)^(## .*)$", text)
    out = [sections[0]]
    for heading, body in zip(sections[1::2], sections[2::2], strict=False):
        screen = heading[3:].strip().lower()
        moved = {
            shown(b.key.split(",")[0]): shown(keys[b.id])
            for b in screens.get(screen, ())
            if isinstance(b, Binding) and b.id in keys
        }

        def swap(cell: re.Match[str], moved: dict[str, str] = moved) -> str:
            return re.sub(r"`([^`]+)`", lambda k: f"`{moved.get(k[1], k[1])}`", cell[0])

        lines = [re.sub(r"^\| [^|]+\|", swap, line) for line in body.split("\n")]
        out += [heading, "\n".join(lines)]
    return "".join(out)
