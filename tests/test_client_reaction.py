"""Clients that react to a finish (closed loop, Poisson with max_concurrency) send their next
request at the delivery time, and with no tokenizer time the scheduler's next pass sees it,
as the runtime's loop does (runtime/engine.py ``_deliver`` then ``_recv``): the request
never waits a further pass."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.engine import run_scenario

from tests.conftest import make_scenario, tiny_profile

WORKLOADS = {
    "closed_loop": {"kind": "closed_loop", "concurrency": 2},
    "poisson_limited": {"kind": "poisson", "request_rate": 1e6, "max_concurrency": 2},
}


def lone_steps_before_each_extend(steps: pd.DataFrame) -> list[int]:
    """For every extend after the first: how many batch-1 decode steps ran right before it."""
    out, run = [], 0
    for mode, bs in zip(steps["mode"], steps["batch_size"], strict=True):
        if mode == "extend":
            out.append(run)
            run = 0
        elif bs == 1:
            run += 1
        else:
            run = 0
    return out[1:]


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(1, 10_000), spread=st.floats(0.1, 0.6))
def test_a_reacting_clients_next_request_is_in_the_next_pass(kind, seed, spread):
    """Two slots, unequal outputs, no speculation: when one request finishes, the other runs
    one decode pass alone (the one already scheduled when its result came back: overlap),
    then the next request's extend. Waiting a further pass would show two lone steps."""
    wl = {**WORKLOADS[kind], "num_requests": 8, "input_len": {"kind": "fixed", "value": 100},
          "output_len": {"kind": "uniform", "value": 24, "range_ratio": spread}}
    sc = make_scenario(server={"speculative_algorithm": "none"}, workload=wl, seed=seed)
    steps = run_scenario(sc, seed=seed, profile=tiny_profile()).steps
    lone = lone_steps_before_each_extend(steps[steps["part"] == "main"])
    assert lone and max(lone) <= 1, lone


def test_a_tokenizer_delay_still_delays_the_arrival():
    """With ingest time the request reaches the scheduler that much later (the FIFO)."""
    wl = {**WORKLOADS["closed_loop"], "num_requests": 6, "input_len": {"kind": "fixed", "value": 100},
          "output_len": {"kind": "uniform", "value": 24, "range_ratio": 0.5}}
    sc = make_scenario(server={"speculative_algorithm": "none"}, workload=wl)
    fast = run_scenario(sc, profile=tiny_profile()).summary["median_ttft_ms"]
    slow = run_scenario(sc, profile=tiny_profile(ingest_per_request_s=0.01)).summary["median_ttft_ms"]
    assert slow >= fast + 10.0 - 1e-6


def test_a_closed_loop_request_waits_for_its_whole_prompt_to_be_encoded():
    """host.ingest_per_token_s: the tokenizer FIFO holds each request for its prompt's tokens
    (SGLang encodes the whole chat history per request): with every prompt N tokens long the
    run is the one with N x cost per request, and a longer prompt waits longer."""
    def ttfts(inp: int, **host) -> list[float]:
        wl = {**WORKLOADS["closed_loop"], "num_requests": 6, "input_len": {"kind": "fixed", "value": inp},
              "output_len": {"kind": "uniform", "value": 24, "range_ratio": 0.5}}
        sc = make_scenario(server={"speculative_algorithm": "none"}, workload=wl)
        return run_scenario(sc, profile=tiny_profile(**host)).requests.sort_values("rid")["ttft_s"].tolist()

    assert ttfts(1000, ingest_per_token_s=1e-5) == pytest.approx(ttfts(1000, ingest_per_request_s=1e-2), abs=1e-12)
    assert ttfts(4000, ingest_per_token_s=1e-5) == pytest.approx(ttfts(4000, ingest_per_request_s=4e-2), abs=1e-12)
    slow, base = ttfts(4000, ingest_per_token_s=1e-5), ttfts(4000)
    assert min(a - b for a, b in zip(slow, base, strict=True)) > 0.03   # ~40 ms more each
