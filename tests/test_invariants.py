"""Invariants of whole simulated runs under random workloads and server settings (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine

from tests.conftest import make_scenario, tiny_profile

servers = st.fixed_dictionaries({
    "max_running_requests": st.integers(1, 24),
    "max_total_num_tokens": st.integers(3_000, 40_000),
    "chunked_prefill_size": st.sampled_from([-1, 256, 1024, 4096]),
    "max_prefill_tokens": st.sampled_from([512, 2048, 16384]),
    "speculative_algorithm": st.sampled_from(["none", "dspark", "eagle"]),
    "speculative_num_draft_tokens": st.integers(2, 6),
    "admission_delay": st.sampled_from(["none", "min_free_slots", "min_free_slots_waiting_aware", "demand_observed"]),
    "sync_mode": st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
    "prefill_slot_expansion_sync": st.booleans(),
    "enable_mixed_chunk": st.booleans(),
    "enable_overlap_schedule": st.booleans(),
    "schedule_policy": st.sampled_from(["fcfs", "lof", "random"]),
})
workloads = st.one_of(
    st.fixed_dictionaries({"kind": st.just("burst"), "num_requests": st.integers(1, 30)}),
    st.fixed_dictionaries({"kind": st.just("closed_loop"), "num_requests": st.integers(1, 30), "concurrency": st.integers(1, 8)}),
    st.fixed_dictionaries({"kind": st.just("poisson"), "num_requests": st.integers(1, 30),
                           "request_rate": st.floats(5, 500), "max_concurrency": st.one_of(st.none(), st.integers(1, 8))}),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, inp=st.integers(1, 1200), out=st.integers(1, 120),
       seed=st.integers(0, 10_000))
def test_run_invariants(server, workload, inp, out, seed):
    workload = dict(workload, input_len={"kind": "uniform", "value": inp, "range_ratio": 0.5},
                    output_len={"kind": "uniform", "value": out, "range_ratio": 0.3})
    acc = {"mean_accept_length": 1 + 0.6 * (server["speculative_num_draft_tokens"] - 1)}
    sc = make_scenario(server, workload, acc, seed=seed)
    eng = SimEngine(sc, tiny_profile(), seed)
    res = eng.run()
    req, chunks, steps, ts = res.requests, res.chunks, res.steps, res.timeseries
    cap = sc.server.max_total_num_tokens
    # every request finishes exactly once, with exactly its output length
    assert len(req) == workload["num_requests"] and req["finish_s"].notna().all()
    per_rid = chunks.groupby("rid")["n_tokens"].sum()
    assert (per_rid.reindex(req["rid"]).to_numpy() == req["output_len"].to_numpy()).all()
    assert (chunks["n_tokens"] >= 1).all()
    assert (chunks.groupby("rid").size() >= 1).all()
    # committed tokens conserved: what the device committed = what clients received
    assert sum(eng.device.committed.values()) == int(req["output_len"].sum())
    # slots and KV respected at every scheduling pass, and at the peak
    assert (ts["running"] <= sc.server.max_running_requests).all()
    assert (ts["kv_used_tokens"] <= cap).all() and eng.sched.kv.peak <= cap
    assert eng.sched.kv.used == 0
    # bench_serving ordering of times
    assert (req["ttft_s"] <= req["e2e_s"] + 1e-12).all() and (req["ttft_s"] > 0).all()
    # verify batches never exceed the slots; GPU launches never overlap on the stream
    if not steps.empty:
        assert (steps["batch_size"] <= sc.server.max_running_requests + 1).all()
        s = steps.sort_values("gpu_start_s")
        assert (s["gpu_start_s"].to_numpy()[1:] >= s["gpu_end_s"].to_numpy()[:-1] - 1e-12).all()
    # accept lengths within 1..window
    spec = sc.server.speculative_algorithm.value != "none"
    ver = steps[(steps["mode"] == "verify") & (steps["decoding_reqs"] > 0)]
    if spec and len(ver):
        per = ver["accepted_tokens"] / ver["decoding_reqs"]
        assert (per >= 1).all() and (per <= sc.server.speculative_num_draft_tokens).all()
