"""Read and write results directories (format: docs/architecture.md, "Results directory").

A results directory holds ``summary.json`` (bench_serving keys plus ``scenario``, ``arm``,
``seed``, ``source``), ``requests.parquet``, ``chunks.parquet``, ``steps.parquet``,
``timeseries.parquet`` and ``scenario.yaml``; it is written by
:func:`specsched.sim.results.write_results` (the one writer). :func:`read_results` returns
the simulator's own :class:`~specsched.sim.records.RunResult`, so every analysis function
takes a run in memory and a run read back alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from specsched.sim.atomic import atomic_write, atomic_write_text, recover_dir  # noqa: F401  (atomic_write_text re-exported)
from specsched.sim.config import dotted_value
from specsched.sim.errors import ConfigError
from specsched.sim.records import OPTIONAL_COLUMNS, TABLE_COLUMNS, RunResult, empty_table  # noqa: F401  (empty_table re-exported)

TABLES: dict[str, tuple[str, ...]] = {
    name: tuple(c for c in cols if c not in OPTIONAL_COLUMNS.get(name, ())) for name, cols in TABLE_COLUMNS.items()
}
"""Table name -> required columns: what the writer writes (sim/records.py) less the columns
added later, so older results directories still read."""


def _check_columns(df: pd.DataFrame, name: str, where: str) -> pd.DataFrame:
    missing = [c for c in TABLES[name] if c not in df.columns]
    if missing:
        raise ConfigError(where, f"{name} columns", sorted(df.columns), f"missing {', '.join(missing)}")
    return df


def read_results(directory: str | Path) -> RunResult:
    """Read a results directory written by :func:`specsched.sim.results.write_results`.

    A write of ``directory`` that was killed half-way is completed first (or its leftovers
    removed; :func:`specsched.sim.atomic.recover_dir`).

    Args:
        directory: the results directory.

    Returns:
        A :class:`~specsched.sim.records.RunResult` (``path`` set). Tables are read from ``<name>.parquet`` or, failing that,
        ``<name>.csv`` (``specsched run --format csv``); ``chunks``/``steps``/``timeseries``
        are empty frames with the right columns when absent (a runtime run may not record
        steps). Extra columns (e.g. ``steps.part``) are kept.

    Raises:
        ConfigError: the directory or ``summary.json``/``requests.parquet`` is missing, a
            file cannot be parsed, or a table lacks a contract column.
    """
    d = Path(directory)
    if not d.is_dir():
        recover_dir(d)
    if not d.is_dir():
        raise ConfigError(str(d), "<results dir>", str(d), "not a directory")
    summary_path = d / "summary.json"
    if not summary_path.is_file():
        runs = sorted(p.name for p in d.iterdir() if (p / "summary.json").is_file())
        if runs:   # results/<scenario>/ itself: name the runs it holds
            shown = ", ".join(runs[:8]) + (f" and {len(runs) - 8} more" if len(runs) > 8 else "")
            raise ConfigError(str(d), "summary.json", "<missing>",
                              f"a folder of results directories, not one; give one or more of them: {shown}")
        raise ConfigError(str(d), "summary.json", "<missing>", "not a results directory (summary.json missing)")
    try:
        summary = json.loads(summary_path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(str(summary_path), "<file>", str(summary_path), f"not valid JSON ({e})") from None
    if not isinstance(summary, dict):
        raise ConfigError(str(summary_path), "<top level>", type(summary).__name__, "must be a JSON object")
    tables: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        p = d / f"{name}.parquet"
        csv = d / f"{name}.csv"
        if not p.is_file() and not csv.is_file():
            if name == "requests":
                raise ConfigError(str(d), "requests.parquet", "<missing>", "every results directory has one")
            tables[name] = empty_table(name)
            continue
        try:
            df = pd.read_parquet(p) if p.is_file() else pd.read_csv(csv)
        except Exception as e:  # pyarrow/pandas raise several types for a bad file
            bad = p if p.is_file() else csv
            raise ConfigError(str(bad), "<file>", str(bad), f"not a readable table ({e})") from None
        tables[name] = _check_columns(df, name, str(p if p.is_file() else csv))
    scenario: Any = None
    sp = d / "scenario.yaml"
    if sp.is_file():
        try:
            scenario = yaml.safe_load(sp.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(str(sp), "<file>", str(sp), f"not valid YAML ({e})") from None
    return RunResult(summary=summary, scenario=scenario, path=d, **tables)


def load_runs(items: Iterable[Any]) -> list[Any]:
    """Turn results directories (str/Path) into runs (:func:`read_results`); pass run
    objects through.

    Raises:
        ConfigError: as :func:`read_results`.
    """
    return [read_results(x) if isinstance(x, (str, os.PathLike)) else x for x in items]


def run_label(run: Any, default: str = "run") -> str:
    """A run's display label: ``summary['arm']``, else the scenario's arm, else ``default``."""
    summary = getattr(run, "summary", None) or {}
    arm = summary.get("arm")
    if arm:
        return str(arm)
    sc = getattr(run, "scenario", None)
    if isinstance(sc, Mapping) and sc.get("arm"):
        return str(sc["arm"])
    if sc is not None and getattr(sc, "arm", None):
        return str(sc.arm)
    return default


def scenario_value(run: Any, dotted: str, default: Any = None) -> Any:
    """Read ``dotted`` (e.g. ``server.max_total_num_tokens``) from a run's scenario, which may
    be a ``Scenario`` model or a plain dict; ``default`` when absent
    (:func:`sim.config.dotted_value`)."""
    return dotted_value(getattr(run, "scenario", None), dotted, default)


def read_parquet_table(path: str | Path, columns: Iterable[str], what: str) -> pd.DataFrame:
    """The parquet table at ``path``, which must hold ``columns``.

    Raises:
        ConfigError: the file cannot be read as parquet, or it is not ``what`` (a column
            missing; the message names them).
    """
    p = Path(path)
    try:
        df = pd.read_parquet(p)
    except Exception as e:  # pyarrow raises several types
        raise ConfigError(str(p), "<file>", str(p), f"not a readable parquet file ({e})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(str(p), "<columns>", sorted(df.columns), f"not {what} (missing {', '.join(missing)})")
    return df


def atomic_write_parquet(df: pd.DataFrame, path: str | Path, metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``df`` as parquet to ``path`` atomically (temporary file + rename).

    Args:
        df: the table (index not written).
        path: destination; parent directories are created.
        metadata: optional key/value strings stored in the parquet schema metadata.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        meta = dict(table.schema.metadata or {})
        meta.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(meta)
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp))
