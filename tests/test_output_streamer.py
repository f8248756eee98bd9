"""server.stream_interval (sim/output_streamer.py; SGLang 0.5.23 output_streamer.py
``OutputStreamer.accept``): which committed tokens go out at once.

Named invariant INV-STREAM: under any interval N, every request is sent exactly the tokens it
committed; its first chunk is its first token alone, sent when it was committed; every later
chunk but the last carries at least N tokens; and the scheduling is untouched, so TTFT, E2E
latency, TPOT and throughput equal the N = 1 run's.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import with_value
from specsched.sim.engine import SimEngine
from specsched.sim.output_streamer import streamed
from specsched.sim.request import Req

from tests.conftest import make_scenario, tiny_profile


def test_the_first_token_goes_at_once_then_chunks_of_the_interval_and_the_finish():
    r = Req(rid=7, input_len=10, max_new_tokens=9)
    reqs = {7: r}
    sent = []
    for n, fin in [(1, False), (1, False), (2, False), (1, False), (3, False), (1, True)]:
        r.output_len += n
        sent.append(streamed(reqs, [7], [n], [fin], 3))
    assert [s[1] for s in sent] == [[1], [], [3], [], [4], [1]]
    assert sent[-1][2] == [True] and r.sent_len == r.output_len == 9


def run(interval: int, spec: bool, out: int, seed: int):
    srv = {} if spec else {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}
    sc = make_scenario(srv, {"kind": "poisson", "request_rate": 400.0, "num_requests": 6,
                             "output_len": {"kind": "uniform", "value": out, "range_ratio": 0.5}}, seed=seed)
    return SimEngine(with_value(sc, "server.stream_interval", interval), tiny_profile()).run()


@settings(max_examples=25, deadline=None)
@given(interval=st.integers(2, 9), spec=st.booleans(), out=st.integers(2, 40), seed=st.integers(1, 50))
def test_inv_stream(interval: int, spec: bool, out: int, seed: int) -> None:
    base, held = run(1, spec, out, seed), run(interval, spec, out, seed)
    for col in ("ttft_s", "e2e_s", "output_len", "finish_s"):
        assert held.requests[col].tolist() == pytest.approx(base.requests[col].tolist()), col
    for key in ("output_throughput", "median_tpot_ms", "median_ttft_ms"):
        assert held.summary[key] == pytest.approx(base.summary[key])
    for rid, c in held.chunks.groupby("rid", sort=False):
        n = c["n_tokens"].tolist()
        req = held.requests.set_index("rid").loc[rid]
        assert sum(n) == req["output_len"]
        assert n[0] == 1 and c["time_s"].iloc[0] == pytest.approx(req["start_s"] + req["ttft_s"])
        assert all(k >= interval for k in n[1:-1])
    assert len(held.chunks) <= len(base.chunks)


def test_the_runtime_streams_as_the_simulator_does():
    """One scheduler, two clocks: the runtime's result processing is the Scheduler's, so on a
    burst (no decision waits on a clock) it sends the same chunks, request by request."""
    pytest.importorskip("torch")
    from specsched.runtime.engine import RuntimeEngine

    sc = make_scenario({"max_running_requests": 4, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
                        "max_total_num_tokens": 5000, "stream_interval": 4},
                       {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": 40},
                        "output_len": {"kind": "fixed", "value": 14}})
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    simulated = SimEngine(sc, tiny_profile()).run()

    def chunks(r):
        return {rid: c["n_tokens"].tolist() for rid, c in r.chunks.groupby("rid")}

    got = chunks(measured)
    assert got == chunks(simulated)
    assert all(n[0] == 1 and sum(n) == 14 and all(k >= 4 for k in n[1:-1]) for n in got.values())
