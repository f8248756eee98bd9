"""Where the bundled profiles and scenarios live, in a checkout and in an installed wheel.

The repository keeps ``profiles/`` and ``scenarios/`` at its root; installed, they are the
package data ``specsched.profiles`` and ``specsched.scenarios`` (pyproject's package-dir
mapping), found through :mod:`importlib.resources` so a non-editable install resolves them
from any working directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _package_dir(package: str) -> Path:
    return Path(str(resources.files(package)))


def profiles_dir() -> Path:
    """The folder of bundled profile YAML files."""
    return _package_dir("specsched.profiles")


def scenarios_dir() -> Path:
    """The folder of bundled scenario YAML files (``h200/`` holds the scaled H200 cells)."""
    return _package_dir("specsched.scenarios")


def resolve_scenario_path(name_or_path: str | Path) -> Path:
    """A scenario given as a path, or as a bundled name (``burst256-ht``, ``h200/batch8``,
    with or without ``.yaml``). Returns the path as given when nothing matches, so the
    loader reports the missing file under the name the user typed."""
    p = Path(name_or_path)
    if p.exists():
        return p
    root = scenarios_dir()
    for c in (root / p, root / f"{name_or_path}.yaml"):
        if c.is_file():
            return c
    return p


def bundled_scenario_names() -> list[str]:
    """Names of the bundled scenarios, relative to the scenarios folder, without .yaml."""
    root = scenarios_dir()
    return sorted(str(q.relative_to(root).with_suffix("")) for q in root.rglob("*.yaml"))
