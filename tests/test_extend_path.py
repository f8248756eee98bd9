"""benchmarks/extend_path.py: each extend's path from its schedule pass to its first token
is read off the steps, passes, first tokens and launch calls exactly, paired with the
predicted run; an extend whose launch call ran slow is marked and its requests left out of
the second TTFT figure; bad input is one line and exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import load_benchmark

ep = load_benchmark("extend_path")

COLS = ["step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s", "gpu_end_s"]


def _run(d, ext_call_s, shift=0.0, probe=True):
    """A verify, two extends (each with its injection) each followed by a verify; the
    second extend's times are moved by ``shift``; launch calls: extends ``ext_call_s``."""
    d.mkdir(parents=True)
    steps = [
        (0, "verify", "main", 4, 0, 0.000, 0.004),
        (1, "extend", "main", 1, 100, 0.004, 0.010),
        (1, "extend", "inject", 1, 100, 0.010, 0.012),
        (2, "verify", "main", 5, 0, 0.012, 0.016),
        (3, "extend", "main", 1, 200, 0.016, 0.022 + shift),
        (3, "extend", "inject", 1, 200, 0.022 + shift, 0.024 + shift),
        (4, "verify", "main", 6, 0, 0.024 + shift, 0.028 + shift),
    ]
    pd.DataFrame(steps, columns=COLS).to_parquet(d / "steps.parquet")
    # passes of the five main forwards
    pd.DataFrame({"time_s": [0.0, 0.001, 0.0121, 0.013, 0.0241 + shift]}).to_parquet(d / "timeseries.parquet")
    pd.DataFrame({"rid": [0, 1, 2], "start_s": [0.0, 0.0009, 0.0129],
                  "first_token_s": [0.003, 0.0135, 0.0255 + shift]}).assign(
        ttft_s=lambda r: r.first_token_s - r.start_s).to_parquet(d / "requests.parquet")
    if probe:
        calls = [0.001, ext_call_s[0], 0.0015, 0.0011, ext_call_s[1], 0.0016, 0.0012]
        pd.DataFrame({"host_launch_s": calls}).to_parquet(d / "host_probe.parquet")


def test_spans_and_calls_are_read_exactly(tmp_path):
    _run(tmp_path / "c-base-measured", (0.006, 0.006))
    t = ep.extend_paths(tmp_path / "c-base-measured", ep.CLOCK_TOLERANCE_S)
    assert list(t.index) == [1, 3]
    r = t.loc[1]
    assert r.busy == pytest.approx(0.003)        # the verify ahead ends 3 ms after the pass
    assert r.ext_end == pytest.approx(0.009)
    assert r.inj_end == pytest.approx(0.011)
    assert r.next_pass == pytest.approx(0.0111)
    assert r.first == pytest.approx(0.0125)      # rid 1's first token
    assert r.rids == [1]
    assert (r.ext_call, r.inj_call, r.next_call) == pytest.approx((0.006, 0.0015, 0.0011))
    assert t.loc[3].rids == [2] and t.loc[3].next_call == pytest.approx(0.0012)


def test_slow_extend_marked_and_paired_with_the_prediction(tmp_path):
    # the second extend's call ran 2x: slow; measured 2 ms later than predicted there
    _run(tmp_path / "c-base-measured", (0.006, 0.012), shift=0.002)
    _run(tmp_path / "c-base-predicted", (0.006, 0.006), probe=False)
    table, f = ep.run_report(tmp_path / "c-base-measured", 1.3)
    assert f["extends"] == 2 and f["slow"] == 1
    # TTFTs 3.0, 12.6, 12.6 + 2 ms: without rid 2 (the slow extend's) the median is 7.8 ms
    assert f["ttft_ms"] == pytest.approx(12.6)
    assert f["ttft_not_slow_ms"] == pytest.approx(7.8)
    assert f["ttft_pred_ms"] == pytest.approx(12.6)
    assert table.loc["paired diff, all", "first"] == pytest.approx(1.0)      # median of 0 and 2 ms
    assert table.loc["paired diff, not slow", "first"] == pytest.approx(0.0)
    assert table.loc["measured, not slow", "ext_call"] == pytest.approx(6.0)


def test_a_predicted_run_with_other_forwards_is_not_paired(tmp_path):
    _run(tmp_path / "c-base-measured", (0.006, 0.006))
    _run(tmp_path / "c-base-predicted", (0.006, 0.006), probe=False)
    s = pd.read_parquet(tmp_path / "c-base-predicted" / "steps.parquet")
    s.loc[1, "num_extend_tokens"] = 101
    s.to_parquet(tmp_path / "c-base-predicted" / "steps.parquet")
    table, f = ep.run_report(tmp_path / "c-base-measured", 1.3)
    assert list(table.index) == ["measured, all", "measured, not slow"]
    assert f["ttft_pred_ms"] != f["ttft_pred_ms"]  # NaN


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert ep.cli([str(tmp_path / "nope")]) == 2
    assert ep.cli([str(tmp_path)]) == 2
    _run(tmp_path / "c-base-measured", (0.006, 0.006))
    (tmp_path / "c-base-measured" / "timeseries.parquet").unlink()
    pd.DataFrame({"time_s": [0.0]}).to_parquet(tmp_path / "c-base-measured" / "timeseries.parquet")
    assert ep.cli([str(tmp_path)]) == 2
    assert ep.cli([str(tmp_path), "--slow", "0.9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and "1 schedule passes for 5 main forwards" in err[2]
