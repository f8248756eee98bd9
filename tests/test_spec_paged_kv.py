"""Speculative decoding's KV at page_size > 1 is whole pages, as SGLang 0.5.23's paged
allocator hands it out (sim/kv_ledger.py). Before, a speculative request's extend took its
prompt's tokens, not its pages, until the first top-up page-aligned it, and the older window
rule reserved and returned tokens.

- the extend: mem_cache/allocation.py ``alloc_for_extend`` -> ``alloc_paged_token_slots_extend``
  (paged ``alloc_extend``: the pages from the prefix to the new length);
- the first top-up: ``alloc_for_spec_decode`` from ``kv_allocated_len`` (the prompt length) to
  ``nxt`` = ceil_page(committed + reserve) (mem_cache/allocation_sizing.py
  ``page_aligned_decode_alloc_lens``), which takes ``ceil_align(nxt) - ceil_align(cur)`` slots
  (managers/schedule_batch.py ``_new_tokens_required_next_decode_spec_v2``);
- the older window rule: a verify window takes the pages it starts, and only whole pages past
  the committed positions return (mem_cache/allocator/paged.py
  ``PagedTokenToKVPoolAllocator.free`` releases a page with any of its slots).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.plan import StepOutput
from specsched.sim.request import Req

from tests.conftest import (
    arrive_and_pass,
    assert_whole_pages,
    clockless_scheduler,
    make_scenario,
)
from tests.test_paged_decode import assert_collapsed_retracting_run
from tests.test_spec_kv import running, sched, verify


def test_a_speculative_extend_takes_its_prompts_pages_and_the_first_top_up_the_rest():
    s = sched(page_size=16)
    r = Req(0, 100, 50)
    s.add_request(r)
    plan = s.schedule()                             # the prefill: 100 tokens, 7 pages
    assert list(plan.rids) == [0] and r.kv_len == 100
    assert r.kv_allocated == 112 == s.kv.used       # was 100 until the first top-up
    assert s.kv.top_up_need([r]) == 0               # ceil16(100 + 8) = 112: held already
    s.process_result(plan, StepOutput.from_mapping(plan, {}))
    verify(s, 1)
    assert r.kv_allocated == 112 == s.kv.used       # committed 101 + 8 = 109 -> 112


def test_the_first_top_up_asks_for_the_pages_past_the_extends_last_page():
    s = sched(page_size=16, speculative_num_draft_tokens=8)    # reserve 16
    r = Req(0, 100, 50)
    s.add_request(r)
    s.schedule()
    # committed 100 + 16 = 116 -> 128: one page past the extend's 112 (not 128 - 100 = 28)
    assert s.kv.top_up_need([r]) == 16


def test_the_window_rule_returns_whole_pages_only():
    s = sched("mi355x-dsv41", page_size=16)
    r = running(s, 0, 100, 10)                      # 109 positions: 7 pages
    assert r.kv_allocated == 112
    verify(s, 1)                                    # window 4 (113: 8 pages), 1 committed (110)
    assert r.kv_len == 110 and r.kv_allocated == 112 == s.kv.used


def _spec_scenario(page: int, rule: str, kv: int, **server):
    return make_scenario({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4, "page_size": page,
                          "max_total_num_tokens": kv, "chunked_prefill_size": 256, "max_prefill_tokens": 2048,
                          "max_running_requests": 32, "semantics_rules": {"spec_kv_reservation": rule}, **server},
                         {"kind": "burst", "num_requests": 40, "ignore_eos": False,
                          "input_len": {"kind": "uniform", "value": 150, "range_ratio": 0.5},
                          "output_len": {"kind": "uniform", "value": 800, "range_ratio": 0.5}},
                         {"mean_accept_length": 2.0})


@pytest.mark.parametrize("page", [16, 64])
@pytest.mark.parametrize("rule", ["topup", "window"])
def test_a_retracting_speculative_burst_on_a_paged_pool_is_the_same_fast_or_step_by_step(page, rule):
    # the collapsed stretches (sim/decode_run.py over KVLedger.stretch_usage's paged rules)
    # give the step-by-step run exactly, and collapse most passes
    assert_collapsed_retracting_run(_spec_scenario(page, rule, 4000), 40, page, 4000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=st.sampled_from([2, 16, 64]), kv=st.integers(2_000, 8_000), radix=st.booleans(),
       rule=st.sampled_from(["topup", "window"]), overlap=st.booleans(),
       lens=st.lists(st.tuples(st.integers(1, 400), st.integers(2, 150)), min_size=1, max_size=12),
       arrive=st.lists(st.integers(0, 30), min_size=12, max_size=12), seed=st.integers(0, 10_000))
def test_every_speculative_holder_holds_whole_pages_within_the_pool(page, kv, radix, rule, overlap, lens, arrive,
                                                                    seed):
    """INV-2 in pages with speculative decoding: after every pass the pool's use is whole
    pages within capacity, each request holds ceil_page(kv_len) of its positions (no prefix
    cache), and every request completes."""
    sc = make_scenario({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4, "page_size": page,
                        "max_total_num_tokens": kv, "chunked_prefill_size": 256, "max_prefill_tokens": 2048,
                        "disable_radix_cache": not radix, "enable_overlap_schedule": overlap,
                        "semantics_rules": {"spec_kv_reservation": rule}}, acceptance={"mean_accept_length": 2.0},
                       seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(5_000):
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        assert_whole_pages(s, page, radix)
        if done:
            break
    assert all(r.output_len == r.max_new_tokens for r in s.reqs.values())


DRAFTERS = [
    {"speculative_algorithm": "dflash", "speculative_num_draft_tokens": 8},
    {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
     "speculative_num_draft_tokens": 4},
    # a draft tree on a paged pool reserves whole pages per branch (ServerArgs.spec_kv_reserve)
    {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
     "speculative_num_draft_tokens": 8},
    {"speculative_algorithm": "nextn", "speculative_num_steps": 2, "speculative_eagle_topk": 1,
     "speculative_num_draft_tokens": 3},
]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(page=st.sampled_from([16, 64, 256]), kv=st.integers(5_000, 12_000), radix=st.booleans(),
       drafter=st.sampled_from(DRAFTERS), rule=st.sampled_from(["topup", "window"]), overlap=st.booleans(),
       swa=st.booleans(), ignore_eos=st.booleans(),
       lens=st.lists(st.tuples(st.integers(1, 700), st.integers(2, 300)), min_size=1, max_size=12),
       arrive=st.lists(st.integers(0, 30), min_size=12, max_size=12), seed=st.integers(0, 10_000))
def test_every_drafters_pages_add_up_to_the_pool(page, kv, radix, drafter, rule, overlap, swa, ignore_eos, lens,
                                                  arrive, seed):
    """INV-2 in pages for the other drafters (DFlash, EAGLE chain and tree, NEXTN), with a
    hybrid sliding-window pool or not: after every pass the pool's use is the requests'
    whole pages plus the radix tree's, within capacity (the SWA pool's too)."""
    srv = {**drafter, "page_size": page, "max_total_num_tokens": kv, "chunked_prefill_size": max(256, page),
           "max_prefill_tokens": 2048, "disable_radix_cache": not radix, "enable_overlap_schedule": overlap,
           "semantics_rules": {"spec_kv_reservation": rule}}
    if swa:
        srv.update(sliding_window_size=128, swa_full_tokens_ratio=1.0)   # holds a tree's top-up
    sc = make_scenario(srv, {"ignore_eos": ignore_eos}, acceptance={"mean_accept_length": 2.0}, seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(20_000):
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        assert_whole_pages(s, page, radix)
        assert 0 <= s.kv.swa_used <= s.kv.swa_capacity
        assert s.kv.used == s.kv.tree + sum(r.kv_allocated for r in s.reqs.values())
        if done:
            break
    else:
        raise AssertionError("the run did not end")
