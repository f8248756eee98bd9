"""Plain decoding with page_size > 1 counts KV in pages, as sglang 0.5.23 does.

managers/schedule_batch.py ``ScheduleBatch.new_tokens_required_next_decode`` (non-speculative):
page_size for each request whose ``kv_committed_len`` is a multiple of page_size, which
``check_decode_mem`` and ``retract_decode``'s stopping rule compare with the free slots
(mem_cache/allocator/paged.py ``available_size``: free pages x page_size); ``alloc_decode``
takes a new page exactly for those requests, and ``alloc_extend`` gives an extend whole
pages. With page_size 1 every count is the token count it was.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.admission import make_policy
from specsched.sim.config import ServerArgs
from specsched.sim.engine import SimEngine
from specsched.sim.kv_ledger import KVLedger
from specsched.sim.request import Req, ReqStatus
from specsched.sim.scheduler import Scheduler

from tests.conftest import (
    arrive_and_pass,
    assert_whole_pages,
    clockless_scheduler,
    make_scenario,
    tiny_profile,
)
from tests.test_disaggregation import _pd, _profile, _ranks
from tests.test_sim_speed_equivalence import assert_same_run

PAGE = 64


def sched(**kw) -> Scheduler:
    args = dict(max_running_requests=8, max_total_num_tokens=640, chunked_prefill_size=1024,
                max_prefill_tokens=1024, page_size=PAGE)
    args.update(kw)
    s = ServerArgs(**args)
    return Scheduler(s, make_policy(s))


def running(s: Scheduler, rid: int, input_len: int, out: int, max_new: int = 500) -> Req:
    """A request in the running batch with its prompt's KV held (as its extend left it)."""
    r = Req(rid, input_len, max_new, output_len=out, status=ReqStatus.RUNNING)
    s.reqs[rid] = r
    s.kv.reserve(r, input_len)
    r.prefill_done = input_len
    s.running.append(r)
    return r


def test_extend_takes_whole_pages():
    # alloc_extend: a 100-token prompt takes two pages; a second chunk starts a third
    s = sched()
    r = Req(0, 150, 10)
    s.kv.reserve(r, 100)
    assert (r.kv_allocated, r.kv_len, s.kv.used) == (128, 100, 128)
    r.prefill_done = 100
    s.kv.reserve(r, 50)
    assert (r.kv_allocated, r.kv_len, s.kv.used) == (192, 150, 192)


def test_requests_at_a_page_boundary_need_a_page_the_others_none():
    s = sched()
    a = running(s, 0, 128, 3)   # 128 positions: the next token starts a page
    b = running(s, 1, 100, 3)   # inside its second page
    assert s._decode_need([a, b]) == PAGE
    plan = s.schedule()
    assert list(plan.decode_rids) == [0, 1]
    assert (a.kv_allocated, b.kv_allocated, s.kv.used) == (192, 128, 320)
    assert (a.kv_len, b.kv_len) == (129, 101)


def test_a_full_pool_still_decodes_requests_inside_their_pages():
    # no page free, but no request at a boundary: the step needs no page (the token count
    # asked for one slot per request and retracted)
    s = sched(max_total_num_tokens=512)
    reqs = [running(s, i, 100, 5) for i in range(4)]   # 4 x 128 slots: the pool is full
    assert s.kv.available == 0
    plan = s.schedule()
    assert s.num_retractions == 0 and not s.waiting
    assert sorted(plan.decode_rids) == [0, 1, 2, 3]
    assert all(r.kv_len == 101 for r in reqs)


def test_retraction_counts_pages_and_stops_once_the_kept_pages_fit():
    # four requests at a page boundary need four pages (256 slots); 128 are free. The token
    # count (4 slots) kept all four. retract_decode retracts the least output first and
    # stops once check_decode_mem holds: one retraction frees 128, three pages fit in 256
    s = sched()
    reqs = [running(s, 0, 128, 30), running(s, 1, 128, 10), running(s, 2, 128, 20), running(s, 3, 128, 40)]
    assert s.kv.available == 128
    plan = s.schedule()
    assert [r.rid for r in s.waiting] == [1]
    assert s.num_retractions == 1
    assert sorted(plan.decode_rids) == [0, 2, 3]
    assert [r.kv_allocated for r in reqs] == [192, 0, 192, 192]
    assert s.kv.used == 3 * 192 <= s.kv.capacity


def test_mixed_chunk_decode_rows_take_pages_too():
    # mix_with_running: the decode rows join when their new pages fit (no retraction)
    s = sched(enable_mixed_chunk=True, max_total_num_tokens=640)
    running(s, 0, 128, 3, max_new=5)
    running(s, 1, 128, 3, max_new=5)
    s.add_request(Req(5, 200, 4))           # 256 slots; 128 left for the decode rows' pages
    plan = s.schedule()
    assert plan.rids[0] == 5 and sorted(plan.decode_rids) == [0, 1]
    assert s.kv.used == 256 + 2 * 192
    s2 = sched(enable_mixed_chunk=True, max_total_num_tokens=600)
    running(s2, 0, 128, 3, max_new=5)
    running(s2, 1, 128, 3, max_new=5)
    s2.add_request(Req(5, 200, 4))          # 256 slots: 88 left, the rows need 128: they sit out
    plan2 = s2.schedule()
    assert list(plan2.rids) == [5] and not plan2.decode_rids and s2.num_retractions == 0


def test_a_retracting_burst_on_a_paged_pool_holds_whole_pages_fast_or_step_by_step():
    # requests that may stop early let admission over-commit as new_token_ratio decays:
    # decode passes retract; every holding is whole pages, and the collapsed stretches
    # (the closed form, paged) give the step-by-step run exactly
    sc = make_scenario({"speculative_algorithm": "none", "page_size": PAGE, "max_total_num_tokens": 3000,
                        "chunked_prefill_size": 8192, "max_prefill_tokens": 8192, "max_running_requests": 32},
                       {"kind": "burst", "num_requests": 60, "ignore_eos": False,
                        "input_len": {"kind": "fixed", "value": 128},
                        "output_len": {"kind": "uniform", "value": 800, "range_ratio": 0.1}})
    assert_collapsed_retracting_run(sc, 60, PAGE, 3000)


def assert_collapsed_retracting_run(sc, completed: int, page: int, pool: int) -> None:
    """The collapsed stretches give ``sc``'s step-by-step run exactly and collapse most of its
    passes; every one of its ``completed`` requests completes, at least one retraction ran, and
    the KV peak is whole pages of ``page`` within the ``pool``."""
    step = SimEngine(sc, tiny_profile(), 1, fast_forward=False).run()
    fast = SimEngine(sc, tiny_profile(), 1).run()
    assert_same_run(step, fast, rel=1e-12)
    assert fast.extra["fast_forward_iterations"] > 0.5 * fast.extra["num_passes"]
    s = fast.summary
    assert s["completed"] == completed and s["num_retractions"] >= 1
    assert s["kv_peak_tokens"] % page == 0 and s["kv_peak_tokens"] <= pool


# --- invariants -------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=st.sampled_from([2, 16, 64]), kv=st.integers(1_200, 8_000), radix=st.booleans(),
       mixed=st.booleans(), overlap=st.booleans(),
       lens=st.lists(st.tuples(st.integers(1, 400), st.integers(1, 150)), min_size=1, max_size=16),
       arrive=st.lists(st.integers(0, 30), min_size=16, max_size=16), seed=st.integers(0, 10_000))
def test_every_holder_holds_whole_pages_within_the_pool(page, kv, radix, mixed, overlap, lens, arrive, seed):
    """INV-2 in pages: after every pass the pool's use is whole pages and within capacity,
    each request holds ceil_page(kv_len) of its own positions past the prefix cache's
    whole pages, and every request completes."""
    sc = make_scenario({"speculative_algorithm": "none", "page_size": page, "max_total_num_tokens": kv,
                        "chunked_prefill_size": 256, "max_prefill_tokens": 2048, "disable_radix_cache": not radix,
                        "enable_mixed_chunk": mixed, "enable_overlap_schedule": overlap}, seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    assert s.kv.paged
    in_flight = None
    for p in range(3_000):
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        assert_whole_pages(s, page, radix)
        if done:
            break
    assert all(r.output_len == r.max_new_tokens for r in s.reqs.values())


ops = st.lists(st.tuples(st.sampled_from(["reserve", "decode", "free"]), st.integers(0, 7), st.integers(1, 300)),
               max_size=40)


@settings(max_examples=200, deadline=None)
@given(ops=ops)
def test_page_size_one_is_the_token_count(ops):
    """With page_size 1 the paged rules are the token rules: two ledgers, one asked to page,
    agree after any sequence of extends, decode passes and frees."""
    a, b = KVLedger(100_000, page_size=1), KVLedger(100_000, page_size=1, paged=True)
    assert not b.paged
    ra = [Req(i, 1000, 10) for i in range(8)]
    rb = [Req(i, 1000, 10) for i in range(8)]
    for op, i, n in ops:
        if op == "reserve":
            a.reserve(ra[i], n)
            b.reserve(rb[i], n)
            ra[i].prefill_done += n
            rb[i].prefill_done += n
        elif op == "decode":
            live_a = [r for r in ra if r.kv_len]
            live_b = [r for r in rb if r.kv_len]
            assert a.window_need(live_a, 1) == b.window_need(live_b, 1) == len(live_a)
            a.reserve_window(live_a, 1)
            b.reserve_window(live_b, 1)
        else:
            a.free([ra[i]])
            b.free([rb[i]])
            ra[i].prefill_done = rb[i].prefill_done = 0
        assert a.used == b.used
        assert [(r.kv_allocated, r.kv_len) for r in ra] == [(r.kv_allocated, r.kv_len) for r in rb]


def test_a_decode_server_keeps_the_fill_length_and_pages_from_it():
    # disaggregation/decode.py: the preallocation takes the fill's pages and sets
    # kv_allocated_len = kv_committed_len = fill_len; the next decode asks a page only if the
    # fill ends a page (3000 = 46 pages + 56: its first decode stays in the last page)
    srv = ServerArgs.model_validate({"max_running_requests": 8, "max_total_num_tokens": 10_000,
                                     "chunked_prefill_size": 2048, "disaggregation_mode": "decode",
                                     "disable_radix_cache": True, "num_reserved_decode_tokens": 512,
                                     "page_size": PAGE})
    s = Scheduler(srv, make_policy(srv))
    s.handoff = lambda r: None
    s.add_request(Req(0, 3000, 2000))
    s.schedule()
    r = s.reqs[0]
    assert (r.kv_allocated, r.kv_len, s.kv.used) == (3008, 3000, 3008)
    assert s._decode_need([r]) == 0
    r.kv_transferred = True
    plan = s.schedule()
    assert plan.rids == (0,) and (r.kv_allocated, r.kv_len) == (3008, 3001)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decode=st.integers(1, 2), kv=st.integers(2_000, 8_000), seed=st.integers(0, 1000),
       inp=st.integers(10, 1000), out=st.integers(1, 300))
def test_paged_decode_servers_balance_their_pages(decode, kv, seed, inp, out):
    """Prefill/decode disaggregation on a paged pool: every request completes, the decode
    servers' pools never exceed capacity (INV-2) and end empty (INV-8)."""
    srv = _pd(1, decode, decode_server={"max_total_num_tokens": kv}, speculative_algorithm="none",
              speculative_num_draft_tokens=1, page_size=PAGE)
    wl = {"kind": "burst", "num_requests": 10, "ignore_eos": False,
          "input_len": {"kind": "uniform", "value": inp, "range_ratio": 0.5},
          "output_len": {"kind": "uniform", "value": out, "range_ratio": 0.5}}
    eng = SimEngine(make_scenario(srv, wl, {"mean_accept_length": 1.0}, seed=seed), _profile(), seed)
    res = eng.run()
    assert len(res.requests) == 10
    for d in eng.decode:
        for r in _ranks(d.sched):
            assert r.kv.paged and r.kv.used == 0 and r.kv.peak <= r.kv.capacity


def test_a_paged_extend_evicts_for_its_pages_not_only_its_tokens():
    """A request's extend can start one page more than its tokens fill (a 150-token extend
    after a 1,536-token cached prefix takes 3 pages of 64). Evicting cached prefixes only until
    the extend's tokens were free left the pool a page short: a multi-turn run on a tight pool
    with page_size 64 raised KVPoolExhausted (need 384 KV tokens, 368 free) where SGLang runs.
    sglang 0.5.23 mem_cache/allocation.py alloc_paged_token_slots_extend evicts first for
    extend_num_tokens + bs x page_size."""
    sc = make_scenario({"speculative_algorithm": "none", "page_size": PAGE, "max_total_num_tokens": 30000,
                        "max_running_requests": 4, "chunked_prefill_size": 4096, "max_prefill_tokens": 16384},
                       {"kind": "multi_turn", "num_requests": None, "concurrency": 24, "input_len": None,
                        "output_len": {"kind": "uniform", "value": 300, "range_ratio": 0.3},
                        "multi_turn": {"num_conversations": 48, "num_turns": 4, "system_prompt_len": 1500,
                                       "first_prompt_len": {"kind": "uniform", "value": 400, "range_ratio": 0.5},
                                       "user_len": {"kind": "fixed", "value": 150}, "think_time_s": 0.5,
                                       "think_time_dist": "exponential"}})
    res = SimEngine(sc, tiny_profile()).run()
    assert len(res.requests) == 192 and res.requests["finish_s"].notna().all()
