"""The version of a project that takes it from git tags, in a checkout that has none.

setuptools-scm (and hatch-vcs, flit-scm, which use it) read the version from
the nearest git tag. A checkout without tags (an sdist turned into a
repository, a shallow clone) gets `0.1.dev1+g…`, and pip then resolves the
test dependencies against that: a plugin that needs the project at 2.x
makes pip backtrack to releases from years ago, and the suite fails for
reasons no change can fix. The drafted setup gives such a project the
version it declares elsewhere, through setuptools-scm's own
`SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>` (for this project only, never a
dependency built on the way): the sdist's `PKG-INFO`, else the version file
setuptools-scm or hatch-vcs writes (`version_file`, `write_to`,
`version-file`), and gate 1 says which.

Everything read here is the repository's data: a version is used only when
it is a plain PEP 440 version, and git is never run (the tags are read from
its refs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_READ_BYTES = 256 * 1024
_SCM_BUILDERS = re.compile(r"^\s*(setuptools[-_]scm|hatch[-_]vcs|flit[-_]scm)\b", re.I)
_SETUP_SCM = re.compile(r"use_scm_version|setuptools[-_]scm", re.I)
_VERSION = re.compile(r"\d+(\.\d+){0,5}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
_PKG_INFO_VERSION = re.compile(r"^Version:\s*(\S+)\s*$", re.M)
_FILE_VERSION = re.compile(
    r"""^(?:__version__|version|VERSION)\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
    re.M,
)


@dataclass(frozen=True)
class PretendVersion:
    """The version a tagless checkout is given, and where it was read."""

    variable: str  # SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>
    version: str
    source: str  # "PKG-INFO", "src/pkg/_version.py"

    @property
    def assignment(self) -> str:
        return f"{self.variable}={self.version}"


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def versioned_by_tags(root: Path, pyproject: dict[str, Any]) -> bool:
    """Whether the project's version comes from git tags (setuptools-scm, hatch-vcs)."""
    build = pyproject.get("build-system")
    requires = build.get("requires") if isinstance(build, dict) else None
    if isinstance(requires, list) and any(
        isinstance(r, str) and _SCM_BUILDERS.match(r) for r in requires
    ):
        return True
    tool = pyproject.get("tool")
    if isinstance(tool, dict) and "setuptools_scm" in tool:
        return True
    for name in ("setup.py", "setup.cfg"):
        text = _read(root / name)
        if text is not None and _SETUP_SCM.search(text):
            return True
    return False


def _git_dir(root: Path) -> Path | None:
    """The repository's common git directory (a worktree's `.git` is a file
    naming its own directory, whose `commondir` names the shared one)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    text = _read(dot)
    if text is None or not text.startswith("gitdir:"):
        return None
    own = Path(text.removeprefix("gitdir:").strip())
    own = own if own.is_absolute() else (root / own)
    common = _read(own / "commondir")
    if common is None:
        return own
    shared = Path(common.strip())
    return shared if shared.is_absolute() else own / shared


def has_tags(root: Path) -> bool:
    """Whether the repository holds any tag (loose or packed); unreadable: assume so."""
    git = _git_dir(root)
    if git is None:
        return True  # not a git checkout: setuptools-scm reads PKG-INFO itself
    tags = git / "refs" / "tags"
    try:
        if any(tags.iterdir()):
            return True
    except OSError:
        pass
    packed = _read(git / "packed-refs") or ""
    return " refs/tags/" in packed


def _plain(version: str) -> str | None:
    version = version.strip().removeprefix("v").split("+", 1)[0]  # no local part
    return version if _VERSION.fullmatch(version) and len(version) <= 40 else None


def _version_files(pyproject: dict[str, Any]) -> list[str]:
    tool = pyproject.get("tool")
    if not isinstance(tool, dict):
        return []
    files: list[str] = []
    scm = tool.get("setuptools_scm")
    if isinstance(scm, dict):
        files += [v for k in ("version_file", "write_to") if isinstance(v := scm.get(k), str)]
    hatch = tool.get("hatch")
    hooks = hatch.get("build", {}).get("hooks", {}) if isinstance(hatch, dict) else {}
    vcs = hooks.get("vcs") if isinstance(hooks, dict) else None
    if isinstance(vcs, dict) and isinstance(vcs.get("version-file"), str):
        files.append(vcs["version-file"])
    return [f for f in files if not f.startswith("/") and ".." not in Path(f).parts]


def _dist_name(root: Path, pyproject: dict[str, Any]) -> str | None:
    project = pyproject.get("project")
    name = project.get("name") if isinstance(project, dict) else None
    if not isinstance(name, str):
        cfg = _read(root / "setup.cfg") or ""
        m = re.search(r"^name\s*=\s*([A-Za-z0-9._-]+)\s*$", cfg, re.M)
        pkg = re.search(r"^Name:\s*([A-Za-z0-9._-]+)\s*$", _read(root / "PKG-INFO") or "", re.M)
        name = m.group(1) if m else pkg.group(1) if pkg else None
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name):
        return None
    return re.sub(r"[-_.]+", "_", name).upper()


def pretend_version(root: Path, pyproject: dict[str, Any]) -> PretendVersion | None:
    """The version to give a project versioned by git tags in a checkout
    without any, or None (not versioned by tags, tags present, no name or
    no plain version to be found)."""
    if not versioned_by_tags(root, pyproject) or has_tags(root):
        return None
    name = _dist_name(root, pyproject)
    if name is None:
        return None
    variable = f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{name}"
    m = _PKG_INFO_VERSION.search(_read(root / "PKG-INFO") or "")
    version = _plain(m.group(1)) if m else None
    if version is not None:
        return PretendVersion(variable, version, "PKG-INFO")
    for rel in _version_files(pyproject):
        found = _FILE_VERSION.search(_read(root / rel) or "")
        version = _plain(found.group(1)) if found else None
        if version is not None:
            return PretendVersion(variable, version, rel)
    return None
