"""Hold-out check of ``specsched calibrate --from``: fit on the lower-load half of a set of
bench_serving runs, predict the upper half; target within 10 % on median TTFT, median ITL
and output tok/s.

    python benchmarks/calibrate_holdout.py RUNS_DIR --profile P [--scenario-template S] \\
        [--out docs/calibration-holdout.md] [--seeds 3] [--params prefill,decode,host]

RUNS_DIR holds bench_serving result files (``*.jsonl``, searched recursively; every line is a
run: e.g. the ``bench_serving.jsonl`` of each results directory of ``specsched measure``, or
SGLang's ``--output-file``). Runs are ordered by load (request rate, then max concurrency);
the lower half is fitted, the upper half held out.

A synthetic check needs no GPU: ``--make-synthetic RUNS_DIR --scenario S --rates 4,8,...
--perturb prefill=1.3,decode=0.85,host=1.6`` first simulates the scenario at each rate with
the profile's values multiplied by the given factors (one seed per rate, seeds 101.., as a
"measurement" is one run) and writes each run's results directory (with its
bench_serving.jsonl) under RUNS_DIR.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

from specsched.analysis.calibrate_bench import (
    ARRIVALS,
    FIT_METRICS,
    cases_from_runs,
    fit,
    predict,
    scale_profile,
)
from specsched.analysis.io import atomic_write_text
from specsched.sim.bench_serving import read_bench
from specsched.sim.profile import load_profile

TARGET_PCT = 10.0


def load_key(run) -> tuple[float, float]:
    """Load order: request rate (inf last), then max concurrency."""
    r = run.args.get("request_rate", math.inf)
    return (r if isinstance(r, float) else math.inf, float(run.args.get("max_concurrency") or 0))


def make_synthetic(out: Path, scenario: str, rates: list[float], profile: str | None, perturb: dict[str, float]) -> None:
    from specsched.sim.config import load_scenario, with_value
    from specsched.sim.engine import run_scenario
    from specsched.sim.results import write_results

    sc = load_scenario(scenario)
    prof = scale_profile(load_profile(profile or sc.profile, sc.path), perturb)
    for i, r in enumerate(rates):
        s = with_value(sc, "workload.request_rate", r)
        res = run_scenario(s, seed=101 + i, profile=prof)
        res.summary["source"] = "synthetic"
        write_results(res, out / f"rate-{r:g}")
        print(f"rate {r:g}: median TTFT {res.summary['median_ttft_ms']:.2f} ms, median ITL "
              f"{res.summary['median_itl_ms']:.3f} ms, {res.summary['output_throughput']:.0f} tok/s")


def _pct(v: float | None, q: float) -> float:
    return (v - q) / q * 100 if v is not None and q else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs_dir", type=Path)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--scenario-template")
    ap.add_argument("--params", default="prefill,decode,host")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--max-evals", type=int, default=40)
    ap.add_argument("--arrivals", choices=ARRIVALS, default="auto",
                    help="replay each run's send times (details), draw at its rate (rate), or replay where the line "
                         "has send times (auto, the default)")
    ap.add_argument("--out", type=Path, help="markdown table (e.g. docs/calibration-holdout.md)")
    ap.add_argument("--title", default="Hold-out calibration check")
    ap.add_argument("--note", action="append", default=[], help="a line for the report (repeatable)")
    ap.add_argument("--make-synthetic", action="store_true", help="first simulate the runs (see the module docstring)")
    ap.add_argument("--scenario", help="--make-synthetic: scenario whose request_rate is swept")
    ap.add_argument("--rates", help="--make-synthetic: comma-separated request rates")
    ap.add_argument("--perturb", default="prefill=1.3,decode=0.85,host=1.6", help="--make-synthetic: factor per parameter")
    a = ap.parse_args(argv)
    perturb = {k: float(v) for k, v in (x.split("=") for x in a.perturb.split(","))}
    if a.make_synthetic:
        make_synthetic(a.runs_dir, a.scenario, [float(x) for x in a.rates.split(",")], a.profile, perturb)
    files = sorted(a.runs_dir.rglob("*.jsonl"))
    runs = sorted((r for f in files for r in read_bench(f)), key=load_key)
    if len(runs) < 2:
        print(f"need at least 2 runs in {a.runs_dir}, found {len(runs)}", file=sys.stderr)
        return 2
    half = len(runs) // 2
    params = a.params.split(",")
    profile = load_profile(a.profile)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cases = cases_from_runs(runs, a.profile, a.scenario_template, Path(tmp), a.arrivals)
        train = cases[:half]
        res = fit(train, profile, params, seeds=a.seeds, max_evals=a.max_evals,
                  progress=lambda i, loss, f: print(f"  eval {i}: loss {loss:.4g} " + " ".join(f"{x:.3f}" for x in f), file=sys.stderr))
        rows = []
        for c in cases:
            before = predict(c, profile, a.seeds)
            after = predict(c, res.profile, a.seeds)
            for m in FIT_METRICS:
                q = c.run.summary.get(m)
                if q is None:
                    continue
                rows.append({"set": "fit" if c in train else "held out", "rate": c.run.args.get("request_rate"),
                             "conc": c.run.args.get("max_concurrency"), "metric": m, "measured": q,
                             "before": before.get(m), "after": after.get(m)})
    wall = time.perf_counter() - t0
    held = [r for r in rows if r["set"] == "held out"]
    worst = max(abs(_pct(r["after"], r["measured"])) for r in held)
    cmd = "python benchmarks/calibrate_holdout.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# {a.title}", "", *a.note, "" if a.note else "",
             f"Command: `{cmd}`", "",
             f"Fitted on the {half} lower-load run(s), held out the other {len(runs) - half}; parameters "
             f"{', '.join(params)}; predictions are means over {a.seeds} seeds; {res.evals} fit evaluations, "
             f"{wall:.0f} s on this machine.", "",
             "Fitted factors: " + ", ".join(f"{k} x{v:.3f}" for k, v in res.factors.items())
             + (f" (the runs were made with {', '.join(f'{k} x{v:g}' for k, v in perturb.items())})" if a.make_synthetic else ""), "",
             "| set | request rate | max conc. | metric | measured | before fit | error | after fit | error |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['set']} | {r['rate']} | {r['conc']} | {r['metric']} | {r['measured']:.3f} | {r['before']:.3f} | "
                     f"{_pct(r['before'], r['measured']):+.1f} % | {r['after']:.3f} | {_pct(r['after'], r['measured']):+.1f} % |")
    verdict = "met" if worst <= TARGET_PCT else "not met"
    lines += ["", f"Worst held-out error after the fit: {worst:.1f} % (target {TARGET_PCT:g} %: {verdict})."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        atomic_write_text(a.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
