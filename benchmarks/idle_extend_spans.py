"""How long the loop's extends launched onto an idle stream really took (no GPU needed).

Reads measured results directories (an extracted ``results.tar.xz`` of a GPU round:
``DIR/*-measured/steps.parquet``, ``host_probe.parquet``, ``summary.json``) and, for every
extend forward (mode extend, part main) that started on an idle stream (its start mark more
than ``--gap-ms`` after the previous forward's end, so the mark ran when the launch call
recorded it: runtime/engine.py ``_launch_call``), prints by extend size the median span
(start mark to end), the profile's device time at its tokens (gpu.extend, first context
column), their difference (the lead the loop paid at the run's host speed), the launch
call's host time (host_probe) and the runs' host speed factor (summary.json host_speed).
An extend whose span is its launch call's is host-bound: on an idle stream it ends with
its issue. Compare with the profile's host.extend_own_idle_lead_by_tokens at the host factor.

    python benchmarks/idle_extend_spans.py R18/results --profile docs/measurements/h200-v18/h200-1b.yaml
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.sim.profile import load_profile

BINS = [0, 384, 768, 1536, 3072, 6144, 1e9]


def idle_extends(results: Path, x: list[float], seconds: list[float], gap_s: float) -> pd.DataFrame:
    """One row per extend started on an idle stream: run, tokens, span, device, call, factor."""
    rows = []
    for d in sorted(results.glob("*-measured")):
        s = pd.read_parquet(d / "steps.parquet").sort_values("gpu_start_s").reset_index(drop=True)
        hp = pd.read_parquet(d / "host_probe.parquet") if (d / "host_probe.parquet").is_file() else None
        summary = json.loads((d / "summary.json").read_text())
        factor = (summary.get("host_speed") or {}).get("speed_factor", float("nan"))
        prev_end = s.gpu_end_s.shift(1)
        for i, r in s.iterrows():
            if r["mode"] != "extend" or r["part"] != "main" or i == 0 or r.gpu_start_s - prev_end[i] < gap_s:
                continue
            call = float("nan")
            if hp is not None:
                m = hp[(hp.step == r.step) & (hp.part == "main")]
                call = float(m.host_launch_s.iloc[0]) if len(m) else call
            rows.append({"run": d.name, "tokens": int(r.num_extend_tokens), "span": r.gpu_end_s - r.gpu_start_s,
                         "device": float(np.interp(r.num_extend_tokens, x, seconds)), "call": call,
                         "factor": factor})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="folder of *-measured results directories")
    ap.add_argument("--profile", required=True, help="the round's profile (gpu.extend gives the device times)")
    ap.add_argument("--gap-ms", type=float, default=0.2, help="idle gap before the extend's start (default 0.2 ms)")
    args = ap.parse_args(argv)
    g = load_profile(args.profile).gpu.extend
    t = idle_extends(args.results, list(g.x), [row[0] for row in g.seconds], args.gap_ms * 1e-3)
    if t.empty:
        print("no extend started on an idle stream")
        return 1
    t["lead"] = t.span - t.device
    t["tokens_bin"] = pd.cut(t.tokens, BINS)
    ms = {c: (c, lambda v: round(1e3 * float(v.median()), 3)) for c in ("span", "device", "lead", "call")}
    out = t.groupby("tokens_bin", observed=True).agg(n=("span", "size"), **{f"{c}_ms": v for c, v in ms.items()},
                                                    factor=("factor", "median"))
    print(f"{len(t)} extends started on an idle stream (gap >= {args.gap_ms:g} ms), medians:")
    print(out.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
