"""Where the host time of a launch onto an idle stream goes, measured against predicted (no
GPU needed).

For every main-part forward that started on an idle stream (its start mark more than
``--gap-ms`` after the previous forward's end: the mark ran when the launch call recorded it,
runtime/engine.py ``_launch_call``), three spans, each the median over the run's forwards of
one mode (extend / decode / verify):

- ``end->pass``: from the previous forward's GPU end to the schedule pass that built this
  forward (timeseries.parquet: one row per main forward, stamped when the loop's
  ``HostWork("schedule")`` runs, after ``Scheduler.schedule()``): the loop's result path
  (Results wait, ``process_result``, Deliver, Recv) and the schedule pass. Not like for
  like: a measured run stamps the pass after ``Recv`` and ``schedule()`` ran
  (runtime/engine.py ``LoopHost._pass``), the simulator at the start of that host work's
  charge (sim/engine.py ``_host``: ``host.schedule_*`` + ``host.recv_path_*`` come after
  the stamp), so a predicted ``end->pass`` is short of a measured one by that charge, and
  its ``pass->mark`` long by as much;
- ``pass->mark``: from that pass to the forward's start (the runtime's launch call records
  its start mark first; the simulator charges ``host.launch_s`` before it);
- ``mark->end``: the forward's span;

and, for extends, ``end->token``: from the extend's end to the first token of the requests
it completed (the host's path from the forward's end to the delivery). A results directory
``CELL-ARM-predicted`` beside the measured one is read the same way; the two are printed
side by side. Every span is in ms.

    python benchmarks/idle_launch_split.py RESULTS_DIR    # DIR/CELL-ARM-measured (and -predicted)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SPANS = ("end->pass", "pass->mark", "mark->end", "end->token")


def idle_launches(run: Path, gap_s: float) -> pd.DataFrame:
    """One row per main-part forward of ``run`` (a results directory) started on an idle
    stream: ``mode``, ``tokens``, ``batch_size`` and the :data:`SPANS` in seconds (``end->token`` NaN but for
    extends that completed a request).

    Raises:
        ValueError: the run's timeseries does not have one row per main-part forward.
    """
    steps = pd.read_parquet(run / "steps.parquet")
    ts = pd.read_parquet(run / "timeseries.parquet")
    main = steps[steps.part == "main"].reset_index(drop=True)
    if len(main) != len(ts):
        raise ValueError(f"{run}: {len(ts)} schedule passes for {len(main)} main forwards")
    main["pass"] = ts.time_s.to_numpy()
    ends = np.sort(steps.gpu_end_s.to_numpy())
    i = np.searchsorted(ends, main.gpu_start_s.to_numpy(), side="right") - 1
    main["prev_end"] = np.where(i >= 0, ends[np.maximum(i, 0)], np.nan)
    out = pd.DataFrame({
        "mode": main["mode"], "tokens": main.num_extend_tokens, "batch_size": main.batch_size,
        "end->pass": main["pass"] - main.prev_end, "pass->mark": main.gpu_start_s - main["pass"],
        "mark->end": main.gpu_end_s - main.gpu_start_s, "end->token": np.nan,
    })
    req = run / "requests.parquet"
    if req.is_file():
        first = np.sort(pd.read_parquet(req).first_token_s.dropna().to_numpy())
        ext = main.index[main["mode"] == "extend"].to_numpy()
        ext_end = main.gpu_end_s.to_numpy()[ext]
        order = np.argsort(ext_end)
        ext, ext_end = ext[order], ext_end[order]
        # each first token belongs to the extend whose end is the last at or before it
        j = np.searchsorted(ext_end, first, side="right") - 1
        lag = pd.Series(first[j >= 0] - ext_end[j[j >= 0]]).groupby(ext[j[j >= 0]]).min()
        out.loc[lag.index, "end->token"] = lag.to_numpy()
    idle = (main.gpu_start_s - main.prev_end) > gap_s
    return out[idle.to_numpy()].reset_index(drop=True)


def split_table(results: Path, gap_s: float) -> pd.DataFrame:
    """Per measured run in ``results`` and mode, the count and the median :data:`SPANS` (ms),
    measured (``m``) and predicted (``p``, NaN without a ``-predicted`` directory holding its
    schedule passes)."""
    rows = []
    for m_dir in sorted(results.glob("*-measured")):
        name = m_dir.name.removesuffix("-measured")
        p_dir = results / f"{name}-predicted"
        meas = idle_launches(m_dir, gap_s)
        # an archive slims its predicted runs to the steps table: no passes, nothing to split
        pred = idle_launches(p_dir, gap_s) if (p_dir / "timeseries.parquet").is_file() else None
        for mode, g in meas.groupby("mode", sort=True):
            row: dict[str, object] = {"run": name, "mode": mode, "n": len(g)}
            q = pred[pred["mode"] == mode] if pred is not None else None
            for s in SPANS:
                row[f"{s} m"] = 1e3 * g[s].median()
                row[f"{s} p"] = 1e3 * q[s].median() if q is not None and len(q) else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="folder of CELL-ARM-measured (and -predicted) results directories")
    ap.add_argument("--gap-ms", type=float, default=0.2, help="idle gap before a forward's start (default 0.2 ms)")
    args = ap.parse_args(argv)
    if not args.results.is_dir():
        print(f"{args.results}: not a directory (give a folder of CELL-ARM-measured results directories)",
              file=sys.stderr)
        return 2
    try:
        t = split_table(args.results, args.gap_ms * 1e-3)
    except (ValueError, OSError) as e:
        print(f"{args.results}: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    if t.empty:
        print(f"{args.results}: no CELL-ARM-measured directory", file=sys.stderr)
        return 2
    print(f"forwards started on an idle stream (gap > {args.gap_ms:g} ms), medians in ms, m measured / p predicted:")
    print(t.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
