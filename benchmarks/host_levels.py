"""Host-paced parts of a GPU round's runs, read from its per-step records (no GPU needed).

Two tables from a round's ``results.tar.gz`` (benchmarks/gpu_validate.py), printed as
markdown:

1. ``--prefill CELL`` (default batch1): per arm, measured and predicted means over the
   requests of the extend's span, the GPU idle gap between the extend and the draft
   injection (the slot-expansion wait), the injection's span, the first verify's span,
   and the time from the injection's end to the first token; then TTFT.
2. ``--extend-levels CELL`` (default poisson-nospec): per rate, the span of each extend
   that ran alone, divided by the span of the extend of the same token count at the
   lowest rate, median per eighth of the run: a host that runs at two speeds for seconds
   at a time shows as eighths near 1.0 and near 1.3.

    python benchmarks/host_levels.py docs/measurements/h200-v7/v8/results.tar.xz
    python benchmarks/host_levels.py docs/measurements/h200-v7/v7b/results.tar.xz --extend-levels poisson-nospec
"""

from __future__ import annotations

import argparse
import re
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd


def _steps(d: Path) -> pd.DataFrame:
    s = pd.read_parquet(d / "steps.parquet")
    return s.assign(span=(s.gpu_end_s - s.gpu_start_s) * 1e3, gap=(s.gpu_start_s - s.gpu_end_s.shift()) * 1e3)


def prefill_table(root: Path, cell: str) -> list[str]:
    """Markdown rows: per arm and side, mean ms of each prefill part (module docstring)."""
    out = ["| arm | side | extend span | gap to injection | injection span | first verify span | "
           "injection end to first token | TTFT |", "|---|---|---|---|---|---|---|---|"]
    for d in sorted(root.glob(f"{cell}-*-measured")):
        arm = d.name[len(cell) + 1:-len("-measured")]
        for side in ("measured", "predicted"):
            p = root / f"{cell}-{arm}-{side}"
            if not p.exists():
                continue
            s, r = _steps(p), pd.read_parquet(p / "requests.parquet")
            ext = s.index[(s["mode"] == "extend") & (s.part == "main")]
            inj = s.index[s.part == "inject"]
            if len(ext) == 0 or len(ext) != len(inj):
                continue
            nxt = [i + 1 for i in inj if i + 1 < len(s)]
            first = r.sort_values("start_s").first_token_s.to_numpy()[:len(inj)]
            vals = [s.span[ext].mean(), s.gap[inj].mean(), s.span[inj].mean(), s.span[nxt].mean(),
                    ((first - s.gpu_end_s[inj].to_numpy()) * 1e3).mean(), r.ttft_s.mean() * 1e3]
            out.append(f"| {arm} | {side} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    return out


def extend_levels(root: Path, cell: str) -> list[str]:
    """Markdown rows: per rate, the median per eighth of the run of extend span / the same
    token count's extend span at the lowest rate (extends that ran alone)."""
    runs = {}
    for d in root.glob(f"{cell}-rate*-measured"):
        m = re.fullmatch(rf"{re.escape(cell)}-rate([0-9.]+)-measured", d.name)
        if m:
            s = _steps(d)
            runs[float(m.group(1))] = s[(s["mode"] == "extend") & (s.batch_size == 1)]
    if len(runs) < 2:
        return []
    rates = sorted(runs)
    ref = dict(zip(runs[rates[0]].num_extend_tokens, runs[rates[0]].span, strict=True))
    out = [f"| rate | extends alone | span / span at {rates[0]:g} req/s, median per eighth of the run |", "|---|---|---|"]
    for rate in rates[1:]:
        e = runs[rate]
        ratio = np.array([sp / ref[t] if t in ref else np.nan for t, sp in zip(e.num_extend_tokens, e.span, strict=True)])
        n = len(ratio)
        eighths = [np.nanmedian(ratio[i * n // 8:(i + 1) * n // 8]) for i in range(8)]
        out.append(f"| {rate:g} | {n} | " + " ".join(f"{x:.2f}" for x in eighths) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a round's results.tar.gz, or its extracted results/ folder")
    ap.add_argument("--prefill", default="batch1", help="cell whose prefill parts to break down (default batch1)")
    ap.add_argument("--extend-levels", default="poisson-nospec", help="cell measured at several rates")
    args = ap.parse_args(argv)
    if not args.results.exists():
        print(f"host_levels: error: {args.results}: no such file or folder", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = args.results
        if root.is_file():
            with tarfile.open(root) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp) / "results"
        rows = prefill_table(root, args.prefill)
        if len(rows) > 2:
            print(f"## {args.prefill}: prefill parts, mean over requests (ms)\n\n" + "\n".join(rows) + "\n")
        rows = extend_levels(root, args.extend_levels)
        if rows:
            print(f"## {args.extend_levels}: extend span by rate against the lowest rate\n\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
