"""The engines the console and `corral run` use.

Until agent panes land, every request runs the built-in demo agent (scripted,
labelled `demo` on the board). Agent CLIs and the built-in model loop plug in
here.
"""

from __future__ import annotations

from ..demo import DemoEngines


def default_engines() -> DemoEngines:
    return DemoEngines()
