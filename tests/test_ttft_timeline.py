"""benchmarks/ttft_timeline.py: every bad input is one line and exit 2 (no traceback), and
the script needs torch only for --refit-slot-expansion."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT, load_benchmark

timeline = load_benchmark("ttft_timeline")


def _refused(capsys, argv: list[str], *needles: str) -> str:
    assert timeline.cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_a_missing_archive_or_directory(tmp_path, capsys):
    _refused(capsys, [str(tmp_path / "nope.tar.xz"), "--profile", "h200-1b"], "nope.tar.xz", "does not exist")


def test_a_corrupt_archive(tmp_path, capsys):
    bad = tmp_path / "results.tar.xz"
    bad.write_bytes(b"not an archive")
    _refused(capsys, [str(bad), "--profile", "h200-1b"], str(bad), "not a readable tar archive")


def test_an_unknown_cell_lists_the_cells(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--cell", "burst67"], "--cell", "burst67", "burst66")


def test_an_unknown_arm_lists_the_arms(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--arms", "stream_wait,nope"], "nope", "stream_wait")


def test_a_run_missing_from_the_results_names_what_is_there(tmp_path, capsys):
    (tmp_path / "burst66-base-measured").mkdir()
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--arms", "both"], "burst66-both-measured",
             "measured runs there: burst66-base")


def test_a_missing_profile(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", str(tmp_path / "nope.yaml")], "nope.yaml")


@pytest.mark.parametrize("argv", [["--help"], ["/nonexistent", "--profile", "h200-1b"]])
def test_help_and_bad_input_need_no_torch(argv):
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['ttft_timeline.py', *{argv!r}]; runpy.run_path('benchmarks/ttft_timeline.py', run_name='__main__')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == (0 if argv == ["--help"] else 2), res.stderr


def _sim_run(rate: float, seed: int, n: int = 24):
    from specsched.sim.config import load_scenario, with_value
    from specsched.sim.engine import run_scenario

    sc = load_scenario(ROOT / "scenarios" / "h200" / "poisson-nospec.yaml")
    sc = with_value(with_value(sc, "workload.num_requests", n), "workload.request_rate", rate)
    return run_scenario(sc, seed=seed)


@settings(max_examples=6, deadline=None)
@given(rate=st.sampled_from([2.0, 16.0, 64.0]), seed=st.integers(1, 50))
def test_first_token_split_sums_to_ttft_and_orders_the_loop(rate, seed):
    """INV: per request, the four terms sum to its TTFT; in a simulated run none is negative
    (a request is scheduled after its send, an extend starts after the pass that built it,
    the first token comes after the extend's end)."""
    r = _sim_run(rate, seed)
    split = timeline.first_token_split(r.steps, r.requests, r.timeseries)
    terms = split[list(timeline.FIRST_TOKEN_TERMS)]
    assert len(split) == len(r.requests)
    assert np.allclose(terms.sum(axis=1), split.ttft_s, atol=1e-9)
    assert (terms.to_numpy() >= -1e-12).all()


def test_first_token_split_reads_the_extend_that_gave_the_token():
    """A hand-made run: one decode, then an extend of request 7 whose first token comes
    after the next decode's launch; the terms are the distances between those marks."""
    steps = pd.DataFrame({"step": [0, 1, 2], "mode": ["decode", "extend", "decode"], "part": ["main"] * 3,
                          "batch_size": [1, 1, 2], "num_extend_tokens": [0, 900, 0],
                          "gpu_start_s": [0.0, 2.0, 11.0], "gpu_end_s": [2.0, 10.0, 13.0]})
    ts = pd.DataFrame({"time_s": [0.0, 0.5, 10.2]})
    req = pd.DataFrame({"rid": [7], "start_s": [0.25], "first_token_s": [11.5], "ttft_s": [11.25]})
    row = timeline.first_token_split(steps, req, ts).loc[7]
    assert [row[t] for t in timeline.FIRST_TOKEN_TERMS] == pytest.approx([0.25, 1.5, 8.0, 1.5])
    with pytest.raises(ValueError, match="schedule passes"):
        timeline.first_token_split(steps, req, ts.iloc[:2])


def test_a_run_directory_missing_a_table_is_one_line(tmp_path, capsys):
    (tmp_path / "steps.parquet").write_bytes(b"")
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b"], "requests.parquet", "<missing>")


def test_bad_host_factors_are_one_line(tmp_path, capsys):
    (tmp_path / "steps.parquet").write_bytes(b"")
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--host-factors", "1,x"], "--host-factors", "1,x")
