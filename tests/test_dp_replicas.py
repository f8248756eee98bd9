"""Data-parallel replicas (sim/dp_replicas.py): ``dp_size`` whole servers behind round-robin dispatch.

Named invariants (docs/dp-replicas.md):

- INV-DP-REPLICA-SPLIT: N replicas sent N copies of a workload at once are N copies of one
  server's run of it: every request's times equal those of the one server's request it copies
  (no replica waits for another, and none shares a pool, a batch or a forward stream).
- INV-DP-REPLICA-RR: request i reaches replica i mod N (SGLang's ``round_robin_scheduler``
  counter, in the order requests reach the controller).
- INV-DP-REPLICA-ALONE: with open arrivals each replica runs on a clock of its own
  (``MemberServer.own_clock``); the run is identical to every replica sharing the run's clock.
- INV-1 per replica: each replica's running requests stay within max_running_requests (the
  cap is each replica's, not divided), while together they exceed it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.dp_replicas import ReplicaEngine
from specsched.sim.engine import SimEngine, Stalled
from specsched.sim.errors import ConfigError
from specsched.sim.scheduler_decode import UnschedulableRequest

from tests.conftest import make_scenario, tiny_profile, uniform_lengths, window_acceptance
from tests.test_invariants import servers

RUNS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(server: dict, workload: dict, seed: int = 1, shared_clock: bool = False, acceptance: dict | None = None):
    sc = make_scenario(server, workload, acceptance, seed=seed)
    eng = SimEngine(sc, tiny_profile(), seed)
    if shared_clock:
        eng._force_shared_clock = True
    return eng, eng.run()


@pytest.mark.parametrize("spec", ["none", "dspark"])
@pytest.mark.parametrize("n", [2, 3])
def test_inv_dp_replica_split_copies_one_servers_run(spec, n):
    """A burst of N x m identical requests (no tokenizer time: all reach the controller at
    t=0) on N replicas: replica k runs requests k, k+N, ..., the same m requests one server
    runs alone, so request i's TTFT and E2E are those of request i // N on one server. With
    speculative decoding every draft is accepted (accept length = the window), so no draw
    (each request's own stream) can differ."""
    server = {"max_running_requests": 4, "max_total_num_tokens": 6000, "chunked_prefill_size": 512,
              "speculative_algorithm": spec}
    work = {"kind": "burst", "num_requests": 7, "input_len": {"kind": "fixed", "value": 700},
            "output_len": {"kind": "fixed", "value": 30}}
    acc = {"request_spread": 0.0, "mean_accept_length": 4.0}
    _, one = _run(server, work, acceptance=acc)
    eng, many = _run({**server, "dp_size": n}, {**work, "num_requests": 7 * n}, acceptance=acc)
    assert isinstance(eng, ReplicaEngine) and many.summary["dp_replicas"] == n
    base = one.requests.set_index("rid")
    for col in ("ttft_s", "e2e_s", "first_token_s", "finish_s"):
        got = many.requests.set_index("rid")[col].to_numpy()
        want = base[col].to_numpy()[np.arange(7 * n) // n]
        assert np.array_equal(got, want), col
    # the same time, N times the tokens; each replica as busy as the one server
    assert many.summary["duration"] == pytest.approx(one.summary["duration"])
    assert many.summary["output_throughput"] == pytest.approx(n * one.summary["output_throughput"])
    assert many.summary["gpu_busy_fraction"] == pytest.approx(one.summary["gpu_busy_fraction"])
    assert set(many.steps["dp_rank"]) == set(range(n))


def _rr_workloads():
    return st.one_of(
        st.fixed_dictionaries({"kind": st.just("burst"), "num_requests": st.integers(1, 30)}),
        st.fixed_dictionaries({"kind": st.just("closed_loop"), "num_requests": st.integers(1, 30),
                               "concurrency": st.integers(1, 8)}),
        st.fixed_dictionaries({"kind": st.just("poisson"), "num_requests": st.integers(1, 30),
                               "request_rate": st.floats(5, 500),
                               "max_concurrency": st.one_of(st.none(), st.integers(1, 8))}))


@RUNS
@given(server=servers, workload=_rr_workloads(), n=st.integers(2, 4), inp=st.integers(1, 1200),
       out=st.integers(1, 60), seed=st.integers(0, 10_000))
def test_inv_dp_replica_rr_and_per_replica_caps(server, workload, n, inp, out, seed):
    """Every request reaches replica (its index mod N), each replica's timeseries keeps its own
    max_running_requests and KV pool, every request finishes with its output."""
    try:
        eng, res = _run({**server, "dp_size": n}, uniform_lengths(workload, inp, out), seed,
                        acceptance=window_acceptance(server))
    except (ConfigError, UnschedulableRequest):
        return
    for k, r in enumerate(eng.replicas):
        assert all(rid % n == k for rid in r.sched.reqs), k
    assert sorted(res.requests["rid"]) == list(range(workload["num_requests"]))
    assert res.requests["finish_s"].notna().all()
    ts = res.timeseries
    if len(ts):
        assert (ts["running"] <= server["max_running_requests"]).all()
        assert (ts["kv_used_tokens"] <= eng.replicas[0].sched.kv.capacity).all()


@RUNS
@given(server=servers, n=st.integers(2, 4), rate=st.floats(5, 800), num=st.integers(1, 40),
       inp=st.integers(1, 1200), out=st.integers(1, 60), seed=st.integers(0, 10_000))
def test_inv_dp_replica_alone_equals_a_shared_clock(server, n, rate, num, inp, out, seed):
    """Open Poisson arrivals: replicas run one after another on clocks of their own, and the
    result (every table, every summary figure) is the one of all replicas on one clock."""
    work = uniform_lengths({"kind": "poisson", "num_requests": num, "request_rate": rate}, inp, out)
    acc = window_acceptance(server)
    try:
        eng_a, alone = _run({**server, "dp_size": n}, work, seed, acceptance=acc)
    except (ConfigError, UnschedulableRequest):
        return
    assert eng_a._alone
    eng_s, shared = _run({**server, "dp_size": n}, work, seed, shared_clock=True, acceptance=acc)
    assert not eng_s._alone
    # equal up to the shared clock's rounding: there a host's time lands on the float SimPy's
    # clock can reach (SimEngine._delay_to), a few units of the last place away
    for a, b in ((alone.requests, shared.requests), (alone.steps, shared.steps),
                 (alone.timeseries, shared.timeseries), (alone.chunks, shared.chunks)):
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        for col in a.columns:
            x, y = a[col].to_numpy(), b[col].to_numpy()
            if x.dtype.kind == "f":
                assert np.allclose(x, y, rtol=1e-9, atol=1e-12, equal_nan=True), col
            else:
                assert np.array_equal(x, y), col
    assert alone.summary.keys() == shared.summary.keys()
    for k, v in alone.summary.items():
        if k == "host_blocked_s":
            # the engines' sums include a host's wait after its last token, which a lone clock
            # runs to its end and a shared one cuts off when the last replica's last token ends
            # the run; the recorded steps' blocking (tables above) is the same
            continue
        w = shared.summary[k]
        if isinstance(v, float):
            assert (math.isnan(v) and math.isnan(w)) or v == pytest.approx(w, rel=1e-9, abs=1e-9), k
        else:
            assert v == w, k


def test_replicas_together_run_more_than_one_servers_cap():
    """The cap is each replica's (SGLang divides by attn_dp_size, 1 here): 2 replicas of
    max_running_requests 4 run 8 requests at once in a burst, as one server of 8 would."""
    server = {"max_running_requests": 4, "speculative_algorithm": "none"}
    eng, res = _run({**server, "dp_size": 2}, {"kind": "burst", "num_requests": 16})
    per = res.timeseries.groupby("dp_rank")["running"].max()
    assert (per == 4).all() and len(per) == 2


NEVER = """
from specsched.sim.admission import AdmissionDelayBase
class Never(AdmissionDelayBase):
    name = "never"
    stateless = True
    def should_delay(self, state):
        return True
"""


@pytest.mark.parametrize("workload", [{"kind": "burst"}, {"kind": "closed_loop", "concurrency": 4},
                                      {"kind": "poisson", "request_rate": 50.0, "max_concurrency": 4},
                                      {"kind": "poisson", "request_rate": 50.0}])
def test_replicas_that_can_never_admit_stall_not_hang(tmp_path, monkeypatch, deadline, workload):
    """A policy that never admits: on a shared clock every replica's host idled at one instant
    and each one's poll kept the others' due, so the clock never moved and the run never
    ended (SimEngine._poll_until_send). It stops with Stalled, as one server does, naming the
    replica where each runs on its own clock."""
    (tmp_path / "never_rules.py").write_text(NEVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    sc = make_scenario({"dp_size": 2, "admission_delay": "never_rules:Never"}, {**workload, "num_requests": 8})
    with pytest.raises(Stalled) as e:
        SimEngine(sc, tiny_profile()).run()
    if workload == {"kind": "poisson", "request_rate": 50.0}:
        assert "replica 0 of 2" in str(e.value)


@pytest.mark.parametrize("seed", [1, 4])
def test_the_kv_and_swa_peaks_are_each_the_largest_replicas(seed):
    """kv_peak_tokens and swa_peak_tokens are each the largest replica's: the SWA peak was read
    from the replica of the largest full peak (seed 4: 2,853 where the other replica's was
    4,080)."""
    sc = make_scenario({"dp_size": 2, "sliding_window_size": 256, "max_total_num_tokens": 30000,
                        "speculative_algorithm": "none"},
                       {"kind": "poisson", "request_rate": 60.0, "num_requests": 60,
                        "input_len": {"kind": "uniform", "value": 2048, "range_ratio": 0.9}}, seed=seed)
    eng = SimEngine(sc, tiny_profile(), seed)
    res = eng.run()
    assert res.summary["kv_peak_tokens"] == max(r.sched.kv.peak for r in eng.replicas)
    assert res.summary["swa_peak_tokens"] == max(r.sched.kv.swa_peak for r in eng.replicas)


def test_one_replica_is_the_plain_engine():
    """dp_size 1 builds no deployment."""
    sc = make_scenario({"dp_size": 1}, None)
    assert type(SimEngine(sc, tiny_profile())) is SimEngine


@pytest.mark.parametrize(("server", "key"), [
    ({"dp_size": 2, "disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1}}}, "server.dp_size"),
])
def test_replicas_of_a_disaggregated_server_are_refused(server, key):
    with pytest.raises(Exception) as e:
        make_scenario(server, None)
    assert key in str(e.value)


def test_the_runtime_refuses_replicas():
    """One device runs one server: replicas are simulated only (one line, naming the key)."""
    from specsched.runtime.engine import check_runnable

    sc = make_scenario({"dp_size": 2}, None)
    with pytest.raises(ConfigError) as e:
        check_runnable(sc)
    assert e.value.key == "server.dp_size" and "simulated only" in e.value.allowed
