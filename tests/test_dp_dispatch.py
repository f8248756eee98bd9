"""The DP controller's dispatch methods (sim/dp_dispatch.py) and data-parallel replicas run
by them (sim/dp_replicas.py).

Named invariants (docs/dp-replicas.md):

- INV-DP-DISPATCH-PICK: total_requests sends a request to the replica with the fewest running
  + waiting requests in the controller's copy, total_tokens to the fewest tokens (then
  requests), the lowest rank on a tie; the chosen replica's copy then grows by 1 request (and
  the prompt's tokens) (data_parallel_controller.py ``DPBudget.dispatch``).
- INV-DP-DISPATCH-STALE: within 20 ms of its last read the controller reads no snapshot: a
  burst spreads over the stale snapshot by its own increments; a read takes a replica's
  snapshot only when its timestamp is new (``refresh_load_budget``, ``update_budget``).
- INV-DP-DISPATCH-CONSERVE: under every method every request reaches exactly one replica and
  finishes there.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.dp_dispatch import (
    PUBLISH_INTERVAL,
    REFRESH_INTERVAL_S,
    STALL_REFRESH_S,
    DPBudget,
    LoadAware,
    LoadPublisher,
    LoadSnapshot,
    RoundRobin,
    SnapshotBoard,
    resolve_method,
    snapshot_of,
)
from specsched.sim.dp_replicas import PublishingReplica, ReplicaEngine
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError

from tests.conftest import arrival_workloads, make_scenario, tiny_profile, uniform_lengths

RUNS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
METHODS = ("auto", "round_robin", "total_requests", "total_tokens")


# ------------------------------------------------------------------ the choice
def test_auto_resolves_as_sglang_does():
    assert resolve_method("auto") == "round_robin"
    assert resolve_method("auto", "decode") == "round_robin"
    assert resolve_method("auto", "prefill") == "follow_bootstrap_room"
    assert resolve_method("total_tokens", "prefill") == "total_tokens"


def test_round_robin_cycles():
    rr = RoundRobin(3)
    assert [rr.choose(0.0, 10) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_each_method_picks_on_a_hand_made_load():
    b = DPBudget(3)
    b.total_requests, b.total_tokens = [4, 2, 2], [100, 900, 50]
    assert b.dispatch("total_requests") == 1           # fewest requests, the lowest rank of the tie
    assert (b.total_requests, b.total_tokens) == ([4, 3, 2], [100, 900, 50])
    assert b.dispatch("total_tokens", 70) == 2         # fewest tokens, whatever its requests
    assert (b.total_requests, b.total_tokens) == ([4, 3, 3], [100, 900, 120])
    assert b.dispatch("total_tokens", 5) == 0          # 100 < 120
    b.total_tokens = [10, 10, 10]
    b.total_requests = [5, 3, 4]
    assert b.dispatch("total_tokens") == 1             # a tie in tokens: the fewest requests
    with pytest.raises(ValueError):
        b.dispatch("round_robin")


@settings(max_examples=200, deadline=None)
@given(loads=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50)), min_size=1, max_size=6),
       tokens=st.integers(0, 20), method=st.sampled_from(("total_requests", "total_tokens")))
def test_inv_dp_dispatch_pick(loads, tokens, method):
    b = DPBudget(len(loads))
    b.total_requests = [r for r, _ in loads]
    b.total_tokens = [t for _, t in loads]
    before_r, before_t = list(b.total_requests), list(b.total_tokens)
    rank = b.dispatch(method, tokens)
    key = (lambda i: before_r[i]) if method == "total_requests" else (lambda i: (before_t[i], before_r[i]))
    assert rank == min(range(len(loads)), key=lambda i: (key(i), i))
    assert b.total_requests == [r + (i == rank) for i, r in enumerate(before_r)]
    assert b.total_tokens == [t + tokens * (i == rank) for i, t in enumerate(before_t)]


# --------------------------------------------------------------- the staleness
def test_inv_dp_dispatch_stale_a_burst_spreads_over_the_stale_snapshot():
    """Replica 0 published 3 requests, replica 1 none: a burst of 5 inside one read interval
    goes 1, 1, 1 (its increments reach 3), then 0 (the tie's lowest rank), then 1; replica 1's
    newer snapshot (10 requests, published mid-burst) is not read until 20 ms after the last
    read, and replica 0's unchanged one (same timestamp) leaves its increments standing."""
    board = SnapshotBoard(2)
    board.write(LoadSnapshot(0.5, 0, 2, 1, 300))
    d = LoadAware("total_requests", board, 2)
    t0 = 1.0
    assert [d.choose(t0 + 0.001 * k, 10) for k in range(3)] == [1, 1, 1]
    board.write(LoadSnapshot(t0 + 0.004, 1, 10, 0, 0))
    assert [d.choose(t0 + 0.005, 10), d.choose(t0 + 0.019, 10)] == [0, 1]
    assert d.refreshes == 1 and d.budget.total_requests == [4, 4]
    # the next read: replica 1's new snapshot replaces its increments, replica 0 keeps its own
    assert d.choose(t0 + REFRESH_INTERVAL_S, 10) == 0
    assert d.refreshes == 2 and d.budget.total_requests == [5, 10]


def test_inv_dp_dispatch_stale_total_tokens_counts_the_prompts_it_sent():
    board = SnapshotBoard(2)
    board.write(LoadSnapshot(0.1, 1, 1, 0, 1000))
    d = LoadAware("total_tokens", board, 2)
    # replica 0 (0 tokens) takes prompts until its copy passes replica 1's 1000
    assert [d.choose(1.0, 400) for _ in range(4)] == [0, 0, 0, 1]
    assert d.budget.total_tokens == [1200, 1400]


def test_the_publisher_publishes_every_extend_and_every_15th_other_batch():
    class S:   # a scheduler's counts as get_loads reads them
        running, waiting, cache, has_work = [object()] * 3, [], None, True

        class kv:
            used = 77

    board = SnapshotBoard(1)
    pub = LoadPublisher(board, 0)
    for k in range(PUBLISH_INTERVAL - 1):
        pub.batch_processed(0.01 * k, S, extend=False)
    assert board.writes == 0
    pub.batch_processed(0.2, S, extend=False)
    assert board.writes == 1 and board.read_all()[0] == LoadSnapshot(0.2, 0, 3, 0, 77)
    pub.batch_processed(0.21, S, extend=False)
    pub.batch_processed(0.22, S, extend=True)    # forced: and the counter starts again
    assert board.writes == 2
    for k in range(PUBLISH_INTERVAL - 1):
        pub.batch_processed(0.3 + 0.01 * k, S, extend=False)
    assert board.writes == 2
    # a pass with requests waiting and no batch: at most one publish per 50 ms
    pub.idle_pass(1.0, S)
    pub.idle_pass(1.0 + STALL_REFRESH_S / 2, S)
    assert board.writes == 3
    pub.idle_pass(1.0 + STALL_REFRESH_S, S)
    assert board.writes == 4
    S.has_work = False   # fully idle: every pass
    pub.idle_pass(1.06, S)
    pub.idle_pass(1.061, S)
    assert board.writes == 6


def test_a_snapshot_counts_running_waiting_and_tokens_as_get_loads_does():
    class R:
        def __init__(self, i, o):
            self.input_len, self.output_len = i, o

    class S:
        running = [R(1, 1)] * 2
        waiting = [R(100, 0), R(50, 7)]   # the second a retracted request: its output counts

        class kv:
            used = 1000

        class cache:
            evictable_size = 300   # the tree's tokens no request holds: free to SGLang

    snap = snapshot_of(S, 2.0, 1)
    assert snap == LoadSnapshot(2.0, 1, 2, 2, 1000 - 300 + 100 + 57)


# -------------------------------------------------------------------- the runs
def _run(method, workload, n=2, server=None, seed=1):
    srv = {"max_running_requests": 8, "max_total_num_tokens": 20000, "dp_size": n, "load_balance_method": method,
           **(server or {})}
    eng = SimEngine(make_scenario(srv, workload, seed=seed), tiny_profile(), seed)
    return eng, eng.run()


@RUNS
@given(method=st.sampled_from(METHODS), n=st.integers(2, 4), seed=st.integers(0, 10_000),
       workload=arrival_workloads(concurrency=10, min_rate=5),
       out=st.integers(1, 200))
def test_inv_dp_dispatch_conserve(method, n, seed, workload, out):
    eng, res = _run(method, uniform_lengths(workload, 300, out), n=n, seed=seed)
    assert isinstance(eng, ReplicaEngine)
    num = workload["num_requests"]
    owned = [set(r.sched.reqs) for r in eng.replicas]
    assert sum(len(o) for o in owned) == num == sum(eng.dispatched)
    assert set().union(*owned) == set(range(num))
    assert res.summary["completed"] == num and res.requests["finish_s"].notna().all()
    assert eng.dispatched == [len(o) for o in owned]
    load_aware = method in ("total_requests", "total_tokens")
    assert all(isinstance(r, PublishingReplica) for r in eng.replicas) is load_aware
    if not load_aware:   # round robin: request i to replica i mod n
        assert all(rid % n == k for k, o in enumerate(owned) for rid in o)


def _alternating_trace(tmp_path, num, gap_s, long_out, short_out):
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(num):
        t = gap_s * i
        rows.append(f"2024-05-01 10:00:{int(t):02d}.{round((t % 1) * 1e6):06d},200,{long_out if i % 2 == 0 else short_out}")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    return {"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"},
            "num_requests": None, "input_len": None, "output_len": None}


@pytest.mark.parametrize("method", ["total_requests", "total_tokens"])
def test_a_load_aware_method_spreads_what_round_robin_piles_on_one_replica(tmp_path, method):
    """Requests arrive every 50 ms, their outputs alternately 400 and 10 tokens: round robin
    sends every long one to replica 0 (its share of the output tokens 400/410); a load-aware
    method reads the published snapshots, in which replica 0 holds the long ones still
    decoding, and sends more requests to replica 1, so the busiest replica's share of the
    output is smaller, and so is its peak running batch. Were nothing published, its own
    increments alone would alternate as round robin does. (The median TTFT is not better:
    round robin leaves replica 1 mostly idle, where a short request starts at once.)"""
    work = _alternating_trace(tmp_path, 60, 0.05, 400, 10)

    def share(eng):
        out = [sum(r.sched.reqs[i].max_new_tokens for i in r.sched.reqs) for r in eng.replicas]
        return max(out) / sum(out)

    rr_eng, rr = _run("round_robin", work)
    la_eng, la = _run(method, work)
    assert share(rr_eng) == pytest.approx(400 / 410)
    assert share(la_eng) < share(rr_eng) - 0.1
    assert la_eng.board.writes > 0 and la_eng.dispatcher.refreshes > 1
    peak = [res.timeseries.groupby("dp_rank")["running"].max().max() for res in (rr, la)]
    assert peak[1] < peak[0], peak


def test_a_burst_reads_once_and_spreads_by_its_own_increments():
    """All requests reach the controller at t=0: one read (every replica idle, zeros), then the
    increments alone spread them: alternately, as round robin does."""
    eng, _ = _run("total_requests", uniform_lengths({"kind": "burst", "num_requests": 12}, 300, 50), n=3)
    assert eng.dispatcher.refreshes == 1
    assert [sorted(r.sched.reqs) for r in eng.replicas] == [list(range(k, 12, 3)) for k in range(3)]


@pytest.mark.parametrize(("server", "value"), [
    ({"dp_size": 2}, "follow_bootstrap_room"),
    ({"dp_size": 2, "enable_dp_attention": True}, "total_requests"),
])
def test_a_method_the_model_does_not_run_is_refused_naming_the_key(server, value):
    with pytest.raises((ConfigError, ValueError)) as e:
        make_scenario({**server, "load_balance_method": value}, {"kind": "burst", "num_requests": 2})
    msg = str(e.value)
    assert "server.load_balance_method" in msg and value in msg and "allowed: auto" in msg, msg


def test_any_method_runs_with_one_replica():
    eng = SimEngine(make_scenario({"load_balance_method": "total_tokens"}, {"kind": "burst", "num_requests": 3}),
                    tiny_profile(), 1)
    assert not isinstance(eng, ReplicaEngine) and eng.run().summary["completed"] == 3
