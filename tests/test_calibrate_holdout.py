"""benchmarks/calibrate_holdout.py and benchmarks/measure_sweep.py: repeats of a load stay on
one side of the split; a CPU sweep's lines carry send times and the hold-out replays them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.bench_serving import parse_run

from tests.conftest import load_benchmark

holdout = load_benchmark("calibrate_holdout")


def _run(rate: float, conc: int | None, k: int):
    return parse_run({"completed": 1, "request_rate": rate, "max_concurrency": conc}, f"r{k}.jsonl:1")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0]), st.sampled_from([None, 8])), min_size=2, max_size=12))
def test_invariant_repeats_of_a_load_stay_on_one_side(loads):
    """Invariant: every fitted load is below every held-out load, no load is on both sides,
    and the fit set is the lower half of the distinct loads."""
    runs = [_run(r, c, k) for k, (r, c) in enumerate(loads)]
    train, held = holdout.split_by_load(runs)
    assert len(train) + len(held) == len(runs)
    tk, hk = {holdout.load_key(r) for r in train}, {holdout.load_key(r) for r in held}
    assert not tk & hk
    assert len(tk) == len(tk | hk) // 2
    if tk:
        assert max(tk) < min(hk)


def test_cpu_sweep_lines_have_send_times_and_the_holdout_replays_them(tmp_path, capsys):
    sweep = load_benchmark("measure_sweep")
    out = tmp_path / "sweep"
    assert sweep.main(["scenarios/h200/poisson-nospec.yaml", "--device", "cpu", "--preset", "tiny",
                       "--rates", "50,400", "--seeds", "1", "--repeats", "2", "--set", "workload.num_requests=4",
                       "--set", "workload.output_len.value=3", "--set", "workload.input_len.value=64",
                       "--out", str(out)]) == 0
    lines = sorted((out / "bench_serving").glob("*.jsonl"))
    assert [p.name for p in lines] == ["rate400-seed1-rep1.jsonl", "rate400-seed1-rep2.jsonl",
                                       "rate50-seed1-rep1.jsonl", "rate50-seed1-rep2.jsonl"]
    run = parse_run(json.loads(lines[0].read_text()), "x:1")
    assert run.details is not None and run.details.start_s is not None and len(run.details.start_s) == 4
    assert (out / "results.tar.gz").exists() and len((out / "sweep.csv").read_text().splitlines()) == 5
    report = tmp_path / "holdout.md"
    assert holdout.main([str(out / "bench_serving"), "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
                         "--max-evals", "2", "--out", str(report)]) == 0
    text = report.read_text()
    capsys.readouterr()
    assert holdout.cli([str(out / "bench_serving"), "--profile", "nope", "--out", str(tmp_path / "x.md")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "x.md").exists()
    assert "4 of 4 runs replay their own send times" in text
    assert text.count("| fit |") == 6 and text.count("| held out |") == 6   # 2 repeats x 3 metrics each side


def test_bench_from_measured_writes_send_times_and_drops_what_it_is_told(tmp_path):
    from specsched.sim.engine import run_scenario
    from specsched.sim.results import write_results

    from tests.conftest import make_scenario, tiny_profile

    sc = make_scenario(server={"speculative_algorithm": "none"},
                       workload={"kind": "poisson", "num_requests": 12, "request_rate": 40.0})
    res = run_scenario(sc, seed=2, profile=tiny_profile())
    write_results(res, tmp_path / "r40-measured")
    bfm = load_benchmark("bench_from_measured")
    assert bfm.main([str(tmp_path / "r40-measured"), "--out", str(tmp_path / "lines"), "--details",
                     "--drop", "itls,generated_texts"]) == 0
    rec = json.loads((tmp_path / "lines" / "r40.jsonl").read_text())
    assert "itls" not in rec and "generated_texts" not in rec and len(rec["start_times"]) == 12
    assert rec["median_ttft_ms"] == res.summary["median_ttft_ms"]
    run = parse_run(rec, "r40.jsonl:1")
    assert run.details.start_s is not None and len(run.details.itls) == 12   # missing itls read as empty lists
