"""The named invariants (docs/architecture.md, "Invariants"), under random workloads and
server settings (hypothesis). A test's name carries the numbers of the invariants it guards:

- INV-1 running <= max_running_requests at every scheduling pass;
- INV-2 KV within capacity: 0 <= used <= max_total_num_tokens, and the peak too;
- INV-3 each request finishes exactly once, with exactly its output length;
- INV-4 tokens conserved: what the device committed is what the clients received;
- INV-5 bench_serving time order: 0 < TTFT <= E2E;
- INV-6 no overlapping GPU steps on the forward stream;
- INV-7 fast path == step by step (tests/test_sim_speed_equivalence.py);
- INV-8 KV balance: the pool's used slots are the sum of the requests' slots, 0 at the end;
- INV-9 accept length within 1..window per verify;
- INV-10 a forward holds at most max_running_requests requests (extend + riding decoders).

Whole runs go through the simulator (its fast path on, the default); the pass-level test
drives the Scheduler alone (no clock), so INV-1, INV-2 and INV-8 are checked after every
pass, retractions included.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.request import ReqStatus

from tests.conftest import (
    arrive_and_pass,
    clockless_scheduler,
    make_scenario,
    tiny_profile,
    uniform_lengths,
    window_acceptance,
)

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
runs = st.fixed_dictionaries({"server": servers, "workload": workloads, "inp": st.integers(1, 1200),
                              "out": st.integers(1, 120), "seed": st.integers(0, 10_000)})
RUNS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def simulate(args: dict):
    """One random run: (scenario, engine after the run, result)."""
    server, seed = args["server"], args["seed"]
    workload = uniform_lengths(args["workload"], args["inp"], args["out"])
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    eng = SimEngine(sc, tiny_profile(), seed)
    return sc, eng, eng.run()


@RUNS
@given(runs)
def test_inv1_running_within_max_running_requests(args):
    sc, _, res = simulate(args)
    assert (res.timeseries["running"] <= sc.server.max_running_requests).all()


@RUNS
@given(runs)
def test_inv2_kv_within_capacity_and_inv8_kv_balance_at_the_end(args):
    sc, eng, res = simulate(args)
    cap = sc.server.max_total_num_tokens
    assert (res.timeseries["kv_used_tokens"] <= cap).all() and (res.timeseries["kv_used_tokens"] >= 0).all()
    assert eng.sched.kv.peak <= cap
    assert eng.sched.kv.used == 0 and all(r.kv_allocated == 0 for r in eng.sched.reqs.values())


@RUNS
@given(runs)
def test_inv3_each_request_finishes_once_with_its_output_length(args):
    _, eng, res = simulate(args)
    req, chunks = res.requests, res.chunks
    assert len(req) == args["workload"]["num_requests"] and req["finish_s"].notna().all()
    assert req["rid"].is_unique
    per_rid = chunks.groupby("rid")["n_tokens"].sum()
    assert (per_rid.reindex(req["rid"]).to_numpy() == req["output_len"].to_numpy()).all()
    assert (chunks["n_tokens"] >= 1).all()
    # the finish is the last delivery, and nothing is delivered after it
    last = chunks.groupby("rid")["time_s"].max()
    assert (last.reindex(req["rid"]).to_numpy() == req["finish_s"].to_numpy()).all()
    assert all(r.status is ReqStatus.FINISHED and r.output_len == r.max_new_tokens for r in eng.sched.reqs.values())


@RUNS
@given(runs)
def test_inv4_tokens_conserved(args):
    _, eng, res = simulate(args)
    assert sum(eng.device.committed.values()) == int(res.requests["output_len"].sum()) == int(res.chunks["n_tokens"].sum())


@RUNS
@given(runs)
def test_inv5_ttft_within_e2e(args):
    _, _, res = simulate(args)
    req = res.requests
    assert (req["ttft_s"] > 0).all() and (req["ttft_s"] <= req["e2e_s"] + 1e-12).all()


@RUNS
@given(runs)
def test_inv6_no_overlapping_gpu_steps_and_inv10_batch_size_bound(args):
    sc, _, res = simulate(args)
    steps = res.steps
    if steps.empty:
        return
    assert (steps["batch_size"] <= sc.server.max_running_requests).all()
    s = steps.sort_values("gpu_start_s")
    assert (s["gpu_end_s"] >= s["gpu_start_s"]).all()
    assert (s["gpu_start_s"].to_numpy()[1:] >= s["gpu_end_s"].to_numpy()[:-1] - 1e-12).all()


@RUNS
@given(runs)
def test_inv9_accept_length_within_the_window(args):
    sc, _, res = simulate(args)
    steps = res.steps
    ver = steps[(steps["mode"] == "verify") & (steps["decoding_reqs"] > 0)]
    if sc.server.speculative_algorithm.value != "none" and len(ver):
        per = ver["accepted_tokens"] / ver["decoding_reqs"]
        assert (per >= 1).all() and (per <= sc.server.speculative_num_draft_tokens).all()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, kv=st.integers(1_200, 10_000),
       lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 150)), min_size=1, max_size=24),
       arrive=st.lists(st.integers(0, 40), min_size=24, max_size=24), seed=st.integers(0, 10_000))
def test_inv1_inv2_inv8_after_every_scheduler_pass(server, kv, lens, arrive, seed):
    # a small pool: retraction and mixed chunks are frequent
    sc = make_scenario(dict(server, max_total_num_tokens=kv), seed=seed,
                       acceptance=window_acceptance(server))
    srv = sc.server
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(5_000):
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        if done:
            break
        assert s.num_running <= srv.max_running_requests                          # INV-1
        assert 0 <= s.kv.used <= s.kv.capacity and s.kv.peak <= s.kv.capacity   # INV-2
        assert s.kv.used == sum(r.kv_allocated for r in s.reqs.values())          # INV-8
        assert all(r.output_len <= r.max_new_tokens for r in s.reqs.values())    # INV-3
    assert not s.has_work and s.kv.used == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 60)), min_size=1, max_size=16),
       arrive=st.lists(st.integers(0, 30), min_size=16, max_size=16), seed=st.integers(0, 10_000))
def test_inv1_running_counts_every_request_of_the_forward_just_built(server, lens, arrive, seed):
    # the timeseries' running column is read right after schedule(): every request of the
    # forward it built holds a running slot, the prompts it just completed and (mixed chunk)
    # the decode rows riding in it included, and INV-1 bounds them all
    sc = make_scenario(server, seed=seed, acceptance=window_acceptance(server))
    srv = sc.server
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(3_000):
        while pending and pending[0][0] <= p:
            s.add_request(pending.pop(0)[1])
        if in_flight is None and not s.has_work and not pending:
            break
        plan = s.schedule()
        if plan is not None:
            assert len(set(plan.rids)) <= s.num_running <= srv.max_running_requests       # INV-1
        new = (plan, dev.step(plan)) if plan is not None else None
        if in_flight is not None:
            s.process_result(*in_flight)
        in_flight = new
    assert not s.has_work
