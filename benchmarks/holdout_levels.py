"""Each measured run's host level beside its hold-out error: why one run's median TTFT misses
when the mean over arrival draws does not.

For every measured run (a results folder of ``benchmarks/measure_sweep.py``: ``runs/NAME/``
with ``steps.parquet``, ``requests.parquet`` and the run's ``bench_serving.jsonl`` carrying
its send times), the run is replayed with a profile (its own arrivals and lengths, as
``specsched calibrate --from`` does) and the measured and predicted per-step records are set
side by side:

- **extend level**: each extend that ran alone (batch 1) divided by the predicted span of an
  extend of the same token count (interpolated over the replay's own lone extends), median
  over the run. 1.0 = the run's extends ran as the profile says.
- **first-token tail**: per request, the time from its extend's GPU end to its first token
  (the host stamping the result), median over the run; the prediction has none to speak of.
  On the rented H200 it is ~0.05 ms or ~2-2.5 ms, held in stretches of seconds: the host's
  two speeds of docs/measurements/h200-v10.md.
- the run's median TTFT measured and predicted, and the error.

A markdown table per run, then per request rate the correlation over runs of the TTFT error
with each level, and the means over arrival draws (a run's repeats, ``-repN``, averaged
first). ``--at-run-level REF`` adds, as a check of the mechanism only, each run predicted with
its prefill scaled by its own extend level / REF (REF: the level the fitted profile stands
for, e.g. the fit set's median): what the prediction would be if it knew the host level the
run met, which a prediction made before the run cannot. No GPU needed.

    python benchmarks/holdout_levels.py docs/measurements/h200-v8-holdout/seeds/results.tar.xz \\
        docs/measurements/h200-v8-holdout/seed1/results.tar.xz --profile FITTED.yaml \\
        --scenario-template scenarios/h200/poisson-nospec.yaml [--at-run-level 0.90] [--out docs/X.md]
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
from specsched.analysis.io import atomic_write_text

SLOW_TAIL_MS = 1.0
"""A first-token tail above this counts as the host's slow level (the two levels sit near
0.05 and 2-2.5 ms)."""


def _main_steps(d: Path) -> pd.DataFrame:
    s = pd.read_parquet(d / "steps.parquet")
    return s[s.part == "main"]


def lone_extends(d: Path) -> tuple[np.ndarray, np.ndarray]:
    """(token counts, spans in ms) of the extends of a results folder that ran alone."""
    s = _main_steps(d)
    e = s[(s["mode"] == "extend") & (s.batch_size == 1)]
    return e.num_extend_tokens.to_numpy(float), ((e.gpu_end_s - e.gpu_start_s) * 1e3).to_numpy()


def first_token_tails(d: Path) -> np.ndarray:
    """Per request (in send order), ms from the GPU end of the extend that held it to its
    first token. Extends are matched to requests in order, one entry per request of each
    extend's batch (FCFS; a prompt fits one chunk at the runs' chunked_prefill_size)."""
    s = _main_steps(d)
    r = pd.read_parquet(d / "requests.parquet").sort_values("start_s")
    e = s[s["mode"] == "extend"]
    ends = np.repeat(e.gpu_end_s.to_numpy(), e.batch_size.to_numpy().astype(int))
    n = min(len(r), len(ends))
    return (r.first_token_s.to_numpy()[:n] - ends[:n]) * 1e3


def extend_level(measured: Path, predicted: Path) -> float:
    """Median over the measured run's lone extends of span / predicted span at its token count
    (the prediction's lone extends, interpolated linearly in tokens). NaN without either."""
    tm, sm = lone_extends(measured)
    tp, sp = lone_extends(predicted)
    if len(tm) == 0 or len(tp) == 0:
        return float("nan")
    o = np.argsort(tp)
    return float(np.median(sm / np.interp(tm, tp[o], sp[o])))


def run_dirs(paths: list[Path], tmp: Path) -> list[Path]:
    """Results folders with a bench_serving.jsonl, from folders or results.tar.gz files."""
    out = []
    for i, p in enumerate(paths):
        root = p
        if p.is_file():
            root = tmp / f"in{i}"
            with tarfile.open(p) as t:
                t.extractall(root, filter="data")
        out += sorted(x.parent for x in root.rglob("bench_serving.jsonl") if (x.parent / "steps.parquet").exists())
    return out


def _rate(name: str) -> float:
    m = re.search(r"rate([0-9.]+)", name)
    return float(m.group(1)) if m else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+", help="results.tar.gz files or folders of measured runs")
    ap.add_argument("--profile", required=True, help="profile to replay with (e.g. calibrate --from's output)")
    ap.add_argument("--scenario-template", help="as calibrate --from's")
    ap.add_argument("--rates", help="only these request rates (comma-separated)")
    ap.add_argument("--at-run-level", type=float, metavar="REF",
                    help="also predict each run with prefill x (its extend level / REF): a check, not a prediction")
    ap.add_argument("--out", type=Path, help="markdown file to write")
    a = ap.parse_args(argv)
    from specsched.analysis.calibrate_bench import cases_from_runs, scale_profile
    from specsched.sim.bench_serving import read_bench_runs
    from specsched.sim.engine import run_scenario
    from specsched.sim.profile import load_profile
    from specsched.sim.results import write_results

    prof = load_profile(a.profile)
    keep = {float(x) for x in a.rates.split(",")} if a.rates else None
    rows = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for k, d in enumerate(run_dirs(a.results, tmp)):
            if keep is not None and _rate(d.name) not in keep:
                continue
            runs = read_bench_runs(d / "bench_serving.jsonl")   # as calibrate --from reads them
            (tmp / f"case{k}").mkdir()
            case = cases_from_runs(runs, a.profile, a.scenario_template, tmp / f"case{k}", "details")[0]
            pred = tmp / f"pred{k}"
            write_results(run_scenario(case.scenario, seed=case.scenario.seed, profile=prof), pred)
            tails = first_token_tails(d)
            q, p = runs[0].summary["median_ttft_ms"], float(np.median(pd.read_parquet(pred / "requests.parquet").ttft_s)) * 1e3
            level = extend_level(d, pred)
            row = {"run": d.name, "draw": re.sub(r"-rep\d+$", "", d.name), "rate": _rate(d.name), "measured": q,
                   "predicted": p, "error": (p / q - 1) * 100, "level": level, "tail": float(np.median(tails)),
                   "tail_pred": float(np.median(first_token_tails(pred))),
                   "slow": float(np.mean(tails > SLOW_TAIL_MS) * 100)}
            if a.at_run_level and np.isfinite(level):
                at = run_scenario(case.scenario, seed=case.scenario.seed,
                                  profile=scale_profile(prof, {"prefill": level / a.at_run_level}))
                row["at_level"] = at.summary["median_ttft_ms"]
            rows.append(row)
    if not rows:
        print("no measured runs (folders with steps.parquet and bench_serving.jsonl) in "
              + ", ".join(map(str, a.results)), file=sys.stderr)
        return 2
    df = pd.DataFrame(rows).sort_values(["rate", "run"])
    cmd = "python benchmarks/holdout_levels.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Each run's host level beside its hold-out error", "", f"Command: `{cmd}`", "",
             "Extend level: the run's lone extends over the replay's span at the same token count (median). "
             f"First-token tail: extend GPU end to first token (median); slow tail: above {SLOW_TAIL_MS:g} ms.", "",
             "| request rate | run | median TTFT measured, ms | predicted | error | extend level | first-token tail "
             "measured, ms | predicted | requests at the slow tail |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    at = "at_level" in df
    if at:
        lines[-2] = lines[-2] + f" at the run's level (prefill x level / {a.at_run_level:g}) | error |"
        lines[-1] = lines[-1] + "---:|---:|"
    lines += [f"| {r.rate:g} | {r.run} | {r.measured:.2f} | {r.predicted:.2f} | {r.error:+.1f} % | {r.level:.3f} | "
              f"{r.tail:.2f} | {r.tail_pred:.2f} | {r.slow:.0f} % |"
              + (f" {r.at_level:.2f} | {(r.at_level / r.measured - 1) * 100:+.1f} % |" if at else "")
              for r in df.itertuples()]
    lines += ["", "Correlation over runs of the TTFT error with each level, per rate:", "",
              "| request rate | runs | with extend level | with first-token tail |", "|---:|---:|---:|---:|"]
    for rate, g in df.groupby("rate"):
        if len(g) >= 3:
            c1, c2 = (float(np.corrcoef(g.error, g[k])[0, 1]) for k in ("level", "tail"))
            lines.append(f"| {rate:g} | {len(g)} | {c1:+.2f} | {c2:+.2f} |")
    cols = ["measured", "predicted"] + (["at_level"] if at else [])
    means = df.groupby(["rate", "draw"])[cols].mean().groupby("rate").agg(["mean", "count"])
    lines += ["", "Median TTFT, means over arrival draws (a draw's repeats averaged first), ms:", "",
              "| request rate | draws | measured | predicted | error" + (" | at the runs' levels | error" if at else "")
              + " |", "|---:|---:|---:|---:|---:|" + ("---:|---:|" if at else "")]
    for rate, m in means.iterrows():
        q = m[("measured", "mean")]
        lines.append(f"| {rate:g} | {m[('measured', 'count')]:.0f} | {q:.2f} | {m[('predicted', 'mean')]:.2f} | "
                     f"{(m[('predicted', 'mean')] / q - 1) * 100:+.1f} %"
                     + (f" | {m[('at_level', 'mean')]:.2f} | {(m[('at_level', 'mean')] / q - 1) * 100:+.1f} %" if at else "")
                     + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        atomic_write_text(a.out, text)
    return 0


def cli(argv: list[str] | None = None) -> int:
    """:func:`main`, a user's bad input (a profile, a file, a key) as one line and exit 2."""
    from specsched.sim.errors import one_line_on_bad_input

    return one_line_on_bad_input(main, argv)


if __name__ == "__main__":
    sys.exit(cli())
