"""A sweep writes every run as one bench_serving line (``<name>.bench_serving.jsonl``), as a
bench_serving loop over rates appends them: one line per run, in grid then seed order, kept
one per run across resumes and interruptions, readable by the project's own bench_serving
reader (``validate --measured``, ``calibrate --from``)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.analysis.sweep import SweepInterrupted, point_id, read_sweep, run_sweep
from specsched.analysis.sweep_store import bench_path
from specsched.analysis.synthetic import write_demo_scenario
from specsched.sim.bench_serving import bench_record, read_bench_runs
from specsched.sim.engine import run_scenario


@pytest.fixture()
def scenario(tmp_path):
    return write_demo_scenario(tmp_path / "demo.yaml")


def _lines(out):
    return [json.loads(line) for line in bench_path(out).read_text().splitlines()]


def summary_runner(scenario, seed):
    """A runner that returns a summary only (no requests table): no bench_serving line."""
    return dict(run_scenario(scenario, seed=seed).summary)


def interrupting_runner(scenario, seed):
    if scenario.server.chunked_prefill_size == 4096:
        raise KeyboardInterrupt
    return run_scenario(scenario, seed=seed)


def test_each_run_is_one_line_equal_to_its_own_runs_record(scenario, tmp_path):
    out = tmp_path / "s.parquet"
    grid = {"server.chunked_prefill_size": [4096, 2048]}
    run_sweep(scenario, grid, 2, out, executor=ThreadPoolExecutor(2), progress=False)
    lines = _lines(out)
    # grid order (4096 first, as given), then seed
    want = [(4096, 1), (4096, 2), (2048, 1), (2048, 2)]
    assert [(r["server_info"]["chunked_prefill_size"], r["server_info"]["specsched"]["seed"]) for r in lines] == want
    assert {r["sweep_point"] for r in lines} == set(read_sweep(out)["point"])
    for r, (chunk, seed) in zip(lines, want, strict=True):
        sc = load_scenario_with_overrides(scenario, "base", {"server.chunked_prefill_size": chunk})
        own = bench_record(run_scenario(sc, seed=seed), details=False)
        for key in ("completed", "duration", "median_ttft_ms", "p99_itl_ms", "output_throughput"):
            assert r[key] == pytest.approx(own[key]), key
    # the project's bench_serving reader takes the file as a real rate sweep
    runs = read_bench_runs(bench_path(out))
    assert len(runs) == 4
    assert runs[2].summary["median_ttft_ms"] == pytest.approx(lines[2]["median_ttft_ms"])


def test_resume_keeps_one_line_per_run_and_the_old_lines_unchanged(scenario, tmp_path):
    out = tmp_path / "s.parquet"
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 2, out, progress=False)
    before = bench_path(out).read_text().splitlines()
    run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 2, out, progress=False)
    after = bench_path(out).read_text().splitlines()
    assert len(after) == 4 and after[:2] == before
    assert len({(json.loads(x)["sweep_point"], json.loads(x)["server_info"]["specsched"]["seed"]) for x in after}) == 4


def test_an_interrupted_sweep_keeps_its_finished_runs_lines_and_resume_completes_them(scenario, tmp_path):
    out = tmp_path / "s.parquet"
    grid = {"server.chunked_prefill_size": [2048, 4096]}
    with pytest.raises(SweepInterrupted):
        run_sweep(scenario, grid, 1, out, executor=ThreadPoolExecutor(1), runner=interrupting_runner,
                  progress=False)
    done = {json.loads(x)["sweep_point"] for x in bench_path(out).read_text().splitlines()}
    assert done == set(read_sweep(out)["point"])
    assert point_id({"arm": "base", "server.chunked_prefill_size": 4096}) not in done
    run_sweep(scenario, grid, 1, out, progress=False)
    assert [r["server_info"]["chunked_prefill_size"] for r in _lines(out)] == [2048, 4096]


def test_a_new_sweep_of_a_summary_runner_leaves_no_old_lines(scenario, tmp_path):
    out = tmp_path / "s.parquet"
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, progress=False)
    assert bench_path(out).exists()
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, runner=summary_runner, resume=False,
              progress=False)
    assert not bench_path(out).exists()


def test_lines_of_runs_the_table_does_not_hold_are_left_out(scenario, tmp_path):
    """A sweep's table removed and another sweep written to the same name: the new sweep read
    the old bench_serving file back and kept its lines, so calibrate and validate read the
    other scenario's runs as this sweep's."""
    from specsched.analysis.sweep_store import samples_path

    out = tmp_path / "s.parquet"
    run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 1, out, progress=False)
    out.unlink()
    samples_path(out).unlink()
    run_sweep(scenario, {"server.chunked_prefill_size": [1024]}, 1, out, progress=False)
    assert [r["server_info"]["chunked_prefill_size"] for r in _lines(out)] == [1024]


def test_the_plot_legend_tells_a_points_seeds_apart(scenario, tmp_path):
    """A sweep's file holds every seed of a point: its runs were labelled "line 1: rate 4/s"
    and "line 2: rate 4/s", nothing telling them apart."""
    from specsched.analysis.bench_cli import sweep_labels

    out = tmp_path / "s.parquet"
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 2, out, progress=False)
    labels = sweep_labels(read_bench_runs(bench_path(out)))
    assert labels == ["line 1: seed 1", "line 2: seed 2"]
