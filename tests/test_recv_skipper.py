"""server.scheduler_recv_interval (sim/recv_skipper.py; SGLang 0.5.23 recv_skipper.py
``SchedulerRecvSkipper``): which passes take new requests in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import with_value
from specsched.sim.engine import SimEngine
from specsched.sim.plan import ForwardMode
from specsched.sim.recv_skipper import RecvSkipper

from tests.conftest import make_scenario, tiny_profile

DECODE, EXTEND = SimpleNamespace(mode=ForwardMode.DECODE), SimpleNamespace(mode=ForwardMode.EXTEND)


def test_steady_decode_receives_every_interval_and_an_extend_at_once():
    s = RecvSkipper(4)
    assert [s.should_recv(DECODE, idle=False) for _ in range(8)] == [False, False, False, True] * 2
    assert s.should_recv(EXTEND, idle=False)                     # weight 1000 >= 4
    assert [s.should_recv(None, idle=False) for _ in range(4)] == [False, False, False, True]
    s.should_recv(DECODE, idle=False)
    assert s.should_recv(None, idle=True) and s.counter == 0      # an idle server receives at once


def run(interval: int, workload: dict, seed: int = 1):
    sc = make_scenario({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}, workload, seed=seed)
    return SimEngine(with_value(sc, "server.scheduler_recv_interval", interval), tiny_profile()).run()


@settings(max_examples=10, deadline=None)
@given(interval=st.integers(2, 64))
def test_a_burst_is_received_whole_at_any_interval(interval: int) -> None:
    """Every request of a burst is there when the idle server first receives: nothing to skip."""
    a = run(1, {"num_requests": 12})
    b = run(interval, {"num_requests": 12})
    assert b.requests["ttft_s"].tolist() == pytest.approx(a.requests["ttft_s"].tolist())


def test_arrivals_mid_decode_wait_for_the_receive_and_all_complete():
    """Poisson arrivals into a decoding server: with an interval of 16, a request arriving
    during a decode stretch waits for the counter, so TTFT grows; every request still
    completes with its tokens."""
    wl = {"kind": "poisson", "request_rate": 20.0, "num_requests": 40,
          "input_len": {"kind": "fixed", "value": 100}, "output_len": {"kind": "fixed", "value": 100}}
    a, b = run(1, wl), run(16, wl)
    assert (b.requests["output_len"] == 100).all() and len(b.requests) == 40
    # a wait of up to 16 decode steps (~1.2 ms each here) on a ~2 ms TTFT
    step_ms = a.summary["median_tpot_ms"]
    assert 3 * a.summary["mean_ttft_ms"] < b.summary["mean_ttft_ms"] < a.summary["mean_ttft_ms"] + 16 * step_ms * 1.2
    assert b.summary["median_tpot_ms"] == pytest.approx(a.summary["median_tpot_ms"], rel=0.1)
