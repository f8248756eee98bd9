"""Waiting-queue orders (SGLang managers/schedule_policy.py ``calc_priority``), each as
SGLang sorts, and the shortest-prefill-first chunk cap."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import ServerArgs
from specsched.sim.radix_cache import RadixCache
from specsched.sim.request import Req
from specsched.sim.schedule_policy import (
    SHIPPED,
    DfsWeight,
    Fcfs,
    Lof,
    Lpm,
    QueueContext,
    ShortestPrefillFirst,
    make_queue_order,
    shortest_prefill_chunk_limit,
)

CTX = QueueContext()


def rids(reqs):
    return [r.rid for r in reqs]


def test_shortest_prefill_first_sorts_by_uncached_work_then_entry_order():
    # _sort_by_shortest_prefill: (deprioritized, max(1, prompt + output - cached), entry time)
    w = [Req(0, 500, 5), Req(1, 100, 5), Req(2, 300, 5, output_len=0), Req(3, 100, 5)]
    w[2].cached_len = 250  # 50 tokens of work
    assert rids(ShortestPrefillFirst().order(w, CTX)) == [2, 1, 3, 0]


def test_shortest_prefill_chunk_limit_leaves_room_for_shorter_requests():
    chunked = Req(9, 10_000, 5, prefill_done=2000)
    w = [Req(0, 300, 5), Req(1, 500, 5), Req(2, 20_000, 5)]
    # budget 4096: reserve 300 + 500 for the two shorter ones, cap the chunk at the rest
    assert shortest_prefill_chunk_limit(chunked, w, 4096, 1) == 4096 - 800
    assert shortest_prefill_chunk_limit(chunked, [Req(5, 9000, 5)], 4096, 1) is None
    assert shortest_prefill_chunk_limit(chunked, w, 1, 1) is None


def test_lof_and_priority_orders():
    w = [Req(0, 10, 5), Req(1, 10, 50), Req(2, 10, 20)]
    assert rids(Lof().order(w, CTX)) == [1, 2, 0]
    w[0].priority, w[1].priority, w[2].priority = 5, 1, 5
    # higher values first by default; ties keep entry order
    assert rids(Fcfs(priority=True).order(w, CTX)) == [0, 2, 1]
    assert rids(Fcfs(priority=True, low_priority_values_first=True).order(w, CTX)) == [1, 0, 2]
    assert rids(Lof(priority=True).order(w, CTX)) == [2, 0, 1]
    assert rids(Fcfs().order(w, CTX)) == [0, 1, 2]


def _tok(*parts):
    return np.concatenate([np.full(n, v, dtype=np.int64) for v, n in parts])


def test_lpm_longest_cached_prefix_first_and_fcfs_above_128():
    tree = RadixCache()
    tree.insert(_tok((7, 100)))
    w = [Req(0, 50, 5), Req(1, 100, 5), Req(2, 100, 5)]
    w[1].tokens = _tok((7, 60), (1, 40))
    w[2].tokens = _tok((7, 100))
    for r in w:
        if r.tokens is not None:
            r.cached_len, r.last_node = tree.match_prefix(r.tokens)
    ctx = QueueContext(prefix_cache=tree)
    assert rids(Lpm().order(w, ctx)) == [2, 1, 0]
    assert rids(Lpm().order(w, CTX)) == [0, 1, 2]  # no cache: fcfs
    many = [Req(i, 10, 5) for i in range(129)]
    many[-1].cached_len = 5
    assert rids(Lpm().order(many, ctx)) == list(range(129))


def test_lpm_defers_duplicates_of_a_cold_shared_prefix():
    # _compute_prefix_matches: a cold group sends its shared prefix to prefill once
    tree = RadixCache()
    w = [Req(i, 100, 5) for i in range(3)]
    w[0].tokens = _tok((3, 64), (1, 36))
    w[1].tokens = _tok((3, 64), (2, 36))
    w[2].tokens = _tok((4, 100))
    assert rids(Lpm().order(w, QueueContext(prefix_cache=tree))) == [0, 2, 1]


def test_dfs_weight_follows_the_tree():
    tree = RadixCache()
    tree.insert(_tok((1, 8), (2, 8)))
    tree.insert(_tok((1, 8), (3, 8)))
    w = [Req(i, 16, 5) for i in range(3)]
    w[0].tokens, w[1].tokens, w[2].tokens = _tok((9, 16)), _tok((1, 8), (3, 8)), _tok((1, 8), (3, 8))
    for r in w:
        r.cached_len, r.last_node = tree.match_prefix(r.tokens)
    assert rids(DfsWeight().order(w, QueueContext(prefix_cache=tree))) == [1, 2, 0]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 5), name=st.sampled_from(sorted(SHIPPED)))
def test_every_order_is_a_permutation(n, seed, name):
    rng = np.random.default_rng(seed)
    w = [Req(i, int(rng.integers(1, 500)), int(rng.integers(1, 50)), priority=int(rng.integers(0, 3))) for i in range(n)]
    tree = RadixCache()
    for r in w[: n // 2]:
        r.tokens = rng.integers(0, 3, size=r.input_len)
        tree.insert(r.tokens[: r.input_len // 2])
    for r in w:
        if r.tokens is not None:
            r.cached_len, r.last_node = tree.match_prefix(r.tokens)
    pol = make_queue_order(ServerArgs(schedule_policy=name), seed)
    out = pol.order(list(w), QueueContext(prefix_cache=tree))
    assert sorted(rids(out)) == list(range(n))


def test_seeded_random_and_shipped_by_name():
    w = [Req(i, 10, 5) for i in range(20)]
    a = make_queue_order(ServerArgs(schedule_policy="random"), 3).order(w, CTX)
    b = make_queue_order(ServerArgs(schedule_policy="random"), 3).order(w, CTX)
    assert rids(a) == rids(b) and rids(a) != list(range(20))
    spf = make_queue_order(ServerArgs(schedule_policy="shortest-prefill-first"))
    assert rids(spf.order([Req(0, 9, 1), Req(1, 3, 1)], CTX)) == [1, 0]


def test_prefill_decode_interval_counts_rounds_after_an_extend():
    # sglang 0.5.23 Scheduler._should_defer_prefill / _arm_prefill_decode_interval
    from specsched.sim.prefill_interval import PrefillDecodeInterval

    k = PrefillDecodeInterval(2, min_bs=4)
    assert not k.should_defer(10)
    k.on_batch(True)
    assert [k.should_defer(10) for _ in range(3)] == [True, True, False]
    k.on_batch(True)
    assert k.should_defer(3) is False and k.remaining == 0  # small batch: fill it now
    off = PrefillDecodeInterval(0)
    off.on_batch(True)
    assert not off.should_defer(100)


def test_shortest_prefill_first_without_the_prefix_cache_is_refused(tmp_path, capsys):
    # sglang 0.5.23 schedule_policy.py SchedulePolicy._validate_and_adjust_policy raises
    # "Experimental shortest-prefill-first requires prefix caching" with the cache disabled
    import pytest
    import yaml

    from specsched.cli import main

    with pytest.raises(ValueError, match="requires prefix caching"):
        ServerArgs(schedule_policy="shortest-prefill-first", disable_radix_cache=True)
    ServerArgs(schedule_policy="lpm", disable_radix_cache=True)   # lpm: fcfs without the cache
    doc = {"name": "spf", "profile": "mi355x-dsv41-flash-tp4",
           "server": {"schedule_policy": "shortest-prefill-first", "disable_radix_cache": True},
           "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 100},
                        "output_len": {"kind": "fixed", "value": 10}}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["run", str(p), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "server.schedule_policy" in err and "Traceback" not in err


def test_a_retracted_request_ties_on_its_requeue_time_under_priority_scheduling():
    """SGLang 0.5.23 re-queues a retracted request through ``_add_request_to_queue(req,
    is_retracted=True)`` (managers/scheduler.py ``update_running_batch``), which keeps its
    priority (``_set_or_validate_priority`` sets only a missing one) and stamps a new
    ``time_stats.wait_queue_entry_time`` (observability/req_time_stats.py
    ``set_wait_queue_entry_time``: the retraction time); ``_sort_by_priority_and_fcfs`` sorts by
    (priority, that time). So at equal priority it goes behind the requests that entered before
    its retraction and ahead of those that arrive after; a higher priority still goes first."""
    from specsched.sim.admission import make_policy as admission
    from specsched.sim.scheduler import Scheduler

    srv = ServerArgs(max_running_requests=8, max_total_num_tokens=100_000, chunked_prefill_size=1000,
                     max_prefill_tokens=1000, enable_priority_scheduling=True)
    for prio0, expected in ((1, [4, 1, 2, 0, 3]), (9, [0, 4, 1, 2, 3])):
        s = Scheduler(srv, admission(srv))
        reqs = [Req(i, 10, 5, priority=p) for i, p in enumerate([prio0, 1, 1, 1, 5])]
        for r in reqs[:3]:
            s.add_request(r)
        s.waiting.remove(reqs[0])   # admitted, run, then retracted
        s._requeue([reqs[0]])
        for r in reqs[3:]:
            s.add_request(r)
        assert rids(s._policy_order(None)) == expected


def test_lof_ranks_a_request_asking_no_output_by_the_zero_it_asked():
    """SGLang 0.5.23 ``_sort_by_longest_output`` sorts by ``-sampling_params.max_new_tokens``,
    0 for a request that asked no output, though it still makes its prefill's token (here
    ``max_new_tokens`` 1, ``asked_no_output``: sim/request.py ``admission_max_new``); it tied
    with a one-token request and kept entry order."""
    w = [Req(0, 10, 1, asked_no_output=True), Req(1, 10, 1), Req(2, 10, 2, asked_no_output=False)]
    assert rids(Lof().order(w, CTX)) == [2, 1, 0]
    for r in w:
        r.priority = 3
    assert rids(Lof(priority=True).order(w, CTX)) == [2, 1, 0]
