"""Maps the repository's root folders onto the one import name `corral`.

The folders stay where the design card puts them (`supervisor/`, `tui/`,
`assets/`); the wheel installs them as `corral.supervisor`, `corral.tui` and
`corral.assets` and holds no other top-level name. Metadata lives in
pyproject.toml; only the package mapping needs code (sub-packages are found, not
listed by hand)."""

from setuptools import find_namespace_packages, find_packages, setup

CODE_ROOTS = ("supervisor", "tui")

packages = ["corral", "corral.assets"]
package_dir = {"corral": "corral", "corral.assets": "assets"}
for root in CODE_ROOTS:
    packages.append(f"corral.{root}")
    package_dir[f"corral.{root}"] = root
    packages.extend(f"corral.{root}.{sub}" for sub in find_packages(root))

# The demo repo and agent are data folders (some hold .py files): setuptools
# ships a folder's files only when the folder is listed as a package.
packages.extend(
    f"corral.assets.{sub}" for sub in find_namespace_packages("assets", exclude=["*__pycache__*"])
)

setup(packages=packages, package_dir=package_dir)
