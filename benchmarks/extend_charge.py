"""The simulator's host charge for an extend-only launch against the engine's launch call,
run by run (no GPU).

The simulator charges an extend-only launch ``host.launch_s + host.launch_per_req_s x batch``
(the loop's ``HostWork("launch")``, sim.cost_model.CostModel.host) and then its kernel issue,
``host.launch_per_extend_s + host.launch_per_extend_token_s x tokens`` (CostModel.issue). The
profiler times that issue around ``ModelRunner.extend`` alone (runtime/profile_gpu.py
``extend_phase``); ``host.launch_s`` comes from its verify stall loop (runtime/profile_host.py
``stall_phase``). The engine's launch call (runtime/engine.py ``_launch_call``, timed by
runtime/host_probe.py) runs ``ModelRunner.extend`` and, outside it, the KV sync (the new
prompt's slots reserved, every running row held to the ledger), the accept bookkeeping, the
prompt tokens' draw, the timing marks and the step record. Does the charge count part of the
launch twice (issue 8)? Per measured run (``DIR/*-measured``: steps.parquet,
host_probe.parquet, summary.json), over its extend-only launches (mode extend, part main):

- ``x_issue`` / ``x_charged``: the median of call / issue and of call / (issue + launch_s,
  launch_per_req_s x batch included);
- ``level``: the run's host level against the level of the profile's extend phase: the run's
  reference work (summary.json ``host_speed.reference_work_s``) over the reference work at
  which the profile measured its extend terms (``host.reference_work_by_term``, or read back
  from the provenance of older profiles, else ``host.reference_work_s``); NaN without them;
- ``x_issue_lvl`` / ``x_charged_lvl``: the two ratios over ``level``.

Printed per set of runs and over every set together: the medians over runs, and the same
over the runs whose level is within ``--near`` of the profile's (the host at the level the
terms were measured at, where the ratios need no conditioning). A charge that counts part of
the launch twice reads below 1 there by that part; one that misses host work, above.

    python benchmarks/extend_charge.py --runs R24/results docs/measurements/h200-v24/h200-1b.yaml \\
        [--runs R23/results docs/measurements/h200-v23/h200-1b.yaml ...] [--near 0.1] [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = ("x_issue", "x_charged", "x_issue_lvl", "x_charged_lvl")


def extend_term_level(profile: Any) -> float | None:
    """The reference work (s) at which ``profile`` measured its extend issue terms: its
    ``host.reference_work_by_term`` entry, the provenance's extend phase (profiles before the
    field, runtime.host_reference.term_references_from_provenance), else its
    ``host.reference_work_s``; None when it has none."""
    from specsched.runtime.host_reference import term_references_from_provenance

    h = profile.host
    refs = h.reference_work_by_term or term_references_from_provenance(profile) or {}
    return refs.get("host.launch_per_extend_s", h.reference_work_s)


def run_charge(run: Path, profile: Any, min_calls: int = 9) -> dict[str, float] | None:
    """One measured run's row (see the module docstring), None with fewer than ``min_calls``
    extend-only launches.

    Raises:
        ValueError: host_probe.parquet and steps.parquet differ in rows.
    """
    s = pd.read_parquet(run / "steps.parquet")
    hp = pd.read_parquet(run / "host_probe.parquet")
    if len(s) != len(hp):
        raise ValueError(f"{run}: host_probe.parquet has {len(hp)} rows, steps.parquet {len(s)}")
    sel = ((s["mode"] == "extend") & (s["part"] == "main")).to_numpy()
    if sel.sum() < min_calls:
        return None
    h = profile.host
    tok = s["num_extend_tokens"].to_numpy(dtype=float)[sel]
    bs = s["batch_size"].to_numpy(dtype=float)[sel]
    call = hp["host_launch_s"].to_numpy(dtype=float)[sel]
    issue = h.launch_per_extend_s + h.launch_per_extend_token_s * tok
    charged = issue + h.launch_s + h.launch_per_req_s * bs
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    ref = (summary.get("host_speed") or {}).get("reference_work_s")
    base = extend_term_level(profile)
    level = ref / base if ref and base else float("nan")
    row = {"calls": float(sel.sum()), "tokens": float(np.median(tok)), "call_ms": 1e3 * float(np.median(call)),
           "issue_ms": 1e3 * float(np.median(issue)), "launch_ms": 1e3 * h.launch_s, "level": level,
           "x_issue": float(np.median(call / issue)), "x_charged": float(np.median(call / charged))}
    row["x_issue_lvl"] = row["x_issue"] / level
    row["x_charged_lvl"] = row["x_charged"] / level
    return row


def medians(t: pd.DataFrame, near: float) -> str:
    """One line: the medians of :data:`COLUMNS` over ``t``'s runs, and of the raw ratios over
    its runs within ``near`` of the profile's level."""
    m = t[list(COLUMNS)].median()
    close = t[np.abs(np.log(t.level)) < np.log1p(near)]
    line = (f"{len(t)} runs: x_issue {m.x_issue:.3f}, x_charged {m.x_charged:.3f}; at the run's level "
            f"x_issue {m.x_issue_lvl:.3f}, x_charged {m.x_charged_lvl:.3f}")
    if len(close):
        c = close[["x_issue", "x_charged"]].median()
        line += f"; {len(close)} runs within {near:.0%} of the profile's level: x_issue {c.x_issue:.3f}, x_charged {c.x_charged:.3f}"
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs=2, action="append", required=True, metavar=("RESULTS_DIR", "PROFILE"),
                    help="a folder of CELL-ARM-measured runs and the profile they were predicted with (repeatable)")
    ap.add_argument("--near", type=float, default=0.1, help="a run within this of the profile's level (default 0.1)")
    ap.add_argument("--min-calls", type=int, default=9, help="runs with fewer extend-only launches are left out")
    ap.add_argument("--csv", default=None, help="also write every run's row here")
    args = ap.parse_args(argv)
    from specsched.sim.errors import ConfigError
    from specsched.sim.profile import load_profile

    if not args.near > 0:
        print(f"extend_charge: --near {args.near}: give a fraction above 0", file=sys.stderr)
        return 2
    rows = []
    for results, prof in args.runs:
        root = Path(results)
        runs = sorted(p for p in root.glob("*-measured") if (p / "host_probe.parquet").is_file())
        if not runs:
            print(f"extend_charge: {root}: no CELL-ARM-measured run with host_probe.parquet", file=sys.stderr)
            return 2
        try:
            profile = load_profile(prof)
        except ConfigError as e:
            print(f"extend_charge: {e}".splitlines()[0], file=sys.stderr)
            return 2
        for p in runs:
            try:
                row = run_charge(p, profile, args.min_calls)
            except (ValueError, KeyError, OSError) as e:
                print(f"extend_charge: skipped {p}: {e}", file=sys.stderr)
                continue
            if row is not None:
                rows.append({"set": results, "run": p.name.removesuffix("-measured"), **row})
    if not rows:
        print(f"extend_charge: no run with {args.min_calls} or more extend-only launches", file=sys.stderr)
        return 2
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 1000):
        print(t.drop(columns="set").round(3).to_string(index=False))
    for name, grp in t.groupby("set", sort=False):
        print(f"{name}: {medians(grp, args.near)}")
    if len(args.runs) > 1:
        print(f"all: {medians(t, args.near)}")
    if args.csv:
        t.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
