"""benchmarks/closed_loop_crossover.py: measured against predicted over client concurrency,
with each arm's closed-loop split."""

from __future__ import annotations

import re

from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.engine import run_scenario
from specsched.sim.results import write_results

from tests.conftest import ROOT, load_benchmark

CELL = ROOT / "scenarios" / "h200" / "closed-loop-crossover.yaml"
SMALL = {"workload.num_requests": 12, "workload.output_len.value": 16, "workload.input_len.value": 64}


def _sweep(tmp_path, arm, concs, **extra):
    for c in concs:
        sc = load_scenario_with_overrides(CELL, arm, {**SMALL, "workload.max_concurrency": c, **extra})
        write_results(run_scenario(sc, seed=sc.seed), tmp_path / arm / f"conc{c}")
    return str(tmp_path / arm)


def test_a_simulated_sweep_read_back_predicts_itself(tmp_path, capsys):
    """The simulator's own runs, read back as bench_serving lines (each at its concurrency and
    prompt count), are predicted with no error on every figure and give the same split."""
    tool = load_benchmark("closed_loop_crossover")
    spec, plain = _sweep(tmp_path, "base", (2, 4, 6)), _sweep(tmp_path, "nospec", (2, 4, 6))
    args = ["--spec", spec, "--plain", plain, "--scenario", str(CELL), "--profile", "h200-1b", "--min-conc", "2",
            "--csv", str(tmp_path / "validate.csv"), "--set", *(f"{k}={v}" for k, v in SMALL.items())]
    assert tool.main(args) == 0
    import pandas as pd

    rows = pd.read_csv(tmp_path / "validate.csv")
    assert len(rows) == 30 and set(rows["arm"]) == {"base", "nospec"} and (rows["error_pct"] == 0).all()
    assert set(rows["cell"]) == {"closed-loop-crossover@2", "closed-loop-crossover@4", "closed-loop-crossover@6"}
    text = capsys.readouterr().out
    errors = [float(e) for e in re.findall(r"\(([+-]\d+\.\d) %\)", text)]
    assert len(errors) == 2 * 3 * 5 and all(e == 0.0 for e in errors)
    split = re.findall(r"\| (spec|plain) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", text)
    assert [s[0] for s in split] == ["spec", "plain"] and all(s[1] == s[2] and s[3] == s[4] for s in split)


def test_a_run_that_is_not_a_closed_loop_is_one_line_and_exit_2(tmp_path, capsys):
    tool = load_benchmark("closed_loop_crossover")
    open_loop = _sweep(tmp_path, "base", (2,), **{"workload.request_rate": 50.0, "workload.max_concurrency": None})
    capsys.readouterr()
    assert tool.main(["--spec", open_loop, "--plain", open_loop, "--scenario", str(CELL), "--profile", "h200-1b",
                      "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_concurrency" in err[0] and not (tmp_path / "r.md").exists()
