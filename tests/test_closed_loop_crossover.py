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


def _lines_of(tmp_path, src: str, name: str, edit) -> str:
    """The runs under ``src`` as one JSONL file in folder ``name``, each record passed through ``edit``."""
    import json
    from pathlib import Path

    recs = [json.loads(x) for f in sorted(Path(src).rglob("*.jsonl")) for x in f.read_text().splitlines()]
    for r in recs:
        edit(r)
    (tmp_path / name).mkdir()
    (tmp_path / name / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(tmp_path / name)


def test_runs_it_cannot_predict_are_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    """An empty folder gave an empty table and exit 0; a run without num_prompts or completed
    a TypeError traceback; a speculative run given as the plain arm's was predicted without
    speculation. Each is one line naming it, exit 2, nothing written."""
    tool = load_benchmark("closed_loop_crossover")
    spec = _sweep(tmp_path, "base", (2, 4))
    (tmp_path / "empty").mkdir()
    no_count = _lines_of(tmp_path, spec, "nocount", lambda r: (r.pop("num_prompts"), r.pop("completed")))
    for args, said in (([str(tmp_path / "empty"), "--plain", spec], "no bench_serving run"),
                       ([no_count, "--plain", spec], "num_prompts"),
                       ([spec, "--plain", spec], "accept_length")):
        capsys.readouterr()
        assert tool.main(["--spec", *args, "--scenario", str(CELL), "--profile", "h200-1b", "--out",
                          str(tmp_path / "r.md"), "--csv", str(tmp_path / "v.csv"),
                          "--set", *(f"{k}={v}" for k, v in SMALL.items())]) == 2
        err = [x for x in capsys.readouterr().err.strip().splitlines() if not x.startswith("warning: profile")]
        assert len(err) == 1 and said in err[0], err
        assert not (tmp_path / "r.md").exists() and not (tmp_path / "v.csv").exists()


def test_what_the_report_cannot_split_it_says_and_other_lengths_are_warned(tmp_path, capsys):
    """Runs at one concurrency (or with no positive throughput) left the split out without a
    word; a run sent at other lengths than the scenario's was predicted at the scenario's, also
    without a word."""
    tool = load_benchmark("closed_loop_crossover")
    spec, plain = _sweep(tmp_path, "base", (4,)), _sweep(tmp_path, "nospec", (2, 4))
    longer = _lines_of(tmp_path, plain, "longer", lambda r: r.update(random_input_len=2048))
    capsys.readouterr()
    assert tool.main(["--spec", spec, "--plain", longer, "--scenario", str(CELL), "--profile", "h200-1b",
                      "--min-conc", "2", "--set", *(f"{k}={v}" for k, v in SMALL.items())]) == 0
    out, err = capsys.readouterr()
    assert "No measured split for arm spec: it needs runs at two concurrencies >= 2" in out
    assert "the runs are at C = 4." in out and "Crossover" not in out
    assert "random_input_len 2048 (the scenario's 64: --set workload.input_len.value=2048)" in err


def test_no_crossover_says_which_way_speculation_stays():
    """``crossover`` is None both where speculation never loses and where it never wins; the
    report called both "speculation never loses"."""
    at = load_benchmark("closed_loop_crossover")._at
    assert at((2.0, 0.1), (1.0, 0.2)) == "10"
    assert at((2.0, 0.2), (1.0, 0.1)) == "none (speculation never loses)"
    assert at((1.0, 0.1), (2.0, 0.2)) == "none (speculation never wins)"
    assert at((1.0, 0.2), (2.0, 0.1)) == "none (speculation loses alone and wins from C = 10 on)"
