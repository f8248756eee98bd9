"""specsched.analysis.compare: arms over seeds, paired bootstrap CIs, table formats."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from specsched.analysis import compare
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.analysis.synthetic import synthetic_run, write_demo_scenario
from specsched.sim.errors import ConfigError

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_demo_scenario(tmp_path_factory.mktemp("cmp") / "demo.yaml")


def _samples(true_pct: float, seeds: int, rng) -> pd.DataFrame:
    rows = []
    for s in range(seeds):
        b = rng.normal(1000.0, 60.0)
        rows.append(("base", s, "output_throughput", b))
        rows.append(("fix", s, "output_throughput", b * (1 + true_pct / 100) + rng.normal(0, 3.0)))
        rows.append(("base", s, "median_ttft_ms", 50.0 + s))
        rows.append(("fix", s, "median_ttft_ms", 50.0 + s))
    return pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"])


def test_summary_ci_contains_the_true_difference():
    samples = _samples(6.0, 10, np.random.default_rng(11))
    table = compare.summarize_comparison(samples, ["output_throughput", "median_ttft_ms"])
    thr = table[table["metric"] == "output_throughput"].iloc[0]
    assert thr["base_arm"] == "base" and thr["arm"] == "fix" and thr["n_seeds"] == 10
    assert thr["ci_low_pct"] < 6.0 < thr["ci_high_pct"]
    assert thr["ci_low_pct"] > 0
    b = samples.query("arm == 'base' and metric == 'output_throughput'")["value"].mean()
    c = samples.query("arm == 'fix' and metric == 'output_throughput'")["value"].mean()
    assert thr["base_value"] == pytest.approx(b) and thr["arm_value"] == pytest.approx(c)
    assert thr["change_pct"] == pytest.approx((c - b) / b * 100)
    assert compare.verdict(thr) == "better"
    ttft = table[table["metric"] == "median_ttft_ms"].iloc[0]
    assert ttft["change_pct"] == 0 and ttft["ci_low_pct"] == 0 == ttft["ci_high_pct"]
    assert compare.verdict(ttft) == "same"


def test_unpaired_when_seeds_differ():
    samples = _samples(6.0, 8, np.random.default_rng(5))
    samples.loc[samples.arm == "fix", "seed"] += 100  # no common seeds: independent bootstrap
    paired = compare.summarize_comparison(_samples(6.0, 8, np.random.default_rng(5)), ["output_throughput"])
    indep = compare.summarize_comparison(samples, ["output_throughput"])
    assert indep["change_pct"].iloc[0] == pytest.approx(paired["change_pct"].iloc[0])
    width = lambda t: (t["ci_high_pct"] - t["ci_low_pct"]).iloc[0]  # noqa: E731
    assert width(indep) > 2 * width(paired)


def test_compare_arms_real_runs(scenario):
    table = compare.compare_arms(scenario, ["base", "stream_wait", "waiting_aware"], 3)
    assert list(table["metric"].unique()) == list(compare.DEFAULT_METRICS)
    assert set(table["arm"]) == {"stream_wait", "waiting_aware"}
    assert (table["n_seeds"] == 3).all()
    finite = table.dropna(subset=["ci_low_pct"])
    assert len(finite) >= len(table) - 2
    assert (finite["ci_low_pct"] <= finite["change_pct"] + 1e-9).all()
    assert (finite["change_pct"] <= finite["ci_high_pct"] + 1e-9).all()


def test_one_seed_gives_nan_ci(scenario):
    table = compare.compare_arms(scenario, ["base", "stream_wait"], 1, ["output_throughput", "max_ttft_ms"],
                                 runner=synthetic_run)
    assert len(table) == 2
    assert table["change_pct"].notna().all()
    assert table["ci_low_pct"].isna().all() and table["ci_high_pct"].isna().all()
    md = compare.to_markdown(table)
    assert "n/a" in md


def test_run_arms_seeds_are_scenario_seed_plus_i(scenario, tmp_path):
    s5 = write_demo_scenario(tmp_path / "s5.yaml", seed=5)
    samples = compare.run_arms(s5, ["base"], 3, runner=synthetic_run)
    assert sorted(samples["seed"].unique()) == [5, 6, 7]
    assert set(samples.columns) == {"arm", "seed", "metric", "value"}
    one = synthetic_run(load_scenario_with_overrides(s5), 6)
    got = samples.query("seed == 6 and metric == 'output_throughput'")["value"].iloc[0]
    assert got == pytest.approx(one.summary["output_throughput"])


def test_overrides_reach_every_arm(scenario):
    samples = compare.run_arms(scenario, ["base", "stream_wait"], 1, overrides={"workload.num_requests": 5},
                               runner=synthetic_run)
    assert (samples.query("metric == 'completed'")["value"] == 5).all()


def test_bad_inputs(scenario):
    with pytest.raises(ConfigError):
        compare.compare_arms(scenario, ["base", "nope"], 2, runner=synthetic_run)
    with pytest.raises(ConfigError):
        compare.compare_arms(scenario, ["base"], 0, runner=synthetic_run)
    with pytest.raises(ConfigError):
        compare.compare_arms(scenario, ["base", "base"], 1, runner=synthetic_run)
    with pytest.raises(ConfigError, match="not in the run summaries"):
        compare.compare_arms(scenario, ["base", "stream_wait"], 1, ["bogus_ms"], runner=synthetic_run)


def test_a_key_value_given_as_an_arm_points_at_sweep(scenario):
    """``--arms base,server.chunked_prefill_size=4096`` (a key's value where an arm's name
    belongs) is refused with the sweep that compares a key's values; a plain unknown arm gets
    only the allowed arms."""
    with pytest.raises(ConfigError) as e:
        compare.check_arms(scenario, ["base", "server.chunked_prefill_size=4096"], 1, None)
    assert e.value.key == "--arms" and e.value.value == "server.chunked_prefill_size=4096"
    assert f"specsched sweep {scenario} --grid server.chunked_prefill_size=4096,OTHER" in e.value.allowed
    with pytest.raises(ConfigError) as e:
        compare.check_arms(scenario, ["base", "nope"], 1, None)
    assert "sweep" not in e.value.allowed and e.value.allowed.startswith("allowed: base")


def _boom(scenario, seed):
    raise RuntimeError("model exploded")


def test_failed_run_names_arm_and_seed(scenario):
    with pytest.raises(compare.RunFailed, match=r"arm 'base' seed 1 failed: RuntimeError: model exploded"):
        compare.run_arms(scenario, ["base"], 1, runner=_boom)


def test_a_run_that_refuses_its_input_is_the_runs_one_line_exit_2(tmp_path, capsys):
    """A ConfigError raised inside a run (here: a profile without the plain decode cost the
    arm needs) or an UnschedulableRequest is bad input: compare gives the line ``run``
    gives and exit 2, in-process and from worker processes alike (it printed a
    RunFailed traceback, the run's traceback inside it)."""
    import yaml
    from specsched.sim.scheduler import UnschedulableRequest

    from specsched.cli import main

    # measured spec costs only, and no verify window to read a decode forward from them
    prof = yaml.safe_load((ROOT / "profiles" / "mi355x-dsv41-flash-tp4.yaml").read_text())
    prof["gpu"].pop("verify_window")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(prof))
    doc = {"name": "nodecode", "profile": str(tmp_path / "p.yaml"),
           "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 100},
                        "output_len": {"kind": "fixed", "value": 10}},
           "arms": {"base": {}, "small": {"server": {"max_running_requests": 2}}}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="gpu.decode"):
        compare.run_arms(str(p), ["base"], 1)
    for workers in ("1", "2"):
        assert main(["compare", str(p), "--arms", "base,small", "--seeds", "2", "--workers", workers,
                     "--out", str(tmp_path / f"out{workers}")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "gpu.decode" in err and "Traceback" not in err

    def unschedulable(scenario, seed):
        raise UnschedulableRequest("request 3: cannot fit")

    with pytest.raises(UnschedulableRequest, match="request 3"):
        compare.run_arms(str(p), ["base"], 1, runner=unschedulable)


def test_formats(tmp_path):
    table = compare.summarize_comparison(_samples(6.0, 5, np.random.default_rng(2)), ["output_throughput"])
    md = compare.to_markdown(table)
    lines = md.strip().splitlines()
    assert len(lines) == 5 and lines[0].startswith("| metric |") and "95% CI of change" in lines[0]
    assert lines[-1].startswith("verdict: ") and "| ±" in lines[2]
    assert "| output_throughput | base |" in lines[2] and "| fix |" in lines[2]
    console = Console(record=True, width=200)
    console.print(compare.to_rich_table(table))
    text = console.export_text()
    assert "output_throughput" in text and "fix" in text and "better" in text
    path = compare.write_csv(table, tmp_path / "sub" / "t.csv")
    back = pd.read_csv(path)
    assert list(back.columns) == list(compare.TABLE_COLUMNS)
    assert back["change_pct"].iloc[0] == pytest.approx(table["change_pct"].iloc[0])
    assert not math.isnan(back["ci_low_pct"].iloc[0])


@pytest.mark.parametrize(("metric", "lo", "hi"), [
    ("verify_cycles_per_s", -1e-11, -1e-12),     # both bounds float noise below zero
    ("median_itl_ms", 1.3e-11, 1.58),            # lower bound float noise above zero
    ("verify_cycles_per_s", 1e-12, 2e-12),
])
def test_float_noise_bounds_are_no_clear_change(metric, lo, hi):
    """Even with no size threshold (--min-change 0), float rounding gets no verdict."""
    row = {"metric": metric, "change_pct": (lo + hi) / 2, "ci_low_pct": lo, "ci_high_pct": hi, "noise_pct": 0.0}
    assert compare.verdict(row) == "no clear change"


def test_changes_above_float_noise_still_get_a_verdict():
    row = {"metric": "median_itl_ms", "change_pct": 0.8, "ci_low_pct": 1e-4, "ci_high_pct": 1.58, "noise_pct": 0.0}
    assert compare.verdict(row) == "worse"
    row = {"metric": "verify_cycles_per_s", "change_pct": -1.0, "ci_low_pct": -2.0, "ci_high_pct": -1e-4, "noise_pct": 0.0}
    assert compare.verdict(row) == "worse"


def test_a_tiny_clear_change_is_the_same_not_better():
    """The newcomer's case: -0.08 % TTFT with a CI that excludes 0 was labelled "better"."""
    row = {"metric": "mean_ttft_ms", "change_pct": -0.08, "ci_low_pct": -0.1, "ci_high_pct": -0.05}
    assert compare.verdict(row) == "same"                        # the default 1 % threshold
    assert compare.verdict({**row, "noise_pct": 0.05}) == "better"  # a user's --min-change 0.05
    assert compare.verdict({**row, "ci_low_pct": math.nan, "ci_high_pct": math.nan}) == "same"   # one seed
    one = {"metric": "mean_ttft_ms", "change_pct": -3.0, "ci_low_pct": math.nan, "ci_high_pct": math.nan}
    assert compare.verdict(one) == "better (1 seed)"


def test_the_noise_is_the_seed_spread_of_the_change():
    """A paired change that scatters over seeds more than its mean is 'same'; a steady one of
    the same size is 'better'; the threshold shown is that scatter (or the 1 % floor)."""
    rows = []
    for s, (d_steady, d_noisy) in enumerate([(3.0, 9.0), (3.1, -4.0), (2.9, 8.0), (3.0, -3.0)]):
        for arm, d in (("base", 0.0), ("steady", d_steady), ("noisy", d_noisy)):
            rows.append((arm, s, "output_throughput", 1000.0 * (1 + s / 10) * (1 + d / 100)))
    table = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]),
                                         ["output_throughput"], n_resamples=999)
    steady, noisy = table.iloc[0], table.iloc[1]
    assert steady["noise_pct"] == pytest.approx(1.0) and compare.verdict(steady) == "better"
    d = np.array([9.0, -4.0, 8.0, -3.0])
    assert noisy["noise_pct"] == pytest.approx(min(np.std(d, ddof=1), 100 * np.expm1(np.std(np.log1p(d / 100), ddof=1))))
    assert noisy["noise_pct"] == pytest.approx(np.std(d, ddof=1), rel=0.05)  # small changes: the two spreads agree
    assert abs(noisy["change_pct"]) < noisy["noise_pct"] and compare.verdict(noisy) in ("same", "no clear change")
    looser = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]),
                                          ["output_throughput"], n_resamples=999, min_change_pct=5.0)
    assert looser.iloc[0]["noise_pct"] == 5.0 and compare.verdict(looser.iloc[0]) == "same"


def test_a_many_fold_change_on_every_seed_is_not_noise():
    """Paired seeds each 16x and 80x worse: the percent changes (+1500 %, +7900 %) scatter by
    4500 %, more than the pooled change, but every seed is many-fold worse; the spread of
    ln(arm / base) (a factor of 3) is the seed noise, and the verdict is 'worse'. A
    steady decrease keeps the percent spread (the smaller one). (Seeds 0.5x, 0.05x and 0.2x
    are no clear change at 3 seeds: the t interval of ln(arm / base), which a 3-seed
    bootstrap undercovers, reaches above 0: tests/test_analysis_stats.py.)"""
    rows = []
    for s, (up, down) in enumerate([(16.0, 0.5), (80.0, 0.4), (30.0, 0.45)]):
        for arm, f in (("base", 1.0), ("up", up), ("down", down)):
            rows.append((arm, s, "mean_ttft_ms", 100.0 * (1 + s / 10) * f))
    table = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]),
                                         ["mean_ttft_ms"], n_resamples=999)
    up, down = table.iloc[0], table.iloc[1]
    r = np.log([16.0, 80.0, 30.0])
    assert up["noise_pct"] == pytest.approx(100 * np.expm1(np.std(r, ddof=1)))
    assert compare.verdict(up) == "worse"
    assert down["noise_pct"] == pytest.approx(np.std([-50.0, -60.0, -55.0], ddof=1))
    assert compare.verdict(down) == "better"


@settings(max_examples=200, deadline=None)
@given(change=st.floats(-50, 50), below=st.floats(0, 20), above=st.floats(0, 20), noise=st.floats(0, 10),
       higher=st.booleans())
def test_verdict_sizes_agree_with_the_noise(change, below, above, noise, higher):
    """Invariant: better/worse only for |change| > noise, and in the change's direction;
    same only when the whole CI lies within ±noise."""
    row = {"metric": "output_throughput" if higher else "mean_ttft_ms", "change_pct": change,
           "ci_low_pct": change - below, "ci_high_pct": change + above, "noise_pct": noise}
    v = compare.verdict(row)
    if v in ("better", "worse"):
        assert abs(change) > noise and (v == "better") == ((change > 0) == higher)
    if v == "same":
        assert -noise <= row["ci_low_pct"] and row["ci_high_pct"] <= noise


def test_csv_columns_name_the_values_they_hold():
    table = compare.summarize_comparison(_samples(6.0, 4, np.random.default_rng(3)), ["output_throughput"])
    assert {"base_value", "arm_value", "change_pct"} <= set(table.columns)
    assert "change_mean" not in table.columns


def test_a_metric_missing_in_one_seed_compares_the_seeds_both_arms_have():
    """A paired metric one arm lacks in some seed (verify_cycles_per_s of a run with no steady
    batch) is compared over the seeds both arms have: the values, the change and the seed count
    agree (the arm's value read n/a beside a change computed from the other seeds)."""
    rows = [("base", s, "verify_cycles_per_s", v) for s, v in enumerate([92.0, 81.0, 83.0])]
    rows += [("fix", s, "verify_cycles_per_s", v) for s, v in enumerate([math.nan, 80.0, 82.5])]
    rows += [(arm, s, "output_throughput", 1000.0 + s) for arm in ("base", "fix") for s in range(3)]
    table = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]))
    assert table.set_index("metric").loc["output_throughput", "n_seeds"] == 3
    r = table.set_index("metric").loc["verify_cycles_per_s"]
    assert r["n_seeds"] == 2
    assert r["base_value"] == pytest.approx(82.0) and r["arm_value"] == pytest.approx(81.25)
    assert r["change_pct"] == pytest.approx(100 * (81.25 - 82.0) / 82.0)


def test_a_metric_only_one_arm_has_shows_that_arms_value():
    """Only one arm speculates: verify_cycles_per_s and accept_length read the speculative
    arm's own value (both arms read n/a, from the seeds both had: none); only the change, its
    CI and the verdict are n/a. accept_length is a default row when an arm has it."""
    rows = [("base", s, "output_throughput", 1000.0 + s) for s in range(3)]
    rows += [("base", s, m, math.nan) for s in range(3) for m in ("verify_cycles_per_s", "accept_length")]
    rows += [("mtp", s, "output_throughput", 1100.0 + s) for s in range(3)]
    rows += [("mtp", s, "verify_cycles_per_s", v) for s, v in enumerate([300.0, 310.0, 320.0])]
    rows += [("mtp", s, "accept_length", v) for s, v in enumerate([2.5, 2.7, 2.9])]
    table = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]))
    t = table.set_index("metric")
    assert list(t.index) == ["output_throughput", "verify_cycles_per_s", "accept_length"]
    assert math.isnan(t.loc["verify_cycles_per_s", "base_value"])
    assert t.loc["verify_cycles_per_s", "arm_value"] == pytest.approx(310.0)
    assert t.loc["accept_length", "arm_value"] == pytest.approx(2.7)
    assert t.loc["verify_cycles_per_s", "n_seeds"] == 0 and math.isnan(t.loc["verify_cycles_per_s", "change_pct"])
    assert compare.verdict(t.loc["verify_cycles_per_s"].to_dict() | {"metric": "verify_cycles_per_s"}) == "n/a"
    md = compare.to_markdown(table)
    assert "| verify_cycles_per_s | base | n/a | mtp | 310 | n/a | n/a | 0 |" in md


def _open_loop(drain_base: float, drain_fix: float, span: bool = True) -> pd.DataFrame:
    """Three seeds of two arms with the same arrivals (span 10 s); the runs end ``drain_*``
    s after the last arrival."""
    rows = []
    for s in range(3):
        for arm, drain in (("base", drain_base), ("fix", drain_fix)):
            dur = 10.0 + 0.1 * s + drain
            rows += [(arm, s, "duration", dur), (arm, s, "output_throughput", 50_000 / dur),
                     (arm, s, "mean_ttft_ms", 40.0 + s + (5 if arm == "fix" else 0))]
            if span:
                rows.append((arm, s, compare.ARRIVAL_SPAN, 10.0 + 0.1 * s))
    return pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"])


def test_open_loop_throughput_below_saturation_is_rate_bound():
    """Open-loop runs that keep pace with their arrivals (each ends within 10 % of its
    duration after its last arrival) have the throughput of the arrivals: a faster arm that
    only finishes its last requests sooner (+2 %) gets 'rate-bound', not 'better'; the
    latency rows keep their verdicts and the table says what rate-bound means. A saturated
    arm (30 % of its run after the last arrival), or runs with no arrival span (a closed
    loop), keep the throughput verdict."""
    metrics = ["output_throughput", "mean_ttft_ms"]
    table = compare.summarize_comparison(_open_loop(0.5, 0.3), metrics)
    t = table.set_index("metric")
    assert t.loc["output_throughput", "change_pct"] > 1.5 and bool(t.loc["output_throughput", "rate_bound"])
    assert [compare.verdict(r) for _, r in table.iterrows()] == ["rate-bound", "worse"]
    assert compare.RATE_BOUND_NOTE in compare.to_markdown(table)
    caption = Console(width=400, record=True)
    caption.print(compare.to_rich_table(table))
    assert "rate-bound: a throughput of open-loop arrivals" in caption.export_text()
    saturated = compare.summarize_comparison(_open_loop(4.5, 3.0), metrics)
    assert compare.verdict(saturated.iloc[0]) == "better"
    assert compare.RATE_BOUND_NOTE not in compare.to_markdown(saturated)
    closed = compare.summarize_comparison(_open_loop(0.5, 0.3, span=False), metrics)
    assert compare.verdict(closed.iloc[0]) == "better"


def test_run_arms_gives_open_loop_runs_their_arrival_span():
    """run_arms records arrival_span_s (last arrival after the first) for poisson arrivals
    only: it is what rate_bound reads beside the duration."""
    over = {"workload.num_requests": 24}
    poisson = compare.run_arms("h200/poisson-spec", ["base"], 1, overrides=over)
    v = poisson.set_index("metric")["value"]
    assert 0 < v[compare.ARRIVAL_SPAN] < v["duration"]
    closed = compare.run_arms("batch8-ll", ["base"], 1, overrides={"workload.num_requests": 8})
    assert compare.ARRIVAL_SPAN not in set(closed["metric"])


def _terminal(monkeypatch, columns: int) -> None:
    """Standard output as a terminal of ``columns`` columns, without colour codes."""
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.mark.parametrize("columns", [80, 100])
def test_a_terminal_too_narrow_for_the_comparison_gets_one_block_per_metric(scenario, tmp_path, capsys,
                                                                            monkeypatch, columns):
    """At 80 or 100 columns the comparison's ten columns (133 characters) were squeezed to
    six characters each: every metric, arm and CI cut to ``outp…``, ``wait…``, ``[+4.…``.
    A table that does not fit is printed as one block per metric, every name and figure
    whole, no line wider than the terminal; one that fits (200 columns) is the table."""
    from specsched.cli import main

    _terminal(monkeypatch, columns)
    assert main(["compare", str(scenario), "--arms", "base,stream_wait", "--seeds", "2", "--out", str(tmp_path / "c")]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)   # bold headings, dim caption
    table = out.split("runs kept in")[0]   # the closing line names the run folders (paths): prose
    assert "…" not in out and all(len(line) <= columns for line in table.splitlines()), out
    assert "\noutput_throughput\n" in out and "arm: stream_wait" in out and "95% CI of change: [" in out
    assert "verdict: " in out and "┃" not in out
    _terminal(monkeypatch, 200)
    assert main(["compare", str(scenario), "--arms", "base,stream_wait", "--seeds", "2", "--out", str(tmp_path / "d")]) == 0
    wide = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "┃ metric" in wide and "…" not in wide


def test_stacked_rows_pack_whole_items_within_the_width():
    """An item is never broken inside; a line holds as many as fit; one longer than the
    width stands alone."""
    from specsched.analysis.narrow import SEPARATOR, stacked_lines

    header = ["metric", "a", "b", "c"]
    (lines,) = stacked_lines(header, [["m", "x" * 10, "y" * 30, "z" * 90]], 40)
    assert lines == ["m", "  a: " + "x" * 10, "  b: " + "y" * 30, "  c: " + "z" * 90]
    (lines,) = stacked_lines(header, [["m", "1", "2", "3"]], 40)
    assert lines == ["m", f"  a: 1{SEPARATOR}b: 2{SEPARATOR}c: 3"]


@settings(max_examples=50, deadline=None)
@given(x=st.floats(-0.004999, 0.004999))
def test_a_change_that_rounds_to_zero_prints_without_a_minus(x):
    """compare printed "-0.00%" for a change of -0.001 %."""
    from specsched.analysis.compare import _pct

    assert _pct(x) == "+0.00%"


def test_an_arm_that_rejects_requests_is_said_not_scored_faster():
    """An arm whose server rejected requests (a smaller pool replaying a trace with long rows)
    read -25 % mean TTFT and +18 % throughput, better, over its completed requests only:
    requests_aborted leads the default metrics (0 for a run that rejected none), its verdict
    is worse, and a warning line says why the rest looks faster."""
    rows = []
    for seed in (1, 2, 3):
        rows += [("base", seed, "mean_ttft_ms", 100.0 + seed), ("base", seed, "output_throughput", 1000.0 + seed),
                 ("small", seed, "mean_ttft_ms", 75.0 + seed), ("small", seed, "output_throughput", 1180.0 + seed),
                 ("small", seed, "requests_aborted", 14.0 + seed)]
    samples = pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"])
    table = compare.summarize_comparison(samples, None, n_resamples=999)
    first = table.iloc[0]
    assert first["metric"] == "requests_aborted" and first["base_value"] == 0 and compare.verdict(first) == "worse"
    note = compare.aborted_note(samples)
    assert note is not None and "small 16" in note and "looks faster" in note   # 15, 16, 17
    assert compare.aborted_note(samples[samples["metric"] != "requests_aborted"]) is None


def test_a_run_held_back_by_max_concurrency_is_not_rate_bound():
    """Poisson arrivals far faster than the server, capped by max_concurrency (bench_serving's
    semaphore): the clients send each request when a slot frees, so the last send falls
    shortly before the run ends although the server never kept pace with the offered rate.
    Its arrival span is the offered arrivals' (the drawn send times), not the delayed sends',
    so its throughput is not called rate-bound; an uncapped run's span is unchanged."""
    over = {"workload.num_requests": 24, "workload.request_rate": 1000.0, "workload.max_concurrency": 2}
    capped = compare.run_arms("h200/poisson-spec", ["base"], 1, overrides=over)
    v = capped.set_index("metric")["value"]
    assert v[compare.ARRIVAL_SPAN] < 0.2 * v["duration"]   # 24 offered arrivals at 1000 req/s
    wide = capped.pivot(index="seed", columns="metric", values="value")
    assert not compare.rate_bound(wide)
    free = compare.run_arms("h200/poisson-spec", ["base"], 1, overrides={"workload.num_requests": 24})
    assert 0 < free.set_index("metric")["value"][compare.ARRIVAL_SPAN]


def _cycles_samples(accept_fix: list[float]) -> pd.DataFrame:
    """Two arms over 4 seeds: the fix runs 10 % more verify cycles a second; its accept length is ``accept_fix``."""
    rows = []
    for s in range(4):
        rows += [("base", s, "verify_cycles_per_s", 100.0 + s), ("fix", s, "verify_cycles_per_s", 110.0 + 1.1 * s),
                 ("base", s, "accept_length", 3.0 + 0.01 * s), ("fix", s, "accept_length", accept_fix[s]),
                 ("base", s, "output_throughput", 300.0 + s), ("fix", s, "output_throughput", 310.0 + s)]
    return pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"])


def test_verify_cycles_per_s_is_neutral_when_the_accept_length_differs(tmp_path):
    """A wider verify window ran 10 % more verify cycles a second at a shorter accept length and
    the table called the cycles 'better', though a cycle then commits fewer tokens: cycles/s
    alone says nothing about speed. With the accept length changed the row reads ``neutral``
    (footnoted); with the same accept length it keeps its verdict; the CSV keeps the flag."""
    shorter = compare.summarize_comparison(_cycles_samples([2.5, 2.51, 2.52, 2.53]))
    t = shorter.set_index("metric")
    assert t.loc["verify_cycles_per_s", "change_pct"] == pytest.approx(10.0)
    assert bool(t.loc["verify_cycles_per_s", "accept_length_differs"])
    assert compare.verdict(t.loc["verify_cycles_per_s"].to_dict() | {"metric": "verify_cycles_per_s"}) == "neutral"
    assert compare.verdict(t.loc["accept_length"].to_dict() | {"metric": "accept_length"}) == "worse"
    assert compare.verdict(t.loc["output_throughput"].to_dict() | {"metric": "output_throughput"}) == "better"
    md = compare.to_markdown(shorter)
    assert "| verify_cycles_per_s | base | 101.5 | fix | 111.7 | +10.00% |" in md and md.count("| neutral |") == 1
    assert compare.ACCEPT_NOTE in md
    back = pd.read_csv(compare.write_csv(shorter, tmp_path / "c.csv"))
    assert [compare.verdict(r) for _, r in back.iterrows()] == [compare.verdict(r) for _, r in shorter.iterrows()]
    same = compare.summarize_comparison(_cycles_samples([3.0, 3.01, 3.02, 3.03]))
    s = same.set_index("metric").loc["verify_cycles_per_s"]
    assert not bool(s["accept_length_differs"])
    assert compare.verdict(s.to_dict() | {"metric": "verify_cycles_per_s"}) == "better"
    assert "neutral" not in compare.to_markdown(same)
    # asked for cycles/s alone, the accept length is still read from the runs
    only = compare.summarize_comparison(_cycles_samples([2.5, 2.51, 2.52, 2.53]), ["verify_cycles_per_s"])
    assert [compare.verdict(r) for _, r in only.iterrows()] == ["neutral"]


def test_an_open_change_over_two_seeds_names_the_seeds_that_would_resolve_it():
    """Two seeds of a change of -6 % and -2 % are 'no clear change' (t with one degree of
    freedom); the table says about how many seeds would resolve it, as the next run's
    --seeds, and a change the seeds already resolve, or one within the noise, gets none."""
    rows = []
    for s, (b, f) in enumerate(((1000.0, 940.0), (1100.0, 1078.0))):
        rows += [("base", s, "output_throughput", b), ("fix", s, "output_throughput", f),
                 ("base", s, "median_ttft_ms", 50.0), ("fix", s, "median_ttft_ms", 50.2 + s * 0.1)]
    table = compare.summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]),
                                         ["output_throughput", "median_ttft_ms"])
    thr = table[table["metric"] == "output_throughput"].iloc[0]
    assert compare.verdict(thr) == "no clear change"
    assert thr["seeds_needed"] == 5
    ttft = table[table["metric"] == "median_ttft_ms"].iloc[0]
    assert math.isnan(ttft["seeds_needed"])                 # within the noise: more seeds could only say 'same'
    md = compare.to_markdown(table)
    assert "no clear change (~5 seeds would resolve it)" in md
    assert md.count("seeds would resolve") == 1
