"""The path from a prefill's schedule pass to its first token, measured against predicted,
extend by extend (no GPU needed).

For every main-part extend of a measured run (``CELL-ARM-measured``: steps.parquet,
timeseries.parquet with one row per main forward, requests.parquet, host_probe.parquet),
times from the schedule pass that built it (the loop's ``HostWork("schedule")`` stamp):

- ``busy``: the previous forward's GPU end (the stream is busy this long after the pass;
  negative: the extend was launched onto an idle stream);
- ``ext_end`` / ``inj_end``: the extend's and its draft injection's GPU end;
- ``next_pass``: the next schedule pass (the loop's result path after the injection);
- ``first``: the first token of the requests it completed (the earliest first token at or
  after the extend's end, within the clock tolerance of a measured run). The overlap loop
  delivers it after it launched the next forward (sim/loop.py, SGLang
  ``event_loop_overlap``), in both engines;
- ``ext_call`` / ``inj_call`` / ``next_call``: the launch calls' host time (measured only,
  host_probe.parquet ``host_launch_s``) of the extend, the injection and the next main
  forward.

An extend whose launch call took more than ``--slow`` times the run's median extend call is
marked ``slow``: the host ran slow around it (a slow spell of the whole host shows in every
launch call of those milliseconds, the verifies' too). A results directory
``CELL-ARM-predicted`` beside the measured one with the same steps table (the runtime
drives the simulator's own scheduler: same forwards) is read the same way and paired
extend by extend. Printed per run: the medians (ms) measured, predicted and of the paired
difference, over every extend and over those not slow, and the median TTFT of the run's
requests, all and without those whose first token came from a slow extend (a light-load
reading: under a queue a slow extend delays the requests behind it too, which stay in).
Extends alike in size (one request each, as at light load) make the call ratio a host
reading; a run whose extends differ a lot (chunked prompts, many requests) mixes in their
own spread.

    python benchmarks/extend_path.py RESULTS_DIR [--cell sharegpt-lengths] [--slow 1.3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.runtime.host_probe import SPELL_RATIO

KEY = ["step", "mode", "part", "batch_size", "num_extend_tokens"]
SPANS = ("busy", "ext_end", "inj_end", "next_pass", "first")
CALLS = ("ext_call", "inj_call", "next_call")
CLOCK_TOLERANCE_S = 5e-4
"""A measured first token may be stamped up to this before its extend's end event (two
clocks: benchmarks/ttft_timeline.py ``CLOCK_TOLERANCE_S``)."""


def extend_paths(run: Path, tolerance_s: float = 0.0) -> pd.DataFrame:
    """One row per main-part extend of ``run`` (index ``step``): ``tokens``, ``batch_size``,
    ``rids`` (the requests whose first token it gave) and the :data:`SPANS` and
    :data:`CALLS` in seconds (calls NaN without host_probe.parquet).

    Raises:
        ValueError: the run's timeseries does not have one row per main-part forward.
    """
    s = pd.read_parquet(run / "steps.parquet").reset_index(drop=True)
    ts = pd.read_parquet(run / "timeseries.parquet")
    req = pd.read_parquet(run / "requests.parquet")
    main = s.index[s.part == "main"].to_numpy()
    if len(main) != len(ts):
        raise ValueError(f"{run}: {len(ts)} schedule passes for {len(main)} main forwards")
    passes = np.full(len(s), np.nan)
    passes[main] = ts.time_s.to_numpy()
    probe = run / "host_probe.parquet"
    call = (pd.read_parquet(probe).host_launch_s.to_numpy() if probe.is_file() else np.full(len(s), np.nan))
    if len(call) != len(s):
        raise ValueError(f"{run}: {len(call)} launch calls for {len(s)} steps")
    end = s.gpu_end_s.to_numpy()
    ext = [i for i in main if s.at[i, "mode"] == "extend"]
    ext_end = end[ext]
    first = req.first_token_s.to_numpy()
    # each first token belongs to the extend whose end is the last at or before it
    owner = np.searchsorted(ext_end, first + tolerance_s, side="right") - 1
    rows = []
    for j, i in enumerate(ext):
        p = passes[i]
        inj = i + 1 if i + 1 < len(s) and s.at[i + 1, "part"] == "inject" else None
        later = main[main > i]
        nxt = later[0] if len(later) else None
        mine = owner == j
        rows.append({
            "step": int(s.at[i, "step"]), "tokens": int(s.at[i, "num_extend_tokens"]),
            "batch_size": int(s.at[i, "batch_size"]), "rids": req.rid.to_numpy()[mine].tolist(),
            "busy": (end[i - 1] - p) if i else np.nan, "ext_end": end[i] - p,
            "inj_end": end[inj] - p if inj is not None else np.nan,
            "next_pass": passes[nxt] - p if nxt is not None else np.nan,
            "first": first[mine].min() - p if mine.any() else np.nan,
            "ext_call": call[i], "inj_call": call[inj] if inj is not None else np.nan,
            "next_call": call[nxt] if nxt is not None else np.nan,
        })
    return pd.DataFrame(rows).set_index("step")


def run_report(measured: Path, slow: float) -> tuple[pd.DataFrame, dict[str, float]]:
    """The table of medians (ms; rows ``measured``, ``predicted``, ``paired diff``, each for
    ``all`` extends and those ``not slow``) and the run's figures: ``extends``, ``slow``
    (how many), ``ttft_ms`` (median TTFT measured), ``ttft_not_slow_ms`` (without the
    requests of slow extends), ``ttft_pred_ms`` (NaN without a predicted run)."""
    m = extend_paths(measured, CLOCK_TOLERANCE_S)
    name = measured.name.removesuffix("-measured")
    p_dir = measured.parent / f"{name}-predicted"
    p = None
    if (p_dir / "timeseries.parquet").is_file():
        sm = pd.read_parquet(measured / "steps.parquet")[KEY].reset_index(drop=True)
        sp = pd.read_parquet(p_dir / "steps.parquet")[KEY].reset_index(drop=True)
        if sm.shape == sp.shape and (sm == sp).all().all():
            p = extend_paths(p_dir)
    m["slow"] = m.ext_call > slow * m.ext_call.median()
    rows = {}
    for label, sel in (("all", m.index), ("not slow", m.index[~m.slow])):
        rows[f"measured, {label}"] = m.loc[sel, [*SPANS, *CALLS]].median()
        if p is not None:
            rows[f"predicted, {label}"] = p.loc[sel, list(SPANS)].median()
            rows[f"paired diff, {label}"] = (m.loc[sel, list(SPANS)] - p.loc[sel, list(SPANS)]).median()
    table = pd.DataFrame(rows).T * 1e3
    req = pd.read_parquet(measured / "requests.parquet").set_index("rid")
    slow_rids = [r for rids in m.rids[m.slow] for r in rids]
    figures = {"extends": float(len(m)), "slow": float(m.slow.sum()), "ttft_ms": 1e3 * req.ttft_s.median(),
               "ttft_not_slow_ms": 1e3 * req.ttft_s.drop(slow_rids).median(), "ttft_pred_ms": np.nan}
    if p is not None:
        figures["ttft_pred_ms"] = 1e3 * pd.read_parquet(p_dir / "requests.parquet").ttft_s.median()
    return table, figures


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="folder of CELL-ARM-measured (and -predicted) results directories")
    ap.add_argument("--cell", default="", help="only the runs whose name starts with this")
    ap.add_argument("--slow", type=float, default=SPELL_RATIO,
                    help=f"an extend is slow when its launch call exceeds this times the run's median (default {SPELL_RATIO:g})")
    args = ap.parse_args(argv)
    if not args.results.is_dir():
        print(f"{args.results}: not a directory (give a folder of CELL-ARM-measured results directories)",
              file=sys.stderr)
        return 2
    if not args.slow > 1.0:
        print(f"--slow {args.slow}: give a factor above 1", file=sys.stderr)
        return 2
    runs = [d for d in sorted(args.results.glob(f"{args.cell}*-measured")) if d.is_dir()]
    if not runs:
        print(f"{args.results}: no {args.cell}*-measured directory", file=sys.stderr)
        return 2
    for d in runs:
        try:
            table, f = run_report(d, args.slow)
        except (ValueError, OSError, KeyError, AttributeError) as e:
            print(f"{d}: {e}".replace("\n", " "), file=sys.stderr)
            return 2
        if table.empty:
            continue
        print(f"{d.name.removesuffix('-measured')}: {f['extends']:.0f} extends, {f['slow']:.0f} slow "
              f"(launch call > {args.slow:g}x the median); median TTFT {f['ttft_ms']:.2f} ms measured, "
              f"{f['ttft_not_slow_ms']:.2f} ms without the slow extends' requests, {f['ttft_pred_ms']:.2f} ms "
              "predicted; medians in ms from the extend's schedule pass:")
        print(table.round(2).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
