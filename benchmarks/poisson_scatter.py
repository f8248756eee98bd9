"""How much a Poisson run's TTFT figures move from sampling alone: the simulator over seeds.

A measured run and its prediction share one seed (benchmarks/gpu_validate.py predicts
with the measured run's seed: the same send times and prompt lengths), so sampling noise
cancels between them; it still sets how far one run's median can sit from the rate's
expectation, and so how much a fit to single runs follows noise (issue 9's hold-out). This
simulates one cell at each rate over many seeds and prints, per rate, the mean over seeds
and the spread (standard deviation and 5-95 % range, in % of the mean) of the median, p90
and mean TTFT. Optionally (``--host-factor``) it also simulates every seed with the
profile's host-paced extend terms (``host.launch_per_extend_*``, ``host.extend_idle_lead*``)
multiplied by that factor: the same-seed change a slower host makes.

    python benchmarks/poisson_scatter.py --profile docs/measurements/h200-v7/v7b/h200-1b.yaml \\
        --rates 4,8,12,16,24 --requests 128 --seeds 20 --host-factor 1.3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.engine import run_scenario
from specsched.sim.host_speed import HOST_TABLES
from specsched.sim.profile import Profile, load_profile

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ("median_ttft_ms", "p90_ttft_ms", "mean_ttft_ms")


def slower_host(profile: Profile, factor: float) -> Profile:
    """``profile`` with its host-paced extend terms (issue and idle-stream leads) x ``factor``."""
    h = profile.host
    upd = {k: getattr(h, k) * factor for k in ("launch_per_extend_s", "launch_per_extend_token_s", "extend_idle_lead_s")}
    for name in HOST_TABLES:
        if (t := getattr(h, name)) is not None:
            upd[name] = t.model_copy(update={"seconds": [s * factor for s in t.seconds]})
    return profile.model_copy(update={"host": h.model_copy(update=upd)})


def scatter(scenario: Path, profile: Profile, rate: float, requests: int, seeds: int) -> dict[str, np.ndarray]:
    """Per figure of :data:`FIGURES`: its value at seeds 1..``seeds`` (ms)."""
    sc = load_scenario_with_overrides(scenario, "base", {"workload.request_rate": rate,
                                                         "workload.num_requests": requests})
    out: dict[str, list[float]] = {f: [] for f in FIGURES}
    for seed in range(1, seeds + 1):
        s = run_scenario(sc, seed=seed, profile=profile).summary
        for f in FIGURES:
            out[f].append(float(s[f]))
    return {f: np.array(v) for f, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "h200" / "poisson-nospec.yaml")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--rates", default="4,8,12,16,24")
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--host-factor", type=float, default=None,
                    help="also simulate with the host-paced extend terms x this factor (same seeds)")
    args = ap.parse_args(argv)
    prof = load_profile(args.profile)
    slow = slower_host(prof, args.host_factor) if args.host_factor else None
    head = "| rate | figure | mean over seeds (ms) | std | 5-95 % range |"
    if slow is not None:
        head += f" host x{args.host_factor:g}: same-seed change (median over seeds) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for rate in [float(r) for r in args.rates.split(",")]:
        base = scatter(args.scenario, prof, rate, args.requests, args.seeds)
        other = scatter(args.scenario, slow, rate, args.requests, args.seeds) if slow is not None else None
        for f in FIGURES:
            v = base[f]
            m = v.mean()
            lo, hi = np.percentile(v, [5, 95])
            row = (f"| {rate:g} | {f} | {m:.2f} | {v.std(ddof=1) / m * 100:.1f} % | "
                   f"{(lo / m - 1) * 100:+.1f} .. {(hi / m - 1) * 100:+.1f} % |")
            if other is not None:
                row += f" {np.median(other[f] / v - 1) * 100:+.1f} % |"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
