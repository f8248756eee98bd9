"""Profile a GPU, then validate the simulator against the runtime on the scaled cells.

One command does everything that belongs together on a GPU machine:

    python benchmarks/gpu_validate.py --out OUTDIR [--preset 1b] [--cells batch1,batch8,...]

1. ``runtime.profiler.profile_device`` runs the microbenchmarks and writes
   ``OUTDIR/h200-1b.yaml`` (the profile comes only from microbenchmarks, never from the
   scenario runs it is checked against);
2. for every scaled cell in ``scenarios/h200/`` and every arm (host_block / stream_wait x
   legacy / waiting-aware delay), measures the scenario with the runtime and simulates it
   with that profile;
3. writes ``validate.csv`` (cell, arm, metric, predicted, measured, error_pct),
   ``checks.md`` (the issue's targets: per-verify host-block vs stream-wait difference,
   GPU idle between verifies at batch 1, syncs counted) and ``results.tar.gz`` (every
   measured and predicted results directory).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
from specsched.runtime.cli_commands import VALIDATE_METRICS, validation_table
from specsched.runtime.engine import RuntimeEngine
from specsched.sim.config import arm_names, load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.profile import load_profile
from specsched.sim.results import write_results

ROOT = Path(__file__).resolve().parent.parent

CELLS = ["batch1", "batch8", "batch32", "batch64", "burst66", "poisson-nospec", "chunked-prefix", "window4-lowacc",
         "kv-retract", "above-graph-bs", "long-context"]


def verify_gaps(steps) -> tuple[float, float]:
    """(median wall per verify, median GPU idle between consecutive verifies) in ms, over
    consecutive verify steps at the full batch."""
    s = steps[steps["part"] == "main"].reset_index(drop=True)
    ver = (s["mode"] == "verify").to_numpy()
    full = s.loc[ver, "batch_size"].max()
    ok = ver[1:] & ver[:-1] & (s["batch_size"].to_numpy()[1:] == full) & (s["batch_size"].to_numpy()[:-1] == full)
    end = s["gpu_end_s"].to_numpy()
    start = s["gpu_start_s"].to_numpy()
    walls = np.diff(end)[ok]
    idle = (start[1:] - end[:-1])[ok]
    return float(np.median(walls) * 1000), float(np.median(idle) * 1000)


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` (cell, arm, metric, predicted, measured, error_pct) as CSV, replaced atomically."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["cell", "arm", "metric", "predicted", "measured", "error_pct"])
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--profile", default=None, help="use this profile instead of profiling now")
    ap.add_argument("--max-bs", type=int, default=128)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run with --preset tiny")
    ap.add_argument("--reverse-arms", action="store_true", help="measure the arms in reverse order (checks order effects)")
    ap.add_argument("--budget", type=float, default=240.0, help="profiling time budget in seconds (default 240)")
    ap.add_argument("--poisson-cell", default=None, help="also measure this cell at each of --rates (req/s)")
    ap.add_argument("--rates", default="8,16,32,64", help="request rates for --poisson-cell (default 8,16,32,64)")
    ap.add_argument("--poisson-requests", type=int, default=96, help="requests per Poisson run (default 96)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    if args.profile:
        prof_path = Path(args.profile)
    else:
        from specsched.runtime.profiler import profile_device, write_profile

        d = profile_device(device=args.device, preset=args.preset, spec_window=6, max_bs=args.max_bs,
                           contexts=[512, 1024, 2048, 4096, 8192], extend_tokens=[256, 1024, 2048, 4096, 8192],
                           extend_prefixes=[0, 1024, 2048, 4096, 8192], cuda_graph_max_bs=128, repeats=15,
                           progress=False, budget_s=args.budget)
        d["name"] = f"h200-{args.preset}"
        prof_path = out / f"h200-{args.preset}.yaml"
        write_profile(d, prof_path)
        print(f"profiled in {time.perf_counter() - t_start:.0f} s -> {prof_path}", flush=True)
    profile = load_profile(str(prof_path))

    rows: list[dict] = []
    checks: list[str] = ["# GPU validation checks", ""]
    res_dir = out / "results"
    for cell in [c for c in args.cells.split(",") if c and c != "none"]:
        path = ROOT / "scenarios" / "h200" / f"{cell}.yaml"
        arms = arm_names(path)[::-1] if args.reverse_arms else arm_names(path)
        eng = None
        walls: dict[str, tuple[float, float, float, float]] = {}
        for arm in arms:
            sc = load_scenario(path, arm)
            t0 = time.perf_counter()
            if eng is None:
                eng = RuntimeEngine(sc, preset=args.preset, device=args.device)
            else:
                eng.set_scenario(sc)
            meas = eng.run()
            pred = run_scenario(sc, seed=meas.summary["seed"], profile=profile)
            for r in validation_table(pred.summary, meas.summary, VALIDATE_METRICS):
                rows.append({"cell": cell, "arm": arm, **r})
            write_results(meas, res_dir / f"{cell}-{arm}-measured")
            write_results(pred, res_dir / f"{cell}-{arm}-predicted")
            mw, mi = verify_gaps(meas.steps)
            pw, pi = verify_gaps(pred.steps)
            walls[arm] = (mw, mi, pw, pi)
            errs = [r for r in rows if r["cell"] == cell and r["arm"] == arm]
            worst = max(abs(r["error_pct"]) for r in errs if r["error_pct"] == r["error_pct"])
            write_csv(out / "validate.csv", rows)  # after every arm: a run cut short keeps what it measured
            print(f"{cell:<15} {arm:<14} measured in {time.perf_counter() - t0:5.1f} s; worst |error| {worst:5.1f} %; "
                  f"verify wall {mw:.3f} ms (pred {pw:.3f}); syncs {meas.summary['host_syncs']}", flush=True)
        if "stream_wait" in walls and "base" in walls:
            dm = walls["base"][0] - walls["stream_wait"][0]
            dp = walls["base"][2] - walls["stream_wait"][2]
            checks.append(f"- {cell}: host_block - stream_wait per verify: measured {dm:.3f} ms, predicted {dp:.3f} ms "
                          f"(difference {abs(dm - dp):.3f} ms); GPU idle between verifies: base {walls['base'][1]:.3f} ms, "
                          f"stream_wait {walls['stream_wait'][1]:.3f} ms of a {walls['stream_wait'][0]:.3f} ms verify "
                          f"({walls['stream_wait'][1] / walls['stream_wait'][0] * 100:.2f} %)")
        del eng

    if args.poisson_cell:
        path = ROOT / "scenarios" / "h200" / f"{args.poisson_cell}.yaml"
        from specsched.analysis.overrides import load_scenario_with_overrides

        eng = None
        for rate in [float(r) for r in args.rates.split(",")]:
            sc = load_scenario_with_overrides(path, "base", {"workload.request_rate": rate,
                                                             "workload.num_requests": args.poisson_requests})
            t0 = time.perf_counter()
            if eng is None:
                eng = RuntimeEngine(sc, preset=args.preset, device=args.device)
            else:
                eng.set_scenario(sc)
            meas = eng.run()
            pred = run_scenario(sc, seed=meas.summary["seed"], profile=profile)
            label = f"{args.poisson_cell}@{rate:g}"
            for r in validation_table(pred.summary, meas.summary, VALIDATE_METRICS):
                rows.append({"cell": label, "arm": "base", **r})
            write_results(meas, res_dir / f"{args.poisson_cell}-rate{rate:g}-measured")
            write_results(pred, res_dir / f"{args.poisson_cell}-rate{rate:g}-predicted")
            write_csv(out / "validate.csv", rows)
            errs = [r for r in rows if r["cell"] == label]
            worst = max(abs(r["error_pct"]) for r in errs if r["error_pct"] == r["error_pct"])
            print(f"{label:<15} base           measured in {time.perf_counter() - t0:5.1f} s; worst |error| "
                  f"{worst:5.1f} %", flush=True)
        del eng

    write_csv(out / "validate.csv", rows)
    (out / "checks.md").write_text("\n".join(checks) + "\n")
    with tarfile.open(out / "results.tar.gz", "w:gz") as tar:
        tar.add(res_dir, arcname="results")
    import shutil

    shutil.rmtree(res_dir)
    print("\n".join(checks))
    print(f"{'cell':<15} {'arm':<14}" + "".join(f"{m[:14]:>15}" for m in VALIDATE_METRICS))
    for cell, arm in dict.fromkeys((r["cell"], r["arm"]) for r in rows):
        errs = {r["metric"]: r["error_pct"] for r in rows if r["cell"] == cell and r["arm"] == arm}
        print(f"{cell:<15} {arm:<14}" + "".join(f"{errs.get(m, float('nan')):>+14.1f}%" for m in VALIDATE_METRICS))
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
