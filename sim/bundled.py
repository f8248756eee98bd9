"""Where the bundled profiles and scenarios live, in a checkout and in an installed wheel.

The repository keeps ``profiles/`` and ``scenarios/`` at its root; installed, they are the
package data ``specsched.profiles`` and ``specsched.scenarios`` (pyproject's package-dir
mapping), found through :mod:`importlib.resources` so a non-editable install resolves them
from any working directory.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from importlib import resources
from pathlib import Path

from specsched.sim.errors import ConfigError
from specsched.sim.input_files import is_input_file


def _package_dir(package: str) -> Path:
    return Path(str(resources.files(package)))


def profiles_dir() -> Path:
    """The folder of bundled profile YAML files."""
    return _package_dir("specsched.profiles")


def scenarios_dir() -> Path:
    """The folder of bundled scenario YAML files (``h200/`` holds the scaled H200 cells)."""
    return _package_dir("specsched.scenarios")


def scenario_data_path(path: str | Path, scenario_path: str | Path | None) -> Path:
    """A data file a scenario names (a trace, an agentic trace, a length histogram): as given
    when it is a file; else, a relative path, beside the scenario file, then among the shipped
    examples by name (``scenarios/``); as given when none of them is a file. A leading ``~``
    is the user's home."""
    p = Path(path).expanduser()   # ~/traces/x.csv: the user's home, as the shell reads it (YAML keeps the ~)
    if p.is_absolute() or is_input_file(p):   # a pipe (<(cat trace.csv)) too
        return p
    if scenario_path:
        q = Path(scenario_path).parent / p
        if q.is_file():
            return q
    if (scenarios_dir() / p).is_file():
        return scenarios_dir() / p
    return p


def resolve_scenario_path(name_or_path: str | Path) -> Path:
    """A scenario given as a path, or as a bundled name (``burst256-ht``, ``h200/batch8``,
    with or without ``.yaml``).

    Returns the path as given when a ``.yaml``/``.yml`` file does not exist, so the loader
    reports the missing file under the name the user typed.

    Raises:
        ConfigError: a bare name (no ``.yaml`` suffix) that is neither a file nor a bundled
            scenario; the message names ``NAME.yaml`` (or ``.yml``) where that file is there,
            else lists the bundled names, closest first.
    """
    p = Path(name_or_path)
    if p.exists():
        return p
    root = scenarios_dir()
    for c in (root / p, root / f"{name_or_path}.yaml", *in_bundled_folder(p, "scenarios", root)):
        if c.is_file():
            return c
    if p.suffix not in (".yaml", ".yml"):
        local = next((q for q in (p.with_name(p.name + ".yaml"), p.with_name(p.name + ".yml")) if q.is_file()), None)
        if local is not None:   # as a profile's bare name beside its file (sim/profile.py)
            raise ConfigError(str(name_or_path), "<scenario>", str(name_or_path),
                              f"no bundled scenario of that name, but {local} is there: give it as a path, {local}")
        names = closest_first(str(name_or_path), bundled_scenario_names())
        raise ConfigError(str(name_or_path), "<scenario>", str(name_or_path),
                          f"neither a file nor a bundled scenario; bundled (closest first): {', '.join(names)}")
    return p


def in_bundled_folder(p: Path, folder: str, root: Path) -> list[Path]:
    """``p`` as a path into the repository's ``folder`` (``scenarios/h200/batch8.yaml``,
    ``profiles/h200-1b.yaml``, as the README's commands name the shipped files) read in the
    bundled one, ``root``: those commands run from any folder, as an installed wheel's user
    runs them. Empty for any other path."""
    parts = p.parts
    return [root.joinpath(*parts[1:])] if not p.is_absolute() and len(parts) > 1 and parts[0] == folder else []


def closest_first(name: str, names: list[str]) -> list[str]:
    """``names`` ordered by likeness to ``name`` (difflib's ratio, a folder-less match counts
    too: ``batch8`` is close to ``h200/batch8``), ties in the given order."""
    stem = name.removesuffix(".yaml").removesuffix(".yml")

    def likeness(n: str) -> float:
        return max(SequenceMatcher(None, stem, n).ratio(), SequenceMatcher(None, stem, n.rsplit("/", 1)[-1]).ratio())
    return sorted(names, key=likeness, reverse=True)


def bundled_scenario_names() -> list[str]:
    """Names of the bundled scenarios, relative to the scenarios folder, without .yaml."""
    root = scenarios_dir()
    return sorted(str(q.relative_to(root).with_suffix("")) for q in root.rglob("*.yaml"))
