"""The prefill pass budgets (SGLang managers/schedule_policy.py ``PrefillAdder``) alone, and
the crash of issue 13 (a mixed chunk whose chunk budget the decode rows used up)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import Scenario
from specsched.sim.engine import run_scenario
from specsched.sim.prefill_adder import AddResult, PrefillAdder, running_reservation
from specsched.sim.request import Req, ReqStatus


def adder(kv=100_000, running=(), ratio=0.7, max_prefill=1000, chunk=1000, page=1, mixed=0, **kw) -> PrefillAdder:
    return PrefillAdder.start(kv, list(running), ratio, max_prefill, chunk, page, mixed, **kw)


def chunked(rid: int, input_len: int, done: int, max_new: int = 10) -> Req:
    r = Req(rid, input_len, max_new, prefill_done=done)
    r.status = ReqStatus.PREFILLING
    return r


def test_add_chunked_req_is_capped_by_the_remaining_total_kv_budget():
    # sglang 0.5.23 add_chunked_req -> PrefillBudget.available_chunk_tokens:
    # min(chunk budget, remaining total): a running batch reserving most of the pool shrinks
    # the next chunk (the old rule took the whole chunk budget)
    running = [Req(9, 10, 2000, prefill_done=10, output_len=1, status=ReqStatus.RUNNING)]
    a = adder(kv=1600, running=running, ratio=0.5, chunk=1000)  # 1600 - 0.5 x 1999 = 600.5 left
    still = a.add_chunked_req(chunked(1, 5000, 1000))
    assert still and a.can_run[0][1] == 600


def test_add_chunked_req_takes_a_full_chunk_when_the_kv_budget_is_spent():
    # "if that is <= 0, a full chunk": the request must make progress to free its KV
    running = [Req(9, 10, 4000, prefill_done=10, output_len=1, status=ReqStatus.RUNNING)]
    a = adder(kv=3000, running=running, ratio=1.0, chunk=500)
    assert a.rem_total_tokens <= 0
    a.add_chunked_req(chunked(1, 5000, 1000))
    assert a.can_run[0][1] == 500


def test_spent_chunk_budget_admits_nothing_and_never_goes_negative():
    # issue 13: mixed decode rows took more than chunked_prefill_size
    a = adder(chunk=7, mixed=8)
    assert a.add_chunked_req(chunked(1, 20, 7)) is True
    assert a.can_run == []
    assert a.add_one_req(Req(2, 20, 50)) is AddResult.OTHER
    assert a.can_run == []


def test_mixed_small_chunk_burst_runs_to_completion():
    # issue 13's reproducer: dspark window 4, chunked_prefill_size 7, enable_mixed_chunk,
    # 3 requests of 20 in / 50 out raised "ValueError: cannot allocate -1 tokens"
    sc = Scenario.model_validate(dict(
        name="i13", profile="mi355x-dsv41-flash-tp4",
        server=dict(speculative_algorithm="dspark", speculative_num_draft_tokens=4, chunked_prefill_size=7,
                    enable_mixed_chunk=True, max_running_requests=8, max_total_num_tokens=100_000),
        acceptance=dict(mean_accept_length=2.0),
        workload=dict(kind="burst", num_requests=3, input_len=dict(kind="fixed", value=20),
                      output_len=dict(kind="fixed", value=50))))
    res = run_scenario(sc)
    assert res.summary["completed"] == 3
    assert (res.requests["output_len"] == 50).all()


def test_chunk_fill_exact_cuts_a_later_request_to_fill_the_chunk():
    # sglang 0.5.23 _select_prefill_admission: with chunking on, max_prefill_tokens is not
    # checked for later requests; the reference MI355X build stops at it instead
    reqs = [Req(i, 300, 5) for i in range(4)]
    exact = adder(max_prefill=1000, chunk=1000, chunk_fill="exact")
    stop = adder(max_prefill=1000, chunk=1000, chunk_fill="stop_at_max_prefill_tokens")
    for r in reqs:
        if exact.add_one_req(r) is not AddResult.CONTINUE:
            break
    for r in [Req(i, 300, 5) for i in range(4)]:
        if stop.add_one_req(r) is not AddResult.CONTINUE:
            break
    assert [n for _, n in exact.can_run] == [300, 300, 300, 100] and exact.new_chunked is reqs[3]
    assert [n for _, n in stop.can_run] == [300, 300, 300] and stop.new_chunked is None


def test_exact_tokens_charges_and_cuts_the_raw_extend_as_on_gfx95():
    # sglang 0.5.23 PrefillAdder._update_prefill_budget / _select_prefill_admission with
    # exact_chunk_fill (_use_exact_chunk_fill: SGLANG_EXACT_CHUNK_FILL on gfx95): the chunk
    # budget takes 300 per request, not ceil_page(300) = 304, and the cut is the remainder
    # verbatim, not floored to a page
    got = {}
    for rule in ("exact", "exact_tokens"):
        a = adder(page=16, chunk=1000, max_prefill=100_000, chunk_fill=rule)
        for i in range(4):
            if a.add_one_req(Req(i, 300, 5)) is not AddResult.CONTINUE:
                break
        got[rule] = [n for _, n in a.can_run]
    assert got == {"exact": [300, 300, 300, 80], "exact_tokens": [300, 300, 300, 100]}
    # a request that fits raw (100 <= 100) but not page-rounded (112) is not cut
    b = adder(page=16, chunk=100, max_prefill=100_000, chunk_fill="exact_tokens")
    b.add_one_req(Req(0, 100, 5))
    assert b.can_run[0][1] == 100 and b.new_chunked is None


def test_without_chunking_max_prefill_tokens_binds_under_either_rule():
    for rule in ("exact", "stop_at_max_prefill_tokens"):
        a = adder(max_prefill=500, chunk=-1, chunk_fill=rule)
        assert a.add_one_req(Req(0, 800, 5)) is AddResult.OTHER  # the first is admitted anyway
        assert a.add_one_req(Req(1, 10, 5)) is AddResult.OTHER
        assert [r.rid for r, _ in a.can_run] == [0]


def test_prefill_max_requests_ends_the_pass():
    # SGLang add_one_req: len(can_run_list) >= prefill_max_requests -> OTHER
    a = adder(prefill_max_requests=2, chunk=100_000, max_prefill=100_000)
    results = [a.add_one_req(Req(i, 10, 5)) for i in range(4)]
    assert [r.rid for r, _ in a.can_run] == [0, 1]
    assert results[2] is AddResult.OTHER


def test_ignore_eos_requests_reserve_at_ratio_one():
    # sglang 0.5.23 _get_running_request_total_token_offset: ratio 1.0 for ignore_eos
    run = [Req(0, 10, 1000, output_len=100, status=ReqStatus.RUNNING),
           Req(1, 10, 1000, output_len=100, status=ReqStatus.RUNNING, ignore_eos=False)]
    assert running_reservation(run, 0.5) == 900.0
    assert running_reservation(run, 0.5, ignore_eos_full=True) == 900 + 450
    a = adder(kv=5000, running=run, ratio=0.5, ignore_eos_full_reservation=True)
    assert a.rem_total_tokens == 5000 - 1350



@settings(deadline=None)   # a loaded CI machine can deschedule one example past 200 ms
@given(st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 20_000), st.booleans()), max_size=6),
       st.floats(0.0, 1.0), st.booleans())
def test_running_reservation_clips_each_requests_remaining_output_at_4096(reqs, ratio, full):
    """INV-CLIP: sglang 0.5.23 ``PrefillAdder._get_running_request_total_token_offset``
    reserves min(max_new - out, CLIP_MAX_NEW_TOKENS) x ratio per running request (ratio 1.0
    for ignore_eos under ``ignore_eos_full_reservation``); a finished request (max_new <= out)
    reserves nothing. The pass's KV budget starts at what is free less that sum."""
    run = [Req(i, 10, max_new, output_len=min(out, max_new), status=ReqStatus.RUNNING, ignore_eos=eos)
           for i, (max_new, out, eos) in enumerate(reqs) if max_new > 0]
    want = sum(min(r.max_new_tokens - r.output_len, 4096) * (1.0 if full and r.ignore_eos else ratio) for r in run)
    assert abs(running_reservation(run, ratio, full) - want) <= 1e-6 * max(1.0, want)
    a = adder(kv=10**6, running=run, ratio=ratio, ignore_eos_full_reservation=full)
    assert abs(a.rem_total_tokens - (10**6 - want)) <= 1e-6 * 10**6


def test_a_long_running_output_reserves_4096_tokens_not_its_whole_length():
    # one running request with 20000 tokens to go reserves 4096 x 0.5 = 2048: a 1000-token
    # prompt with 100 output tokens fits a pool with 3200 free (unclipped it would reserve 10000)
    run = [Req(0, 10, 20_100, output_len=100, status=ReqStatus.RUNNING, ignore_eos=False)]
    a = adder(kv=3200, running=run, ratio=0.5)
    assert a.rem_total_tokens == 3200 - 2048
    assert a.add_one_req(Req(1, 1000, 100)) is not AddResult.NO_TOKEN and len(a.can_run) == 1


def test_mixed_decode_rows_shrink_the_prompt_budget_too():
    # sglang 0.5.23 PrefillAdder.__init__: rem_input_tokens = max_prefill_tokens -
    # num_mixed_decode_tokens, as rem_chunk_tokens and the KV budget: with 4 decode rows
    # riding, a 96-token prompt spends max_prefill_tokens 100 and the pass ends (OTHER)
    a = adder(max_prefill=100, chunk=1000, mixed=4)
    assert a.rem_input_tokens == 96 and a.rem_chunk_tokens == 996
    assert a.add_one_req(Req(0, 96, 10)) is AddResult.OTHER
    assert a.add_one_req(Req(1, 10, 10)) is AddResult.OTHER and len(a.can_run) == 1
    b = adder(max_prefill=100, chunk=1000)
    assert b.add_one_req(Req(0, 96, 10)) is AddResult.CONTINUE

def test_each_admitted_request_costs_a_page_of_kv_budget():
    # PrefillBudget.reserve: ceil(extend) + page + reserved output
    a = adder(kv=10_000, page=16, chunk=100_000, max_prefill=100_000)
    a.add_one_req(Req(0, 100, 50))
    assert a.rem_total_tokens == 10_000 - (112 + 16 + 50)


def test_an_admitted_request_reserves_its_whole_clipped_output_even_after_retraction():
    # sglang 0.5.23 PrefillAdder._select_prefill_admission: the check asks for what is left
    # of the output, the charge (_update_prefill_budget) for min(max_new_tokens, CLIP):
    # a retracted request re-prefilling prompt + 400 of 500 output tokens takes 500
    a = adder(kv=10_000, chunk=100_000, max_prefill=100_000)
    a.add_one_req(Req(0, 100, 500, output_len=400))
    assert a.can_run[0][1] == 500 and a.rem_total_tokens == 10_000 - (500 + 1 + 500)
    # ... and so does a chunked request's last chunk (add_chunked_req)
    c = adder(kv=10_000, chunk=1000)
    r = chunked(1, 300, 200, max_new=500)
    r.output_len = 100
    assert c.add_chunked_req(r) is False
    assert c.can_run[0][1] == 200 and c.rem_total_tokens == 10_000 - (200 + 1 + 500)
    # clipped at CLIP_MAX_NEW_TOKENS
    d = adder(kv=100_000, chunk=100_000, max_prefill=100_000)
    d.add_one_req(Req(2, 10, 9000, output_len=1))
    assert d.rem_total_tokens == 100_000 - (11 + 1 + 4096)


def test_the_kv_check_takes_the_raw_extend_the_charge_the_page_rounded_one():
    # sglang 0.5.23 PrefillAdder.add_one_req: total_tokens = extend + max_new + a page (the
    # raw extend) must be below remaining_total; PrefillBudget.reserve charges ceil_page(extend)
    a = adder(kv=140, page=16, chunk=100_000, max_prefill=100_000)
    a.add_one_req(Req(0, 100, 20))  # raw 100 + 20 + 16 = 136 < 140; paged 112 + 20 + 16 = 148
    assert [n for _, n in a.can_run] == [100]
    assert a.rem_total_tokens == 140 - 148
    b = adder(kv=136, page=16, chunk=100_000, max_prefill=100_000)
    assert b.add_one_req(Req(0, 100, 20)) is AddResult.NO_TOKEN and not b.can_run


@settings(max_examples=200, deadline=None)
@given(kv=st.integers(1, 5000), chunk=st.integers(-1, 600), mixed=st.integers(0, 300),
       page=st.sampled_from([1, 4, 16]), max_prefill=st.integers(1, 2000),
       cont=st.tuples(st.integers(2, 3000), st.integers(0, 2999)),
       lens=st.lists(st.tuples(st.integers(1, 2000), st.integers(1, 500)), max_size=8),
       rule=st.sampled_from(["exact", "exact_tokens", "stop_at_max_prefill_tokens"]), eos_path=st.booleans())
def test_inv_adder_extends_positive_and_within_free_kv(kv, chunk, mixed, page, max_prefill, cont, lens, rule,
                                                       eos_path):
    """INV-ADDER: every admitted extend is >= 1 token and the pass never takes more KV than
    is free (after the mixed decode rows), on the ignore_eos path too (prefix cache off)."""
    a = adder(kv=kv, chunk=chunk, mixed=mixed, page=page, max_prefill=max_prefill, chunk_fill=rule,
              ignore_eos_path=eos_path)
    inp, done = cont
    if chunk > 0 and done < inp:
        a.add_chunked_req(chunked(100, inp, done))
    for i, (n, m) in enumerate(lens):
        if a.add_one_req(Req(i, n, m)) is not AddResult.CONTINUE:
            break
    extends = [n for _, n in a.can_run]
    assert all(n >= 1 for n in extends)
    assert sum(extends) <= max(kv - mixed, 0)
    assert sum(1 for r, n in a.can_run if n < r.extend_remaining) <= 2  # old chunk + one new cut
