"""Writing a run's results directory: the one writer (format in docs/architecture.md).

A results directory holds the four tables (``requests``, ``chunks``, ``steps``,
``timeseries``; parquet or CSV) and the files of :data:`OUTPUTS` (``summary.json``,
``scenario.yaml``, ...). Simulated, measured (runtime) and synthetic runs all go through
:func:`write_results`; :func:`specsched.analysis.io.read_results` reads them back into the
same :class:`~specsched.sim.records.RunResult`.

Writes survive ``kill -9`` at any point and concurrent writers of one directory are
serialised (:func:`specsched.sim.atomic.replace_dir`): the old or the new complete directory
is there, never a mix, never nothing.

Adding an output format (e.g. a ``bench_serving.jsonl`` line): write a function
``write(result, directory)`` that creates its file(s) in ``directory`` and add an
:class:`Output` for it to :data:`OUTPUTS`; every run of every command then writes it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from specsched.sim.atomic import atomic_write, atomic_write_text, replace_dir  # noqa: F401  (re-exported)
from specsched.sim.records import RunResult

TABLES = ("requests", "chunks", "steps", "timeseries")
TABLE_FORMATS = ("parquet", "csv")


def clean_json(v: Any) -> Any:
    """``v`` as plain JSON values: numpy scalars to Python, NaN/inf to None (JSON has no
    NaN), dicts and lists recursively, models through ``model_dump``."""
    if isinstance(v, Mapping):
        return {str(k): clean_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean_json(x) for x in v]
    if hasattr(v, "model_dump"):
        return clean_json(v.model_dump(mode="json"))
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return clean_json(v.item())
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def scenario_dict(scenario: Any) -> dict[str, Any] | None:
    """The resolved scenario as plain data (a ``Scenario`` model or a mapping); its
    ``path`` relative to the working directory when inside it (no machine paths in
    results). None for no scenario."""
    if scenario is None:
        return None
    if isinstance(scenario, Mapping):
        sc = dict(scenario)
    elif hasattr(scenario, "model_dump"):
        sc = scenario.model_dump(mode="json")
    else:
        raise TypeError(f"cannot serialise a scenario of type {type(scenario).__name__}")
    if sc.get("path"):
        p = Path(sc["path"]).resolve()
        if p.is_relative_to(Path.cwd()):
            sc["path"] = str(p.relative_to(Path.cwd()))
    return sc


def _write_summary(result: RunResult, d: Path) -> None:
    summary = clean_json(dict(result.summary))
    (d / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def _write_scenario(result: RunResult, d: Path) -> None:
    sc = scenario_dict(result.scenario)
    if sc is not None:
        (d / "scenario.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))


@dataclass(frozen=True)
class Output:
    """One output format of a results directory: ``write(result, directory)`` creates
    ``name`` (and only files of its own) in the directory being built."""

    name: str
    write: Callable[[RunResult, Path], None]


def _write_bench_serving(result: RunResult, d: Path) -> None:
    from specsched.sim.bench_serving import bench_line  # the run as a bench_serving line

    (d / "bench_serving.jsonl").write_text(bench_line(result) + "\n")


OUTPUTS: tuple[Output, ...] = (
    Output("summary.json", _write_summary),
    Output("scenario.yaml", _write_scenario),
    Output("bench_serving.jsonl", _write_bench_serving),
)
"""What every results directory gets besides the tables. Add a format here."""


def write_tables(result: RunResult, d: Path, fmt: str = "parquet") -> None:
    """Write the four tables of ``result`` into directory ``d`` as ``<name>.<fmt>``."""
    for name in TABLES:
        df = getattr(result, name)
        if fmt == "parquet":
            df.to_parquet(d / f"{name}.parquet", index=False)
        else:
            df.to_csv(d / f"{name}.csv", index=False)


def write_results(result: RunResult, out_dir: str | Path, fmt: str = "parquet",
                  outputs: Sequence[Output] = OUTPUTS) -> Path:
    """Write ``result`` as the results directory ``out_dir``, replacing it as a whole.

    Args:
        result: the run (simulated, measured or synthetic).
        out_dir: the directory (parents created).
        fmt: ``parquet`` or ``csv`` for the tables.
        outputs: the other files to write (default :data:`OUTPUTS`).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ValueError: unknown ``fmt``.
        OSError: the location is not writable (nothing is left behind, an existing
            directory is kept).
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"format must be parquet or csv, got {fmt!r}")

    def fill(d: Path) -> None:
        write_tables(result, d, fmt)
        for o in outputs:
            o.write(result, d)

    return replace_dir(out_dir, fill)
