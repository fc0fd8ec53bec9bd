"""corral's supervisor. Importing it first tells pydantic that corral's
models use no pydantic plugins: pydantic looks for them, at the first model
it builds, by scanning every installed distribution's entry points, which
loads importlib.metadata with zipfile, email and csv (about 1 MB resident in
every corral process, the idle console's included). The plugin loader is
replaced by one that finds none, unless pydantic loaded it already (a host
program that wants its plugins keeps them)."""

from __future__ import annotations

import sys
import types


def _no_pydantic_plugins() -> None:
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    loader = types.ModuleType(name, "corral's models use no pydantic plugins")
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[name] = loader


_no_pydantic_plugins()
