"""specsched.analysis.sweep: grid x seeds on local processes, threads and an in-process Dask cluster;
resume, failures, interrupts."""

from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest
from specsched.analysis.sweep import grid_points, point_id, read_sweep, run_sweep
from specsched.analysis.synthetic import synthetic_run, write_demo_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError

GRID = {"arm": ["base", "stream_wait"], "server.chunked_prefill_size": [2048, 4096]}


@pytest.fixture()
def scenario(tmp_path):
    return write_demo_scenario(tmp_path / "demo.yaml")


_calls: list[tuple[int, int]] = []
_lock = threading.Lock()


def counting_runner(scenario, seed):
    with _lock:
        _calls.append((scenario.server.chunked_prefill_size, seed))
    return run_scenario(scenario, seed=seed)


def flaky_runner(scenario, seed):
    if scenario.server.chunked_prefill_size == 4096 and seed == 2:
        raise RuntimeError("simulated crash at 4096/seed 2")
    return run_scenario(scenario, seed=seed)


def interrupting_runner(scenario, seed):
    if scenario.server.chunked_prefill_size == 4096:
        raise KeyboardInterrupt
    return run_scenario(scenario, seed=seed)


def never_runner(scenario, seed):  # pragma: no cover - must not be called
    raise AssertionError("a finished point was run again")


def test_grid_points_order_and_arm_axis():
    pts = grid_points({"server.x": [1, 2], "arm": ["a", "b"]}, arm="base")
    assert pts == [{"arm": "a", "server.x": 1}, {"arm": "b", "server.x": 1},
                   {"arm": "a", "server.x": 2}, {"arm": "b", "server.x": 2}]
    assert grid_points({}, arm="z") == [{"arm": "z"}]
    assert point_id({"b": 1, "a": "x"}) == '{"a":"x","b":1}'
    with pytest.raises(ConfigError):
        grid_points({"server.x": []})


def test_local_processes_and_in_process_dask_give_identical_tables(scenario, tmp_path):
    from distributed import Client

    local = run_sweep(scenario, GRID, 2, tmp_path / "local.parquet", progress=False, max_workers=2)
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        dask = run_sweep(scenario, GRID, 2, tmp_path / "dask.parquet", executor=client, progress=False)
    assert local.ok and dask.ok and local.ran == dask.ran == 8
    a, b = read_sweep(local.path), read_sweep(dask.path)
    pd.testing.assert_frame_equal(a, b)
    # tidy: one row per run and metric, params as typed columns
    assert list(a.columns[:3]) == ["scenario", "arm", "server.chunked_prefill_size"]
    assert str(a["server.chunked_prefill_size"].dtype) == "Int64"
    assert a.groupby(["point", "seed"]).size().nunique() == 1
    assert set(a["seed"]) == {1, 2}
    thr = a[(a.metric == "output_throughput") & (a.arm == "stream_wait") & (a.seed == 2)
            & (a["server.chunked_prefill_size"] == 2048)]["value"]
    from specsched.analysis.overrides import load_scenario_with_overrides

    want = run_scenario(load_scenario_with_overrides(scenario, "stream_wait", {"server.chunked_prefill_size": 2048}),
                        seed=2).summary["output_throughput"]
    assert thr.tolist() == [pytest.approx(want)]


def test_resume_skips_points_already_done(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    first = run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 2, out, executor=ThreadPoolExecutor(2),
                      runner=counting_runner, progress=False)
    assert first.ran == 2 and first.skipped == 0
    before = read_sweep(out)
    _calls.clear()
    second = run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 2, out,
                       executor=ThreadPoolExecutor(2), runner=counting_runner, progress=False)
    assert second.skipped == 2 and second.ran == 2
    assert sorted(_calls) == [(4096, 1), (4096, 2)]  # only the new point ran
    after = read_sweep(out)
    old = after[after["server.chunked_prefill_size"] == 2048].reset_index(drop=True)
    pd.testing.assert_frame_equal(old, before.reset_index(drop=True))
    # everything there: nothing runs (a runner that fails if called)
    third = run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 2, out,
                      executor=ThreadPoolExecutor(1), runner=never_runner, progress=False)
    assert third.ran == 0 and third.skipped == 4 and third.ok
    # --no-resume reruns all and overwrites
    _calls.clear()
    fourth = run_sweep(scenario, {"server.chunked_prefill_size": [4096]}, 1, out,
                       executor=ThreadPoolExecutor(1), runner=counting_runner, resume=False, progress=False)
    assert fourth.ran == 1 and _calls == [(4096, 1)]
    assert set(read_sweep(out)["point"]) == {point_id({"arm": "base", "server.chunked_prefill_size": 4096})}


def test_failed_point_is_reported_and_the_others_kept(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    rep = run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 2, out,
                    executor=ThreadPoolExecutor(2), runner=flaky_runner, progress=False)
    assert not rep.ok and rep.ran == 3
    assert len(rep.failed) == 1
    f = rep.failed[0]
    assert f.params == {"arm": "base", "server.chunked_prefill_size": 4096} and f.seed == 2
    assert "RuntimeError: simulated crash" in f.error
    assert "server.chunked_prefill_size=4096 seed=2" in f.describe()
    table = read_sweep(out)
    assert set(zip(table["server.chunked_prefill_size"], table["seed"], strict=True)) == {(2048, 1), (2048, 2), (4096, 1)}
    failures = json.loads((tmp_path / "sweep.parquet.failures.json").read_text())
    assert failures[0]["params"]["server.chunked_prefill_size"] == 4096
    # a resumed sweep retries only the failed run, and clears the failure file
    _calls.clear()
    again = run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 2, out,
                      executor=ThreadPoolExecutor(1), runner=counting_runner, progress=False)
    assert again.ok and again.ran == 1 and _calls == [(4096, 2)]
    assert not (tmp_path / "sweep.parquet.failures.json").exists()
    assert len(read_sweep(out).groupby(["point", "seed"])) == 4


def test_interrupt_keeps_finished_runs(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 1, out,
                  executor=ThreadPoolExecutor(1), runner=interrupting_runner, progress=False)
    table = read_sweep(out)
    assert set(table["server.chunked_prefill_size"]) == {2048}


def test_bad_grid_is_a_config_error_before_anything_runs(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    with pytest.raises(ConfigError) as e:
        run_sweep(scenario, {"server.chunked_prefil_size": [1]}, 1, out, runner=never_runner, progress=False)
    assert e.value.key == "server.chunked_prefil_size"
    with pytest.raises(ConfigError) as e:
        run_sweep(scenario, {"server.max_running_requests": [4, 0]}, 1, out, runner=never_runner, progress=False)
    assert e.value.key == "server.max_running_requests"
    with pytest.raises(ConfigError):
        run_sweep(scenario, {"arm": ["base", "nope"]}, 1, out, runner=never_runner, progress=False)
    with pytest.raises(ConfigError):
        run_sweep(scenario, {}, 0, out, runner=never_runner, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("grid,key", [
    ({"profile": ["mi355x-dsv41-flash-tp4", "no-such-profile.yaml"]}, "profile"),
    ({"workload.input_len.value": [100, 10_000_000]}, "workload.input_len"),
    ({"server.max_total_num_tokens": [400_000, 64]}, "workload.input_len"),
])
def test_a_point_run_would_refuse_is_refused_before_anything_runs(scenario, tmp_path, grid, key):
    """Every point gets the checks ``specsched run`` makes before simulating (sim/limits.py
    check_fits: the profile, the KV pool, the model's context). A sweep used to check only
    its base point: a pool that cannot hold one request or a prompt past the context ran
    and reported figures, and a missing profile failed each run after the sweep started."""
    out = tmp_path / "sweep.parquet"
    with pytest.raises(ConfigError) as e:
        run_sweep(scenario, grid, 1, out, runner=never_runner, progress=False)
    assert e.value.key == key
    assert not out.exists() and list(tmp_path.iterdir()) == [scenario]


def test_a_sweep_over_other_parameters_is_not_merged_into_the_file(scenario, tmp_path, capsys):
    """Two sweeps of one scenario over different keys (the README's window sweep, then a
    chunk-size one) share the default --out. The second was appended to the first: its
    table mixed both, with <NA> for each sweep's missing axis, named a point of the other
    sweep the highest, and ``specsched plot`` of the file stopped with a traceback. A file
    holding a sweep over other parameters is refused now, in one line, nothing run."""
    from specsched.cli import main

    out = tmp_path / "sweep.parquet"
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, executor=ThreadPoolExecutor(1),
              runner=synthetic_run, progress=False)
    before = read_sweep(out)
    with pytest.raises(ConfigError, match="server.chunked_prefill_size") as e:
        run_sweep(scenario, {"server.min_free_slots": [2]}, 1, out, executor=ThreadPoolExecutor(1),
                  runner=never_runner, progress=False)
    assert "server.min_free_slots" in str(e.value) and "--no-resume" in str(e.value)
    pd.testing.assert_frame_equal(read_sweep(out), before)
    assert main(["sweep", str(scenario), "--grid", "server.min_free_slots=2", "--out", str(out), "-q",
                 "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"specsched: error: {out}"), err
    # more values of the same axis still resume; --no-resume replaces the file
    assert run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 1, out, executor=ThreadPoolExecutor(1),
                     runner=synthetic_run, progress=False).skipped == 1
    assert run_sweep(scenario, {"server.min_free_slots": [2]}, 1, out, executor=ThreadPoolExecutor(1),
                     runner=synthetic_run, progress=False, resume=False).ran == 1


def test_a_sweep_at_a_new_set_value_says_it_extends_the_file(scenario, tmp_path, capsys):
    """The same sweep again with another --set value (12 requests, then 6) extends the file as a
    new value of a grid axis would, and its summary spans both; a user reads --set as the
    sweep's fixed condition, so one note line says so. The same value again: no note."""
    out = tmp_path / "sweep.parquet"
    kw = dict(executor=ThreadPoolExecutor(1), runner=synthetic_run, progress=False)
    run_sweep(scenario, {"server.min_free_slots": [2]}, 1, out, overrides={"workload.num_requests": 12}, **kw)
    assert "note:" not in capsys.readouterr().err
    rep = run_sweep(scenario, {"server.min_free_slots": [2]}, 1, out, overrides={"workload.num_requests": 6}, **kw)
    assert rep.ran == 1
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]
    assert notes == [f"note: {out} holds runs at workload.num_requests = 12; this sweep adds workload.num_requests "
                     "= 6: one sweep now, whose summary and best point span both (give another --out to keep them "
                     "apart)"], notes
    assert set(read_sweep(out)["workload.num_requests"]) == {6, 12}
    run_sweep(scenario, {"server.min_free_slots": [2, 3]}, 1, out, overrides={"workload.num_requests": 6}, **kw)
    assert "note:" not in capsys.readouterr().err


def test_resume_refuses_results_of_a_changed_scenario(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    run_sweep(scenario, {}, 1, out, executor=ThreadPoolExecutor(1), runner=synthetic_run, progress=False)
    scenario.write_text(scenario.read_text().replace("num_requests: 12", "num_requests: 10"))
    with pytest.raises(ConfigError, match="different version"):
        run_sweep(scenario, {}, 1, out, executor=ThreadPoolExecutor(1), runner=synthetic_run, progress=False)
    rep = run_sweep(scenario, {}, 1, out, executor=ThreadPoolExecutor(1), runner=synthetic_run, resume=False,
                    progress=False)
    assert rep.ran == 1


def test_fixed_overrides_and_mixed_value_types(scenario, tmp_path):
    out = tmp_path / "sweep.parquet"
    rep = run_sweep(scenario, {"server.min_free_slots": [None, 2], "server.schedule_policy": ["fcfs", "lof"]}, 1, out,
                    executor=ThreadPoolExecutor(2), runner=synthetic_run, progress=False,
                    overrides={"workload.num_requests": 6})
    assert rep.ok and rep.ran == 4
    t = read_sweep(out)
    assert (t.loc[t.metric == "completed", "value"] == 6).all()
    assert (t["workload.num_requests"] == 6).all()
    assert t["server.min_free_slots"].isna().sum() == t["server.min_free_slots"].notna().sum()
    assert set(t["server.schedule_policy"]) == {"fcfs", "lof"}


def test_scheduler_address_through_the_cli(scenario, tmp_path):
    from distributed import LocalCluster

    from specsched.cli import main

    out = tmp_path / "dask.parquet"
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2, protocol="tcp",
                      dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        rc = main(["sweep", str(scenario), "--grid", "arm=base,stream_wait", "--seeds", "2", "--out", str(out),
                   "--scheduler", cluster.scheduler_address, "--no-progress"])
    assert rc == 0
    t = read_sweep(out)
    assert len(t.groupby(["point", "seed"])) == 4
    local = run_sweep(scenario, {"arm": ["base", "stream_wait"]}, 2, tmp_path / "l.parquet",
                      executor=ThreadPoolExecutor(2), progress=False)
    pd.testing.assert_frame_equal(t, local.table)


def test_unreachable_scheduler_is_a_config_error(scenario, tmp_path, monkeypatch):
    import specsched.analysis.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ConfigError, match="cannot connect"):
        run_sweep(scenario, {}, 1, tmp_path / "x.parquet", executor="tcp://127.0.0.1:9", progress=False)


def test_summary_pools_percentiles_over_seeds_and_plots(scenario, tmp_path):
    """The sweep summary's p99 TTFT is the percentile of the pooled requests of all seeds
    (the same definition as the compare table and the plot legends), within the 1 us the
    samples file rounds to; other metrics are means over seeds."""
    import numpy as np
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.analysis.sweep_store import read_samples
    from specsched.analysis.sweep_summary import plot_sweep, summarize_sweep, to_markdown

    out = tmp_path / "sweep.parquet"
    rep = run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 3, out,
                    executor=ThreadPoolExecutor(2), progress=False)
    summary = summarize_sweep(rep.table, read_samples(out))
    assert len(summary) == 2 * 7 and set(summary["seeds"]) == {3}
    row = summary[(summary["server.chunked_prefill_size"] == 2048) & (summary["metric"] == "p99_ttft_ms")].iloc[0]
    assert row["across_seeds"] == "pooled" and row["ci_low"] <= row["value"] <= row["ci_high"]
    sc = load_scenario_with_overrides(scenario, "base", {"server.chunked_prefill_size": 2048})
    ttft = np.concatenate([run_scenario(sc, seed=sc.seed + i).requests["ttft_s"].to_numpy() for i in range(3)])
    assert row["value"] == pytest.approx(np.percentile(ttft, 99) * 1e3, abs=1e-3)
    thr = summary[(summary["server.chunked_prefill_size"] == 2048) & (summary["metric"] == "output_throughput")]
    per_seed = rep.table[(rep.table["metric"] == "output_throughput") & (rep.table["server.chunked_prefill_size"] == 2048)]
    assert thr.iloc[0]["across_seeds"] == "mean" and thr.iloc[0]["value"] == pytest.approx(per_seed["value"].mean())
    assert to_markdown(summary).count("\n") == 4
    fig = plot_sweep(summary)
    assert [ax.get_xlabel() for ax in fig.axes if ax.get_visible()][0] == "server.chunked_prefill_size"


def test_a_window_sweep_table_shows_the_accept_length_each_window_achieved(tmp_path, capsys):
    """The verify-window sweep users run (README): the summary table has an accept-length
    column, the mean over seeds of the runs' accept length, longer for the longer window;
    a sweep without speculation has no such column (nor a verify-cycles one)."""
    from specsched.cli import main

    out = tmp_path / "w.parquet"
    small = ["--set", "workload.num_requests=8", "--workers", "1", "-q"]
    assert main(["sweep", "batch8-ll", "--grid", "server.speculative_num_draft_tokens=2,6", "--seeds", "2",
                 "--out", str(out), *small]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("accept_length" in line for line in lines[:6]), "\n".join(lines)
    assert "(at every point: arm=base, workload.num_requests=8)" in lines[0]   # not two constant columns
    table = read_sweep(out)
    acc = table[table["metric"] == "accept_length"].groupby("server.speculative_num_draft_tokens")["value"].mean()
    assert acc[2] < acc[6] <= 6
    for w in (2, 6):
        row = next(line for line in lines if line.count("│") > 3 and line.split("│")[1].strip() == str(w))
        assert row.split("│")[-2].strip().startswith(f"{acc[w]:.4g} "), row
    assert main(["sweep", "poisson8b-fixed", "--grid", "server.chunked_prefill_size=4096", "--out",
                 str(tmp_path / "p.parquet"), *small]) == 0
    out = capsys.readouterr().out
    assert "output_throughput" in out and "accept_length" not in out and "verify_cycles" not in out


@pytest.mark.parametrize(("key", "values", "ticks"), [
    ("workload.request_rate", [20.0, 5.0, math.inf], ["5", "20", "inf"]),
    ("server.chunked_prefill_size", [2048, -1, 512], ["512", "2048", "-1"]),
])
def test_a_sweep_plot_keeps_inf_and_off_points_and_puts_them_last(key, values, ticks):
    """A rate sweep's burst point (request_rate inf) was dropped from the figure without a
    word, and chunked_prefill_size -1 (chunking off) was drawn below the smallest chunk, so
    the line read 'smaller chunks' for 'no chunking'. Such axes are categorical now, the
    ordinary values in order and the special ones after them."""
    from specsched.analysis.sweep_summary import plot_sweep

    rows = [{"point": i, key: v, "seed_group": g, "metric": "output_throughput", "across_seeds": "mean",
             "value": 100.0 + i + 10 * g, "ci_low": float("nan"), "ci_high": float("nan"), "seeds": 1}
            for g in (0, 1) for i, v in enumerate(values)]
    fig = plot_sweep(pd.DataFrame(rows), x=key)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ticks
    for g, line in enumerate(ax.lines):   # one line per value of the other parameter
        xs, ys = line.get_data()
        assert len(xs) == len(values) and np.isfinite(xs).all()
        for i, v in enumerate(values):   # each value's point sits at its tick
            lab = "inf" if v == math.inf else str(int(v))
            assert ys[list(xs).index(ticks.index(lab))] == 100.0 + i + 10 * g


def test_a_sweep_over_a_null_value_plots_it_as_a_null_tick(scenario, tmp_path):
    """``--grid server.prefill_max_requests=null,1,4`` (null: SGLang's None, no limit) swept,
    but ``specsched plot`` of it ended in a ValueError traceback ('<NA>' is not in list):
    the tick labels were built with ``astype(str)``, which keeps a missing value missing,
    and each point was looked up by ``str(value)``. A null point now has its own tick,
    after the ordinary values, and every point of the line is drawn."""
    from specsched.analysis.sweep_summary import plot_sweep, summarize_sweep

    out = tmp_path / "sweep.parquet"
    rep = run_sweep(scenario, {"server.min_free_slots": [None, 2, 4]}, 1, out,
                    executor=ThreadPoolExecutor(1), runner=synthetic_run, progress=False)
    fig = plot_sweep(summarize_sweep(rep.table))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "null"]
    xs, ys = ax.lines[0].get_data()
    assert sorted(xs) == [0, 1, 2] and np.isfinite(ys).all()


@pytest.mark.parametrize(("seeds", "text"), [
    ([1, 1], "(1 seed per point: no confidence band)"),
    ([3, 3], "(3 seeds per point; band = 95% CI"),
    ([1, 3], "(1 to 3 seeds per point; band = 95% CI"),
])
def test_the_sweep_plot_title_counts_seeds_in_words(seeds, text):
    """'up to 1 seeds per point' with a band that one seed never has: the count agrees with
    its noun, and a one-seed sweep says it has no band."""
    from specsched.analysis.sweep_summary import plot_sweep

    rows = [{"point": i, "server.x": v, "metric": "output_throughput", "across_seeds": "mean",
             "value": 100.0 + i, "ci_low": math.nan, "ci_high": math.nan, "seeds": n}
            for i, (v, n) in enumerate(zip([1, 2], seeds, strict=True))]
    fig = plot_sweep(pd.DataFrame(rows), x="server.x")
    assert text in fig._suptitle.get_text()


def test_a_terminal_too_narrow_for_the_sweep_table_gets_one_block_per_point(tmp_path, capsys, monkeypatch):
    """At 80 columns the summary's metric columns were squeezed to six characters, every value
    and CI cut (``[1,22…``); each point is now a block headed by its parameters, every
    figure whole, no line wider than the terminal."""
    import re

    from rich.console import Console

    from specsched.cli import main

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["sweep", "batch8-ll", "--grid", "server.speculative_num_draft_tokens=2,6", "--seeds", "2",
                 "--out", str(tmp_path / "w.parquet"), "--set", "workload.num_requests=8", "--workers", "1", "-q"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    table = out.split(str(tmp_path))[0]   # the closing line names the sweep file (a path): prose
    assert "…" not in table and all(len(line) <= 80 for line in table.splitlines()), out
    lines = table.splitlines()
    assert "server.speculative_num_draft_tokens=2" in lines and "server.speculative_num_draft_tokens=6" in lines
    assert re.search(r"output_throughput: [\d,.]+ \[[\d,.]+, [\d,.]+\]", table), out


def test_a_piped_sweep_table_wider_than_200_columns_is_not_squeezed(tmp_path, capsys):
    """Piped or captured, the summary was laid out at 200 columns: two grid axes and CIs over
    seeds passed that, and rich cut ``verify_cycles_per…`` and folded CIs over two lines. A log
    keeps the whole table, at its own width."""
    import re

    from specsched.cli import main

    assert main(["sweep", "batch8-ll", "--grid", "server.speculative_num_draft_tokens=2,6",
                 "--grid", "server.sync_mode=host_block,stream_wait", "--seeds", "2",
                 "--out", str(tmp_path / "w.parquet"), "--set", "workload.num_requests=8", "--workers", "1", "-q"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert "…" not in out and "verify_cycles_per_s" in out, out
    assert len(rows) == 4 and all(re.search(r"\[[\d,.]+, [\d,.]+\]", r) for r in rows), out


def test_a_sweep_names_its_highest_throughput_point_and_those_within_its_interval(tmp_path, capsys):
    """A window sweep was read by eye for the best tokens/s: seven rows of value [CI] and no
    word which one is highest, nor that its neighbours lie inside its interval. One line
    under the table names the highest output_throughput point and the points whose mean
    lies inside its CI (not told apart by these seeds); with one point there is no line."""
    from specsched.analysis.sweep_summary import best_text

    from specsched.cli import main

    def rows(values, lo, hi):
        return pd.DataFrame([{"point": i, "arm": "base", "server.speculative_num_draft_tokens": w,
                              "metric": "output_throughput", "across_seeds": "mean", "value": v,
                              "ci_low": lo[i], "ci_high": hi[i], "seeds": 3}
                             for i, (w, v) in enumerate(zip((2, 4, 5, 6), values, strict=True))])

    s = rows([4121.0, 4525.0, 4539.0, 4477.0], [4084, 4450, 4433, 4370], [4157, 4599, 4645, 4583])
    assert best_text(s) == ("highest output_throughput: server.speculative_num_draft_tokens=5, 4,539 tok/s "
                            "[4,433, 4,645]; not told apart by these seeds (inside that interval): "
                            "server.speculative_num_draft_tokens=4 (4,525), server.speculative_num_draft_tokens=6 "
                            "(4,477)")
    one = rows([1.0, 2.0, 3.0, 4.0], [math.nan] * 4, [math.nan] * 4)
    assert best_text(one) == "highest output_throughput: server.speculative_num_draft_tokens=6, 4 tok/s"
    assert best_text(s.iloc[:1]) is None
    out = tmp_path / "w.parquet"
    assert main(["sweep", "batch8-ll", "--grid", "server.speculative_num_draft_tokens=2,6", "--seeds", "1",
                 "--out", str(out), "--set", "workload.num_requests=8", "--workers", "1", "-q"]) == 0
    assert "highest output_throughput: server.speculative_num_draft_tokens=" in capsys.readouterr().out


def test_a_sweep_tells_points_apart_pair_by_seed_as_compare_does():
    """Every point of a sweep runs the same seeds, so a point is compared with the best seed
    by seed, as `specsched compare` compares arms: a point 1 % below the best at every seed
    is told apart although its mean lies inside the best point's interval over seeds (which
    holds the seeds' own spread, here 7,600 vs 8,700 tok/s); a point whose per-seed changes
    straddle 0 is not."""
    from specsched.analysis.sweep_summary import best_text, summarize_sweep

    per_seed = {"host_block": (7600.0, 8700.0), "stream_wait": (7676.0, 8787.0), "cross_queue_wait": (7690.0, 8690.0)}
    table = pd.DataFrame([{"scenario": "b", "arm": "base", "server.sync_mode": mode, "seed": seed,
                           "metric": "output_throughput", "value": v, "point": i}
                          for i, (mode, vals) in enumerate(per_seed.items()) for seed, v in zip((1, 2), vals, strict=True)])
    summary = summarize_sweep(table)
    best = summary.loc[summary["value"].idxmax()]
    assert best["server.sync_mode"] == "stream_wait"
    # unpaired, both other points lie inside the best point's interval
    assert all(best["ci_low"] <= v <= best["ci_high"] for v in summary["value"])
    unpaired = best_text(summary)
    assert "host_block" in unpaired and "cross_queue_wait" in unpaired
    paired = best_text(summary, table=table)
    assert "paired by seed" in paired
    # host_block: -1.0 % at both seeds, told apart; cross_queue_wait: +0.2 % then -1.1 %, not
    assert "host_block" not in paired.split("not told apart")[1]
    assert "server.sync_mode=cross_queue_wait" in paired.split("not told apart")[1]
    # its per-seed changes (+0.2 %, -1.1 %) would be resolved by about 18 seeds, were their
    # spread what these two show: the line says so, as the next run's --seeds
    assert paired.endswith("; about 18 seeds would tell them apart (--seeds 18)"), paired


def test_a_sweep_over_names_is_drawn_as_points_and_its_axis_writes_no_offset():
    """A sweep over sync modes was drawn as lines through the modes (a trend between names
    that have no order) and its throughput panel labelled ticks 0.015-0.055 under an offset
    "+1.5368e3". Named values are markers with error bars now, and no axis has an offset."""
    from specsched.analysis.sweep_summary import plot_sweep, summarize_sweep

    vals = {"host_block": (1536.80, 1536.82), "stream_wait": (1536.84, 1536.86), "cross_queue_wait": (1536.81, 1536.83)}
    table = pd.DataFrame([{"scenario": "b", "arm": "base", "server.sync_mode": mode, "seed": seed,
                           "metric": "output_throughput", "value": v, "point": i}
                          for i, (mode, pair) in enumerate(vals.items()) for seed, v in zip((1, 2), pair, strict=True)])
    fig = plot_sweep(summarize_sweep(table))
    ax = fig.axes[0]
    fig.canvas.draw()
    joined = [ln for ln in ax.get_lines() if ln.get_linestyle() not in ("None", "none", "") and len(ln.get_xdata()) > 2]
    assert not joined, [ln.get_xdata() for ln in joined]
    assert ax.containers, "no error bars"
    assert ax.yaxis.get_major_formatter().get_offset() == ""
    assert [t.get_text() for t in ax.get_xticklabels()] == list(vals)


def test_a_point_not_paired_with_the_best_is_not_said_to_be_paired():
    """A point with fewer than two finite seeds in common with the best (its other seeds'
    values NaN) is judged by the best point's interval, not seed by seed: the line names it
    under that test, not under the paired one a neighbour was judged by."""
    from specsched.analysis.sweep_summary import best_text, summarize_sweep

    per_seed = {"host_block": (7600.0, 8700.0, 8100.0), "stream_wait": (7676.0, 8787.0, 8180.0),
                "cross_queue_wait": (7690.0, 8690.0, 8050.0), "x": (8000.0, math.nan, math.nan)}
    table = pd.DataFrame([{"scenario": "b", "arm": "base", "server.sync_mode": mode, "seed": seed,
                           "metric": "output_throughput", "value": v, "point": i}
                          for i, (mode, vals) in enumerate(per_seed.items())
                          for seed, v in zip((1, 2, 3), vals, strict=True)])
    text = best_text(summarize_sweep(table), table=table)
    paired, inside = text.split("(paired by seed, the change holds 0): ")[1].split("; (inside that interval")
    assert "cross_queue_wait" in paired and "sync_mode=x" not in paired
    assert inside.startswith(", fewer than two seeds in common): ") and "sync_mode=x (8,000)" in inside


def test_a_points_seed_count_is_of_the_seeds_its_figure_rests_on():
    """A seed whose value is NaN (a run without that sample) adds nothing to the mean or its
    interval, so it is not counted in the summary's seeds either (it was: 3 seeds shown for
    a mean of 1)."""
    from specsched.analysis.sweep_summary import summarize_sweep

    table = pd.DataFrame([{"scenario": "b", "arm": "base", "x": 1, "seed": s, "metric": "output_throughput",
                           "value": v, "point": 0} for s, v in ((1, 100.0), (2, math.nan), (3, math.nan))])
    row = summarize_sweep(table).iloc[0]
    assert row["value"] == 100.0 and row["seeds"] == 1


def test_a_sweep_says_when_a_point_rejected_requests(tmp_path, capsys):
    """A pool small enough that the server rejects a trace's long rows reads faster over the
    rest: the sweep says which points rejected requests."""
    from specsched.cli import main

    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n0,100,20\n0.1,5000,20\n0.2,200,20\n")
    (tmp_path / "s.yaml").write_text(
        "name: s\nprofile: h200-llama8b-roofline\nserver: {max_total_num_tokens: 4096, speculative_algorithm: none}\n"
        f"workload: {{kind: trace, trace: {{path: {tmp_path / 't.csv'}}}}}\n")
    assert main(["sweep", str(tmp_path / "s.yaml"), "--grid", "server.max_total_num_tokens=4096,100000", "--seeds", "1",
                 "--out", str(tmp_path / "sw.parquet"), "--quiet"]) == 0
    warn = [x for x in capsys.readouterr().err.splitlines() if "rejected requests" in x]
    assert len(warn) == 1 and "at 1 point(s)" in warn[0], warn


@pytest.mark.parametrize("x_values", [[2, 4, 6], ["host_block", "stream_wait", "cross_queue_wait"]])
def test_each_sweep_series_has_its_own_dash_style_and_marker(x_values):
    """Three arms over a window sweep whose throughputs coincide were three ``o-`` lines
    told apart by colour only, the top one hiding the rest (and all alike in grey), over
    ticks at 2.5 and 3.5 between the windows. Each series now has its own dash style and
    hollow marker, earlier ones larger, in the legend too, and the ticks are the windows;
    over named values (markers with error bars, no line) the markers differ."""
    from specsched.analysis.sweep_summary import plot_sweep

    rows = [{"point": 3 * a + i, "arm": arm, "server.x": v, "metric": "output_throughput", "across_seeds": "mean",
             "value": 100.0 + i, "ci_low": math.nan, "ci_high": math.nan, "seeds": 1}
            for a, arm in enumerate(("base", "stream_wait", "both")) for i, v in enumerate(x_values)]
    fig = plot_sweep(pd.DataFrame(rows), x="server.x")
    ax = fig.axes[0]
    if ax.containers:   # named values: one error-bar container per series, its data line first
        drawn = [c.lines[0] for c in ax.containers]
        assert all(ln.get_linestyle() in ("None", "none", "") for ln in drawn)
        assert len({ln.get_marker() for ln in drawn}) == 3
    else:
        drawn = ax.get_lines()
        assert len(drawn) == 3 and len({(ln.get_linestyle(), ln.get_marker()) for ln in drawn}) == 3
        assert len({ln.get_linestyle() for ln in drawn}) == 3 and len({ln.get_marker() for ln in drawn}) == 3
        # on the same points (as here) each marker shows inside the one drawn before it
        assert all(ln.get_markerfacecolor() == "none" for ln in drawn)
        sizes = [ln.get_markersize() for ln in drawn]
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3
        # a whole-number parameter: ticks at the swept values only (no 2.5 between windows)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "6"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["arm=base", "arm=stream_wait", "arm=both"]
    handles, _ = ax.get_legend_handles_labels()   # what the legend draws its keys from
    keys = [h.lines[0] if hasattr(h, "lines") else h for h in handles]
    assert len({(k.get_linestyle(), k.get_marker()) for k in keys}) == 3


def test_a_second_sweep_over_other_parameters_is_told_the_exact_out_to_give(tmp_path, capsys, monkeypatch):
    """A sync-mode sweep then a window sweep of the same scenario: the second was refused
    because the default file held the first, told to "choose another --out" but not which.
    The one line now names the file to give (beside the first, named by the new axis), the
    first file is untouched, and the command with that --out runs."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    small = ["--seeds", "1", "--set", "workload.num_requests=4", "--workers", "1", "-q"]
    assert main(["sweep", "batch8-ll", "--grid", "server.sync_mode=host_block,stream_wait", *small]) == 0
    first = tmp_path / "results" / "sweep-batch8-ll.parquet"
    before = first.read_bytes()
    capsys.readouterr()
    window = ["sweep", "batch8-ll", "--grid", "server.speculative_num_draft_tokens=2,4", *small]
    assert main(window) == 2
    err = capsys.readouterr().err.strip().splitlines()
    suggested = "results/sweep-batch8-ll-speculative_num_draft_tokens.parquet"
    assert len(err) == 1 and str(first.relative_to(tmp_path)) in err[0] and f"give --out {suggested} " in err[0], err
    assert "server.sync_mode" in err[0] and "--no-resume" in err[0]
    assert first.read_bytes() == before and not (tmp_path / suggested).exists()
    assert main([*window, "--out", suggested]) == 0
    assert set(read_sweep(tmp_path / suggested)["server.speculative_num_draft_tokens"]) == {2, 4}
    # that name taken too: the next free one
    from specsched.analysis.sweep import other_out

    assert other_out(first, ("server.speculative_num_draft_tokens",), [("server.sync_mode",)]) == \
        first.with_name("sweep-batch8-ll-speculative_num_draft_tokens-2.parquet")


def test_a_set_that_only_the_grid_completes_runs_every_point(tmp_path, capsys):
    """``--set`` keys that make a valid scenario only with an axis (speculation switched on
    in a file without it, its accept length swept) run: the --set keys were loaded alone
    before any point and refused for the acceptance the axis gives."""
    from specsched.cli import main

    out = tmp_path / "a.parquet"
    assert main(["sweep", "poisson8b-fixed", "--set", "workload.num_requests=8", "--set",
                 "server.speculative_algorithm=eagle", "--grid", "acceptance.mean_accept_length=1.5,2.5",
                 "--out", str(out), "--workers", "1", "-q"]) == 0
    table = read_sweep(out)
    acc = table[table["metric"] == "accept_length"].groupby("acceptance.mean_accept_length")["value"].mean()
    assert acc[1.5] < acc[2.5]
    capsys.readouterr()
    # a --set that no point makes valid is still refused before any run, in one line
    assert main(["sweep", "poisson8b-fixed", "--set", "workload.num_requests=8", "--set",
                 "server.speculative_algorithm=eagle", "--grid", "server.chunked_prefill_size=2048,4096",
                 "--out", str(tmp_path / "b.parquet"), "--workers", "1", "-q"]) == 2
    assert "acceptance" in capsys.readouterr().err
    assert not (tmp_path / "b.parquet").exists()


def test_resume_refuses_results_of_a_rewritten_profile(tmp_path):
    """A profile written again under the same name (another GPU, a refit) changes every
    prediction while the scenario file stays the same: resuming kept the old runs as the
    new profile's, printed as its prediction ('0 run(s) done now, 2 already there')."""
    from specsched.sim.bundled import profiles_dir

    prof = tmp_path / "p.yaml"
    prof.write_bytes((profiles_dir() / "mi355x-dsv41-flash-tp4.yaml").read_bytes())
    scenario = write_demo_scenario(tmp_path / "demo.yaml", profile=str(prof))
    out = tmp_path / "sweep.parquet"
    kw = {"executor": ThreadPoolExecutor(1), "runner": synthetic_run, "progress": False}
    run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, **kw)
    assert run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 1, out, **kw).skipped == 1
    before = read_sweep(out)
    prof.write_text(prof.read_text() + "\n# refitted\n")
    with pytest.raises(ConfigError, match="different version of this file") as e:
        run_sweep(scenario, {"server.chunked_prefill_size": [2048, 4096]}, 1, out, **kw)
    assert str(prof.resolve()) in str(e.value) and "--no-resume" in str(e.value)
    pd.testing.assert_frame_equal(read_sweep(out), before)
    assert run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, resume=False, **kw).ran == 1


def test_resume_refuses_results_of_a_rewritten_trace(tmp_path):
    """A trace regenerated in place (the scenario file unchanged) is refused on resume as a
    rewritten profile is; the same file reached from another folder still resumes."""
    import yaml

    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n0,64,8\n0.5,32,4\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "tr", "profile": "h200-llama8b-roofline", "server": {"speculative_algorithm": "none"},
        "workload": {"kind": "trace", "trace": {"path": "t.csv"}}}))
    out = tmp_path / "sweep.parquet"
    kw = {"executor": ThreadPoolExecutor(1), "progress": False}
    assert run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, **kw).ran == 1
    assert run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, **kw).skipped == 1
    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n0,640,80\n0.5,320,40\n")
    with pytest.raises(ConfigError, match="different version of this file") as e:
        run_sweep(scenario, {"server.chunked_prefill_size": [2048]}, 1, out, **kw)
    assert str((tmp_path / "t.csv").resolve()) in str(e.value)



def test_a_sweep_of_rate_bound_points_says_its_highest_throughput_is_the_arrivals(tmp_path):
    """An open-loop point whose runs kept pace with their arrivals measures the arrival rate
    in its throughput (analysis.compare.rate_bound): a burstiness sweep at 6 req/s named its
    highest throughput at burstiness 0.25 with nothing said, where compare calls the same
    difference rate-bound. A saturated point keeps the plain line."""
    import yaml
    from specsched.analysis.sweep_store import read_samples
    from specsched.analysis.sweep_summary import best_text, summarize_sweep

    sc = tmp_path / "rate.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "rate", "profile": "h200-1b", "server": {"speculative_algorithm": "none"},
        "workload": {"kind": "poisson", "request_rate": 6, "num_requests": 60,
                     "input_len": {"kind": "fixed", "value": 256}, "output_len": {"kind": "fixed", "value": 32}}}))

    def line(grid, name):
        out = tmp_path / f"{name}.parquet"
        run_sweep(str(sc), grid, 2, out, progress=False, max_workers=1)
        table = read_sweep(out)
        return best_text(summarize_sweep(table, read_samples(out)), table=table)

    bursty = line({"workload.burstiness": [0.25, 1.0, 4.0]}, "bursty")
    assert bursty.startswith("highest output_throughput") and "every point is rate-bound" in bursty
    saturated = line({"workload.request_rate": [6, 2000]}, "saturated")
    assert "rate-bound" not in saturated


def test_sweep_warnings_name_the_points_they_came_from(capsys):
    """A window sweep's "verify window 8 is longer than the 4 the acceptance states" read as if
    every point ran window 8; a note some points' runs gave names them (the parameters that
    vary), at the largest value any reached; one every point gave names none."""
    from specsched.analysis.sweep import point_labels
    from specsched.sim.grid_range import AcceptanceBeyond, write_labelled_warnings

    pts = [json.dumps({"arm": "base", "server.speculative_num_steps": s}) for s in (1, 3, 5, 7)]
    labels = point_labels(pts)
    assert labels[pts[2]] == "server.speculative_num_steps=5"   # the shared arm names none
    notes = [(AcceptanceBeyond(6, 4, 1.0, False), labels[pts[2]]), (AcceptanceBeyond(8, 4, 1.0, False), labels[pts[3]]),
             (AcceptanceBeyond(8, 4, 1.0, False), labels[pts[3]])]
    (line,) = write_labelled_warnings(notes, list(labels.values()), "points")
    assert "verify window 8 is longer than the 4" in line
    assert line.endswith("(at 2 of 4 points: server.speculative_num_steps=5, server.speculative_num_steps=7)")
    assert capsys.readouterr().err.strip() == line
    every = [(AcceptanceBeyond(8, 4, 1.0, False), x) for x in labels.values()]
    assert "points" not in write_labelled_warnings(every, list(labels.values()), "points")[0]
    many = [f"x={i}" for i in range(10)]
    line = write_labelled_warnings([(AcceptanceBeyond(8, 4, 1.0, False), x) for x in many[:9]], many, "arms", most=2)[0]
    assert line.endswith("(at 9 of 10 arms: x=0, x=1 and 7 more)")
