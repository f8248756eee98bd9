"""The decode/verify launch calls right after a prefill against the rest, in measured runs
(no GPU needed).

For every measured run (``DIR/*-measured`` with ``steps.parquet`` and ``host_probe.parquet``,
an extracted ``results.tar.xz`` of a GPU round) each main decode/verify launch gets its
position ``k`` after the last extend launch (1: the first launch after an extend run, 2: the
second, ...), and its excess: the launch call's host time (host_probe ``host_launch_s``,
runtime/engine.py ``_launch``) less the median of the calls at the same batch size that
are at least 4 launches after an extend and whose batch did not change. Printed per run,
the median excess (ms) and count at k = 1, 2, 3 and, for k = 1, by how many requests
joined the batch (its batch size less the last decode/verify's before the extend).

What it showed on round 19's second machine, round 19 and round 20 (speculative cells): the
first verify after a prefill +0.35-0.6 ms, more the more requests join (one request's first
accept draw, made inside the launch call until AcceptanceModel.prepare moved it before the
loop); the second -0.15..-0.5 ms (its KV top-up reserves nothing: no verify result was
processed since the first, runtime.kv_cache.ReqToTokenPool.reserve returns at once); plain
decoding +0.0-0.1 ms at both (docs/measurements/h200-v20.md, "The first verify after a
prefill").

    python benchmarks/first_verify.py RESULTS_DIR [--runs small-chunk,batch1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

STEADY_K = 4


def launch_excess(run: Path) -> pd.DataFrame:
    """One row per main decode/verify launch of ``run``: ``k`` (launches since the last
    extend; large before the first), ``batch_size``, ``joined`` (batch size less the last
    decode/verify's before the extend run; NaN for k > 1) and ``excess_ms`` (NaN where no
    steady call of that batch size exists)."""
    s = pd.read_parquet(run / "steps.parquet").reset_index(drop=True)
    hp = pd.read_parquet(run / "host_probe.parquet")
    if len(hp) != len(s):
        raise ValueError(f"{run}: host_probe.parquet has {len(hp)} rows, steps.parquet {len(s)}")
    s["call_ms"] = hp["host_launch_s"].to_numpy() * 1e3
    m = s[s["part"] == "main"].reset_index(drop=True)
    ks, joined = [], []
    k, last_bs, before_ext = 10**9, np.nan, np.nan
    for mode, bs in zip(m["mode"], m["batch_size"], strict=True):
        if mode == "extend":
            if k != 0:
                before_ext = last_bs
            k = 0
            ks.append(0)
            joined.append(np.nan)
            continue
        k += 1
        ks.append(k)
        joined.append(bs - (0 if np.isnan(before_ext) else before_ext) if k == 1 else np.nan)
        last_bs = bs
    m["k"], m["joined"] = ks, joined
    v = m[m["mode"] != "extend"].copy()
    same = v["batch_size"] == v["batch_size"].shift()
    steady = v[(v["k"] >= STEADY_K) & same].groupby("batch_size")["call_ms"].median()
    v["excess_ms"] = v["call_ms"] - v["batch_size"].map(steady)
    return v[["k", "batch_size", "joined", "excess_ms"]]


def summary(v: pd.DataFrame) -> dict[str, str]:
    """Median excess (count) at k = 1, 2, 3 and at k = 1 by requests joined (1, 2, 3+)."""
    out = {}
    for k in (1, 2, 3):
        e = v.loc[v["k"] == k, "excess_ms"].dropna()
        out[f"k={k}"] = f"{e.median():+.3f} ({len(e)})" if len(e) else "-"
    first = v[v["k"] == 1]
    for j, sel in (("1", first["joined"] == 1), ("2", first["joined"] == 2), ("3+", first["joined"] >= 3)):
        e = first.loc[sel, "excess_ms"].dropna()
        out[f"k=1 joined {j}"] = f"{e.median():+.3f} ({len(e)})" if len(e) else "-"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="directory holding CELL-ARM-measured run directories")
    ap.add_argument("--runs", default="", help="comma-separated name prefixes of the runs to read (default: all)")
    args = ap.parse_args(argv)
    runs = sorted(p for p in args.results.glob("*-measured")
                  if (p / "steps.parquet").is_file() and (p / "host_probe.parquet").is_file())
    if args.runs:
        pre = tuple(x for x in args.runs.split(",") if x)
        runs = [p for p in runs if p.name.startswith(pre)]
    if not runs:
        print(f"first_verify: no measured runs with steps.parquet and host_probe.parquet under {args.results}",
              file=sys.stderr)
        return 2
    rows = []
    for run in runs:
        try:
            rows.append({"run": run.name.removesuffix("-measured"), **summary(launch_excess(run))})
        except (ValueError, OSError) as e:
            print(f"first_verify: {e}".replace("\n", " "), file=sys.stderr)
            return 2
        except KeyError as e:
            print(f"first_verify: {run}: no column {e} (steps.parquet / host_probe.parquet)", file=sys.stderr)
            return 2
    print("launch call excess over steady calls at the same batch size, median ms (count):")
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
