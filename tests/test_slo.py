"""specsched.analysis.slo: service-level objectives over a sweep (which points meet them,
where a metric crosses its bound along the swept parameter, the best point among those that
meet them) and ``sweep --slo`` / ``plot SWEEP --slo`` on the command line."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.analysis.cli_commands import parse_slos
from specsched.analysis.slo import Slo, crossing, judge_points, parse_slo, slo_lines
from specsched.sim.errors import ConfigError

from specsched.cli import main

KNOWN = ["p90_ttft_ms", "median_tpot_ms", "output_throughput"]


def _summary(rows):
    """A sweep summary as summarize_sweep writes it, from (point, arm, rate, metric, value, lo, hi)."""
    return pd.DataFrame([{"point": p, "arm": arm, "workload.request_rate": rate, "metric": m, "across_seeds": "mean",
                          "value": v, "ci_low": lo, "ci_high": hi, "seeds": 3}
                         for p, arm, rate, m, v, lo, hi in rows])


RATE_SWEEP = _summary([
    (0, "base", 2.0, "p90_ttft_ms", 400.0, 390.0, 410.0), (0, "base", 2.0, "output_throughput", 500.0, 490.0, 510.0),
    (1, "base", 4.0, "p90_ttft_ms", 900.0, 880.0, 920.0), (1, "base", 4.0, "output_throughput", 1000.0, 990.0, 1010.0),
    (2, "base", 8.0, "p90_ttft_ms", 2400.0, 2300.0, 2500.0), (2, "base", 8.0, "output_throughput", 1900.0, 1850.0, 1950.0),
    (3, "fix", 2.0, "p90_ttft_ms", 300.0, 290.0, 310.0), (3, "fix", 2.0, "output_throughput", 500.0, 490.0, 510.0),
    (4, "fix", 4.0, "p90_ttft_ms", 600.0, 580.0, 620.0), (4, "fix", 4.0, "output_throughput", 1000.0, 990.0, 1010.0),
    (5, "fix", 8.0, "p90_ttft_ms", 1900.0, 1800.0, 2100.0), (5, "fix", 8.0, "output_throughput", 1950.0, 1900.0, 2000.0),
])


def test_an_objective_is_parsed_and_judged_in_the_metrics_unit():
    slo = parse_slo("p90_ttft_ms <= 2000", KNOWN)
    assert slo == Slo("p90_ttft_ms", "<=", 2000.0) and str(slo) == "p90_ttft_ms<=2000"
    assert slo.met(2000.0) and not slo.met(2000.1) and not slo.met(float("nan"))
    assert parse_slo("output_throughput>5e3", KNOWN).met(5001.0)
    assert not parse_slo("output_throughput>5e3", KNOWN).met(5000.0)


@pytest.mark.parametrize("text,why", [
    ("p90_ttft<=2000", "unknown metric 'p90_ttft'"),
    ("p90_ttft_ms=2000", "expected METRIC<=NUMBER"),
    ("p90_ttft_ms<=two", "expected METRIC<=NUMBER"),
    ("p90_ttft_ms<=inf", "finite"),
])
def test_a_bad_objective_is_one_line_naming_it(text, why):
    with pytest.raises(ConfigError) as e:
        parse_slo(text, KNOWN)
    assert why in str(e.value) and text in str(e.value) and "\n" not in str(e.value)


@given(x0=st.floats(0, 100), dx=st.floats(0.01, 100), v0=st.floats(-1e4, 1e4), dv=st.floats(-1e4, 1e4),
       t=st.floats(0, 1))
def test_the_crossing_lies_between_the_points_and_on_the_line_through_them(x0, dx, v0, dv, t):
    """Invariant: for a bound between two values, the interpolated crossing lies between the
    two points and the line through them takes the bound there; outside, it is NaN."""
    x1, v1 = x0 + dx, v0 + dv
    bound = v0 + t * dv
    c = crossing(x0, v0, x1, v1, bound)
    if dv == 0 or abs(dv) < 1e-9:
        return
    assert x0 - 1e-9 <= c <= x1 + 1e-9
    assert math.isclose(v0 + (c - x0) / dx * dv, bound, rel_tol=1e-6, abs_tol=1e-6)
    outside = max(v0, v1) + abs(dv) + 1.0
    assert math.isnan(crossing(x0, v0, x1, v1, outside))


def test_points_meet_objectives_by_their_value_over_seeds_and_the_interval_marks_undecided_ones():
    verdict = judge_points(RATE_SWEEP, [Slo("p90_ttft_ms", "<=", 2000.0)])
    assert [v.met for v in verdict.values()] == [True, True, False, True, True, True]
    assert verdict[2].missed[0][1] == 2400.0
    assert verdict[5].undecided and not verdict[4].undecided   # 2000 inside [1800, 2100]
    missing = judge_points(RATE_SWEEP, [Slo("median_tpot_ms", "<=", 50.0)])
    assert not any(v.met for v in missing.values())   # a metric no run has meets nothing


def test_the_lines_walk_the_rate_per_arm_and_name_the_crossing_and_the_best_point_meeting_them():
    lines = slo_lines(RATE_SWEEP, [Slo("p90_ttft_ms", "<=", 2000.0)])
    text = "\n".join(lines)
    assert lines[0] == "SLOs p90_ttft_ms<=2000: met at 5 of 6 point(s)"
    assert "along workload.request_rate (arm=base): met at 4, 2" not in text
    assert "along workload.request_rate (arm=base): met at 2, 4" in text
    # base crosses 2000 between 4 (900) and 8 (2400): 4 + 4 x 1100 / 1500
    assert "missed from workload.request_rate=8 after 4: p90_ttft_ms 900 -> 2,400 (bound 2000, crossed at ~6.933" in text
    assert "along workload.request_rate (arm=fix): met at 2, 4, 8" in text
    # the highest throughput is base at 8 (1,900 < fix's 1,950 anyway) but base at 8 misses
    assert "highest output_throughput meeting them: arm=fix workload.request_rate=8, 1,950 tok/s" in text
    assert "undecided by these seeds" in text and "arm=fix workload.request_rate=8" in text.split("undecided")[1]


def test_a_sweep_with_an_objective_prints_the_verdict_and_the_plot_draws_the_bound(tmp_path, capsys):
    out = tmp_path / "rate.parquet"
    assert main(["sweep", "poisson8b-fixed", "--grid", "workload.request_rate=2,60", "--seeds", "1",
                 "--set", "workload.num_requests=40", "--out", str(out), "--no-progress", "--workers", "1",
                 "--slo", "median_tpot_ms<=1000", "--slo", "p90_ttft_ms<=0.001"]) == 0
    text = capsys.readouterr().out
    assert "SLOs median_tpot_ms<=1000, p90_ttft_ms<=0.001: met at 0 of 2 point(s)" in text
    assert "p90_ttft_ms" in text.split("one row per point")[1].split("SLOs")[0]   # the objective's column is shown
    assert main(["plot", str(out), "--slo", "median_tpot_ms<=1000", "--out", str(tmp_path / "plots")]) == 0
    text = capsys.readouterr().out
    assert "met at 2 of 2 point(s)" in text and "along workload.request_rate: met at 2, 60" in text
    assert (tmp_path / "plots" / "sweep_rate.png").is_file()


def test_a_bad_objective_stops_the_sweep_before_any_run(tmp_path, capsys):
    out = tmp_path / "rate.parquet"
    assert main(["sweep", "poisson8b-fixed", "--grid", "workload.request_rate=2,4", "--out", str(out),
                 "--slo", "p90_ttft<=2000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--slo" in err and "unknown metric" in err
    assert not out.exists()


def test_a_sweep_over_names_lists_the_points_that_meet_the_objectives():
    by_arm = RATE_SWEEP[RATE_SWEEP["workload.request_rate"] == 8.0]
    lines = slo_lines(by_arm, [Slo("p90_ttft_ms", "<=", 2000.0)])
    assert lines[:2] == ["SLOs p90_ttft_ms<=2000: met at 1 of 2 point(s)", "  met at: arm=fix"]


@pytest.mark.parametrize("text", ["p90_ttft_ms<=-5", "output_throughput>=-1", "median_tpot_ms<-0.5"])
def test_a_negative_bound_is_refused(text):
    """Every run summary metric is >= 0 (latencies, throughputs, counts): a negative bound was
    taken, and `<= -5` then judged every point missed ('met at none'), `>= -1` every point met,
    with no word that the objective cannot tell points apart."""
    with pytest.raises(ConfigError) as e:
        parse_slo(text, ["p90_ttft_ms", "output_throughput", "median_tpot_ms"])
    assert e.value.key == "--slo" and ">= 0" in str(e.value), str(e.value)


def _walk(values, rates=(2.0, 4.0, 8.0)):
    return _summary([(i, "base", r, m, v, v, v) for i, (r, vals) in enumerate(zip(rates, values, strict=True))
                     for m, v in zip(("p90_ttft_ms", "output_throughput"), vals, strict=True)])


def test_a_flip_prints_the_metric_in_the_order_walked():
    """A metric that falls below its bound along the rate ('met from 4 after 2') was printed
    backwards, from the point that meets it to the one that misses it: 'p90_ttft_ms 1,000 ->
    3,000' where it went from 3,000 at rate 2 to 1,000 at rate 4."""
    lines = slo_lines(_walk([(3000.0, 100.0), (1000.0, 200.0), (2500.0, 300.0)]), [Slo("p90_ttft_ms", "<=", 2000.0)])
    assert "    met from workload.request_rate=4 after 2: p90_ttft_ms 3,000 -> 1,000 (bound 2000, crossed at ~3 " \
           "by linear interpolation)" in lines
    assert "    missed from workload.request_rate=8 after 4: p90_ttft_ms 1,000 -> 2,500 (bound 2000, crossed at " \
           "~6.667 by linear interpolation)" in lines
    lines = slo_lines(_walk([(1.0, 100.0), (1.0, 200.0), (1.0, 300.0)]), [Slo("output_throughput", ">=", 150.0)])
    assert any("met from workload.request_rate=4 after 2: output_throughput 100 -> 200" in ln for ln in lines), lines


def test_a_rate_axis_ending_at_inf_is_walked_with_inf_last():
    """A rate sweep ending at inf (bench_serving --request-rate inf) was not walked at all: no
    'along' line, no flip named."""
    lines = slo_lines(_walk([(300.0, 100.0), (5000.0, 200.0), (900.0, 300.0)], rates=(2.0, math.inf, 4.0)),
                      [Slo("p90_ttft_ms", "<=", 2000.0)])
    assert "  along workload.request_rate: met at 2, 4" in lines, lines
    assert "    missed from workload.request_rate=inf after 4: p90_ttft_ms 900 -> 5,000 (bound 2000)" in lines, lines


def test_an_objective_on_a_metric_no_run_has_says_so():
    """accept_length of runs without speculative decoding: every point 'missed' without a word why."""
    s = _walk([(300.0, 100.0), (900.0, 200.0), (5000.0, 300.0)])
    s = pd.concat([s, s[s["metric"] == "output_throughput"].assign(metric="accept_length", value=float("nan"),
                                                                      ci_low=float("nan"), ci_high=float("nan"))])
    lines = slo_lines(s, [Slo("p90_ttft_ms", "<=", 2000.0), Slo("accept_length", ">=", 2.0)])
    assert "  accept_length: no run of this sweep has a value for it, so no point meets its objective" in lines


def test_the_sweep_takes_an_objective_on_a_maximum_its_plot_takes(tmp_path, capsys):
    """max_ttft_ms is in every run's summary (plot SWEEP --slo took it) but sweep --slo refused it;
    an unknown metric's suggestions were the keys sharing its last word ('ms': the TTFT keys for
    p95_e2e_ms)."""
    assert parse_slos(["max_ttft_ms<=3000"]) == [Slo("max_ttft_ms", "<=", 3000.0)]
    with pytest.raises(ConfigError) as e:
        parse_slos(["p95_e2e_ms<=3000"])
    assert "p95_e2e_latency_ms" in str(e.value), str(e.value)


def test_an_objective_beside_results_directories_is_refused(tmp_path, capsys):
    """plot RESULTS_DIR --slo ... drew the run's figures and said nothing of the objective."""
    run = tmp_path / "run"
    assert main(["run", "poisson8b-fixed", "--set", "workload.num_requests=5", "--out", str(run), "-q"]) == 0
    capsys.readouterr()
    assert main(["plot", str(run), "--slo", "p90_ttft_ms<=5", "--out", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--slo" in err and "SWEEP.parquet" in err, err
    assert not (tmp_path / "plots").exists()
    with pytest.raises(ConfigError) as e:
        parse_slos(["P90_TTFT_MS<=5"])
    assert "p90_ttft_ms" in str(e.value)


def test_a_bound_is_printed_as_given():
    """'%g' keeps six digits: p99_e2e_latency_ms<=1234567 was printed as <=1.23457e+06 and
    output_throughput>=12345.5 as >=12345.5 but 123456.7 as >=123457, a bound not given."""
    assert str(parse_slo("output_throughput>=123456.7", KNOWN)) == "output_throughput>=123456.7"
    assert str(parse_slo("p90_ttft_ms<=1234567", KNOWN)) == "p90_ttft_ms<=1234567"
    lines = slo_lines(_walk([(100.0, 100.0), (1234600.0, 200.0), (1.0, 300.0)]), [Slo("p90_ttft_ms", "<=", 1234567.0)])
    assert any("(bound 1234567, crossed at" in ln for ln in lines), lines


def test_a_bound_panels_legend_names_its_objectives_not_every_line():
    """The arms' labels were repeated in the legend of every panel with a bound (a long arm
    name then covered the panel's lines); the first panel keeps the plot's legend of lines."""
    from specsched.analysis.sweep_summary import plot_sweep

    fig = plot_sweep(RATE_SWEEP, slos=[Slo("p90_ttft_ms", "<=", 2000.0), Slo("p90_ttft_ms", "<=", 1000.0),
                                       Slo("output_throughput", ">=", 800.0)])
    legends = {ax.get_title(): [t.get_text() for t in ax.get_legend().texts] for ax in fig.axes if ax.get_legend()}
    ttft = next(v for k, v in legends.items() if "TTFT" in k)   # the first panel
    assert ttft == ["arm=base", "arm=fix", "SLO p90_ttft_ms<=2000", "SLO p90_ttft_ms<=1000"], legends
    tput = next(v for k, v in legends.items() if "throughput" in k.lower())
    assert tput == ["SLO output_throughput>=800"], legends


def test_points_whose_every_run_failed_are_counted_apart_not_dropped():
    """A sweep of two points, one failing in every run, read "met at 1 of 1 point(s)": the
    failed point is in no summary. The first line now counts it as not judged."""
    from types import SimpleNamespace

    import pandas as pd
    from specsched.analysis.cli_commands import _unfinished_points
    from specsched.analysis.sweep import FailedPoint, point_id

    lines = slo_lines(RATE_SWEEP, [Slo("p90_ttft_ms", "<=", 2000.0)], unjudged=1)
    assert lines[0].endswith("; 1 more point(s) with no finished run (every run failed), not judged")
    assert "not judged" not in slo_lines(RATE_SWEEP, [Slo("p90_ttft_ms", "<=", 2000.0)])[0]
    done, bad = {"arm": "base", "workload.request_rate": 2}, {"arm": "base", "workload.request_rate": 60}
    table = pd.DataFrame({"point": [point_id(done)] * 2, "seed": [1, 2], "metric": ["x", "x"], "value": [1.0, 2.0]})
    report = SimpleNamespace(table=table, failed=[FailedPoint(bad, 1, "E"), FailedPoint(bad, 2, "E"),
                                                  FailedPoint(done, 3, "E")])
    assert _unfinished_points(report) == 1
