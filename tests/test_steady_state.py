"""bench_serving's steady-state throughput (sim/steady_state.py, after sglang 0.5.23
benchmark/steady_state.py): the window, the token accounting, and the scenario key."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.engine import run_scenario
from specsched.sim.steady_state import steady_throughputs, steady_window

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
    s = steady_throughputs(df, ratio)
    t0, t1 = s["steady_window_start_s"], s["steady_window_end_s"]
    assert 0 <= t0 < t1 <= df.finish_s.max()
    assert s["output_throughput"] <= c * n_out / min(decode, t1 - t0) + 1e-6
    assert s["steady_concurrency_threshold"] - 1e-9 <= s["steady_concurrency"] <= c + 1e-9
    assert s["total_throughput"] == pytest.approx(s["input_throughput"] + s["output_throughput"])


def test_a_long_closed_loop_reads_its_own_rate():
    # every client sends back to back: c requests per (ttft + decode) seconds
    df = _closed_loop_table(4, 50, 0.5, 1.5, 11, stagger=0.5)
    s = steady_throughputs(df, 0.8)
    assert s["request_throughput"] == pytest.approx(4 / 2.0, rel=0.05)
    assert s["output_throughput"] == pytest.approx(4 * 11 / 2.0, rel=0.05)


def _closed_loop(ratio: float | None, n: int = 40):
    return make_scenario({"max_running_requests": 4, "chunked_prefill_size": 512, "max_prefill_tokens": 512},
                         {"kind": "closed_loop", "concurrency": 4, "num_requests": n,
                          "steady_state_concurrency_ratio": ratio,
                          "input_len": {"kind": "fixed", "value": 2000}, "output_len": {"kind": "fixed", "value": 64}})


def test_the_scenario_key_replaces_throughputs_only():
    # steady_state_serving keeps bench_serving's full-run latency statistics
    whole = run_scenario(_closed_loop(None), seed=1, profile=tiny_profile()).summary
    steady = run_scenario(_closed_loop(0.8), seed=1, profile=tiny_profile()).summary
    for k in ("mean_ttft_ms", "p90_tpot_ms", "completed", "duration"):
        assert steady[k] == whole[k]
    # the drain (the last requests alone) is left out: the steady output rate is higher
    assert steady["output_throughput"] > whole["output_throughput"]
    assert 0 <= steady["steady_window_start_s"] < steady["steady_window_end_s"] <= whole["duration"]


def test_the_ratio_is_checked():
    with pytest.raises(Exception, match="steady_state_concurrency_ratio"):
        _closed_loop(1.5)
