"""Speculation against plain decoding over client concurrency: measured against predicted.

    python benchmarks/closed_loop_crossover.py --spec RUNS [RUNS ...] --plain RUNS [RUNS ...] \\
        --scenario scenarios/h200/closed-loop-crossover.yaml --spec-arm base --plain-arm nospec \\
        --profile P [--seeds 1] [--min-conc 8] [--out report.md]

RUNS: bench_serving result files or folders of them (``*.jsonl``, searched recursively), one
run per concurrency (bench_serving ``--request-rate inf --max-concurrency C``; e.g. what
``benchmarks/measure_sweep.py --concurrencies`` writes, or a real server's ``--output-file``).
Each run is predicted with the scenario's arm at the run's concurrency and prompt count
(``--profile``: a profile of the same machine), and the table gives measured and predicted
median TTFT, p90 TTFT, median TPOT, median ITL and output tok/s. Below it, the closed-loop
split of each arm's throughputs over the concurrencies >= ``--min-conc``
(:func:`analysis.closed_loop.closed_loop_split`: a lone request's time per token ``a`` and
what each concurrent request adds to every other's lifetime ``b``) and the concurrency where
speculation stops winning, measured and predicted: which of the two a prediction misses
(docs/analytic-profiles.md, "the closed-loop split"; the public MI355X DSpark report misses
``b``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from specsched.analysis.closed_loop import closed_loop_split, crossover
from specsched.analysis.io import atomic_write_text
from specsched.analysis.overrides import load_scenario_with_overrides, parse_overrides
from specsched.runtime.cli_commands import TARGET_METRICS
from specsched.sim.bench_serving import read_bench_runs
from specsched.sim.cli_types import positive_int
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile

METRICS = TARGET_METRICS
"""The five figures of the hardware target (issue 8), as gpu_validate scores them."""


def runs_in(paths: list[str]) -> list:
    """Every bench_serving run in ``paths`` (files, or folders searched for ``*.jsonl``).

    Raises:
        ConfigError: a file that is not bench_serving output, or no run at all (an empty
            folder gave an empty table and exit 0).
    """
    files = [f for p in map(Path, paths) for f in (sorted(p.rglob("*.jsonl")) if p.is_dir() else [p])]
    runs = [r for f in files for r in read_bench_runs(f)]
    if not runs:
        raise ConfigError(" ".join(paths), "<runs>", 0, "no bench_serving run in it (a result file, or a folder of "
                          "*.jsonl ones)")
    return runs


def length_note(run, scenario) -> str | None:
    """A ``warning:`` line when ``run`` (bench_serving's random dataset) sent other lengths
    than ``scenario``'s workload, which the prediction runs: the figures would be compared
    against requests the run did not send. None when they agree or the run does not say."""
    if run.args.get("dataset_name") != "random":
        return None
    w, said = scenario.workload, []
    for key, dist in (("random_input_len", w.input_len), ("random_output_len", w.output_len)):
        v = run.args.get(key)
        if v is None or dist is None or dist.kind == "file":
            continue
        ratio, own = run.args.get("random_range_ratio"), dist.range_ratio if dist.kind == "uniform" else 1.0
        if int(v) != dist.value:
            said.append(f"{key} {v:g} (the scenario's {dist.value}: --set workload.{key[7:]}.value={v:g})")
        elif ratio is not None and float(ratio) != own:
            said.append(f"random_range_ratio {ratio:g} on {key} (the scenario's {own:g})")
    if not said:
        return None
    return f"warning: {run.source}: the run sent {', '.join(said)}; predicted with the scenario's lengths"


def predict_arm(runs: list, scenario: str, arm: str, profile, seeds: int, overrides: dict | None = None) -> list[dict]:
    """One row per run (by concurrency): the run's measured metrics and the arm's prediction
    (mean over ``seeds`` seeds from the scenario's) at its max_concurrency and prompt count.

    Raises:
        ConfigError: a run without a max_concurrency (not a closed-loop run).
    """
    rows = []
    for run in runs:
        conc = run.args.get("max_concurrency")
        if not conc:
            raise ConfigError(run.source, "max_concurrency", conc, "a closed-loop run (--max-concurrency C)")
        n = run.args.get("num_prompts") or run.summary.get("completed")
        if not n:
            raise ConfigError(run.source, "num_prompts", "<missing>", "the run's prompt count (num_prompts, or "
                              "completed), which each prediction sends")
        sc = load_scenario_with_overrides(scenario, arm, {**(overrides or {}), "workload.request_rate": math.inf,
                                                          "workload.max_concurrency": int(conc),
                                                          "workload.num_requests": int(n)})
        acc = run.summary.get("accept_length")
        if acc is not None and acc > 1 and not sc.server.speculative_algorithm.enabled:
            raise ConfigError(run.source, "accept_length", f"{acc:.3g}", f"a run with speculative decoding, given as "
                              f"arm {arm!r}'s, which runs none (--spec and --plain runs mixed?)")
        if (note := length_note(run, sc)) is not None:
            print(note, file=sys.stderr)
        sims = [run_scenario(sc, seed=sc.seed + i, profile=profile).summary for i in range(seeds)]
        row = {"conc": int(conc), "run": run.source}
        for m in METRICS:
            meas, pred = run.summary.get(m, math.nan), float(np.mean([s[m] for s in sims]))
            row |= {f"meas_{m}": meas, f"pred_{m}": pred, f"err_{m}": (pred / meas - 1) * 100 if meas else math.nan}
        rows.append(row)
    return sorted(rows, key=lambda r: r["conc"])


def split_of(rows: list[dict], which: str, output_len: float,
             min_conc: int) -> tuple[tuple[float, float] | None, str | None]:
    """``closed_loop_split`` of the rows' ``which`` (meas/pred) throughputs at concurrency >=
    ``min_conc``, and why there is none: (split, None), or (None, the reason: fewer than two
    such concurrencies, or a throughput that is not a positive number)."""
    use = [r for r in rows if r["conc"] >= min_conc]
    if len({r["conc"] for r in use}) < 2:
        have = ", ".join(str(c) for c in sorted({r["conc"] for r in rows}))
        return None, f"it needs runs at two concurrencies >= {min_conc} (--min-conc); the runs are at C = {have}"
    bad = [r["conc"] for r in use if not (r[f"{which}_output_throughput"] > 0)]   # NaN too
    if bad:
        return None, f"output throughput not a positive number at C = {', '.join(map(str, bad))}"
    tok_s = [r[f"{which}_output_throughput"] for r in use]
    return closed_loop_split([r["conc"] for r in use], tok_s, output_len), None


def write_validate_csv(path: Path, arms: dict[str, list[dict]], cell: str) -> None:
    """Every figure of every run as a validate.csv row, the run's cell named ``CELL@C``."""
    import pandas as pd

    rows = [{"cell": f"{cell}@{r['conc']}", "arm": arm, "metric": m, "predicted": r[f"pred_{m}"],
             "measured": r[f"meas_{m}"], "error_pct": r[f"err_{m}"]}
            for arm, runs in arms.items() for r in runs for m in METRICS]
    atomic_write_text(path, pd.DataFrame(rows).to_csv(index=False))


def _at(plain: tuple[float, float], spec: tuple[float, float]) -> str:
    """Where speculation stops winning (:func:`crossover`), or why it has no such point: it
    never loses, never wins, or loses alone and wins from some concurrency on."""
    conc = crossover(plain, spec)
    if conc is not None:
        return f"{conc:.0f}"
    (ap, bp), (as_, bs) = plain, spec
    if as_ < ap:
        return "none (speculation never loses)"
    if bs < bp:
        return f"none (speculation loses alone and wins from C = {(as_ - ap) / (bp - bs):.0f} on)"
    return "none (speculation never wins)"


def report(arms: dict[str, list[dict]], output_len: float, min_conc: int) -> str:
    """The markdown report: per-run table, then each arm's split and the crossover."""
    lines = ["| arm | C | " + " | ".join(f"{m} meas / pred (err)" for m in METRICS) + " |",
             "|---|---:|" + "---:|" * len(METRICS)]
    for name, rows in arms.items():
        for r in rows:
            cells = [f"{r[f'meas_{m}']:,.2f} / {r[f'pred_{m}']:,.2f} ({r[f'err_{m}']:+.1f} %)" for m in METRICS]
            lines.append(f"| {name} | {r['conc']} | " + " | ".join(cells) + " |")
    lines += ["", f"Closed-loop split over C >= {min_conc} (a: a lone request's ms per output token; b: ms each "
              "concurrent request adds to every other's lifetime):", "",
              "| arm | a measured | a predicted | b measured | b predicted |", "|---|---:|---:|---:|---:|"]
    splits, notes = {}, []
    for name, rows in arms.items():
        (meas, why_meas), (pred, why_pred) = (split_of(rows, w, output_len, min_conc) for w in ("meas", "pred"))
        splits[name] = (meas, pred)
        notes += [f"No {what} split for arm {name}: {why}." for what, why in (("measured", why_meas),
                                                                              ("predicted", why_pred)) if why]
        if meas and pred:
            lines.append(f"| {name} | {meas[0] / output_len * 1e3:.2f} | {pred[0] / output_len * 1e3:.2f} | "
                         f"{meas[1] * 1e3:.1f} | {pred[1] * 1e3:.1f} |")
    if notes:
        lines += ["", *notes]
    if len(splits) == 2 and all(m and p for m, p in splits.values()):
        (sm, sp), (pm, pp) = splits["spec"], splits["plain"]
        lines += ["", f"Crossover concurrency (speculation stops winning): measured {_at(pm, sm)}, "
                  f"predicted {_at(pp, sp)}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", nargs="+", required=True, help="bench_serving runs of the speculative arm")
    ap.add_argument("--plain", nargs="+", required=True, help="bench_serving runs without speculation")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--spec-arm", default="base")
    ap.add_argument("--plain-arm", default="nospec")
    ap.add_argument("--profile", required=True, help="profile of the machine that measured the runs")
    ap.add_argument("--seeds", type=positive_int, default=1, help="seeds per prediction (default 1)")
    ap.add_argument("--min-conc", type=positive_int, default=8, help="smallest concurrency in the split (default 8)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="scenario overrides for every prediction (the runs' lengths, say)")
    ap.add_argument("--out", type=Path, help="also write the report here (markdown)")
    ap.add_argument("--csv", type=Path, help="also write every figure as gpu_validate's validate.csv rows (cell "
                                             "SCENARIO@C, arm, metric, predicted, measured, error_pct), which "
                                             "benchmarks/h200_scoreboard.py reads")
    a = ap.parse_args(argv)
    try:
        profile, overrides = load_profile(a.profile), parse_overrides(a.set)
        arms = {"spec": predict_arm(runs_in(a.spec), a.scenario, a.spec_arm, profile, a.seeds, overrides),
                "plain": predict_arm(runs_in(a.plain), a.scenario, a.plain_arm, profile, a.seeds, overrides)}
        output_len = load_scenario_with_overrides(a.scenario, a.spec_arm, overrides).workload.output_len.value
    except ConfigError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    text = report(arms, float(output_len), a.min_conc)
    if a.csv:
        cell = Path(a.scenario).stem
        write_validate_csv(a.csv, {a.spec_arm: arms["spec"], a.plain_arm: arms["plain"]}, cell)
    print(text)
    if a.out:
        atomic_write_text(a.out, f"`python benchmarks/closed_loop_crossover.py {' '.join(argv or sys.argv[1:])}`\n\n"
                          + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
