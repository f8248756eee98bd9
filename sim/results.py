"""Writing a run's results directory (format in docs/architecture.md).

Writes are atomic: everything goes to a temporary sibling directory that is renamed into
place at the end, so an interrupted or failed run leaves no half-written results.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from specsched.sim.records import RunResult

TABLES = ("requests", "chunks", "steps", "timeseries")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Create ``path`` atomically: ``write`` fills a temporary file in the same directory,
    which is then renamed over ``path`` (readers never see a half-written file; a failed
    write leaves nothing behind). Parent directories are created. Returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text))


def write_results(result: RunResult, out_dir: str | Path, fmt: str = "parquet") -> Path:
    """Write ``result`` to ``out_dir`` atomically (replacing an existing directory).

    Args:
        result: the run.
        out_dir: target directory.
        fmt: ``parquet`` or ``csv`` for the tables.

    Returns:
        The directory written.

    Raises:
        ValueError: unknown ``fmt``.
    """
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be parquet or csv, got {fmt!r}")
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name in TABLES:
            df: pd.DataFrame = getattr(result, name)
            if fmt == "parquet":
                df.to_parquet(tmp / f"{name}.parquet", index=False)
            else:
                df.to_csv(tmp / f"{name}.csv", index=False)
        summary = {k: _clean(v) for k, v in result.summary.items()}
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        from specsched.analysis.bench_serving import bench_line  # the run as a bench_serving line

        (tmp / "bench_serving.jsonl").write_text(bench_line(result) + "\n")
        if result.scenario is not None:
            sc = result.scenario.model_dump(mode="json")
            if sc.get("path"):  # relative to where the command ran, when inside it
                p = Path(sc["path"]).resolve()
                if p.is_relative_to(Path.cwd()):
                    sc["path"] = str(p.relative_to(Path.cwd()))
            (tmp / "scenario.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
