"""bench_serving's steady-state figures (sim/steady_state.py, after sglang 0.5.23
benchmark/steady_state.py and steady_state_serving.py): the window, the token accounting, the
peak inside the window, and the scenario key's separate result (summary, report, file)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.bench_serving import _peaks
from specsched.sim.engine import SimEngine, run_scenario
from specsched.sim.report import format_report
from specsched.sim.results import write_results
from specsched.sim.steady_state import STEADY_KEYS, steady_state_metrics, steady_window

from tests.conftest import make_scenario, tiny_profile


def _closed_loop_table(c: int, rounds: int, ttft: float, decode: float, n_out: int, stagger: float) -> pd.DataFrame:
    """``c`` clients (client k starts at k x stagger), each sending ``rounds`` requests back to back."""
    rows = []
    for k in range(c):
        t = k * stagger
        for _ in range(rounds):
            f = t + ttft + decode
            rows.append(dict(rid=len(rows), start_s=t, first_token_s=t + ttft, finish_s=f, input_len=100, output_len=n_out))
            t = f  # the next send at the reply (one float: no overlap from rounding)
    return pd.DataFrame(rows)


def test_window_is_the_longest_span_at_the_threshold():
    # in flight: 1 on [0,1), 3 on [1,2), 1 on [2,3), 3 on [3,6), 0 after: peak 3, ratio 0.8 -> 3
    start = np.array([0.0, 1.0, 1.0, 3.0, 3.0, 3.0])
    finish = np.array([3.0, 2.0, 2.0, 6.0, 6.0, 6.0])
    start[0], finish[0] = 0.0, 6.0
    start, finish = start[[0, 1, 2, 4, 5]], finish[[0, 1, 2, 4, 5]]
    assert steady_window(start, finish, 0.8) == (3.0, 6.0, 3, 3)
    with pytest.raises(ValueError, match="ratio"):
        steady_window(start, finish, 1.5)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 5), rounds=st.integers(2, 6), ttft=st.floats(0.01, 2.0), decode=st.floats(0.1, 5.0),
       n_out=st.integers(2, 50), ratio=st.floats(0.05, 1.0))
def test_steady_rates_never_exceed_what_the_clients_can_do(c, rounds, ttft, decode, n_out, ratio):
    # invariants: the window lies in the run; at most c requests emit tokens at once, each at
    # most n_out tokens per (decode) seconds plus its first token; the time-average in flight
    # inside the window is at least the threshold and at most the peak
    df = _closed_loop_table(c, rounds, ttft, decode, n_out, stagger=0.0)
    s = steady_state_metrics(df, ratio)
    t0, t1 = s["window_start"], s["window_end"]
    assert 0 <= t0 < t1 <= df.finish_s.max()
    assert s["output_throughput"] <= c * n_out / min(decode, t1 - t0) + 1e-6
    assert s["concurrency_threshold"] - 1e-9 <= s["average_concurrency"] <= c + 1e-9
    # the 1-second buckets hold every token counted in the window, the busiest at least its share
    nb = max(1, math.ceil(t1 - t0))
    assert s["total_output"] / nb - 1e-6 <= s["peak_output_throughput"] <= s["total_output"] + 1e-6


def test_a_long_closed_loop_reads_its_own_rate():
    # every client sends back to back: c requests per (ttft + decode) seconds
    df = _closed_loop_table(4, 50, 0.5, 1.5, 11, stagger=0.5)
    s = steady_state_metrics(df, 0.8)
    assert s["completed"] / s["duration"] == pytest.approx(4 / 2.0, rel=0.05)
    assert s["output_throughput"] == pytest.approx(4 * 11 / 2.0, rel=0.05)


def _closed_loop(ratio: float | None, n: int = 40):
    return make_scenario({"max_running_requests": 4, "chunked_prefill_size": 512, "max_prefill_tokens": 512},
                         {"kind": "closed_loop", "concurrency": 4, "num_requests": n,
                          "steady_state_concurrency_ratio": ratio,
                          "input_len": {"kind": "fixed", "value": 2000}, "output_len": {"kind": "fixed", "value": 64}})


def test_the_scenario_key_leaves_every_full_run_figure_and_adds_steady_ones():
    # steady_state_serving keeps bench_serving's whole result as it is (throughputs included)
    # and reports the window's figures apart
    whole = run_scenario(_closed_loop(None), seed=1, profile=tiny_profile()).summary
    steady = run_scenario(_closed_loop(0.8), seed=1, profile=tiny_profile()).summary
    added = set(steady) - set(whole)
    assert added and all(k.startswith("steady_") for k in added)
    for k, v in whole.items():
        assert steady[k] == v or (isinstance(v, float) and math.isnan(v) and math.isnan(steady[k])), k
    # the drain (the last requests alone) is left out: the steady output rate is higher
    assert steady["steady_output_throughput"] > whole["output_throughput"]
    assert 0 <= steady["steady_window_start_s"] < steady["steady_window_end_s"] <= whole["duration"]
    assert steady["steady_concurrency_ratio"] == 0.8 and steady["steady_peak_concurrency"] == 4


def _token_times_brute(requests: pd.DataFrame, chunks: pd.DataFrame) -> list[tuple[float, float]]:
    """(time, weight) of every token as steady_state.py's _token_timestamps builds them, one
    request at a time: start + TTFT, then each chunk's n tokens at gap / n apart."""
    out = []
    for r in requests.itertuples():
        ch = chunks[chunks.rid == r.rid].sort_values("time_s")
        ts = [r.first_token_s]
        rows = list(ch.itertuples())
        for prev, cur in zip(rows[:-1], rows[1:], strict=True):
            gap = (cur.time_s - prev.time_s) / cur.n_tokens
            ts += [ts[-1] + gap * (k + 1) for k in range(cur.n_tokens)]
        out += [(t, r.output_len / len(ts)) for t in ts]
    return out


def _drain_burst_table() -> tuple[pd.DataFrame, pd.DataFrame]:
    """4 closed-loop clients at 10 tok/s (1-token chunks), then one request left alone that
    streams 200 tokens in 0.5 s: the run's busiest second lies in the drain."""
    reqs, chunks = [], []
    for k in range(4):
        t = 0.25 * k
        for _ in range(5):
            rid = len(reqs)
            times = t + 0.1 + 0.1 * np.arange(20)
            reqs.append(dict(rid=rid, start_s=t, first_token_s=times[0], finish_s=times[-1], input_len=100, output_len=20))
            chunks += [dict(rid=rid, time_s=x, n_tokens=1) for x in times]
            t = times[-1]
    t = max(r["finish_s"] for r in reqs)
    rid = len(reqs)
    reqs.append(dict(rid=rid, start_s=t, first_token_s=t + 0.1, finish_s=t + 0.6, input_len=100, output_len=200))
    chunks += [dict(rid=rid, time_s=t + 0.1, n_tokens=1)] + [dict(rid=rid, time_s=t + 0.1 + 0.05 * (j + 1), n_tokens=20)
                                                             for j in range(9)] + [dict(rid=rid, time_s=t + 0.6, n_tokens=19)]
    return pd.DataFrame(reqs), pd.DataFrame(chunks)


def test_the_steady_peak_is_counted_in_the_windows_own_seconds():
    req, ch = _drain_burst_table()
    s = steady_state_metrics(req, 0.8, ch)
    t0, t1, nb = s["window_start"], s["window_end"], max(1, math.ceil(s["duration"]))
    events = _token_times_brute(req, ch)
    inside = [(t, w) for t, w in events if t0 <= t <= t1]
    buckets = np.zeros(nb)
    for t, w in inside:
        buckets[min(max(0, math.ceil(t - t0) - 1), nb - 1)] += w
    assert s["total_output"] == pytest.approx(sum(w for _, w in inside))
    assert s["peak_output_throughput"] == pytest.approx(buckets.max())
    # the drain's 200 tokens in half a second make the run's peak, not the window's
    run_peak = _peaks(req, ch)["max_output_tokens_per_s"]
    assert run_peak >= 100 and s["peak_output_throughput"] <= 4 * 10 + 1
    # compact records (no chunk times): tokens spread evenly over each request's decode give
    # the same count here (the decode is even) and a peak within a token of it
    sc = steady_state_metrics(req, 0.8, None)
    assert sc["total_output"] == pytest.approx(s["total_output"], abs=1.0)
    assert sc["peak_output_throughput"] == pytest.approx(s["peak_output_throughput"], abs=4.0)


def test_the_steady_result_is_a_block_of_its_own_and_a_file_of_its_own(tmp_path):
    sc = _closed_loop(0.8)
    res = SimEngine(sc, tiny_profile(), 1).run()
    text = format_report(res.summary)
    assert text.count("Steady-State Result") == 1
    block = text[text.index("Steady-State Result"):]
    assert text.index("Serving Benchmark Result") < text.index("Steady-State Result")
    for label in ("Concurrency ratio:", "Measurement duration (s):", "Minimum concurrency:", "Completed requests:",
                  "Input tokens:", "Generated tokens:", "Output throughput, retokenized (tok/s):",
                  "Average concurrency:", "Peak concurrency:", "Peak output throughput (tok/s):"):
        assert label in block, label
    line = f"{'Output token throughput (tok/s):':<40} {res.summary['steady_output_throughput']:<10.2f}"
    assert line in block
    out = write_results(res, tmp_path / "r")
    rec = json.loads((out / "steady_state.jsonl").read_text())
    assert list(rec) == list(STEADY_KEYS)
    assert rec["output_throughput"] == pytest.approx(res.summary["steady_output_throughput"])
    bench = json.loads((out / "bench_serving.jsonl").read_text())
    assert bench["output_throughput"] == pytest.approx(res.summary["output_throughput"])
    whole = SimEngine(_closed_loop(None), tiny_profile(), 1).run()
    assert "Steady-State Result" not in format_report(whole.summary)
    assert not (write_results(whole, tmp_path / "w") / "steady_state.jsonl").exists()


def test_the_ratio_is_checked():
    with pytest.raises(Exception, match="steady_state_concurrency_ratio"):
        _closed_loop(1.5)
