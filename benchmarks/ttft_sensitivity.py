"""How a cell's TTFT figures move with a uniform x(1+e) on decode, extend or host cost (no GPU).

Each arm is simulated at its own seed and at ``--seeds`` more arrival draws, with the profile's
``gpu.decode`` (and ``gpu.verify``), ``gpu.extend``, or the host (``host.speed_factor``) scaled
by 1+e. For every figure the table gives its value at e=0 (median over seeds) and its
elasticity: (figure(1+e) - figure(1-e)) / (2 e figure(1)), i.e. the per cent a figure moves
per per cent of step cost. An elasticity well above 1 means the figure is ill-conditioned:
a prediction error of d % on the step costs shows as elasticity x d % on the figure.

Besides the bench_serving figures it reports the split of the median TTFT where a cell runs
past its running-request limit: ``queued`` is the number of requests that waited for a slot
(first admitted after the running batch was full; read as TTFT above the largest gap in the
sorted TTFTs), ``gap_ms`` the width of that gap. When the median's two order statistics sit
on both sides of the gap, the median is the gap's midpoint and moves with either side.

Usage:
    python benchmarks/ttft_sensitivity.py --profile PATH scenarios/h200/poisson-nospec.yaml \
        --arm base --seeds 4 --eps 0.02
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.config import with_value
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile

KNOBS = ("decode", "extend", "host")


def scaled_profile(profile, knob: str, factor: float):
    """The profile with one cost scaled: ``decode`` scales gpu.decode and gpu.verify (every
    value of the grids), ``extend`` gpu.extend; ``host`` leaves the profile (the scenario's
    host.speed_factor carries it, see :func:`scaled_scenario`)."""
    if knob == "host" or factor == 1.0:
        return profile
    data = profile.model_dump(mode="python")
    names = ("decode", "verify") if knob == "decode" else ("extend",)
    for name in names:
        grid = data["gpu"].get(name)
        if grid is not None:
            grid["seconds"] = [[v * factor for v in row] for row in grid["seconds"]]
    return type(profile).model_validate(data)


def scaled_scenario(sc, knob: str, factor: float):
    """The scenario with host.speed_factor multiplied by ``factor`` for knob ``host``."""
    if knob != "host" or factor == 1.0:
        return sc
    return with_value(sc, "host.speed_factor", sc.host.speed_factor * factor)


def ttft_split(ttft_s: np.ndarray) -> dict[str, float]:
    """Median, mean, p90 TTFT (ms) and the largest gap in the sorted TTFTs: how many requests
    lie above it (``queued``) and its width (``gap_ms``)."""
    t = np.sort(np.asarray(ttft_s, dtype=float))
    d = np.diff(t)
    i = int(np.argmax(d)) if len(d) else 0
    return {"median": float(np.median(t) * 1e3), "mean": float(t.mean() * 1e3),
            "p90": float(np.percentile(t, 90) * 1e3), "queued": float(len(t) - i - 1),
            "gap_ms": float(d[i] * 1e3) if len(d) else 0.0}


def run_one(sc, profile, seed: int) -> dict[str, float]:
    res = run_scenario(sc, seed=seed, profile=profile, warn=False)
    out = ttft_split(res.requests["ttft_s"].to_numpy())
    out["duration_s"] = float(res.summary["duration"])
    out["median_itl"] = float(res.summary["median_itl_ms"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--arm", default="base")
    ap.add_argument("--seeds", type=int, default=4, help="arrival draws besides the scenario's own seed")
    ap.add_argument("--eps", type=float, default=0.02)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scenario override")
    args = ap.parse_args(argv)
    if not 0 < args.eps < 0.5:
        print(f"ttft_sensitivity: --eps {args.eps}: allowed 0 < eps < 0.5", file=sys.stderr)
        return 2
    try:
        profile = load_profile(args.profile)
        sc = load_scenario_with_overrides(args.scenario, args.arm, args.set)
    except ConfigError as e:
        print(f"ttft_sensitivity: {e}", file=sys.stderr)
        return 2
    seeds = [sc.seed] + [sc.seed + 1000 * k for k in range(1, args.seeds + 1)]
    rows = []
    for seed in seeds:
        base = run_one(sc, profile, seed)
        rows.append({"seed": seed, "knob": "-", "e": 0.0, **base})
        for knob in KNOBS:
            for sign in (1, -1):
                f = 1 + sign * args.eps
                r = run_one(scaled_scenario(sc, knob, f), scaled_profile(profile, knob, f), seed)
                rows.append({"seed": seed, "knob": knob, "e": sign * args.eps, **r})
    t = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(t[t.knob == "-"].drop(columns=["knob", "e"]).round(3).to_string(index=False))
    figs = ["median", "mean", "p90", "duration_s", "median_itl"]
    out = []
    for seed, g in t.groupby("seed", sort=False):
        b = g[g.knob == "-"].iloc[0]
        for knob in KNOBS:
            hi = g[(g.knob == knob) & (g.e > 0)].iloc[0]
            lo = g[(g.knob == knob) & (g.e < 0)].iloc[0]
            out.append({"seed": seed, "knob": knob,
                        **{f: (hi[f] - lo[f]) / (2 * args.eps * b[f]) for f in figs}})
    el = pd.DataFrame(out)
    print(f"\nelasticity (% per % of cost, +-{args.eps:.0%}), by seed:")
    print(el.round(2).to_string(index=False))
    print("\nmedian over seeds:")
    print(el.groupby("knob")[figs].median().round(2).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
