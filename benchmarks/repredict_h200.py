"""Predict the recorded H200 measurements again with another profile (no GPU needed).

The measured side of a validation (``validate*.csv`` written by benchmarks/gpu_validate.py:
cell, arm, metric, predicted, measured, error_pct) stays as it was measured; the predicted
side is simulated again from the scenario (scenarios/h200/CELL.yaml, arm; ``CELL@RATE``
rows are the Poisson runs at that request rate with --poisson-requests requests) with
``--profile``. Prints and writes old and new errors side by side.

    python benchmarks/repredict_h200.py docs/measurements/h200-v2/validate-run1.csv \\
        docs/measurements/h200-v2/validate-run2.csv \\
        --profile docs/measurements/h200-v2/h200-1b-refit.yaml \\
        --out docs/measurements/h200-v2/repredict-refit.csv

``--mean``: with several CSVs of the same cells (repeated runs, e.g. ``validate.csv`` and
``validate-run2.csv``), the measured side is their mean per (cell, arm, metric), and the
run-to-run spread (|run - mean| / mean, largest over runs) is printed and written per row
(``run_spread_pct``): no prediction can be held to less than the measurement repeats.
Without it the last file's row wins.

``--measured-results DIR`` (the measured results directories, e.g. an extracted
``results.tar.gz``: ``DIR/CELL-ARM-measured`` or ``DIR/CELL-rateR-measured``): the measured
TTFT figures are recomputed from each run's ``requests.parquet`` with bench_serving's send
times (sim.workload.Clients: the arrival, or the freed slot's time) instead of the
recorded start, for runs made before the runtime stamped send times (it stamped the
loop's next poll, leaving the wait to it out of TTFT). Rows changed are marked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.bundled import scenarios_dir
from specsched.sim.engine import run_scenario
from specsched.sim.metrics import error_pct
from specsched.sim.profile import load_profile
from specsched.sim.results import atomic_write_text
from specsched.sim.workload import replay_send_times

TARGETS = ("median_ttft_ms", "p90_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


def send_time_ttft(sc, requests: pd.DataFrame) -> dict[str, float]:
    """TTFT figures (ms) of a measured run, timed from each request's send time."""
    sent = replay_send_times(sc, dict(zip(requests.rid.tolist(), requests.finish_s.tolist(), strict=True)))
    v = (requests.first_token_s.to_numpy() - np.array([sent[r] for r in requests.rid.tolist()])) * 1e3
    return {"mean_ttft_ms": float(v.mean()), "median_ttft_ms": float(np.median(v)),
            "p90_ttft_ms": float(np.percentile(v, 90)), "max_ttft_ms": float(v.max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--poisson-requests", type=int, default=96)
    ap.add_argument("--measured-results", type=Path, help="measured results directories (TTFT from send times)")
    ap.add_argument("--mean", action="store_true", help="measured = mean over the CSVs (repeated runs of the same cells)")
    args = ap.parse_args(argv)
    runs = [pd.read_csv(p) for p in args.csv]
    measured = pd.concat(runs, ignore_index=True)
    spread: dict[tuple, float] = {}
    if args.mean and len(runs) > 1:
        key = ["cell", "arm", "metric"]
        mean = measured.groupby(key, sort=False).measured.mean()
        dev = (measured.set_index(key).measured - mean).abs() / mean.abs() * 100
        spread = dev.groupby(level=[0, 1, 2]).max().to_dict()
        measured = measured.drop_duplicates(key, keep="last").set_index(key)
        measured["measured"] = mean
        measured = measured.reset_index()
    measured = measured.drop_duplicates(["cell", "arm", "metric"], keep="last")
    profile = load_profile(args.profile)
    rows = []
    for (cell, arm), grp in measured.groupby(["cell", "arm"], sort=False):
        name, _, rate = cell.partition("@")
        overrides = {"workload.request_rate": float(rate), "workload.num_requests": args.poisson_requests} if rate else {}
        sc = load_scenario_with_overrides(scenarios_dir() / "h200" / f"{name}.yaml", arm, overrides)
        pred = run_scenario(sc, seed=sc.seed, profile=profile).summary
        fixed: dict[str, float] = {}
        if args.measured_results is not None:
            d = args.measured_results / (f"{name}-rate{rate}-measured" if rate else f"{cell}-{arm}-measured")
            if (d / "requests.parquet").is_file():
                fixed = send_time_ttft(sc, pd.read_parquet(d / "requests.parquet"))
        for r in grp.itertuples():
            new = pred.get(r.metric)
            meas = fixed.get(r.metric, r.measured)
            rows.append({"cell": cell, "arm": arm, "metric": r.metric, "measured": meas,
                         "recorded_measured": r.measured, "ttft_from_send": r.metric in fixed,
                         "old_predicted": r.predicted, "old_error_pct": error_pct(r.predicted, meas) if fixed or spread else r.error_pct, "new_predicted": new,
                         "new_error_pct": error_pct(new, meas) if new is not None else float("nan"),
                         "run_spread_pct": spread.get((cell, arm, r.metric), float("nan"))})
        print(f"{cell:<18} {arm:<14} " + " ".join(
            f"{m[:12]:>12} {rows[-len(grp):][[x['metric'] for x in rows[-len(grp):]].index(m)]['new_error_pct']:+6.1f}%"
            for m in TARGETS if m in set(grp.metric)), flush=True)
    df = pd.DataFrame(rows)
    atomic_write_text(Path(args.out), df.to_csv(index=False))
    t = df[df.metric.isin(TARGETS)]
    print("\nmetric              within 5 % (old -> new)   median |error| (old -> new)")
    for m in TARGETS:
        s = t[t.metric == m]
        print(f"{m:<20} {int((s.old_error_pct.abs() <= 5).sum()):>3} -> {int((s.new_error_pct.abs() <= 5).sum()):<3} "
              f"of {len(s):<5} {s.old_error_pct.abs().median():6.1f} % -> {s.new_error_pct.abs().median():5.1f} %")
    print(f"all five: {int((t.old_error_pct.abs() <= 5).sum())} -> {int((t.new_error_pct.abs() <= 5).sum())} of {len(t)} within 5 %")
    if spread:
        print("\nrun-to-run spread of the measurement (largest |run - mean| / mean), by metric: median, max, rows above 5 %")
        for m in TARGETS:
            sp = t[t.metric == m].run_spread_pct
            print(f"{m:<20} {sp.median():5.1f} % {sp.max():6.1f} % {int((sp > 5).sum()):>3} of {len(sp)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
