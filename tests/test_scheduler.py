"""Scheduler core with made-up step outputs (vLLM-style): admission budgets, chunking,
prefill priority, the overlap one-step lag, retraction, new_token_ratio."""

from __future__ import annotations

import pytest
from specsched.sim.admission import NoDelay, make_policy
from specsched.sim.config import ServerArgs
from specsched.sim.new_token_ratio import NewTokenRatio
from specsched.sim.plan import ForwardMode, StepOutput
from specsched.sim.request import Req, ReqStatus
from specsched.sim.scheduler import Scheduler


def sched(**kw) -> Scheduler:
    args = dict(max_running_requests=8, max_total_num_tokens=100_000, chunked_prefill_size=1000,
                max_prefill_tokens=1000)
    args.update(kw)
    s = ServerArgs(**args)
    return Scheduler(s, make_policy(s))


def commit_all(s: Scheduler, plan, n: int = 1):
    out = {rid: (1 if rid in plan.new_rids else 0) for rid in plan.rids[: plan.num_extend]}
    out.update({rid: n for rid in plan.decode_rids})
    return s.process_result(plan, StepOutput.from_mapping(plan, out))


def test_max_prefill_tokens_stops_before_chunking():
    # the older build checks the prompt budget before chunking: 300 >= 100 left -> OTHER
    # (0.5.23 cuts the 4th to fill the chunk: tests/test_sglang_rules.py)
    s = sched(sglang_semantics="mi355x-dsv41")
    for i in range(4):
        s.add_request(Req(i, 300, 5))
    p = s.schedule()
    assert p.rids == (0, 1, 2) and p.chunked_rid is None


def test_prefill_has_priority_and_chunk_budget_ends_admission():
    s = sched(max_prefill_tokens=10_000)
    for i in range(4):
        s.add_request(Req(i, 300, 5))
    p = s.schedule()
    # 300 + 300 + 300 = 900 < 1000; the 4th (300 >= 100 left) is cut by chunking
    assert p.mode is ForwardMode.EXTEND
    assert p.rids == (0, 1, 2, 3)
    assert p.extend_lens == (300, 300, 300, 100)
    assert p.chunked_rid == 3 and p.new_rids == (0, 1, 2)
    commit_all(s, p)
    p2 = s.schedule()
    # the chunked request continues first, and prefill still beats decode
    assert p2.mode is ForwardMode.EXTEND and p2.rids[0] == 3 and p2.extend_lens[0] == 200
    assert p2.chunked_rid is None


def test_max_prefill_tokens_without_chunking_admits_first_even_if_too_long():
    s = sched(chunked_prefill_size=-1, max_prefill_tokens=100)
    s.add_request(Req(0, 500, 5))
    s.add_request(Req(1, 50, 5))
    p = s.schedule()
    assert p.rids == (0,) and p.extend_lens == (500,)


def test_allocatable_slots_limit_admission():
    s = sched(max_running_requests=3, chunked_prefill_size=100_000, max_prefill_tokens=100_000)
    for i in range(5):
        s.add_request(Req(i, 10, 5))
    p = s.schedule()
    assert len(p.rids) == 3 and len(s.waiting) == 2


def test_kv_budget_no_token():
    # pool 1000: a request needs 400 + min(max_new, 4096) = 600 tokens (+1 page)
    s = sched(max_total_num_tokens=1000, chunked_prefill_size=100_000, max_prefill_tokens=100_000)
    s.add_request(Req(0, 400, 200))
    s.add_request(Req(1, 400, 200))
    p = s.schedule()
    assert p.rids == (0,)


def test_finished_request_rides_one_step_then_is_filtered():
    # the older build (0.5.23 leaves a request whose last token is in flight out instead:
    # tests/test_sglang_rules.py)
    s = sched(chunked_prefill_size=100_000, max_prefill_tokens=100_000, sglang_semantics="mi355x-dsv41")
    s.add_request(Req(0, 10, 3))
    s.add_request(Req(1, 10, 10))
    p0 = s.schedule()            # prefill both
    p1 = s.schedule()            # decode step k (built before p0's results: overlap)
    assert p1.mode is ForwardMode.DECODE and set(p1.rids) == {0, 1}
    commit_all(s, p0)            # first tokens
    p2 = s.schedule()            # step k+1 built before p1's results
    commit_all(s, p1)            # request 0 now has 2 of 3
    p3 = s.schedule()
    d = commit_all(s, p2)        # request 0 finishes at p2
    assert any(x.rid == 0 and x.finished for x in d)
    p4 = s.schedule()            # built after p2's results: 0 filtered
    assert 0 in p3.rids          # rode one extra step
    assert 0 not in p4.rids
    assert s.reqs[0].status is ReqStatus.FINISHED


def test_retraction_when_decode_cannot_get_kv():
    s = sched(max_total_num_tokens=400, chunked_prefill_size=100_000, max_prefill_tokens=100_000,
              speculative_algorithm="dspark", speculative_num_draft_tokens=4)
    for i in range(3):
        s.add_request(Req(i, 20, 300, ignore_eos=False))  # ignore_eos would reserve at ratio 1
    steps = 0
    while s.num_retractions == 0 and steps < 200:
        s.ratio.value = 0.0  # admit optimistically so decode runs out of KV
        s.batch_is_full = False  # (and retry admission every pass)
        q = s.schedule()
        if q is None:
            break
        commit_all(s, q, 4)
        assert s.kv.used <= s.kv.capacity
        steps += 1
    assert s.num_retractions >= 1
    retracted = [r for r in s.reqs.values() if r.retractions]
    assert retracted and all(r.status is ReqStatus.WAITING and r.kv_allocated == 0 for r in retracted)
    assert s.ratio.value > 0.0


def test_new_token_ratio_decays_to_floor_and_resets():
    r = NewTokenRatio(1.0)
    assert r.value == 0.7
    for _ in range(700):
        r.on_decode_step()
    assert abs(r.value - 0.7 * 0.14) < 1e-12
    r.on_idle()
    assert r.value == 0.7


def test_delay_skips_prefill_and_decodes_instead():
    # legacy rule at 253 running of 256 (3 free): the 3 waiting wait, the batch decodes
    s = Scheduler(ServerArgs(max_running_requests=256, admission_delay="min_free_slots",
                             chunked_prefill_size=-1, max_prefill_tokens=10**6, max_total_num_tokens=10**7),
                  make_policy(ServerArgs(max_running_requests=256, admission_delay="min_free_slots", min_free_slots=4)))
    for i in range(253):
        r = Req(i, 10, 100)
        r.status, r.prefill_done, r.output_len = ReqStatus.RUNNING, 10, 1
        s.reqs[i] = r
        s.running.append(r)
    for i in range(253, 256):
        s.add_request(Req(i, 10, 100))
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and len(p.rids) == 253 and len(s.waiting) == 3
    assert s.num_delayed_passes == 1


def test_chunked_request_in_progress_skips_delay():
    s = Scheduler(ServerArgs(max_running_requests=8, admission_delay="min_free_slots", chunked_prefill_size=100,
                             max_prefill_tokens=100), NoDelay())
    s.add_request(Req(0, 250, 5))
    plans = [s.schedule() for _ in range(3)]
    assert [p.extend_lens[0] for p in plans] == [100, 100, 50]


def test_mixed_chunk_budget_counts_decode_tokens_once():
    # a running request reserves 4 tokens for its verify; the new request needs
    # 813 + 400 + 1 page = 1214 tokens: it fits a 2000-token pool once, not twice
    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              max_total_num_tokens=2000, chunked_prefill_size=4096, max_prefill_tokens=4096)
    s.ratio.value = 0.0
    s.add_request(Req(0, 500, 400, ignore_eos=False))
    commit_all(s, s.schedule())
    s.add_request(Req(1, 813, 400, ignore_eos=False))
    p = s.schedule()
    assert p.mode is ForwardMode.MIXED and p.rids == (1, 0)
    assert s.kv.used <= s.kv.capacity


def test_mixed_pass_that_admits_nothing_decays_the_ratio_once():
    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              max_total_num_tokens=2000, chunked_prefill_size=4096, max_prefill_tokens=4096)
    s.add_request(Req(0, 500, 400))
    commit_all(s, s.schedule())
    s.add_request(Req(1, 1200, 400))  # never fits next to request 0's reservation
    before = s.ratio.value
    p = s.schedule()
    assert p.mode is ForwardMode.VERIFY
    assert before - s.ratio.value == pytest.approx(s.ratio.decay)


def _two_requests_one_slot(pool: int, page: int = 1, window: int = 6):
    from specsched.sim.engine import SimEngine

    from tests.conftest import make_scenario, tiny_profile

    sc = make_scenario({"max_running_requests": 1, "max_total_num_tokens": pool, "page_size": page,
                        "speculative_num_draft_tokens": window},
                       {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 1001},
                        "output_len": {"kind": "fixed", "value": 64}})
    return SimEngine(sc, tiny_profile())


def test_a_pool_that_barely_holds_one_request_completes():
    res = _two_requests_one_slot(1090).run()
    assert res.summary["completed"] == 2


@pytest.mark.parametrize(("pool", "page"), [(1067, 1)])
def test_a_request_that_can_never_run_is_rejected_not_looped(pool, page):
    from specsched.sim.scheduler import UnschedulableRequest

    # page 1: the admission's charge fits (1001 + 64 + 1 < 1067), the last top-up (1001 + 62 +
    # 12 reserved) does not
    with pytest.raises(UnschedulableRequest, match="tops it up"):
        _two_requests_one_slot(pool, page).run()


def test_a_request_whose_output_the_pool_cannot_hold_runs_cut():
    # page 16: the charge (1008 + 64 + 16) does not fit a pool of 1082, so SGLang cuts
    # max_new_tokens to what the empty pool holds (scheduler.py init_req_max_new_tokens:
    # 1082 - 1008 - 16 - 1 = 57), whose last top-up (1001 + 55 + 12, page-rounded 1072) fits;
    # it was refused before the generated workloads' outputs were cut
    res = _two_requests_one_slot(1082, 16).run()
    assert res.summary["completed"] == 2 and res.requests["output_len"].tolist() == [57, 57]
