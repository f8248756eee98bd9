"""benchmarks/measured_noise_rounds.py: each recorded TTFT/TPOT figure is matched to the measured
run that states it, and a miss is counted as sampling noise only where the prediction lies
inside that run's interval."""

from __future__ import annotations

import csv
import json
import tarfile

from specsched.analysis.measured_noise import measured_intervals
from specsched.sim.bench_serving import read_bench_one
from specsched.sim.engine import SimEngine
from specsched.sim.results import write_results

from tests.conftest import load_benchmark, make_scenario, tiny_profile

nr = load_benchmark("measured_noise_rounds")


def test_a_miss_inside_the_measured_interval_is_counted_as_noise_and_one_outside_is_not(tmp_path):
    sc = make_scenario({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1},
                       {"kind": "poisson", "num_requests": 80, "request_rate": 40.0,
                        "input_len": {"kind": "uniform", "value": 400, "range_ratio": 0.9},
                        "output_len": {"kind": "uniform", "value": 30, "range_ratio": 0.5}})
    run_dir = write_results(SimEngine(sc, tiny_profile(), seed=5).run(), tmp_path / "res" / "c-base-measured")
    line = read_bench_one(run_dir / "bench_serving.jsonl")
    (lo, hi), = measured_intervals(line, ["median_ttft_ms"]).values()
    meas = line.summary["median_ttft_ms"]
    rnd = tmp_path / "docs" / "h200-v99"
    rnd.mkdir(parents=True)
    with tarfile.open(rnd / "results.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "res", arcname="results")
    inside = hi if abs(hi / meas - 1) > 0.05 else lo   # a miss outside 5 %, at the interval's edge
    rows = [{"cell": "c", "arm": "base", "metric": "median_ttft_ms", "predicted": inside, "measured": meas},
            {"cell": "c", "arm": "base", "metric": "median_tpot_ms", "predicted": 3 * line.summary["median_tpot_ms"],
             "measured": line.summary["median_tpot_ms"]},
            {"cell": "c", "arm": "other", "metric": "p90_ttft_ms", "predicted": 1.0, "measured": 2.0}]
    with open(rnd / "validate.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["cell", "arm", "metric", "predicted", "measured", "error_pct"])
        w.writeheader()
        w.writerows([dict(r, error_pct=0) for r in rows])
    got, n = nr.round_rows(rnd / "validate.csv", rnd / "results.tar.gz")
    assert n == 1 and [r["inside"] for r in got] == [True, False, False]
    assert got[2]["low"] != got[2]["low"]   # no run of arm "other": no interval
    assert nr.main(["--docs", str(tmp_path / "docs")]) == 0
    text = (tmp_path / "docs" / "noise.md").read_text()
    assert "| median_ttft_ms | 1 | 1 | 1 | 0 | 0 |" in text and "| median_tpot_ms | 1 | 1 | 0 | 0 | 0 |" in text
    assert "Of 2 misses outside 5 % with an interval, **1** lie inside it" in text
    assert json.loads((run_dir / "summary.json").read_text())["arm"] == "base"


def test_a_folder_without_archives_is_one_line_and_nothing_written(tmp_path, capsys):
    assert nr.main(["--docs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0]
    assert not (tmp_path / "noise.md").exists()
