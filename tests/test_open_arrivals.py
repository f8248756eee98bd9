"""Open arrivals (Poisson or trace without max_concurrency) reach the scheduler without a
SimPy process: the host takes every request whose arrival time its clock has reached
(``SimEngine._take_arrivals``; docs/performance.md).

- the rule itself: a receive at host time t takes every request that arrived at or before
  t, in arrival order, recorded with its client's send time (the tokenizer FIFO between);
- INV-7 with ties: arrival times on the dyadic grid the host's costs move on, so requests
  arrive at the very time of a receive (also inside what would be a collapsed stretch), give
  the same run with fast-forward on and off.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim import engine_clients
from specsched.sim.engine import SimEngine

from tests.conftest import make_scenario, tiny_profile
from tests.test_sim_speed_equivalence import assert_same_run

GRID = 2.0 ** -12   # seconds: host costs and arrival times are multiples of it


def _poisson(n: int, inp: int = 300, out: int = 30, **server) -> object:
    srv = {"speculative_algorithm": "none", **server}
    wl = {"kind": "poisson", "num_requests": n, "request_rate": 50.0,
          "input_len": {"kind": "fixed", "value": inp}, "output_len": {"kind": "fixed", "value": out}}
    return make_scenario(srv, wl)


def test_a_receive_takes_every_request_arrived_by_its_time():
    eng = SimEngine(_poisson(4), tiny_profile(ingest_per_request_s=0.25))
    # sends at 0.5, 0.6, 0.9, 2.0: the tokenizer FIFO lets them in at 0.75, 1.0, 1.25, 2.25
    eng._open_arrivals(np.array([0.5, 0.6, 0.9, 2.0]))
    assert eng._arrive_at == [0.75, 1.0, 1.25, 2.25]
    # every timer starts at its send, known before the run: the rows are recorded at once
    assert eng.rec._rid.tolist() == [0, 1, 2, 3] and eng.rec._start.tolist() == [0.5, 0.6, 0.9, 2.0]
    eng._t = 1.0
    eng._take_arrivals()
    assert [r.rid for r in eng.inbox] == [0, 1]          # the one arriving at 1.0 exactly too
    assert eng._next_arrival == 1.25
    eng._t = 1.2
    eng._take_arrivals()
    assert [r.rid for r in eng.inbox] == [0, 1]
    eng._t = 5.0
    eng._take_arrivals()
    assert [r.rid for r in eng.inbox] == [0, 1, 2, 3] and eng._next_arrival == float("inf")


def test_the_tokenizer_fifo_charges_every_prompt_token():
    # host.ingest_per_token_s: the HTTP server encodes each prompt whole before the next
    # (serving_chat.py _render_and_encode_chat_template): 1 ms + 0.5 ms per 1K tokens
    eng = SimEngine(_poisson(3, inp=2000), tiny_profile(ingest_per_request_s=1e-3, ingest_per_token_s=5e-7))
    eng._open_arrivals(np.array([0.0, 0.0005, 1.0]))
    # 2 ms each: the second waits behind the first; the third finds the FIFO free
    assert eng._arrive_at == pytest.approx([0.002, 0.004, 1.002], abs=1e-12)
    per_req = SimEngine(_poisson(3, inp=2000), tiny_profile(ingest_per_request_s=2e-3))
    per_req._open_arrivals(np.array([0.0, 0.0005, 1.0]))
    assert per_req._arrive_at == pytest.approx(eng._arrive_at, abs=1e-12)
    longer = SimEngine(_poisson(3, inp=8000), tiny_profile(ingest_per_request_s=1e-3, ingest_per_token_s=5e-7))
    longer._open_arrivals(np.array([0.0, 0.0005, 1.0]))
    assert longer._arrive_at == pytest.approx([0.005, 0.010, 1.005], abs=1e-12)   # 4x the tokens


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), spread=st.integers(1, 400),
       costs=st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 3)),
       overlap=st.sampled_from([True, True, False]), out=st.integers(1, 60))
def test_inv7_with_arrivals_at_the_hosts_own_times(seed, n, spread, costs, overlap, out):
    # host costs and arrival times on one dyadic grid: host times are exact multiples of it
    # while the host is the bottleneck, so arrivals land exactly on receives
    rng = np.random.default_rng(seed)
    times = np.sort(rng.integers(0, spread, n)) * GRID
    sc = _poisson(n, inp=int(rng.integers(1, 800)), out=out, enable_overlap_schedule=overlap)
    prof = tiny_profile(schedule_s=costs[0] * GRID, launch_s=costs[1] * GRID, process_s=costs[2] * GRID,
                        sync_wakeup_s=0.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine_clients, "arrival_times", lambda *a: times)
        step = SimEngine(sc, prof, fast_forward=False).run()
        fast = SimEngine(sc, prof, fast_forward=True).run()
    assert_same_run(step, fast)
    assert step.requests["start_s"].tolist() == sorted(times.tolist())


def test_ties_do_happen_in_that_setting(monkeypatch):
    # the property above is not vacuous: some pass starts at the very time a request arrives
    times = np.arange(40) * 3 * GRID
    monkeypatch.setattr(engine_clients, "arrival_times", lambda *a: times)
    prof = tiny_profile(schedule_s=GRID, launch_s=GRID, process_s=GRID, sync_wakeup_s=0.0)
    run = SimEngine(_poisson(40, inp=1, out=1), prof, fast_forward=False).run()
    passes = set(run.timeseries["time_s"].tolist())
    assert passes & set(times.tolist())
