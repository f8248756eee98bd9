"""benchmarks/idle_launch_split.py: the spans of a launch onto an idle stream are read off
the steps, schedule passes and first tokens exactly; bad input is one line and exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import load_benchmark

split = load_benchmark("idle_launch_split")


def _run(d, steps, passes, first_tokens):
    d.mkdir(parents=True)
    cols = ["step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s", "gpu_end_s"]
    pd.DataFrame(steps, columns=cols).to_parquet(d / "steps.parquet")
    pd.DataFrame({"time_s": passes}).to_parquet(d / "timeseries.parquet")
    pd.DataFrame({"rid": range(len(first_tokens)), "first_token_s": first_tokens}).to_parquet(d / "requests.parquet")


def _steps(idle_gap):
    # a decode, then an extend launched after the decode ended (idle by idle_gap), then a
    # decode queued behind the extend (no gap)
    return [
        (0, "decode", "main", 4, 0, 0.000, 0.003),
        (1, "extend", "main", 1, 700, 0.003 + idle_gap, 0.012),
        (2, "decode", "main", 5, 0, 0.012, 0.015),
    ]


def test_spans_of_an_idle_extend_are_read_exactly(tmp_path):
    _run(tmp_path / "c-base-measured", _steps(0.0005), [0.0, 0.0034, 0.0115], [0.01207])
    t = split.idle_launches(tmp_path / "c-base-measured", 0.0002)
    assert list(t["mode"]) == ["extend"]  # the queued decode and the first forward are not idle
    row = t.iloc[0]
    assert row["end->pass"] == pytest.approx(0.0004)
    assert row["pass->mark"] == pytest.approx(0.0001)
    assert row["mark->end"] == pytest.approx(0.012 - 0.0035)
    assert row["end->token"] == pytest.approx(0.00007)


def test_a_forward_started_within_the_gap_is_not_idle(tmp_path):
    _run(tmp_path / "c-base-measured", _steps(0.0001), [0.0, 0.0030, 0.0115], [0.0121])
    assert split.idle_launches(tmp_path / "c-base-measured", 0.0002).empty


def test_measured_and_predicted_side_by_side(tmp_path):
    _run(tmp_path / "c-base-measured", _steps(0.0005), [0.0, 0.0034, 0.0115], [0.0121])
    _run(tmp_path / "c-base-predicted", _steps(0.0003), [0.0, 0.00301, 0.0115], [0.012])
    t = split.split_table(tmp_path, 0.0002)
    assert list(t.run) == ["c-base"] and list(t["mode"]) == ["extend"]
    assert t["end->pass m"].iloc[0] == pytest.approx(0.4)
    assert t["end->pass p"].iloc[0] == pytest.approx(0.01)
    assert t["pass->mark p"].iloc[0] == pytest.approx(0.29)
    assert t["end->token p"].iloc[0] == pytest.approx(0.0)


def test_passes_must_match_the_main_forwards(tmp_path, capsys):
    _run(tmp_path / "c-base-measured", _steps(0.0005), [0.0, 0.0034], [0.0121])
    assert split.cli([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 schedule passes for 3 main forwards" in err


@pytest.mark.parametrize("make", [False, True])
def test_no_results_is_one_line_and_exit_2(tmp_path, capsys, make):
    target = tmp_path / "empty" if make else tmp_path / "nope"
    if make:
        target.mkdir()
    assert split.cli([str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(target) in err


def test_a_predicted_run_without_passes_is_left_out(tmp_path):
    _run(tmp_path / "c-base-measured", _steps(0.0005), [0.0, 0.0034, 0.0115], [0.0121])
    (tmp_path / "c-base-predicted").mkdir()   # an archive keeps only its steps table
    pd.DataFrame(_steps(0.0003), columns=["step", "mode", "part", "batch_size", "num_extend_tokens",
                                          "gpu_start_s", "gpu_end_s"]).to_parquet(tmp_path / "c-base-predicted" / "steps.parquet")
    t = split.split_table(tmp_path, 0.0002)
    assert t["end->pass m"].iloc[0] == pytest.approx(0.4) and t["end->pass p"].isna().all()


def test_repredict_estimates_the_result_path_from_the_idle_launches(tmp_path):
    """repredict_h200 --result-path-from-runs: the median end->pass of the idle launches less
    the wake-up, process and schedule the profile charges at each one's batch size, charged
    as host.result_path_s (or recv_path_s); a labelled estimate, and nothing to read is None."""
    from tests.conftest import tiny_profile

    rp = load_benchmark("repredict_h200", "rp_result_path")
    _run(tmp_path / "c-base-measured", _steps(0.0005), [0.0, 0.0034, 0.0115], [0.01207])
    prof = tiny_profile(sync_wakeup_s=2e-5, process_s=1e-5, process_per_req_s=1e-6, schedule_s=3e-5,
                        schedule_per_req_s=2e-6)
    got, text = rp.result_path_from_runs(prof, [tmp_path / "c-base-measured"])
    # the extend (batch 1) is the one idle launch: 0.4 ms end->pass less 2e-5 + 1e-5 + 3e-5 + 3e-6
    assert got.host.result_path_s == pytest.approx(0.0004 - 6.3e-5)
    assert got.host.recv_path_s == 0.0 and "ESTIMATED from the runs" in text
    got, _ = rp.result_path_from_runs(prof, [tmp_path / "c-base-measured"], "recv")
    assert got.host.recv_path_s == pytest.approx(0.0004 - 6.3e-5) and got.host.result_path_s == 0.0
    assert rp.result_path_from_runs(prof, [tmp_path / "nothing-measured"]) is None
