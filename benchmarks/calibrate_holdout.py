"""Hold-out check of ``specsched calibrate --from``: fit on the lower-load half of a set of
bench_serving runs, predict the upper half; target within 10 % on median TTFT, median ITL
and output tok/s.

    python benchmarks/calibrate_holdout.py RUNS_DIR [RUNS_DIR ...] --profile P [--scenario-template S] \\
        [--out docs/calibration-holdout.md] [--seeds 3] [--params prefill,decode,host] \\
        [--arrivals auto|rate|details] [--spread-seeds 20] [--elasticity] [--set KEY=VALUE ...]

Each RUNS_DIR holds bench_serving result files (``*.jsonl``, searched recursively; every line
is a run: e.g. the ``bench_serving.jsonl`` of each results directory of ``specsched measure``,
or SGLang's ``--output-file``); several are pooled. Runs are ordered by load (request rate,
then max concurrency); the runs at the lower half of the distinct loads are fitted (all
repeats of a load together), the others held out. Lines with send times replay them
(``--arrivals``, as ``calibrate --from``). ``--spread-seeds N`` adds, per held-out run, the
spread of the fitted profile's prediction over N arrival draws at the line's rate (what one
run's draw can move a metric by); ``--elasticity`` the % change of each held-out metric per
1 % change of each fitted parameter (how closely the fit must pin each one).

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

import numpy as np
from specsched.analysis.calibrate_bench import (
    ARRIVALS,
    FIT_METRICS,
    cases_from_runs,
    default_fit_metrics,
    fit,
    metric_noise,
    parse_prior,
    pin_acceptance,
    predict,
    scale_profile,
)
from specsched.analysis.io import atomic_write_text
from specsched.sim.bench_serving import read_bench_runs
from specsched.sim.cli_types import positive_int
from specsched.sim.errors import ConfigError
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


def _pct_cell(v: float | None, q: float) -> str:
    """A table cell of ``v``'s error against the measured ``q``: "+1.2 %", or n/a with the
    reason where there is none (a measured 0, a figure not predicted), not "+nan %"."""
    if v is None or not math.isfinite(v):
        return "n/a (not predicted)"
    if not q:
        return "n/a (measured 0)"
    return f"{_pct(v, q):+.1f} %"


def split_by_load(runs: list) -> tuple[list, list]:
    """(fit set, held-out set): the runs at the lower half of the distinct loads, and the
    rest. Repeats of a load (several runs at one rate: repeats, other arrival draws) stay on
    one side, so the held-out loads are never seen by the fit."""
    loads = sorted({load_key(r) for r in runs})
    low = set(loads[: len(loads) // 2])
    return [r for r in runs if load_key(r) in low], [r for r in runs if load_key(r) not in low]


def same_arrivals(a, b, tol_s: float = 1e-3) -> bool:
    """Whether runs ``a`` and ``b`` sent the same requests at the same times (a repeat of one
    arrival draw): both lines have send times, as many, each within ``tol_s`` of the other's."""
    sa = a.details.start_s if a.details is not None else None
    sb = b.details.start_s if b.details is not None else None
    return (sa is not None and sb is not None and len(sa) == len(sb)
            and bool(np.all(np.abs(np.asarray(sa, float) - np.asarray(sb, float)) <= tol_s)))


def draw_ids(runs: list) -> list[int]:
    """Per run, the index of its arrival draw: runs at one load with the same send times
    (:func:`same_arrivals`: repeats of one seed) share one; a run without send times is a
    draw of its own. Means over draws weigh each draw once, however often it was repeated."""
    ids: list[int] = []
    reps: list[tuple[tuple, object, int]] = []   # (load, first run of the draw, id)
    for r in runs:
        hit = next((i for k, f, i in reps if k == load_key(r) and same_arrivals(f, r)), None)
        if hit is None:
            hit = len(reps)
            reps.append((load_key(r), r, hit))
        ids.append(hit)
    return ids


def _cv(v: np.ndarray) -> float | None:
    return float(np.std(v, ddof=1) / np.mean(v) * 100) if len(v) > 1 else None


def _fmt(v: float | None, spec: str) -> str:
    return format(v, spec) if v is not None else ""


def draw_means(rows: list[dict]) -> list[dict]:
    """Per (set, load, metric): the mean over arrival draws of the measured figure and of the
    prediction (each draw's repeats averaged first), the error of the means, the per-run
    errors' range, the draws' spread measured and predicted (CV %), and the correlation
    across draws of predicted with measured (Pearson, on logs; 3 draws or more): whether the
    model follows one draw's arrivals or only the mean. ``rows`` need ``draw`` set."""
    out = []
    keys = sorted({(r["set"] != "fit", r["load"], r["metric"]) for r in rows})
    for held, load, m in keys:
        rs = [r for r in rows if (r["set"] != "fit", r["load"], r["metric"]) == (held, load, m)]
        by: dict[int, list[dict]] = {}
        for r in rs:
            by.setdefault(r["draw"], []).append(r)
        meas = np.array([np.mean([r["measured"] for r in v]) for v in by.values()])
        pred = np.array([np.mean([r["after"] for r in v]) for v in by.values()])
        errs = [_pct(r["after"], r["measured"]) for r in rs]
        corr = (float(np.corrcoef(np.log(pred), np.log(meas))[0, 1])
                if len(meas) >= 3 and np.std(np.log(pred)) > 1e-9 and np.std(np.log(meas)) > 1e-9 else None)
        out.append({"set": "held out" if held else "fit", "rate": rs[0]["rate"], "conc": rs[0]["conc"], "metric": m,
                    "draws": len(by), "runs": len(rs), "measured": float(meas.mean()), "after": float(pred.mean()),
                    "error": _pct(float(pred.mean()), float(meas.mean())), "run_min": min(errs), "run_max": max(errs),
                    "cv_measured": _cv(meas), "cv_predicted": _cv(pred), "corr": corr})
    return out


def repeat_spread(rows: list[dict]) -> dict[tuple, float]:
    """(load, metric) -> coefficient of variation (%) of the measured figure over the runs at
    that load, where there are two or more."""
    by: dict[tuple, list[float]] = {}
    for r in rows:
        by.setdefault((r["load"], r["metric"]), []).append(r["measured"])
    return {k: float(np.std(v, ddof=1) / np.mean(v) * 100) for k, v in by.items() if len(v) > 1}


def _load_label(row: dict) -> str:
    """Where a row's run was measured: its request rate, or its client concurrency at
    ``--request-rate inf`` (a closed-loop sweep's loads)."""
    rate = row.get("rate")
    if isinstance(rate, (int, float)) and math.isinf(rate) and row.get("conc"):
        return f"max concurrency {row['conc']:g}"
    return f"{rate} req/s"


def within_draw_spread(held: list[dict], spreads: dict[str, dict]) -> str | None:
    """One sentence on the held-out figures that miss the target: how many of them the run's
    own draw could explain, i.e. lie inside the 5-95 % interval of one run's figure over arrival
    (and acceptance) draws around the prediction (:func:`seed_spread`). None when none misses
    or no spread was computed for them."""
    miss = [r for r in held if abs(_pct(r["after"], r["measured"])) > TARGET_PCT
            and r["metric"] in spreads.get(r["run"], {})]
    if not miss:
        return None
    inside = [r for r in miss if r["after"] * (1 + spreads[r["run"]][r["metric"]][1] / 100) <= r["measured"]
              <= r["after"] * (1 + spreads[r["run"]][r["metric"]][2] / 100)]
    return (f"Of the {len(miss)} held-out figure(s) beyond {TARGET_PCT:g} %, {len(inside)} lie inside one run's 5-95 % "
            "draw interval around the prediction (the draw spread column): a single run of that load lands there "
            "from its own draw, so such a miss does not by itself show a model error.")


def seed_spread(case, profile, seeds: int) -> dict[str, tuple[float, float, float]]:
    """Per metric, the simulator's spread over ``seeds`` arrival draws of one run of the case's
    scenario: (coefficient of variation %, 5th and 95th percentile as % of the mean). What a
    single measured run of this size could differ from the expectation by, from its draw."""
    from specsched.sim.engine import run_scenario

    vals = np.array([[run_scenario(case.scenario, seed=case.scenario.seed + k, profile=profile).summary[m]
                      for m in FIT_METRICS] for k in range(seeds)], dtype=float)
    mean = vals.mean(axis=0)
    lo, hi = np.percentile(vals, [5, 95], axis=0)
    cv = vals.std(axis=0, ddof=1) / mean * 100
    return {m: (float(c), float((a / u - 1) * 100), float((b / u - 1) * 100))
            for m, c, a, b, u in zip(FIT_METRICS, cv, lo, hi, mean, strict=True)}


def elasticities(case, profile, params: list[str], seeds: int, step: float = 1.02,
                 base: dict | None = None) -> dict[str, dict[str, float]]:
    """d log(metric) / d log(factor) of the case's prediction, per parameter (a +2 % step):
    how much a held-out figure moves per 1 % error of each fitted parameter. ``base``: the
    case's prediction under ``profile`` with ``seeds``, when already made."""
    base = base if base is not None else predict(case, profile, seeds)
    out: dict[str, dict[str, float]] = {}
    for p in params:
        moved = predict(case, scale_profile(profile, {p: step}), seeds)
        out[p] = {m: math.log(moved[m] / base[m]) / math.log(step) for m in FIT_METRICS
                  if base.get(m) and moved.get(m)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs_dirs", type=Path, nargs="+",
                    help="bench_serving files, or folders of them (searched for *.jsonl); several are pooled")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--scenario-template")
    ap.add_argument("--params", default="prefill,decode,host")
    ap.add_argument("--seeds", type=positive_int, default=3)
    ap.add_argument("--max-evals", type=positive_int, default=160,
                    help="evaluations the fit may run, a hard cap (calibrate --from's; a fit of three factors "
                         "takes some 50-90)")
    ap.add_argument("--jobs", type=positive_int, default=1,
                    help="worker processes for the fit's simulations, at most the CPUs (the fit is the same)")
    ap.add_argument("--prior", default="default",
                    help="prior on the log factors: 'default' (analysis.calibrate_bench.PRIOR_SD), 'none' (the "
                         "unregularised fit), or NAME=SD,...; with a prior each metric's residuals are divided by "
                         "its standard error (analysis.calibrate_bench.residual_noise)")
    ap.add_argument("--arrivals", choices=ARRIVALS, default="auto",
                    help="replay each run's send times (details), draw at its rate (rate), or replay where the line "
                         "has send times (auto, the default)")
    ap.add_argument("--spread-seeds", type=int, default=0,
                    help="also simulate each held-out run at its rate over this many arrival draws (fitted profile) "
                         "and report the spread a single run has from its draw")
    ap.add_argument("--elasticity", action="store_true",
                    help="also report, per held-out run, the %% change of each metric per 1 %% change of each parameter")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                    help="scenario override for every run (repeatable; analysis.overrides), for what the measured "
                         "server ran with that neither the lines nor the template say, e.g. "
                         "server.cuda_graph_bs=[1,2,4,8,12,16,24,32,40,48,56,64]")
    ap.add_argument("--out", type=Path, help="markdown table (e.g. docs/calibration-holdout.md)")
    ap.add_argument("--fit-metrics", default="auto",
                    help=f"metrics the fit matches (default auto: what `specsched calibrate --from` fits, "
                         f"{','.join(FIT_METRICS)} with mean_itl_ms in place of median_itl_ms when the fitted runs "
                         "decoded speculatively; the verdict is always on the hold-out's targets)")
    ap.add_argument("--also-report", default="mean_itl_ms",
                    help="metrics reported beside the fitted ones, neither fitted nor in the verdict (comma-separated; "
                         "default mean_itl_ms: a speculative run's median ITL sits on one rung of interval / tokens, "
                         "sim/metrics.py median_itl_rung, and can jump a rung where the mean does not; '' for none)")
    ap.add_argument("--title", default="Hold-out calibration check")
    ap.add_argument("--note", action="append", default=[], help="a line for the report (repeatable)")
    ap.add_argument("--make-synthetic", action="store_true", help="first simulate the runs (see the module docstring)")
    ap.add_argument("--scenario", help="--make-synthetic: scenario whose request_rate is swept")
    ap.add_argument("--rates", help="--make-synthetic: comma-separated request rates")
    ap.add_argument("--perturb", default="prefill=1.3,decode=0.85,host=1.6", help="--make-synthetic: factor per parameter")
    a = ap.parse_args(argv)
    perturb = {k: float(v) for k, v in (x.split("=") for x in a.perturb.split(","))}
    if a.make_synthetic:
        make_synthetic(a.runs_dirs[0], a.scenario, [float(x) for x in a.rates.split(",")], a.profile, perturb)
    missing = [str(d) for d in a.runs_dirs if not d.exists()]
    if missing:
        raise ConfigError("<command line>", "runs_dirs", missing[0], "does not exist: give bench_serving files "
                          "(.jsonl) or folders of them")
    files = sorted({f for d in a.runs_dirs for f in ([d] if d.is_file() else d.rglob("*.jsonl"))})
    read = [r for f in files for r in read_bench_runs(f)]   # as calibrate --from reads them, in file order
    runs = sorted(read, key=load_key)
    train_runs, held_runs = split_by_load(runs)
    if not train_runs or not held_runs:
        print(f"need runs at 2 loads or more in {', '.join(map(str, a.runs_dirs))}, found {len(runs)} run(s)", file=sys.stderr)
        return 2
    params = a.params.split(",")
    # the same default as calibrate --from, so the hold-out checks the fit a user gets
    fit_metrics = (tuple(default_fit_metrics(train_runs)) if a.fit_metrics == "auto"
                   else tuple(m for m in a.fit_metrics.split(",") if m))
    also = tuple(dict.fromkeys(m for m in (*fit_metrics, *a.also_report.split(",")) if m and m not in FIT_METRICS))
    profile = load_profile(a.profile)
    prior = parse_prior(a.prior, params, analytic=profile.analytic is not None)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cases = cases_from_runs(train_runs + held_runs, a.profile, a.scenario_template, Path(tmp), a.arrivals,
                                overrides=a.overrides)
        cases, pinned = pin_acceptance(cases, profile, a.seeds)   # as calibrate --from does
        for note in pinned:
            print(f"acceptance: {note}", file=sys.stderr)
        train = cases[: len(train_runs)]
        res = fit(train, profile, params, seeds=a.seeds, max_evals=a.max_evals, prior_sd=prior, jobs=a.jobs,
                  metrics=fit_metrics, noise=metric_noise(train, fit_metrics) if prior else None,
                  progress=lambda i, loss, f: print(f"  eval {i}: loss {loss:.4g} " + " ".join(f"{x:.3f}" for x in f), file=sys.stderr))
        rows = []
        draws = dict(zip(map(id, cases), draw_ids([c.run for c in cases]), strict=True))
        fitted = {id(c): (b, f) for c, b, f in zip(train, res.before, res.after, strict=True)}
        for c in cases:
            # the fit set's predictions are the fit's own (same profiles, same seeds)
            if id(c) not in fitted:
                fitted[id(c)] = (predict(c, profile, a.seeds), predict(c, res.profile, a.seeds))
            before, after = fitted[id(c)]
            for m in (*FIT_METRICS, *also):
                q = c.run.summary.get(m)
                if q is None or not isinstance(before.get(m), (int, float)) or not isinstance(after.get(m), (int, float)):
                    continue
                rows.append({"target": m in FIT_METRICS, "set": "fit" if c in train else "held out", "load": load_key(c.run),
                             "rate": c.run.args.get("request_rate"),
                             "conc": c.run.args.get("max_concurrency"), "run": c.label, "draw": draws[id(c)],
                             "metric": m, "measured": q,
                             "before": before.get(m), "after": after.get(m)})
        held_cases = cases[len(train_runs):]
        spreads = {}
        if a.spread_seeds > 1:
            drawn_dir = Path(tmp) / "drawn"
            drawn_dir.mkdir()
            drawn = cases_from_runs(held_runs, a.profile, a.scenario_template, drawn_dir, "rate", overrides=a.overrides)
            drawn = pin_acceptance(drawn, profile, a.seeds)[0]
            seen = {}
            for c in drawn:   # one spread per load (repeats share it)
                key = load_key(c.run)
                if key not in seen:
                    seen[key] = seed_spread(c, res.profile, a.spread_seeds)
                spreads[c.label] = seen[key]
        seen_e: dict = {}
        for c in held_cases:   # per held-out load: for the fit's uncertainty there (and the table)
            key = load_key(c.run)
            if key not in seen_e:
                seen_e[key] = (c, elasticities(c, res.profile, params, a.seeds, base=fitted[id(c)][1]))
        elastic = list(seen_e.values())
        for r in rows:
            if r["set"] == "held out":
                e = seen_e[r["load"]][1]
                r["fit_se"] = None if not r["target"] else res.prediction_se_pct({p_: e[p_].get(r["metric"], 0.0) for p_ in params})
    wall = time.perf_counter() - t0
    repeat_cv = repeat_spread(rows)
    held = [r for r in rows if r["set"] == "held out" and r["target"]]
    worst = max(abs(_pct(r["after"], r["measured"])) for r in held)
    cmd = "python benchmarks/calibrate_holdout.py " + " ".join(argv if argv is not None else sys.argv[1:])
    n_replay = sum(c.scenario.workload.kind == "trace" for c in cases)
    lines = [f"# {a.title}", "", *a.note, "" if a.note else "",
             f"Command: `{cmd}`", "",
             f"Fitted on the {len(train_runs)} run(s) at the lower half of the {len({load_key(r) for r in runs})} loads, "
             f"held out the other {len(held_runs)}; parameters {', '.join(params)}; fitted to {', '.join(fit_metrics)}; "
             f"predictions are means over "
             f"{a.seeds} seeds; {n_replay} of {len(cases)} runs replay their own send times (the rest draw arrivals "
             f"at their rate); {res.evals} fit evaluations, {wall:.0f} s on this machine."
             + "".join(f" {line}." for line in res.stopped()), "",
             f"Weighting: {res.weighting()} (a residual's standard error: the measured figure's, from the spread "
             "between runs at one load or else one run's seed scatter, and the seed mean's; no prior: unregularised "
             "least squares on the log ratios).", "",
             "Fitted factors: " + ", ".join(f"{k} x{v:.3f}" for k, v in res.factors.items())
             + (f" (the runs were made with {', '.join(f'{k} x{v:g}' for k, v in perturb.items())})" if a.make_synthetic else ""), "",
             "| set | request rate | max conc. | run | metric | measured | before fit | error | after fit | error | "
             "fit uncertainty |" + (" repeats' spread (CV) |" if repeat_cv else "")
             + (" draw spread (CV; 5-95 %) |" if spreads else ""),
             "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if repeat_cv else "")
             + ("---|" if spreads else "")]
    for r in rows:
        sp = spreads.get(r["run"], {}).get(r["metric"])
        lines.append(f"| {r['set']} | {r['rate']} | {r['conc']} | {r['run']} | {r['metric']} | {r['measured']:.3f} | "
                     f"{r['before']:.3f} | {_pct_cell(r['before'], r['measured'])} | {r['after']:.3f} | "
                     f"{_pct_cell(r['after'], r['measured'])} | "
                     + ("|" if r.get("fit_se") is None else f"+-{r['fit_se']:.1f} % |" if math.isfinite(r["fit_se"])
                         else "n/a (moved by a factor no fitted figure moves) |")
                     + ((f" {repeat_cv[(r['load'], r['metric'])]:.1f} % |" if (r["load"], r["metric"]) in repeat_cv
                         else " |") if repeat_cv else "")
                     + ((f" {sp[0]:.1f} %; {sp[1]:+.0f} / {sp[2]:+.0f} % |" if sp else " |") if spreads else ""))
    verdict = "met" if worst <= TARGET_PCT else "not met"
    worst_row = max(held, key=lambda r: abs(_pct(r["after"], r["measured"])))
    means = draw_means(rows)
    several = len({r["draw"] for r in rows}) > len({r["load"] for r in rows})   # a load with two draws or more
    if several:
        held_m = [r for r in means if r["set"] == "held out" and r["metric"] in FIT_METRICS]
        worst_m = max(held_m, key=lambda r: abs(r["error"]))
        lines += ["", "Means over arrival draws (each draw's repeats averaged first; per-run errors after the fit):", "",
                  "| set | request rate | max conc. | metric | draws (runs) | measured mean | predicted mean | error "
                  "of means | per-run errors | draws' CV measured | draws' CV predicted | correlation over draws |",
                  "|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        for r in means:
            lines.append(f"| {r['set']} | {r['rate']} | {r['conc']} | {r['metric']} | {r['draws']} ({r['runs']}) | "
                         f"{r['measured']:.3f} | {r['after']:.3f} | {r['error']:+.1f} % | {r['run_min']:+.1f} .. "
                         f"{r['run_max']:+.1f} % | {_fmt(r['cv_measured'], '.1f')} % | {_fmt(r['cv_predicted'], '.1f')} % | "
                         f"{_fmt(r['corr'], '+.2f')} |")
        verdict_m = "met" if abs(worst_m["error"]) <= TARGET_PCT else "not met"
        lines += ["", f"Worst held-out error of the means over draws: {abs(worst_m['error']):.1f} % (target "
                  f"{TARGET_PCT:g} %: {verdict_m}), {worst_m['metric']} at {_load_label(worst_m)}. Worst single run: "
                  f"{worst:.1f} %, {worst_row['metric']} at {_load_label(worst_row)} ({worst_row['run']})."]
    else:
        lines += ["", f"Worst held-out error after the fit: {worst:.1f} % (target {TARGET_PCT:g} %: {verdict}), "
                  f"{worst_row['metric']} at {_load_label(worst_row)}."]
    if spreads and (inside := within_draw_spread(held, spreads)) is not None:
        lines += ["", inside]
    if repeat_cv:
        lines += ["", "Repeats' spread: the coefficient of variation of the measured figure over the runs at that "
                  "load (repeats of the same arrivals, or other draws): how far one run of the load is from another."]
    if res.cov is not None:
        se = res.factor_se_pct()
        lines += ["", "Fit uncertainty: the factors' standard errors from the residual scatter the fit set leaves "
                  "(each metric's own scatter through the fit's Jacobian: analysis.factor_fit.covariance): "
                  + ", ".join(f"{k} +-{v:.1f} %" if math.isfinite(v) else f"{k} +-n/a (no fitted figure moves it)"
                              for k, v in se.items())
                  + "; carried to each held-out figure through its elasticities (sqrt(g^T cov g)). A held-out error "
                  "within about twice its fit uncertainty is as close as the fit set can pin that figure down."]
    unidentified = res.identifiability() + res.unexplained
    if unidentified:
        lines += ["", "What the fit set could not identify or explain (analysis.calibrate_bench.FitResult.identifiability, "
                  "unexplained_runs):", "",
                  *(f"- {line}" for line in unidentified)]
    if spreads:
        lines += ["", f"Draw spread: the fitted profile's predictions of one run at the line's rate over {a.spread_seeds} "
                  "arrival draws (seeds): the coefficient of variation, and the 5th / 95th percentiles relative to the "
                  "mean. A single run with its own draw differs from the expectation by that much."]
    if a.elasticity:
        lines += ["", "Elasticities (fitted profile, replayed arrivals where the line has them): % change of each held-out "
                  "metric per 1 % change of each parameter.", "",
                  "| request rate | parameter | " + " | ".join(FIT_METRICS) + " |", "|---:|---|" + "---:|" * len(FIT_METRICS)]
        for c, e in elastic:
            for p_ in params:
                lines.append(f"| {c.run.args.get('request_rate')} | {p_} | "
                             + " | ".join(f"{e[p_].get(m, float('nan')):+.2f}" for m in FIT_METRICS) + " |")
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
