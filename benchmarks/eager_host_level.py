"""How a measured run's eager cycles follow its host speed (no GPU needed).

An eager decode/verify step (batch above ``cuda_graph_max_bs``) issues its kernels one by
one from Python, so its launch call is host time, and the host's level moves it. A measured
run records both: each launch call's thread CPU (``host_probe.parquet``) and the reference
work's thread CPU sampled right after a launch call returns (``host_speed.parquet``,
runtime/host_probe.py ``HostProbe.end``). Per run this prints, for its eager verify launches:

- ``calls``: how many, their median and mean thread CPU (ms);
- ``run ref``: the run's reference-work median and mean (ms), and the mean call over each,
  in reference works: what conditioning on the run's median (sim/host_speed.py, the figure a
  run's ``summary.json`` records) or its mean would read;
- ``paired``: per reference sample taken right after an eager launch call, that call over
  the sample (the call and the reading on the same host level): n, median, p25 / p75.

A call that is host work at one level's speed reads the same number of reference works on
every host and level; docs/measurements/h200-v29-eager.md holds rounds 28-29.

    python benchmarks/eager_host_level.py RESULTS_DIR [--cells above-graph-bs]   # DIR/CELL-ARM-measured
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.sim.config import load_scenario

PAIR_SLACK_S = 1e-3
"""A sample pairs with the launch call whose end (start mark + call wall) lies within this of
it: the probe samples as the call's readings close, and the start mark is taken a little after
the call's own clock starts (0.1 ms or less in the runs), so the end read this way can fall
either side of the sample."""


def eager_launches(steps: pd.DataFrame, probe: pd.DataFrame, graph_max_bs: int) -> pd.DataFrame:
    """The run's eager verify/decode launches (part main, batch above ``graph_max_bs``):
    columns ``start_s`` (the step's start mark, s since the run's start), ``call_s`` (launch
    call wall), ``cpu_s`` (its thread CPU). ``probe`` row i is ``steps`` row i.

    Raises:
        ValueError: the two tables differ in length.
    """
    if len(probe) != len(steps):
        raise ValueError(f"host_probe.parquet has {len(probe)} rows, steps.parquet {len(steps)}")
    sel = (steps["mode"].isin(["verify", "decode"]) & (steps["part"] == "main")
           & (steps["batch_size"] > graph_max_bs)).to_numpy()
    return pd.DataFrame({"start_s": steps["gpu_start_s"].to_numpy()[sel],
                         "call_s": probe["host_launch_s"].to_numpy()[sel],
                         "cpu_s": probe["host_launch_cpu_s"].to_numpy()[sel]})


def paired_ratios(eager: pd.DataFrame, speed: pd.DataFrame, slack_s: float = PAIR_SLACK_S) -> np.ndarray:
    """Per reference sample (``speed``: ``t_s``, ``reference_work_s``) taken right after an
    eager launch call, the call's thread CPU over the sample: the call whose end (its start
    mark plus its wall, :data:`PAIR_SLACK_S`) is nearest the sample, when within ``slack_s``.
    Samples after other calls (extends, injections, graph replays) pair with none."""
    if eager.empty or speed.empty:
        return np.array([])
    ends = (eager["start_s"] + eager["call_s"]).to_numpy()
    cpu = eager["cpu_s"].to_numpy()
    out = []
    for t, r in zip(speed["t_s"].to_numpy(), speed["reference_work_s"].to_numpy(), strict=True):
        i = int(np.argmin(np.abs(ends - t)))
        if abs(t - ends[i]) <= slack_s:
            out.append(cpu[i] / r)
    return np.asarray(out, dtype=float)


def run_line(d: Path, graph_max_bs: int) -> str:
    """One line for the measured run in ``d`` (module docstring)."""
    steps, probe = pd.read_parquet(d / "steps.parquet"), pd.read_parquet(d / "host_probe.parquet")
    speed = pd.read_parquet(d / "host_speed.parquet")
    e = eager_launches(steps, probe, graph_max_bs)
    if e.empty:
        return f"{d.name}: no eager launch"
    ref = speed["reference_work_s"].to_numpy()
    p = paired_ratios(e, speed)
    mean_call = float(e["cpu_s"].mean())
    paired = (f"paired n={p.size} median {np.median(p):.0f} p25 / p75 {np.percentile(p, 25):.0f} / "
              f"{np.percentile(p, 75):.0f}" if p.size else "paired none")
    return (f"{d.name}: calls {len(e)} median {e['cpu_s'].median() * 1e3:.1f} mean {mean_call * 1e3:.1f} ms; run ref median "
            f"{np.median(ref) * 1e3:.3f} mean {ref.mean() * 1e3:.3f} ms, mean call = {mean_call / np.median(ref):.0f} / "
            f"{mean_call / ref.mean():.0f} reference works; {paired}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+", help="results directories holding CELL-ARM-measured runs")
    ap.add_argument("--cells", default="above-graph-bs", help="comma-separated cells (scenarios/h200/CELL.yaml)")
    args = ap.parse_args(argv)
    from specsched.sim.bundled import scenarios_dir

    for root in args.results:
        for cell in args.cells.split(","):
            runs = sorted(root.glob(f"{cell}-*-measured"))
            if not runs:
                print(f"eager_host_level: {root}: no {cell}-*-measured run", file=sys.stderr)
                return 2
            gmax = load_scenario(scenarios_dir() / "h200" / f"{cell}.yaml").server.cuda_graph_max_bs
            for d in runs:
                print(f"{root}: {run_line(d, gmax)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
