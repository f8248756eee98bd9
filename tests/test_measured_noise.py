"""The measured figures' sampling intervals (analysis/measured_noise.py) and their column in
``specsched validate --measured``: one bench_serving run is one sample of its requests, and a
miss smaller than that sample's spread is no evidence of a model error."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.bench_cli import (
    CI_HIGH,
    CI_LOW,
    CI_PERCENT,
    OLD_VALIDATE_BENCH_HEADERS,
    VALIDATE_BENCH_HEADER,
)
from specsched.analysis.measured_noise import CONFIDENCE, interval, measured_intervals
from specsched.sim.bench_serving import read_bench_one
from specsched.sim.engine import SimEngine
from specsched.sim.results import write_results

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

WORKLOAD = {"kind": "poisson", "num_requests": 60, "request_rate": 40.0,
            "input_len": {"kind": "uniform", "value": 400, "range_ratio": 0.5},
            "output_len": {"kind": "uniform", "value": 30, "range_ratio": 0.5}}


def _line(tmp_path, workload=WORKLOAD):
    sc = make_scenario(workload=workload, server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1})
    out = write_results(SimEngine(sc, tiny_profile(), seed=3).run(), tmp_path / "run")
    return out / "bench_serving.jsonl"


def test_the_percentage_named_in_the_table_is_the_intervals_confidence():
    assert CI_PERCENT == round(100 * CONFIDENCE)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 1e4, allow_nan=False), min_size=20, max_size=400),
       st.sampled_from([None, 10.0, 50.0, 90.0, 95.0]))
def test_invariant_an_interval_holds_the_samples_own_figure(xs, pct):
    """The interval of a mean or a percentile contains that statistic of the sample itself
    (where the sample is large enough for one at all)."""
    x = np.array(xs)
    lo, hi = interval(x, pct)
    if math.isnan(lo):
        return
    own = x.mean() if pct is None else np.percentile(x, pct)
    assert lo - 1e-9 * abs(own) <= own <= hi + 1e-9 * abs(own)
    assert lo <= hi


@pytest.mark.parametrize("pct", [None, 50.0, 90.0])
def test_an_interval_covers_the_true_figure_about_as_often_as_it_says(pct):
    """Drawn 400 times from a known skewed distribution (lognormal, 300 requests a run), the
    95 % interval holds the true mean or quantile in 90-99 % of runs (a narrower interval,
    an ITL-style one over dependent samples, would fall far below)."""
    rng = np.random.default_rng(7)
    sigma = 0.8
    true = math.exp(sigma ** 2 / 2) if pct is None else math.exp(sigma * float(
        __import__("scipy").stats.norm.ppf(pct / 100)))
    hits = 0
    for _ in range(400):
        lo, hi = interval(rng.lognormal(0.0, sigma, 300), pct)
        hits += lo <= true <= hi
    assert 0.90 <= hits / 400 <= 0.99


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="percentile"):
        interval(np.arange(30.0), 100.0)
    with pytest.raises(ValueError, match="confidence"):
        interval(np.arange(30.0), 50.0, confidence=1.0)


def test_a_run_with_details_gets_intervals_for_ttft_tpot_e2e_but_not_itl(tmp_path):
    run = read_bench_one(_line(tmp_path))
    keys = [k for k in run.summary if k.endswith("_ms")]
    got = measured_intervals(run, keys)
    for fam in ("ttft", "tpot", "e2e_latency"):
        for stat in ("mean", "median", "p90"):
            k = f"{stat}_{fam}_ms"
            assert k in got, k
            lo, hi = got[k]
            assert lo <= run.summary[k] <= hi
    assert not any("itl" in k or k.startswith("std_") for k in got)


def test_no_interval_where_the_details_do_not_give_the_lines_figure(tmp_path):
    """A figure the details do not reproduce (the line counts it otherwise, or was edited)
    gets no interval around another number; a line of few requests gets none."""
    path = _line(tmp_path)
    obj = json.loads(path.read_text())
    obj["p90_ttft_ms"] *= 1.5
    path.write_text(json.dumps(obj) + "\n")
    run = read_bench_one(path)
    got = measured_intervals(run, ["p90_ttft_ms", "median_ttft_ms"])
    assert "p90_ttft_ms" not in got and "median_ttft_ms" in got
    few = read_bench_one(_line(tmp_path / "few", {**WORKLOAD, "num_requests": 6}))
    assert measured_intervals(few, ["median_ttft_ms", "mean_ttft_ms"]) == {}


def test_validate_prints_and_writes_the_interval_and_says_what_it_means(tmp_path, capsys, monkeypatch):
    """``specsched validate --measured F --scenario S``: the table's last column is the
    measured interval, starred where it holds the prediction; validate.csv has it as two
    columns; a note says what the interval is. A folder with a table of the old header is
    still this command's own."""
    monkeypatch.chdir(tmp_path)
    line = _line(tmp_path)
    sc = tmp_path / "run" / "scenario.yaml"
    assert main(["validate", "--measured", str(line), "--scenario", str(sc), "--profile", "h200-1b", "--seeds", "2", "--out", "v"]) == 0
    out = capsys.readouterr().out
    assert f"measured {CI_PERCENT} % interval" in out
    row = next(x for x in out.splitlines() if x.startswith("median_ttft_ms"))
    assert "[" in row and "]" in row
    assert next(x for x in out.splitlines() if x.startswith("median_itl_ms")).rstrip().endswith("%")
    assert any(x.startswith("note: measured 95 % interval") for x in out.splitlines())
    table = pd.read_csv(tmp_path / "v" / "validate.csv")
    assert ",".join(table.columns) == VALIDATE_BENCH_HEADER
    ttft = table.set_index("metric").loc["median_ttft_ms"]
    assert ttft[CI_LOW] <= ttft["measured"] <= ttft[CI_HIGH]
    assert table.set_index("metric").loc["median_itl_ms", [CI_LOW, CI_HIGH]].isna().all()
    (tmp_path / "v" / "validate.csv").write_text(OLD_VALIDATE_BENCH_HEADERS[0] + "\nduration,1,1,0\n")
    assert main(["validate", "--measured", str(line), "--scenario", str(sc), "--profile", "h200-1b", "--seeds", "1", "--out", "v"]) == 0
