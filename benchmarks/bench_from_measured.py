"""bench_serving lines from measured results directories, with TTFT timed from the send.

Runs measured before the runtime stamped each request's send time (it stamped the loop's
next poll, which left the wait to that poll out of TTFT; docs/measurements/h200-v3-repredict.md)
are corrected first: every request's start becomes bench_serving's send time, replayed
from the run's scenario and recorded finish times (sim.workload.Clients: the arrival, or
the freed slot's time), and the summary is recomputed from the tables
(sim.metrics.summarize). One line per directory goes to OUT/NAME.jsonl, for
benchmarks/calibrate_holdout.py. With ``--details`` the line also holds the per-request
lists, send times (``start_times``) included, so a fit replays the run's own arrivals;
``--drop itls,generated_texts`` leaves out the bulk of them (the per-token gaps), which a
replay does not need.

    python benchmarks/bench_from_measured.py /tmp/v2/results/poisson-nospec-rate*-measured \\
        --out docs/measurements/h200-v2/poisson-bench_serving-sendtime [--details]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from specsched.analysis.io import read_results
from specsched.sim.bench_serving import bench_record
from specsched.sim.config import Scenario
from specsched.sim.metrics import summarize
from specsched.sim.results import atomic_write_text
from specsched.sim.workload import replay_send_times


def _plain(o):
    return o.item() if hasattr(o, "item") else str(o)


def corrected(directory: Path):
    """The run in ``directory`` with its requests' starts at their send times and the
    summary recomputed; returns (run, median start lag in ms)."""
    run = read_results(directory)
    sc = Scenario.model_validate(run.scenario) if isinstance(run.scenario, dict) else run.scenario
    if run.summary.get("seed") is not None:   # the run's own seed drew its arrivals (--seed, measure_sweep --seeds)
        sc = sc.model_copy(update={"seed": int(run.summary["seed"])})
    req = run.requests.copy()
    sent = replay_send_times(sc, dict(zip(req.rid.tolist(), req.finish_s.tolist(), strict=True)))
    new = np.array([sent[r] for r in req.rid.tolist()])
    lag = float(np.median(req.start_s.to_numpy() - new)) * 1e3
    for col, t in (("ttft_s", "first_token_s"), ("e2e_s", "finish_s")):
        req[col] = req[t] - new
    req["start_s"] = new
    summary = dict(run.summary)
    summary.update(summarize(req, run.chunks, run.steps))
    run.requests, run.summary = req, summary
    return run, lag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--details", action="store_true",
                    help="write the per-request lists and send times (start_times) too")
    ap.add_argument("--drop", default="", metavar="KEYS",
                    help="comma-separated keys left out of each line, e.g. itls,generated_texts (the bulk of a "
                         "detailed line; a replay needs only lengths and send times)")
    args = ap.parse_args(argv)
    for d in args.dirs:
        run, lag = corrected(d)
        name = d.name.removesuffix("-measured")
        rec = bench_record(run, details=args.details)
        for k in filter(None, args.drop.split(",")):
            rec.pop(k, None)
        atomic_write_text(args.out / f"{name}.jsonl", json.dumps(rec, default=_plain) + "\n")
        print(f"{name}: start lag median {lag:.3f} ms; median TTFT {run.summary['median_ttft_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
