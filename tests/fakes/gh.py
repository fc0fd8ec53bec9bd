"""A stand-in for the GitHub CLI (`gh`), which cannot reach GitHub here: an
executable `gh` that records its argv and working directory as JSON and
prints a pull request URL, as `gh pr create` does. Only for `corral pr`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

URL = "https://github.com/example/shop/pull/7"


def install_fake_gh(bin_dir: Path, record: Path) -> Path:
    """Write `bin_dir/gh`; each run overwrites `record` with what it was given."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(record)!r}, 'w') as f:\n"
        "    json.dump({'argv': sys.argv[1:], 'cwd': os.getcwd()}, f)\n"
        f"print({URL!r})\n"
    )
    gh.chmod(0o755)
    return gh


def recorded(record: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(record.read_text())
    return data


def path_without_gh() -> str:
    """PATH with every directory holding a real `gh` left out."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not os.access(Path(d) / "gh", os.X_OK))
