"""What a sweep keeps on disk besides its tidy table: the run log and the latency samples.

- The run log ``.<out>.runs.jsonl`` (beside ``<out>``): one JSON line per finished run
  (metrics and latency samples), appended and flushed to disk the moment the run comes
  back. It is what a sweep killed at any point (even ``kill -9``) leaves of the runs it
  finished after its last save; the next (resumed) sweep reads it; a sweep that ends
  removes it after its final save.
- The samples file ``<out stem>.samples.parquet``: each run's latency samples (TTFT, TPOT,
  E2E per request, ITL per token; :func:`analysis.runner.latency_samples`) as
  ``point, seed, latency, value_ms, count`` rows, the values rounded to 1 us (0.001 ms) so
  that equal values are stored once. Percentiles across seeds are of these pooled samples
  (:func:`analysis.stats.across_seeds`). Written atomically at every save, before the table.
- The bench_serving file ``<out stem>.bench_serving.jsonl``: each run as one line of SGLang
  bench_serving's ``--output-file`` (0.5.23's keys and units, no per-request lists), as a
  bench_serving loop over rates or concurrencies appends them, so dashboards, ``specsched
  validate --measured F:LINE`` and ``calibrate --from`` read a sweep as they read real runs.
  Each line also carries ``sweep_point`` (the table's ``point``), which keeps a resumed
  sweep's lines one per run. Ordered by grid point, then seed; written atomically at every
  save, before the table; absent when the runner returns only summaries.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from specsched.analysis.io import read_parquet_table
from specsched.analysis.runner import RunOutcome
from specsched.sim.errors import ConfigError

METRIC_COLUMNS = ["scenario", "seed", "metric", "value", "point"]
SAMPLE_COLUMNS = ["point", "seed", "latency", "value_ms", "count"]
SAMPLE_DECIMALS = 3
"""Latency samples are stored in ms rounded to this many decimals (1 us)."""


def run_log_path(out: str | Path) -> Path:
    """The run log of a sweep writing ``out``: ``.<name>.runs.jsonl`` beside it."""
    o = Path(out)
    return o.with_name(f".{o.name}.runs.jsonl")


def _beside(out: str | Path, suffix: str) -> Path:
    """``<stem><suffix>`` beside the sweep file ``out`` (its ``.parquet`` left out of the stem)."""
    o = Path(out)
    stem = o.name[: -len(".parquet")] if o.name.endswith(".parquet") else o.name
    return o.with_name(f"{stem}{suffix}")


def samples_path(out: str | Path) -> Path:
    """The samples file of the sweep ``out``: ``<stem>.samples.parquet`` beside it."""
    return _beside(out, ".samples.parquet")


def bench_path(out: str | Path) -> Path:
    """The bench_serving file of the sweep ``out``: ``<stem>.bench_serving.jsonl`` beside it."""
    return _beside(out, ".bench_serving.jsonl")


def check_writable(out: Path) -> None:
    """Raise ConfigError unless files can be created beside ``out`` (checked before any
    run, so an unwritable place is refused before the work, not after it)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = out.with_name(f".{out.name}.{os.getpid()}.probe.tmp")  # removed by the next write if we die
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o666))
        os.unlink(probe)
        if out.exists() and not os.access(out, os.R_OK):
            raise PermissionError(13, "cannot read the existing file")
    except OSError as e:
        raise ConfigError("<command line>", "--out", str(out),
                          f"cannot write there ({e.strerror or e}); choose a writable location") from None


def compress_samples(samples: dict[str, np.ndarray]) -> dict[str, tuple[list[float], list[int]]]:
    """latency -> (distinct values in ms rounded to :data:`SAMPLE_DECIMALS`, counts)."""
    out = {}
    for name, v in samples.items():
        v = np.asarray(v, dtype=float)
        vals, counts = np.unique(np.round(v[np.isfinite(v)], SAMPLE_DECIMALS), return_counts=True)
        out[name] = (vals.tolist(), counts.tolist())
    return out


def append_run(fd: int, scenario: str, o: RunOutcome) -> None:
    """Append one finished run to the run log and flush it to disk."""
    line = json.dumps({"scenario": scenario, "point": o.key, "seed": o.seed,
                       "metrics": {k: (v if math.isfinite(v) else None) for k, v in (o.metrics or {}).items()},
                       "samples": compress_samples(o.samples),
                       **({"bench": o.bench} if o.bench is not None else {})},
                      default=lambda v: v.item() if hasattr(v, "item") else str(v))
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)


BenchLines = dict[tuple[str, int], dict[str, Any]]
"""Bench_serving records by run: (point, seed) -> record."""


def read_run_log(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, BenchLines]:
    """(metric rows :data:`METRIC_COLUMNS`, sample rows :data:`SAMPLE_COLUMNS`, bench_serving
    records of the runs logged with one) of a run log, in one read; a last line cut short by
    a kill is ignored."""
    rows: list[tuple[Any, ...]] = []
    srows: list[pd.DataFrame] = []
    bench: BenchLines = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
                rows += [(r["scenario"], int(r["seed"]), m, float("nan") if v is None else float(v), r["point"])
                         for m, v in r["metrics"].items()]
                for lat, (vals, counts) in (r.get("samples") or {}).items():
                    srows.append(pd.DataFrame({"point": r["point"], "seed": int(r["seed"]), "latency": lat,
                                               "value_ms": np.asarray(vals, float),
                                               "count": np.asarray(counts, np.int64)}))
                if isinstance(r.get("bench"), dict):
                    bench[(r["point"], int(r["seed"]))] = {**r["bench"], "sweep_point": r["point"]}
            except (ValueError, KeyError, TypeError):
                continue
    samples = pd.concat(srows, ignore_index=True) if srows else empty_samples()
    return pd.DataFrame(rows, columns=METRIC_COLUMNS), samples, bench


def read_bench_file(out: str | Path) -> BenchLines:
    """The records of the sweep ``out``'s bench_serving file (empty when there is none).
    A line whose ``sweep_point`` or seed cannot be read (edited by hand) is dropped: its run
    is in the table, and the next save writes the lines of the runs it knows."""
    p = bench_path(out)
    lines: BenchLines = {}
    if not p.exists():
        return lines
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
            seed = r["server_info"]["specsched"]["seed"]
            lines[(str(r["sweep_point"]), int(seed))] = r
        except (ValueError, KeyError, TypeError):
            continue
    return lines


def bench_text(lines: BenchLines, runs: list[tuple[str, int]]) -> str:
    """The bench_serving file's text: the line of each run of ``runs`` ((point, seed) in the
    table's order: grid point, points of earlier sweeps after this grid's, then seed) that has
    one; lines of runs not in ``runs`` are left out."""
    from specsched.sim.bench_serving import record_line

    return "".join(record_line(lines[k]) + "\n" for k in runs if k in lines)


def empty_samples() -> pd.DataFrame:
    """An empty samples table."""
    return pd.DataFrame({"point": pd.Series(dtype=object), "seed": pd.Series(dtype="int64"),
                         "latency": pd.Series(dtype=object), "value_ms": pd.Series(dtype="float64"),
                         "count": pd.Series(dtype="int64")})


def read_samples(out: str | Path) -> pd.DataFrame:
    """The samples file of the sweep ``out`` (empty when there is none: a sweep written
    before samples were kept, or runners that return only a summary).

    Raises:
        ConfigError: the file exists but cannot be read.
    """
    p = samples_path(out)
    if not p.exists():
        return empty_samples()
    return read_parquet_table(p, SAMPLE_COLUMNS, "a sweep samples file")[SAMPLE_COLUMNS]


def merge(frames: list[pd.DataFrame], key: list[str]) -> pd.DataFrame | None:
    """Concatenate, keeping the last copy of each run (``key`` columns identify a row's
    run: the same run may be in the saved file and in the run log)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    df = pd.concat(frames, ignore_index=True)
    # rows of a run come as a block from one source: keep the last source's block
    src = np.concatenate([np.full(len(f), i) for i, f in enumerate(frames)])
    last = pd.Series(src).groupby([df[k] for k in key if k in ("point", "seed")]).transform("max").to_numpy()
    return df[src == last].reset_index(drop=True)
