"""benchmarks/calibrate_holdout.py and benchmarks/measure_sweep.py: repeats of a load stay on
one side of the split; a CPU sweep's lines carry send times and the hold-out replays them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
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
    import tarfile

    import pandas as pd
    with tarfile.open(out / "results.tar.gz") as t:   # per-launch host readings, rows aligned with the steps
        t.extractall(tmp_path / "x", filter="data")
    for d in (tmp_path / "x" / "runs").iterdir():
        probe, steps = pd.read_parquet(d / "host_probe.parquet"), pd.read_parquet(d / "steps.parquet")
        assert len(probe) == len(steps) > 0 and (probe.step.to_numpy() == steps.step.to_numpy()).all()
        assert {"mode", "batch_size"} < set(probe.columns) and len(probe.columns) > 4
    report = tmp_path / "holdout.md"
    assert holdout.main([str(out / "bench_serving"), "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
                         "--max-evals", "2", "--out", str(report)]) == 0
    text = report.read_text()
    capsys.readouterr()
    assert holdout.cli([str(out / "bench_serving"), "--profile", "nope", "--out", str(tmp_path / "x.md")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "x.md").exists()
    assert "4 of 4 runs replay their own send times" in text
    # 2 repeats x (3 fitted metrics + mean ITL, reported beside them) each side
    assert text.count("| fit |") == 8 and text.count("| held out |") == 8
    assert text.count("| mean_itl_ms |") == 4
    # mean ITL is reported, never the verdict's worst figure nor fitted
    verdict = next(line for line in text.splitlines() if line.startswith(("Worst held-out", "Worst")))
    assert "mean_itl_ms" not in verdict


def _count_engines(monkeypatch) -> list:
    """A list that gets one item per RuntimeEngine built from now on."""
    from specsched.runtime import engine as runtime_engine

    built = []
    real = runtime_engine.RuntimeEngine.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(runtime_engine.RuntimeEngine, "__init__", counting)
    return built


def _concurrency_sweep(out: Path, monkeypatch, scenario: str, concurrencies: str, requests: int,
                       input_len: int) -> tuple[list, list]:
    """measure_sweep --concurrencies on the CPU's tiny preset, 3 output tokens: (the engines it
    built, its bench_serving lines read, in file order)."""
    built = _count_engines(monkeypatch)
    assert load_benchmark("measure_sweep").main([
        scenario, "--device", "cpu", "--preset", "tiny", "--concurrencies", concurrencies,
        "--set", f"workload.num_requests={requests}", "--set", "workload.output_len.value=3",
        "--set", f"workload.input_len.value={input_len}", "--out", str(out)]) == 0
    runs = [parse_run(json.loads(p.read_text()), p.name) for p in sorted((out / "bench_serving").glob("*.jsonl"))]
    return built, runs


def test_a_concurrency_sweep_runs_on_one_engine_and_its_lines_order_by_concurrency(tmp_path, monkeypatch):
    """measure_sweep --concurrencies: bench_serving's closed loop (--request-rate inf
    --max-concurrency C) at each C, one engine for all of them; the hold-out orders the lines by
    concurrency."""
    out = tmp_path / "sweep"
    built, runs = _concurrency_sweep(out, monkeypatch, "scenarios/h200/poisson-nospec.yaml", "1,3", 4, 64)
    assert len(built) == 1
    assert [r.args.get("max_concurrency") for r in runs] == [1, 3]
    assert sorted(holdout.load_key(r) for r in runs) == [(math.inf, 1.0), (math.inf, 3.0)]
    rows = (out / "sweep.csv").read_text().splitlines()
    assert rows[0].startswith("rate,max_concurrency,") and [r.split(",")[1] for r in rows[1:]] == ["1", "3"]


def test_a_concurrency_sweep_of_a_closed_loop_runs_each_point_at_its_concurrency(tmp_path, monkeypatch):
    """measure_sweep --concurrencies on a closed-loop scenario (kind closed_loop reads
    ``concurrency``, not ``max_concurrency``): every point ran at the file's concurrency while
    sweep.csv named the point's. Each point now runs at its own, on one engine."""
    built, runs = _concurrency_sweep(tmp_path / "sweep", monkeypatch, "scenarios/h200/window2-closed.yaml", "1,2", 3, 40)
    assert len(built) == 1
    assert [r.args.get("max_concurrency") for r in runs] == [1, 2]


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


def _drawn(rate: float, sends: list[float], k: int):
    n = len(sends)
    return parse_run({"completed": n, "request_rate": rate, "input_lens": [10] * n, "output_lens": [5] * n,
                      "ttfts": [0.01] * n, "start_times": sends}, f"d{k}.jsonl:1")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([8.0, 16.0]), st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=10),
       st.floats(0.0, 0.0009))
def test_invariant_repeats_of_a_draw_count_once_in_the_means(specs, jitter):
    """Invariant: runs at one load share a draw exactly when their send times match (within
    1 ms: a repeat's clock jitter); a draw repeated r times weighs as much in a load's mean
    as a draw run once (each draw's runs averaged first)."""
    runs, rows = [], []
    for rate, draw, reps in specs:
        sends = [0.0, 0.1 * (draw + 1), 0.5 * (draw + 1)]
        for j in range(reps):
            run = _drawn(rate, [s + jitter * (j % 2) for s in sends], len(runs))
            runs.append(run)
            rows.append({"set": "held out", "load": holdout.load_key(run), "rate": rate, "conc": None,
                         "metric": "m", "measured": 10.0 * (draw + 1), "after": 11.0 * (draw + 1)})
    ids = holdout.draw_ids(runs)
    for a, ra in zip(ids, runs, strict=True):
        for b, rb in zip(ids, runs, strict=True):
            same = holdout.load_key(ra) == holdout.load_key(rb) and holdout.same_arrivals(ra, rb)
            assert (a == b) == same
    for r, i in zip(rows, ids, strict=True):
        r["draw"] = i
    for m in holdout.draw_means(rows):
        draws = {(rate, d) for rate, d, _ in specs if rate == m["rate"]}
        assert m["draws"] == len(draws)
        assert m["measured"] == sum(10.0 * (d + 1) for _, d in draws) / len(draws)
        assert abs(m["error"] - 10.0) < 1e-9   # every draw 10 % high: the means too


def test_draw_without_send_times_is_its_own_and_a_shifted_draw_is_another():
    a = _drawn(8.0, [0.0, 0.1, 0.2], 0)
    b = _drawn(8.0, [0.0, 0.1, 0.2 + 0.002], 1)   # 2 ms off: another draw
    c = parse_run({"completed": 3, "request_rate": 8.0}, "c.jsonl:1")
    d = parse_run({"completed": 3, "request_rate": 8.0}, "d.jsonl:1")
    assert holdout.draw_ids([a, b, c, d]) == [0, 1, 2, 3]
    assert holdout.draw_ids([a, _drawn(16.0, [0.0, 0.1, 0.2], 2), a]) == [0, 1, 0]   # other load, other draw


def test_holdout_levels_of_a_run_replayed_with_its_own_profile_are_exact(tmp_path, capsys):
    """A simulated run taken as the 'measurement' and replayed with the profile that made it:
    error 0, extend level 1, the same first-token tail; bad input is one line, exit 2."""
    from specsched.sim.config import load_scenario, with_value
    from specsched.sim.engine import run_scenario
    from specsched.sim.results import write_results

    levels = load_benchmark("holdout_levels")
    sc = with_value(with_value(load_scenario("scenarios/h200/poisson-nospec.yaml"), "workload.num_requests", 24),
                    "workload.request_rate", 30.0)
    write_results(run_scenario(sc, seed=3), tmp_path / "runs" / "rate30-seed3-rep1")
    out = tmp_path / "levels.md"
    assert levels.main([str(tmp_path / "runs"), "--profile", "h200-1b", "--at-run-level", "1", "--out", str(out)]) == 0
    row = next(x for x in out.read_text().splitlines() if x.startswith("| 30 | rate30"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == cells[3] and cells[4] == "+0.0 %" and cells[5] == "1.000" and cells[6] == cells[7]
    assert cells[9] == cells[2] and cells[10] == "+0.0 %"   # at its own level (1 / 1): the same prediction
    mean = next(x for x in out.read_text().splitlines() if x.startswith("| 30 | 1 |"))   # one draw
    assert mean.count("+0.0 %") == 2
    capsys.readouterr()
    assert levels.cli([str(tmp_path / "runs"), "--profile", "nope", "--out", str(tmp_path / "x.md")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "x.md").exists()
    assert levels.cli([str(tmp_path / "none"), "--profile", "h200-1b"]) == 2


def test_a_missing_runs_file_is_named_as_missing(tmp_path, capsys):
    """Not "need runs at 2 loads or more ... found 0 run(s)": the path does not exist."""
    missing = tmp_path / "nope.jsonl"
    assert holdout.cli([str(missing), "--profile", "h200-1b"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "does not exist" in err, err


@pytest.mark.parametrize("opt", ["--jobs", "--seeds", "--max-evals"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_count_below_one_is_refused(opt, value, capsys):
    """``--jobs 0`` or ``-1`` ran in one process without a word (type=int), ``--seeds 0``
    failed deep in the fit; each is one line, exit 2."""
    with pytest.raises(SystemExit) as e:
        holdout.main(["somewhere", "--profile", "h200-1b", opt, value])
    assert e.value.code == 2 and opt in capsys.readouterr().err


@pytest.mark.parametrize(("accept", "given", "fitted_itl"), [
    (3.2, None, "mean_itl_ms"),             # speculative runs: the default is calibrate --from's
    (1.0, None, "median_itl_ms"),           # plain decoding: the hold-out's own targets
    (3.2, "median_ttft_ms,median_itl_ms,output_throughput", "median_itl_ms"),   # stated: as stated
])
def test_the_holdout_fits_what_calibrate_from_fits_unless_told(tmp_path, monkeypatch, accept, given, fitted_itl):
    """The hold-out checks the fit a user of ``specsched calibrate --from`` gets: by default it
    fits the same metrics (analysis.calibrate_bench.default_fit_metrics: mean ITL for a
    speculative run, whose median ITL sits on one rung of interval / tokens)."""
    for rate in (4, 8, 16, 32):
        line = {"completed": 8, "request_rate": rate, "max_concurrency": None, "duration": 2.0,
                "median_ttft_ms": 50.0, "median_itl_ms": 5.0, "mean_itl_ms": 6.0, "output_throughput": 900.0,
                "accept_length": accept}
        (tmp_path / f"rate{rate}.jsonl").write_text(json.dumps(line) + "\n")
    seen = {}

    class Stop(Exception):
        pass

    def fake_fit(train, profile, params, **kw):
        seen["metrics"] = kw["metrics"]
        raise Stop

    monkeypatch.setattr(holdout, "cases_from_runs", lambda runs, *a, **k: list(runs))
    monkeypatch.setattr(holdout, "pin_acceptance", lambda cases, *a, **k: (cases, []))
    monkeypatch.setattr(holdout, "metric_noise", lambda train, metrics: None)
    monkeypatch.setattr(holdout, "fit", fake_fit)
    argv = [str(tmp_path), "--profile", "h200-1b", "--seeds", "1"] + (["--fit-metrics", given] if given else [])
    with pytest.raises(Stop):
        holdout.main(argv)
    assert fitted_itl in seen["metrics"]
    assert ({"mean_itl_ms", "median_itl_ms"} - {fitted_itl}).isdisjoint(seen["metrics"])


IMPOSSIBLE_LINE = {"completed": 4, "request_rate": 2.0, "duration": 10.0, "total_output_tokens": 400,
                   "output_throughput": 90.0, "median_ttft_ms": 30.0}
"""A run whose output_throughput is not total_output_tokens / duration (40): read as written,
with the reader's note."""


def test_the_holdout_prints_the_readers_notes_as_the_cli_does(tmp_path, capsys):
    """The reader's notes (figures no single run gives, per-request lists left out) were
    dropped by the hold-out, which ``calibrate --from`` prints as ``warning:`` lines."""
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(IMPOSSIBLE_LINE) + "\n")
    assert holdout.main([str(p), "--profile", "h200-1b"]) == 2   # one load: nothing to hold out
    err = capsys.readouterr().err
    warned = [x for x in err.splitlines() if x.startswith(f"warning: {p}:1: ")]
    assert len(warned) == 1 and "output_throughput 90" in warned[0], err


def test_holdout_levels_prints_the_readers_notes_as_the_cli_does(tmp_path, capsys, monkeypatch):
    """As the hold-out: the reader's notes of each run's bench_serving.jsonl reach stderr."""
    import specsched.analysis.calibrate_bench as cb

    levels = load_benchmark("holdout_levels")
    d = tmp_path / "runs" / "rate2-seed1-rep1"
    d.mkdir(parents=True)
    (d / "bench_serving.jsonl").write_text(json.dumps(IMPOSSIBLE_LINE) + "\n")
    (d / "steps.parquet").write_bytes(b"")

    class Stop(Exception):
        pass

    def stop(*a, **k):
        raise Stop

    monkeypatch.setattr(cb, "cases_from_runs", stop)   # the notes come before any replay
    with pytest.raises(Stop):
        levels.main([str(tmp_path / "runs"), "--profile", "h200-1b"])
    err = capsys.readouterr().err
    warned = [x for x in err.splitlines() if x.startswith("warning: ") and "bench_serving.jsonl:1: " in x]
    assert len(warned) == 1 and "output_throughput 90" in warned[0], err


def _cut_file(p):
    """A sweep file whose last run was cut while appended (a file copied while bench_serving
    wrote it): one whole run, then the next run's line unfinished, without its newline."""
    whole = json.dumps({**IMPOSSIBLE_LINE, "output_throughput": 40.0})
    p.write_text(whole + "\n" + whole[:30])
    return p


def test_the_holdout_leaves_a_cut_last_line_out_as_the_cli_does(tmp_path, capsys):
    """A last line cut short refused every run of the file in the hold-out; ``calibrate --from
    FILE`` leaves it out with a ``warning:`` line and reads the runs before it."""
    p = _cut_file(tmp_path / "runs.jsonl")
    assert holdout.main([str(p), "--profile", "h200-1b"]) == 2   # one load: nothing to hold out
    err = capsys.readouterr().err
    assert f"warning: {p}:2: left out: the last line is cut short" in err, err
    assert "found 1 run(s)" in err, err


def test_holdout_levels_leaves_a_cut_last_line_out_as_the_cli_does(tmp_path, capsys, monkeypatch):
    """As the hold-out: each run folder's bench_serving.jsonl is read with its cut last line left out."""
    import specsched.analysis.calibrate_bench as cb

    levels = load_benchmark("holdout_levels")
    d = tmp_path / "runs" / "rate2-seed1-rep1"
    d.mkdir(parents=True)
    _cut_file(d / "bench_serving.jsonl")
    (d / "steps.parquet").write_bytes(b"")
    read = []

    class Stop(Exception):
        pass

    def stop(runs, *a, **k):
        read.append(runs)
        raise Stop

    monkeypatch.setattr(cb, "cases_from_runs", stop)
    with pytest.raises(Stop):
        levels.main([str(tmp_path / "runs"), "--profile", "h200-1b"])
    err = capsys.readouterr().err
    assert "bench_serving.jsonl:2: left out: the last line is cut short" in err, err
    assert [len(r) for r in read] == [1]


def test_an_error_cell_without_an_error_says_why():
    """A measured 0 or a figure not predicted reads n/a with the reason, never "+nan %"."""
    assert holdout._pct_cell(1.1, 1.0) == "+10.0 %"
    assert holdout._pct_cell(1.0, 0.0) == "n/a (measured 0)"
    assert holdout._pct_cell(float("nan"), 1.0) == "n/a (not predicted)"
    assert holdout._pct_cell(None, 1.0) == "n/a (not predicted)"


def test_a_miss_inside_one_runs_draw_interval_is_said_and_a_concurrency_load_is_named():
    """The verdict's sentence counts the held-out misses (beyond 10 %) that lie inside one run's
    5-95 % draw interval around the prediction; a closed-loop load reads as its concurrency."""
    held = [{"run": "a", "metric": "median_itl_ms", "after": 100.0, "measured": 115.0},   # miss, inside +20 %
            {"run": "a", "metric": "median_ttft_ms", "after": 100.0, "measured": 130.0},  # miss, outside
            {"run": "b", "metric": "median_itl_ms", "after": 100.0, "measured": 103.0}]   # no miss
    spreads = {"a": {"median_itl_ms": (8.0, -5.0, 20.0), "median_ttft_ms": (5.0, -8.0, 9.0)},
               "b": {"median_itl_ms": (1.0, -1.0, 1.0)}}
    text = holdout.within_draw_spread(held, spreads)
    assert text is not None and text.startswith("Of the 2 held-out figure(s) beyond 10 %, 1 lie inside")
    assert holdout.within_draw_spread(held[2:], spreads) is None
    assert holdout._load_label({"rate": math.inf, "conc": 32}) == "max concurrency 32"
    assert holdout._load_label({"rate": 8.0, "conc": None}) == "8.0 req/s"
