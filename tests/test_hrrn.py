"""The hrrn waiting-queue order: highest response ratio next, aged in prefill tokens
(sglang 0.5.23 managers/schedule_policy.py ``SchedulePolicy._sort_by_hrrn``; the counter is
managers/scheduler.py ``Scheduler.processed_tokens_counter``, advanced in ``run_batch`` and
snapshot into ``Req.arrival_processed_tokens`` by ``_add_request_to_queue``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import ServerArgs
from specsched.sim.plan import ForwardMode
from specsched.sim.radix_cache import RadixCache
from specsched.sim.request import Req
from specsched.sim.schedule_policy import Fcfs, Hrrn, QueueContext, hrrn_key, make_queue_order

from tests.test_sglang_rules import commit_all, running, sched


def rids(reqs):
    return [r.rid for r in reqs]


def _tok(*parts):
    return np.concatenate([np.full(n, v, dtype=np.int64) for v, n in parts])


def _req(rid, input_len, arrived, cached=0, tokens=None):
    r = Req(rid, input_len, 5)
    r.arrival_processed_tokens = arrived
    r.cached_len = cached
    r.tokens = tokens
    return r


# --- (a) the ordering rule ------------------------------------------------------------------

def test_sort_by_hrrn_on_a_hand_built_queue():
    # _sort_by_hrrn at processed_tokens = 1000:
    #   no uncached prompt (D) first; then by descending waited / uncached: C 1000/200 = 5,
    #   A 1000/1000 = 1 and B 100/100 = 1 tied, by rid (A before B though B is ahead in
    #   the queue); E would lead with 1000/100 = 10 but shares A's cold 64-token prefix
    #   (_compute_prefix_matches' in-batch check), so it goes last
    d = _req(3, 50, 1000, cached=50)
    b = _req(1, 100, 900)
    a = _req(0, 1000, 0, tokens=_tok((3, 64), (1, 936)))
    c = _req(2, 200, 0)
    e = _req(4, 100, 0, tokens=_tok((3, 64), (2, 36)))
    ctx = QueueContext(prefix_cache=RadixCache(), processed_tokens=1000)
    assert rids(Hrrn().order([d, b, a, c, e], ctx)) == [3, 2, 0, 1, 4]
    # the ratio is of the prompt alone: a retracted request whose prompt is all cached has
    # no prefill work left by SGLang's _uncached_len, whatever output it re-prefills
    f = _req(5, 100, 1000, cached=100)
    f.output_len = 40
    assert hrrn_key(f, 1000, set()) == (float("-inf"), 5)
    # nothing waited yet: every ratio is 0 and the rid decides
    assert rids(Hrrn().order([c, b, a], QueueContext(prefix_cache=RadixCache(), processed_tokens=0))) == [0, 1, 2]


def test_hrrn_is_fcfs_without_a_prefix_cache():
    # _validate_and_adjust_policy: with the tree cache disabled the policy becomes FCFS
    # (priority scheduling does not reach it: check_server_args takes fcfs or lof only)
    w = [_req(0, 1000, 0), _req(1, 10, 0)]
    ctx = QueueContext(prefix_cache=None, processed_tokens=5000)
    assert rids(Hrrn().order(w, ctx)) == [0, 1]
    pol = make_queue_order(ServerArgs(schedule_policy="hrrn", disable_radix_cache=True))
    assert rids(pol.order(w, ctx)) == [0, 1]


@settings(max_examples=80, deadline=None)
@given(gaps=st.lists(st.integers(0, 300), min_size=1, max_size=30), extra=st.integers(0, 500),
       length=st.integers(1, 400), seed=st.integers(0, 9))
def test_with_equal_uncached_prompts_hrrn_is_arrival_order(gaps, extra, length, seed):
    """Invariant: when every request has the same uncached prompt, the ratio only measures
    the wait, so hrrn admits in arrival order (counter snapshot, then rid), however the
    queue happens to be ordered."""
    arrived, w = 0, []
    for rid, gap in enumerate(gaps):
        arrived += gap
        w.append(_req(rid, length, arrived))
    shuffled = list(w)
    np.random.default_rng(seed).shuffle(shuffled)
    ctx = QueueContext(prefix_cache=RadixCache(), processed_tokens=arrived + extra)
    out = Hrrn().order(shuffled, ctx)
    assert rids(out) == list(range(len(gaps)))


@settings(max_examples=80, deadline=None)
@given(reqs=st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 3000), st.integers(0, 3000)),
                     max_size=40), done=st.integers(0, 6000))
def test_hrrn_ratio_never_rises_along_the_order(reqs, done):
    """Invariant: the order is a permutation of the queue whose response ratios
    (waited / uncached prompt) never rise from head to tail."""
    w = [_req(i, n, a, cached=min(c, n)) for i, (n, a, c) in enumerate(reqs)]
    out = Hrrn().order(list(w), QueueContext(prefix_cache=RadixCache(), processed_tokens=done))
    assert sorted(rids(out)) == list(range(len(w)))
    keys = [hrrn_key(r, done, set())[0] for r in out]
    assert keys == sorted(keys)


# --- the counter ------------------------------------------------------------------------------

def test_counter_adds_each_forwards_extend_tokens_and_snapshots_at_queue_entry():
    # run_batch adds batch.extend_num_tokens (with processed_tokens_decode none a decode
    # forward adds none); _add_request_to_queue snapshots the counter, again for a
    # retracted request
    s = sched(schedule_policy="hrrn", chunked_prefill_size=300, max_prefill_tokens=300,
              semantics_rules={"processed_tokens_decode": "none"})
    s.add_request(Req(0, 500, 3))
    assert s.processed_tokens == 0
    p = s.schedule()
    assert p.extend_lens == (300,) and s.processed_tokens == 300
    commit_all(s, p)
    late = Req(1, 50, 3)
    s.add_request(late)
    assert late.arrival_processed_tokens == 300
    p = s.schedule()                  # the chunk's last 200 and the late request's 50
    assert sum(p.extend_lens) == 250 and s.processed_tokens == 550
    commit_all(s, p)
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.processed_tokens == 550
    commit_all(s, p)
    r = running(s, 7, 40, 10, 2)
    s._retract_req(r)
    s._requeue([r])
    assert r.arrival_processed_tokens == 550


def test_a_decode_forward_adds_the_running_batchs_stale_extend_count():
    """sglang 0.5.23: run_batch adds batch.extend_num_tokens for every forward, and the
    running batch is the prefill batch object that found it empty (get_next_batch_to_run
    ``running_batch = last_batch``), whose field neither merge_batch nor prepare_for_decode
    resets: each decode forward adds that prefill's tokens again. A later prefill merged into
    a non-empty running batch leaves the count; once the batch empties, the next prefill
    batch brings its own."""
    s = sched(schedule_policy="hrrn", chunked_prefill_size=300, max_prefill_tokens=300)
    s.add_request(Req(0, 500, 3))
    p = s.schedule()                  # a chunk of 300: the chunked request never joins the batch
    commit_all(s, p)
    s.add_request(Req(1, 50, 3))
    p = s.schedule()                  # 200 + 50: both complete and become the running batch
    commit_all(s, p)
    assert s.processed_tokens == 550
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.processed_tokens == 800
    commit_all(s, p)
    s.add_request(Req(2, 40, 5))
    p = s.schedule()                  # merged into the running batch: the count stays 250
    assert sum(p.extend_lens) == 40 and s.processed_tokens == 840
    commit_all(s, p)
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.processed_tokens == 1090
    commit_all(s, p)
    while s.running or s.waiting or s._last_prefill:   # drain: the running batch empties
        p = s.schedule()
        if p is None:
            break
        commit_all(s, p)
    s.add_request(Req(3, 70, 3))
    p = s.schedule()
    commit_all(s, p)
    before = s.processed_tokens
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.processed_tokens == before + 70


# --- (b) behaviour under a burst -------------------------------------------------------------

def _burst(policy: str, passes: int = 400):
    """A 100-token request, then a 2000-token prompt L and four 100-token ones, all in the
    queue before the first pass; each pass prefills at most 100 tokens and one more
    100-token request arrives after it. Returns (pass of each request's first extend,
    the scheduler)."""
    s = sched(schedule_policy=policy, chunked_prefill_size=100, max_prefill_tokens=100,
              max_running_requests=64)
    for rid, n in enumerate((100, 2000, 100, 100, 100, 100)):
        s.add_request(Req(rid, n, 1))
    first: dict[int, int] = {}
    nxt = 6
    for step in range(passes):
        p = s.schedule()
        for rid in p.rids[: p.num_extend]:
            first.setdefault(rid, step)
        commit_all(s, p)
        if s.reqs[1].finished and all(i in first for i in (2, 3, 4, 5)):
            break
        s.add_request(Req(nxt, 100, 1))
        nxt += 1
    return first, s


def test_hrrn_admits_short_prompts_first_but_does_not_starve_the_long_one():
    fcfs, _ = _burst("fcfs")
    hrrn, s = _burst("hrrn")
    shorts = (2, 3, 4, 5)
    # fcfs: L goes second and its 20 chunks hold the four short prompts back
    assert fcfs[1] == 1 and all(fcfs[i] > 20 for i in shorts)
    # hrrn: after the first pass L has waited 100 tokens for 2000 (ratio 0.05), a short
    # one 100 for 100 (ratio 1): the short ones go first, each in the next pass
    assert [hrrn[i] for i in shorts] == [1, 2, 3, 4]
    assert np.mean([hrrn[i] for i in shorts]) < np.mean([fcfs[i] for i in shorts])
    # the short arrivals keep the budget full, yet L's ratio grows with every token the
    # server prefills for them and overtakes theirs: it starts and finishes
    assert hrrn[1] > 20 and s.reqs[1].finished
    waited = s.processed_tokens - s.reqs[1].arrival_processed_tokens
    assert s.reqs[1].arrival_processed_tokens == 0 and waited >= 20 * hrrn[1]


# --- (c) above 128 waiting hrrn is fcfs (_determine_active_policy) ------------------------

def test_hrrn_above_128_waiting_is_fcfs_over_the_queue_the_last_sort_left():
    s = sched(schedule_policy="hrrn", chunked_prefill_size=100, max_prefill_tokens=100,
              max_running_requests=256)
    for rid, n in enumerate((100, 2000, 100, 100)):
        s.add_request(Req(rid, n, 1))
    for want in (0, 2):               # ratios all 0: rid 0; then the short rid 2 over L
        p = s.schedule()
        assert p.rids == (want,)
        commit_all(s, p)
    assert rids(s.waiting) == [3, 1]  # sorted in place: [3, 1] is what hrrn left
    for rid in range(4, 132):
        s.add_request(Req(rid, 100, 1))
    # 130 waiting: fcfs over [3, 1, 4..131], not hrrn (which would also pick 3) nor the
    # arrival order (which would pick L)
    p = s.schedule()
    assert p.rids == (3,)
    commit_all(s, p)
    # 129 waiting: fcfs gives L; hrrn would pick a short one (100/100 over 300/2000)
    p = s.schedule()
    assert p.rids == (1,)
    w = list(s.waiting)
    assert rids(Hrrn().order(w, QueueContext(prefix_cache=s.cache, processed_tokens=s.processed_tokens)))[0] != 1
    assert rids(Fcfs().order(w, QueueContext()))[0] == 4


@pytest.mark.parametrize("policy", ["lpm", "dfs-weight", "hrrn"])
def test_a_cache_aware_policy_without_a_cache_is_fcfs(policy):
    # _validate_and_adjust_policy turns lpm, dfs-weight and hrrn into FCFS when the tree cache
    # is disabled; lpm and dfs-weight return the queue as it stood. Priority scheduling cannot
    # be on with them: sglang 0.5.23 arg_groups/validation_hook.py check_server_args takes fcfs
    # or lof only (tests/test_startup_checks.py)
    w = [_req(0, 1000, 0), _req(1, 10, 0), _req(2, 10, 0)]
    w[2].priority = 9
    ctx = QueueContext(prefix_cache=None, processed_tokens=0)
    plain = make_queue_order(ServerArgs(schedule_policy=policy, disable_radix_cache=True))
    assert rids(plain.order(w, ctx)) == [0, 1, 2]
    with pytest.raises(ValueError, match="fcfs or lof only"):
        ServerArgs(schedule_policy=policy, disable_radix_cache=True, enable_priority_scheduling=True)


def test_the_stale_count_is_the_same_through_a_collapsed_decode_stretch():
    """The collapsed decode path (sim/scheduler_stretch.py apply_stretch) adds n decode
    forwards' stale count at once: the run is the step-by-step one's, request by request
    (without that add it is not); and the rule moves the hrrn order."""
    from specsched.sim.config import Scenario
    from specsched.sim.engine import SimEngine

    ttft = {}
    for rule in ("stale_extend", "none"):
        sc = Scenario.model_validate(dict(
            name="h", profile="h200-llama8b-roofline",
            server=dict(schedule_policy="hrrn", max_running_requests=24, chunked_prefill_size=1024,
                        max_prefill_tokens=1024, semantics_rules={"processed_tokens_decode": rule}),
            workload=dict(kind="poisson", request_rate=60.0, num_requests=400,
                          shared_prefix=dict(num_groups=40, prompts_per_group=10, system_prompt_len=1500,
                                             question_len=300),
                          output_len=dict(kind="uniform", value=200, range_ratio=0.2))))
        fast, step = (SimEngine(sc, fast_forward=ff).run().requests.sort_values("rid")["ttft_s"].to_numpy()
                      for ff in (True, False))
        assert np.array_equal(fast, step), rule
        ttft[rule] = fast
    assert not np.array_equal(ttft["stale_extend"], ttft["none"])
