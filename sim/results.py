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

import errno
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from specsched.sim.atomic import (  # noqa: F401  (re-exported)
    atomic_write,
    atomic_write_text,
    file_above,
    probe_writable,
    replace_dir,
)
from specsched.sim.records import RunResult
from specsched.sim.tables import Columns

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


def _relocated(sc: dict[str, Any], d: Path) -> dict[str, Any]:
    """``sc`` with each file it names by a relative path (the profile, a workload's ``path``:
    a trace, an agentic trace, a length histogram; a server policy's ``FILE.py:Class``) made
    relative to the results folder ``d``, where the saved scenario.yaml sits: a reader resolves
    them beside the scenario file it loads (sim/profile.py, sim/trace.py), so the saved copy
    named files beside the original scenario and could not be run again from its results
    folder ("trace file does not exist"). Each file is found by the loader's own rule
    (:func:`sim.profile.resolve_profile_path`, :func:`sim.bundled.scenario_data_path`,
    :func:`sim.policy_loader.policy_file`) from the original scenario; one shipped with the
    package (a bundled profile, an example trace) or not found keeps its name. Relative, not
    absolute: no machine paths in results."""
    import os

    from specsched.sim.bundled import profiles_dir, scenario_data_path, scenarios_dir
    from specsched.sim.policy_loader import policy_file
    from specsched.sim.profile import resolve_profile_path

    origin = sc.get("path") or None
    shipped = (profiles_dir().resolve(), scenarios_dir().resolve())

    def moved(v: Any, find: Callable[[str], Path | None]) -> Any:
        if not isinstance(v, str) or not v or Path(v).expanduser().is_absolute():
            return v
        p = find(v)
        if p is None or not p.is_file():
            return v
        p = p.resolve()
        return v if any(p.is_relative_to(s) for s in shipped) else os.path.relpath(p, d.resolve())

    def data_paths(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: moved(v, lambda x: scenario_data_path(x, origin)) if k == "path" else data_paths(v)
                    for k, v in node.items()}
        if isinstance(node, list):
            return [data_paths(x) for x in node]
        return node

    def files_of(node: dict[str, Any]) -> dict[str, Any]:
        node = dict(node)
        if "profile" in node:
            node["profile"] = moved(node["profile"], lambda x: resolve_profile_path(x, origin))
        if isinstance(node.get("workload"), dict):
            node["workload"] = data_paths(node["workload"])
        return node

    out = files_of(sc)
    if isinstance(sc.get("arms"), dict):   # an arm's own trace or profile, beside the scenario too
        out["arms"] = {a: files_of(o) if isinstance(o, dict) else o for a, o in sc["arms"].items()}
    if isinstance(out.get("server"), dict):
        srv = out["server"] = dict(out["server"])
        base = Path(origin).parent if origin else None
        for key in ("admission_delay", "schedule_policy"):
            spec = srv.get(key)
            if isinstance(spec, str) and spec.rpartition(":")[0].endswith(".py"):
                target, _, name = spec.rpartition(":")
                srv[key] = f"{moved(target, lambda x: policy_file(x, base))}:{name}"
    return out


def _write_scenario(result: RunResult, d: Path) -> None:
    sc = scenario_dict(result.scenario)
    if sc is not None:
        (d / "scenario.yaml").write_text(yaml.safe_dump(_relocated(sc, d), sort_keys=False))


@dataclass(frozen=True)
class Output:
    """One output format of a results directory: ``write(result, directory)`` creates
    ``name`` (and only files of its own) in the directory being built."""

    name: str
    write: Callable[[RunResult, Path], None]


def _write_bench_serving(result: RunResult, d: Path) -> None:
    from specsched.sim.bench_serving import bench_line  # the run as a bench_serving line

    (d / "bench_serving.jsonl").write_text(bench_line(result) + "\n")


def _write_steady_state(result: RunResult, d: Path) -> None:
    # steady_state_serving --steady-state-output-file: one SteadyStateMetrics line (SGLang
    # 0.5.23 benchmark/steady_state_serving.py _append_metrics), only for a run with a ratio
    from specsched.sim.steady_state import steady_metrics_of_summary

    m = steady_metrics_of_summary(dict(result.summary))
    if m is not None:
        (d / "steady_state.jsonl").write_text(json.dumps(clean_json(m)) + "\n")


OUTPUTS: tuple[Output, ...] = (
    Output("summary.json", _write_summary),
    Output("scenario.yaml", _write_scenario),
    Output("bench_serving.jsonl", _write_bench_serving),
    Output("steady_state.jsonl", _write_steady_state),
)
"""What every results directory gets besides the tables. Add a format here."""


def write_tables(result: RunResult, d: Path, fmt: str = "parquet") -> None:
    """Write the four tables of ``result`` into directory ``d`` as ``<name>.<fmt>``.

    A table still held as numpy columns (a run in memory, :class:`~sim.tables.Columns`) goes
    to parquet through pyarrow directly, without pandas: the file reads back
    (``pandas.read_parquet``) as the DataFrame's own ``to_parquet`` file does (same columns,
    types and values; tests/test_results_io.py); it lacks only pandas' schema note.
    """
    for name in TABLES:
        t = result.table(name) if hasattr(result, "table") else getattr(result, name)
        arrow = _arrow_table(t) if fmt == "parquet" and type(t) is Columns else None
        if arrow is not None:
            import pyarrow.parquet as pq

            pq.write_table(arrow, d / f"{name}.parquet")
        elif fmt == "parquet":
            t = t if hasattr(t, "to_parquet") else t.frame()
            t.to_parquet(d / f"{name}.parquet", index=False)
        else:
            t = t if hasattr(t, "to_csv") else t.frame()
            t.to_csv(d / f"{name}.csv", index=False)


def _arrow_table(cols: Columns) -> Any:
    """The pyarrow Table ``pa.Table.from_pandas`` makes of ``cols.frame()`` (float NaN ->
    null, int64 as is, object columns of str -> large_string (pandas 3's str), an empty object column -> null
    type), or None for a column kind not handled here (the caller goes through pandas).

    Built from buffers: pyarrow's own array constructors import pandas to inspect their
    input, which is what writing without pandas saves.
    """
    import pyarrow as pa

    arrays = []
    for v in cols.data.values():
        n = len(v)
        kind = v.dtype.kind
        if kind == "f":
            v = np.ascontiguousarray(v, dtype=np.float64)
            nan = np.isnan(v)
            nulls = int(nan.sum())
            valid = pa.py_buffer(np.packbits(~nan, bitorder="little")) if nulls else None
            arrays.append(pa.Array.from_buffers(pa.float64(), n, [valid, pa.py_buffer(v)], null_count=nulls))
        elif kind == "i" and v.dtype.itemsize == 8:
            v = np.ascontiguousarray(v, dtype=np.int64)
            arrays.append(pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(v)], null_count=0))
        elif kind == "O" and n == 0:
            arrays.append(pa.nulls(0))
        elif kind == "O" and all(type(x) is str for x in v.tolist()):
            data = [x.encode() for x in v.tolist()]
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum([len(b) for b in data], out=offsets[1:])
            arrays.append(pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))],
                                                null_count=0))
        else:
            return None
    return pa.Table.from_arrays(arrays, names=list(cols.data))


def check_results_target(out_dir: str | Path) -> Path:
    """``out_dir`` if writing a results directory there destroys nothing else: it does not
    exist, is an empty folder, or is a results directory (has ``summary.json``) that the new
    run replaces. ``.`` and ``..`` are resolved to the folder they name (and so refused
    unless empty). Call it before the run, so that a bad ``--out`` costs no work.

    Returns:
        The path to write (``out_dir``, resolved when it has no name of its own).

    Raises:
        FileExistsError: ``out_dir`` is a file or under one, or a folder with other content (a replace
            would move it away and delete it); the message says so, nothing is touched.
    """
    o = Path(out_dir)
    if o.name in ("", ".", ".."):
        o = o.resolve()
    if o.exists() and not o.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder: not replaced by a results directory; "
                                            "give a new folder", str(out_dir))
    above = file_above(o)
    if above is not None:   # --out notes.txt/run1: failed only after the run
        raise FileExistsError(errno.ENOTDIR, f"{above} is not a folder: it cannot hold a results directory; "
                                             "give a path under a folder", str(out_dir))
    if o.is_dir() and not (o / "summary.json").is_file() and any(o.iterdir()):
        raise FileExistsError(errno.ENOTEMPTY, "a folder with other content, not a results directory (no "
                                               "summary.json): not replaced; give a new or empty folder", str(out_dir))
    probe_writable(o, str(out_dir))
    return o


def write_results(result: RunResult, out_dir: str | Path, fmt: str = "parquet",
                  outputs: Sequence[Output] = OUTPUTS) -> Path:
    """Write ``result`` as the results directory ``out_dir``, replacing it as a whole
    (only a results directory is replaced: :func:`check_results_target`).

    Args:
        result: the run (simulated, measured or synthetic).
        out_dir: the directory (parents created).
        fmt: ``parquet`` or ``csv`` for the tables.
        outputs: the other files to write (default :data:`OUTPUTS`).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ValueError: unknown ``fmt``.
        FileExistsError: ``out_dir`` is a file or a folder that is not a results directory
            (nothing touched).
        OSError: the location is not writable (nothing is left behind, an existing
            directory is kept).
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"format must be parquet or csv, got {fmt!r}")
    out_dir = check_results_target(out_dir)

    def fill(d: Path) -> None:
        write_tables(result, d, fmt)
        for o in outputs:
            o.write(result, d)

    return replace_dir(out_dir, fill)
