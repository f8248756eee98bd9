"""SGLang scheduling rules as sglang 0.5.23 has them, each switchable through the semantics
presets (sim/semantics.py). Every test names the SGLang function it follows, and checks
the older behaviour through the rule's switch."""

from __future__ import annotations

from specsched.sim.admission import make_policy
from specsched.sim.config import ServerArgs
from specsched.sim.plan import ForwardMode, StepOutput
from specsched.sim.request import Req, ReqStatus
from specsched.sim.scheduler import Scheduler


def sched(preset: str = "0.5.23", **kw) -> Scheduler:
    args = dict(max_running_requests=8, max_total_num_tokens=100_000, chunked_prefill_size=1000,
                max_prefill_tokens=1000, sglang_semantics=preset)
    args.update(kw)
    s = ServerArgs(**args)
    return Scheduler(s, make_policy(s))


def running(s: Scheduler, rid: int, input_len: int, max_new: int, out: int, ignore_eos: bool = True) -> Req:
    """Put a request straight into the running batch, its prompt and output KV held."""
    r = Req(rid, input_len, max_new, output_len=out, status=ReqStatus.RUNNING, ignore_eos=ignore_eos)
    s.reqs[rid] = r
    s.kv.reserve(r, input_len + out)  # as a (re-)prefill of prompt + output: then prefill_done
    r.prefill_done = input_len
    s.running.append(r)
    return r


def commit_all(s: Scheduler, plan, n: int = 1):
    out = {rid: (1 if rid in plan.new_rids else 0) for rid in plan.rids[: plan.num_extend]}
    out.update({rid: n for rid in plan.decode_rids})
    return s.process_result(plan, StepOutput.from_mapping(plan, out))


# --- PrefillAdder._select_prefill_admission: chunk fill of later requests -----------------

def test_chunk_fill_exact_cuts_the_later_request_older_build_stops():
    for preset, want in (("0.5.23", ((0, 1, 2, 3), 3)), ("mi355x-dsv41", ((0, 1, 2), None))):
        s = sched(preset)
        for i in range(4):
            s.add_request(Req(i, 300, 5))
        p = s.schedule()
        assert (p.rids, p.chunked_rid) == want, preset


# --- ScheduleBatch._get_decode_retraction_order / retract_decode --------------------------

def _tight(preset: str, spec: bool = False):
    kw = dict(speculative_algorithm="dspark", speculative_num_draft_tokens=4) if spec else {}
    s = sched(preset, max_total_num_tokens=1000, **kw)
    w = s.window
    # outputs 50, 10, 10 (prompt 100 vs 300), 30: the pool has room for nothing new
    reqs = [running(s, 0, 100, 500, 50), running(s, 1, 100, 500, 10), running(s, 2, 300, 500, 10),
            running(s, 3, 100, 500, 30)]
    s.kv.reserve(reqs[0], s.kv.available - 3 * w)  # three requests' next step fits, not four
    return s, reqs


def test_retraction_least_output_first_ties_longest_prompt():
    s, reqs = _tight("0.5.23")
    s.schedule()
    assert [r.rid for r in s.waiting] == [2]  # output 10, the longer prompt
    assert s.num_retractions == 1


def test_retraction_spec_batch_tail_in_the_older_build():
    s, reqs = _tight("mi355x-dsv41", spec=True)
    s.schedule()
    assert s.waiting and s.waiting[0].rid == 3  # the back of the batch
    s2, _ = _tight("0.5.23", spec=True)
    s2.schedule()
    assert s2.waiting[0].rid == 2


def _small(preset: str) -> Scheduler:
    s = sched(preset, max_total_num_tokens=1000)
    a = running(s, 0, 100, 500, 50)
    running(s, 1, 20, 500, 5)    # retracted first (least output): frees 25
    running(s, 2, 20, 500, 6)    # then this one: frees 26
    running(s, 3, 100, 500, 40)
    s.kv.reserve(a, s.kv.available - 3)  # three requests' next step fits, not four
    return s


def test_retraction_retracts_at_least_one_then_stops_when_the_next_step_fits():
    # retract_decode: ``first_iter or not check_decode_mem``; the older rule kept going until
    # 20 x bs tokens (+ spec headroom) were free
    s = _small("0.5.23")
    s.schedule()
    assert [r.rid for r in s.waiting] == [1]
    old = _small("mi355x-dsv41")
    old.schedule()
    assert [r.rid for r in old.waiting] == [1, 2]
    assert old.kv.available >= 20 * len(old.running) - 2  # (minus the step just reserved)


def test_release_req_evicts_the_cache_until_20_tokens_per_kept_request_are_free():
    # 0.5.23 schedule_batch.py release_req -> mem_cache/common.py evict_from_tree_cache:
    # after the retracted request's KV is freed and its cached prefix unlocked, LRU
    # prefixes are evicted until remaining x SGLANG_RETRACT_DECODE_STEPS tokens are free,
    # beyond the next step's need (which the freed KV alone covers here)
    for preset in ("0.5.23", "mi355x-dsv41"):
        s = sched(preset, max_total_num_tokens=1000)
        a = running(s, 0, 100, 500, 50)
        r1 = running(s, 1, 20, 500, 5)    # retracted first (least output): frees 25
        running(s, 2, 20, 500, 6)
        running(s, 3, 100, 500, 40)
        prefix = list(range(5000, 5040))  # r1's cached prefix, locked while it runs
        holder = Req(9, 40, 1)
        s.kv.reserve(holder, 40)
        s.cache.insert(prefix)
        s.kv.to_tree(holder, 40)
        node = s.cache.match_prefix(prefix)[1]
        s.cache.inc_lock_ref(node)
        s._locks[r1.rid] = node
        s.kv.reserve(a, s.kv.available - 3)   # three requests' next step fits, not four
        s.schedule()
        assert [r.rid for r in s.waiting] == [1], preset
        # 25 freed + 3 < 20 x 3: the unlocked prefix went too (it would fit the step without)
        assert s.cache.total_size == 0 and s.kv.tree == 0, preset
        assert s.kv.available + 3 >= 60, preset


def test_ratio_after_retraction_is_estimated_over_the_kept_batch():
    # NewTokenRatioTracker.estimate_new_token_ratio_after_retract over the requests kept:
    # min(1, (sum output + 20 x bs) / (sum max_new + 1))
    s = _small("0.5.23")
    s.schedule()
    kept = s.running
    assert [r.rid for r in kept] == [0, 2, 3]
    assert s.ratio.value == min(1.0, (50 + 6 + 40 + 20 * 3) / (3 * 500 + 1))


# --- NewTokenRatioTracker (scheduler_components/new_token_ratio_tracker.py) ----------------

def test_new_token_ratio_init_floor_and_decay_follow_schedule_conservativeness():
    # NewTokenRatioTracker.from_config: init = min(0.7 x conservativeness, 1); min = init x
    # 0.14; decay = (init - min) / 600 per decode_step
    from specsched.sim.new_token_ratio import NewTokenRatio

    for c, init in ((1.0, 0.7), (0.5, 0.35), (2.0, 1.0)):
        r = NewTokenRatio(c)
        assert r.value == r.init == init and r.floor == init * 0.14
        r.on_decode_step()
        assert abs(r.value - (init - (init - init * 0.14) / 600)) < 1e-15
        for _ in range(600):
            r.on_decode_step()
        assert r.value == r.floor


class _Hold:
    """An admission policy that delays every pass (a user policy may, with nothing running)."""

    name = "hold"
    stateless = True

    def should_delay(self, state):
        return True

    def on_prefill_admitted(self, n):
        return None


def test_new_token_ratio_resets_only_when_the_server_is_fully_idle():
    # Scheduler.on_idle resets the tracker only when is_fully_idle: nothing running,
    # chunked or waiting. A pass that admits no waiting request with nothing running keeps it.
    s = Scheduler(ServerArgs(max_running_requests=8, max_total_num_tokens=100_000), _Hold())
    s.ratio.value = 0.3
    s.add_request(Req(0, 10, 5))
    assert s.schedule() is None and s.num_delayed_passes == 1
    assert s.ratio.value == 0.3
    s.waiting.clear()
    assert s.schedule() is None
    assert s.ratio.value == s.ratio.init


def test_retraction_policy_priority_retracts_the_lowest_priority_first():
    # _get_decode_retraction_order with --retraction-policy priority: the key is
    # (priority x -sign, output length, -prompt length), descending, popped from the end
    for policy, low_first, want in (("priority", False, 1), ("priority", True, 0), ("length", False, 0)):
        s = sched(max_total_num_tokens=1000, enable_priority_scheduling=True, retraction_policy=policy,
                  schedule_low_priority_values_first=low_first)
        reqs = [running(s, 0, 100, 500, 10), running(s, 1, 100, 500, 50), running(s, 2, 100, 500, 30)]
        for r, p in zip(reqs, (5, 1, 3), strict=True):
            r.priority = p
        s.kv.reserve(reqs[0], s.kv.available - 2)  # two requests' next step fits, not three
        s.schedule()
        assert [r.rid for r in s.waiting] == [want], (policy, low_first)


def test_an_idle_dp_rank_keeps_its_ratio_while_a_peer_runs():
    # DP attention: a rank with nothing to run gets an idle batch while any peer runs
    # (maybe_prepare_mlp_sync_batch), so the overlap loop does not reach on_idle for it
    from specsched.sim.dp_attention import DPGroup

    g = DPGroup(ServerArgs(enable_dp_attention=True, dp_size=2, max_running_requests=16,
                           max_total_num_tokens=100_000, chunked_prefill_size=1000, max_prefill_tokens=1000))
    busy, idle = g.ranks
    running(busy, 0, 10, 50, 1)
    idle.ratio.value = busy.ratio.value = 0.3
    plan = g.schedule()
    assert plan is not None and idle.ratio.value == 0.3
    busy.running.clear()
    assert g.schedule() is None and idle.ratio.value == idle.ratio.init == busy.ratio.value


# --- PrefillAdder._get_running_request_total_token_offset ----------------------------------

def test_ignore_eos_running_requests_reserve_at_ratio_one():
    # a running request with 3000 output tokens left; the pool has 4000 free; the new
    # request needs 700 + 400 + 1: it fits beside 0.7 x 3000 reserved, not beside 3000
    for preset, ignore_eos, admitted in (("0.5.23", True, False), ("0.5.23", False, True),
                                          ("mi355x-dsv41", True, True)):
        s = sched(preset, max_total_num_tokens=4100)
        running(s, 0, 50, 3050, 50, ignore_eos=ignore_eos)
        s.add_request(Req(1, 700, 400))
        p = s.schedule()
        assert (p.mode is ForwardMode.EXTEND) is admitted, (preset, ignore_eos)


# --- PrefillAdder.add_one_req_ignore_eos (prefix cache off) -------------------------------

def test_ignore_eos_with_the_cache_off_projects_finishes_instead_of_reserving():
    # add_one_req: ``ignore_eos and getattr(tree_cache, "disable", True)`` takes
    # add_one_req_ignore_eos: the new request's output is not reserved up front; the pool
    # must hold every request's remaining output in the order they finish, the KV of
    # those finished before reused. A running request 100 tokens from its end holds 1900;
    # 800 free: the reservation rule (1100 + 1 + 100 reserved) refuses, the projection admits.
    # The rule is older than 0.5.23: both presets take it.
    for preset in ("0.5.23", "mi355x-dsv41"):
        for cache_off, ignore_eos, admitted in ((True, True, True), (False, True, False), (True, False, False)):
            s = sched(preset, max_total_num_tokens=2700, disable_radix_cache=cache_off, chunked_prefill_size=-1,
                      max_prefill_tokens=10**6)
            running(s, 0, 1000, 1000, 900)
            s.add_request(Req(1, 100, 1000, ignore_eos=ignore_eos))
            p = s.schedule()
            assert (p.mode is ForwardMode.EXTEND) is admitted, (preset, cache_off, ignore_eos)


def test_ignore_eos_projection_keeps_one_token_per_request_free():
    # IGNORE_EOS_RESERVE_TOKENS = 1 per request still running at each finish: two requests
    # of 10 + 1000 in a pool with 2012 free pass the reservation rule (10 + 1000 + 1 < 2012
    # - 1000) but not the projection (2012 - 11 - 2 x 1000 = 1 <= 2)
    from specsched.sim.prefill_adder import AddResult, PrefillAdder

    run = [Req(0, 10, 1000, prefill_done=10, status=ReqStatus.RUNNING)]
    for eos_path, fits in ((False, True), (True, False)):
        a = PrefillAdder.start(2012, run, 0.7, 10**6, -1, 1, ignore_eos_full_reservation=True,
                               ignore_eos_path=eos_path)
        res = a.add_one_req(Req(1, 10, 1000))
        assert (res is not AddResult.NO_TOKEN) is fits, eos_path
    a = PrefillAdder.start(2014, run, 0.7, 10**6, -1, 1, ignore_eos_path=True)  # 2014 - 11 - 2000 = 3 > 2
    assert a.add_one_req(Req(1, 10, 1000)) is not AddResult.NO_TOKEN


def test_ignore_eos_path_cuts_the_chunk_exactly_and_skips_max_prefill_tokens():
    # add_one_req_ignore_eos: a later request is cut to rem_chunk_tokens (no page floor),
    # and max_prefill_tokens is not checked for it (the budget state still stops a spent pass)
    from specsched.sim.prefill_adder import PrefillAdder

    a = PrefillAdder.start(10**6, [], 0.7, 500, 1000, 16, ignore_eos_path=True,
                           chunk_fill="stop_at_max_prefill_tokens")
    a.add_one_req(Req(0, 300, 5))
    a.add_one_req(Req(1, 900, 5))
    assert [n for _, n in a.can_run] == [300, 1000 - 304] and a.new_chunked is a.can_run[1][0]


# --- Scheduler.get_next_batch_to_run: finished requests leave before the delay gate --------

def _at_253(preset: str) -> Scheduler:
    s = sched(preset, max_running_requests=256, admission_delay="min_free_slots", min_free_slots=4,
              chunked_prefill_size=-1, max_prefill_tokens=10**6, max_total_num_tokens=10**7)
    for i in range(253):
        running(s, i, 10, 100, 1)
    s.running[0].output_len = 100
    s.running[0].status = ReqStatus.FINISHED  # finished, not filtered yet
    for i in range(253, 256):
        s.add_request(Req(i, 10, 100))
    return s


def test_finished_requests_are_filtered_before_the_delay_gate():
    p = _at_253("0.5.23").schedule()
    assert p.mode is ForwardMode.EXTEND and len(p.rids) == 3  # 252 running: 4 free
    old = _at_253("mi355x-dsv41")
    p = old.schedule()
    assert p.mode is ForwardMode.DECODE and old.num_delayed_passes == 1


# --- Scheduler._reqs_finishing_inflight (overlap) ------------------------------------------

def test_request_whose_next_token_is_its_last_sits_out_the_next_decode():
    for preset, rides in (("0.5.23", False), ("mi355x-dsv41", True)):
        s = sched(preset)
        a = running(s, 0, 10, 5, 3)
        running(s, 1, 10, 50, 3)
        p1 = s.schedule()             # decode: a commits its 4th token
        assert p1.rids == (0, 1)
        a.output_len = 4              # results of an earlier step: a has 4 of 5
        p2 = s.schedule()             # p1 is in flight and commits a's last token
        assert (0 in p2.rids) is rides, preset
        commit_all(s, p1)
        assert a.finished



def _finishing_in_flight(preset: str) -> tuple[Scheduler, object]:
    """Three decoding requests; the decode in flight commits request 0's last token, and the
    KV left cannot take the next step of the other two (2 tokens), only of one."""
    s = sched(preset, max_total_num_tokens=1000)
    a = running(s, 0, 100, 5, 3)
    b = running(s, 1, 100, 500, 3)
    running(s, 2, 100, 500, 3)
    p1 = s.schedule()                 # decode: a commits its 4th token
    assert p1.rids == (0, 1, 2)
    a.output_len = 4                  # results of an earlier step: a has 4 of 5
    s.kv.reserve(b, s.kv.available - 1)
    return s, p1


def test_a_decode_that_does_not_fit_while_a_request_finishes_in_flight_waits_instead_of_retracting():
    """0.5.23 scheduler.py ``update_running_batch``: ``if kv_full_retract_flag and
    finishing_reqs``: the in-flight result frees the finishing request's KV at the end of
    this step, so the rest decode next step instead of being retracted (no decode this pass,
    no retraction, no new_token_ratio decay). Under the older build's rule (no
    ``_reqs_finishing_inflight``) the finishing request rides, the step does not fit, and a
    request is retracted."""
    s, p1 = _finishing_in_flight("0.5.23")
    ratio = s.ratio.value
    assert s.schedule() is None
    assert s.num_retractions == 0 and not s.waiting and s.ratio.value == ratio
    assert [r.rid for r in s.running] == [1, 2] and not s.batch_is_full
    commit_all(s, p1)                 # a finishes: its KV is freed
    p3 = s.schedule()
    assert p3.mode is ForwardMode.DECODE and p3.rids == (1, 2) and s.num_retractions == 0
    old, _ = _finishing_in_flight("mi355x-dsv41")
    p2 = old.schedule()
    assert old.num_retractions >= 1 and old.waiting
    assert p2 is not None and 0 in p2.rids


# --- _get_new_batch_prefill_raw: the min-free-slots gate and the batch_is_full latch ------

def test_min_free_slots_gate_is_skipped_while_a_chunked_request_is_in_progress():
    """0.5.23 scheduler.py ``_get_new_batch_prefill_raw``: the delayer is asked only when
    ``self.chunked_req is None`` ("that pass must proceed regardless"): with 5 of 8 slots
    taken (3 free, below the threshold 4) the chunked prompt still takes its next chunks,
    and the pass of its last chunk admits a waiting request beside it; once no chunk is in
    flight, a fresh admission at 7 of 8 is delayed."""
    for preset in ("0.5.23", "mi355x-dsv41"):
        s = sched(preset, admission_delay="min_free_slots", min_free_slots=4, chunked_prefill_size=100,
                  max_prefill_tokens=10**6)
        for i in range(4):
            running(s, i, 10, 100, 1)
        s.add_request(Req(10, 20, 50))    # whole
        s.add_request(Req(11, 250, 50))   # chunked: 80, then 100, then 70
        p = s.schedule()
        assert p.rids == (10, 11) and p.extend_lens == (20, 80) and s.chunked_req is s.reqs[11], preset
        commit_all(s, p)
        s.add_request(Req(12, 10, 50))
        for chunk in (100, 70):
            p = s.schedule()              # 5 running (3 free < 4): the chunk goes on all the same
            assert p.mode is ForwardMode.EXTEND and p.rids[0] == 11 and p.extend_lens[0] == chunk, preset
            commit_all(s, p)
        assert p.rids == (11, 12) and s.chunked_req is None and s.num_delayed_passes == 0, preset
        s.add_request(Req(13, 10, 50))
        p = s.schedule()                  # 7 running, no chunk in flight: the gate holds 13
        assert p.mode is ForwardMode.DECODE and s.num_delayed_passes == 1 and s.waiting, preset



def test_an_explicit_min_free_slots_wins_in_0523_is_capped_at_the_automatic_value_in_the_older_build():
    """0.5.23 managers/min_free_slots_delayer.py ``resolve_min_free_slots``: "An explicit
    user value always wins, capped by max_running_requests": 8 asked, 250 of 256 running
    (6 free) delays the pass. Older code capped an explicit value at the automatic one
    (min(4, max(2, (256 + 5) // 6)) = 4): 6 free admits (``min_free_slots_explicit``)."""
    for preset, delays in (("0.5.23", True), ("mi355x-dsv41", False)):
        s = sched(preset, max_running_requests=256, admission_delay="min_free_slots", min_free_slots=8,
                  chunked_prefill_size=-1, max_prefill_tokens=10**6, max_total_num_tokens=10**7)
        for i in range(250):
            running(s, i, 10, 100, 1)
        s.add_request(Req(250, 10, 100))
        p = s.schedule()
        assert (p.mode is ForwardMode.DECODE) is delays and s.num_delayed_passes == int(delays), preset
        if not delays:
            assert p.rids == (250,)

def test_batch_is_full_is_cleared_when_a_request_of_the_last_prefill_batch_finished():
    """0.5.23 scheduler.py ``get_next_batch_to_run``: the last prefill batch is filtered
    before it joins the running batch, and ``if last_batch.batch_size() < last_bs:
    running_batch.batch_is_full = False``. A request that finished on its prefill (one
    output token) never enters the running batch, so only this clears the latch its pass
    set; the waiting request takes its slot at the next pass (results processed before
    the next pass, as in ``event_loop_normal``)."""
    s = sched(max_running_requests=2, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    s.add_request(Req(0, 10, 1))
    s.add_request(Req(1, 10, 50))
    s.add_request(Req(2, 10, 50))
    p = s.schedule()
    assert p.rids == (0, 1) and s.batch_is_full
    commit_all(s, p)                   # request 0 is done
    p = s.schedule()
    assert not s.batch_is_full and p.mode is ForwardMode.EXTEND and p.rids == (2,)


def test_batch_is_full_is_cleared_by_a_retraction():
    """0.5.23 scheduler.py ``update_running_batch``: ``if batch.batch_size() < initial_bs:
    batch.batch_is_full = False``: a retraction makes room, so the next pass may admit (the
    retracted request first, once it fits)."""
    for preset in ("0.5.23", "mi355x-dsv41"):
        s = _small(preset)
        s.batch_is_full = True             # a pass had found the KV budget spent
        p = s.schedule()
        assert p.mode is ForwardMode.DECODE and s.num_retractions >= 1, preset
        assert not s.batch_is_full, preset


def test_batch_is_full_is_cleared_when_a_finishing_request_sits_out_a_mixed_step():
    """0.5.23 scheduler.py ``_get_new_batch_prefill_raw``, mixed chunk: the requests whose
    in-flight step commits their last token leave the running batch before it rides the
    extend (``running_batch.filter_batch(reqs_to_exclude=finishing_reqs)``) and ``if
    finishing_reqs: running_batch.batch_is_full = False``. They are gone from the running
    batch then, so no later filter would clear the latch the pass set on its full slots:
    without this the waiting request would wait for another request to leave."""
    s = sched(max_running_requests=3, enable_mixed_chunk=True, chunked_prefill_size=1000)
    a = running(s, 0, 10, 5, 3)
    running(s, 1, 10, 500, 3)
    p1 = s.schedule()                  # decode: a commits its 4th token
    a.output_len = 4                   # results of an earlier step: a has 4 of 5
    s.add_request(Req(2, 10, 50))
    s.add_request(Req(3, 10, 50))
    p2 = s.schedule()                  # p1 in flight commits a's last token
    assert p2.mode is ForwardMode.MIXED and p2.rids == (2, 1)   # 1 slot: 2 joins; a sits out
    assert not s.batch_is_full
    commit_all(s, p1)
    commit_all(s, p2)
    p3 = s.schedule()                  # running 1 and 2: the slot a left takes 3
    assert p3.num_extend == 1 and p3.rids[0] == 3


# --- mixed chunk (scheduler.py _get_new_batch_prefill_raw, mix_with_running) --------------

def test_mixed_chunk_budgets_shrink_by_running_bs_with_spec():
    # the budgets shrink by one token per running request, not by the verify window
    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              chunked_prefill_size=100, max_prefill_tokens=100)
    running(s, 0, 10, 50, 1)
    running(s, 1, 10, 50, 1)
    s.add_request(Req(2, 500, 5))
    p = s.schedule()
    assert p.mode is ForwardMode.MIXED and p.extend_lens[0] == 98


def test_mixed_path_neither_retracts_nor_decays_the_ratio():
    # four verify rows need 16 slots; after the 96-token chunk 15 are left: the rows sit
    # this step out (no retraction, no ratio step) and decode at the next decode step
    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              chunked_prefill_size=100, max_prefill_tokens=100, max_total_num_tokens=10_000)
    for i in range(4):
        running(s, i, 100, 600, 1, ignore_eos=False)
    s.ratio.value = 0.0
    s.kv.reserve(s.running[0], s.kv.available - 111)
    s.add_request(Req(5, 100, 5))
    p = s.schedule()
    assert p.mode is ForwardMode.EXTEND and p.rids == (5,) and p.extend_lens == (96,)
    assert s.num_retractions == 0 and s.ratio.value == 0.0 and len(s.running) == 4


def test_mixed_chunk_is_off_for_a_standalone_drafter_on_for_the_others():
    # 0.5.23 spec_info.py supports_mixed_chunk (EAGLE, EAGLE3, DFLASH, DSPARK; NEXTN is EAGLE)
    # and speculative_hook.py _handle_eagle_family: STANDALONE gets enable_mixed_chunk=False
    for algo, mixes in [("standalone", False), ("STANDALONE", False), ("eagle", True), ("nextn", True),
                        ("mtp", True), ("eagle3", True), ("dspark", True), ("dflash", True), ("none", True)]:
        spec = {} if algo == "none" else {"speculative_algorithm": algo, "speculative_num_draft_tokens": 4}
        if algo.lower() not in ("none", "dspark", "dflash"):
            spec["speculative_num_steps"] = 3   # a chain states its steps (SGLang refuses the window alone)
        s = sched(enable_mixed_chunk=True, chunked_prefill_size=100, max_prefill_tokens=100, **spec)
        assert s.server.enable_mixed_chunk is mixes, algo
        running(s, 0, 10, 50, 1)
        s.add_request(Req(1, 500, 5))
        p = s.schedule()
        assert p.mode is (ForwardMode.MIXED if mixes else ForwardMode.EXTEND), algo



def test_mixed_chunk_needs_chunked_prefill():
    """0.5.23 scheduler.py ``Scheduler.__init__``: ``is_mixed_chunk = chunked_prefill_size
    is not None and enable_mixed_chunk`` (``chunked_prefill_size: -1`` is None there): with
    chunking off the running batch never rides an extend; it decodes on its own."""
    for chunk, mixes in ((-1, False), (1000, True)):
        s = sched(enable_mixed_chunk=True, chunked_prefill_size=chunk, max_prefill_tokens=1000)
        running(s, 0, 10, 50, 1)
        s.add_request(Req(1, 100, 5))
        p = s.schedule()
        assert (p.mode is ForwardMode.MIXED) is mixes and p.rids[0] == 1, chunk
        assert (0 in p.rids) is mixes, chunk

def test_mixed_step_rows_are_one_token_decodes_with_spec():
    # 0.5.23 schedule_batch.py mix_with_running: a running row of a mixed step extends one
    # token (extend_end = prefix_len + 1) and the step is no verify: the device commits 1
    # token per row, and the row's reserved verify window is not consumed
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.acceptance_config import AcceptanceConfig
    from specsched.sim.device_tokens import DeviceTokens

    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              chunked_prefill_size=100, max_prefill_tokens=100)
    running(s, 0, 10, 50, 1)
    s.add_request(Req(1, 500, 5))
    p = s.schedule()
    assert p.mode is ForwardMode.MIXED and p.rids == (1, 0)
    assert p.extend_lens[1] == 1 and p.spec_window == 1
    dev = DeviceTokens(AcceptanceModel(AcceptanceConfig(mean_accept_length=3.5), s.window, seed=1))
    out = dev.step(p)
    assert out.counts()[1] == 1
    used = s.kv.used
    s.process_result(p, out)
    assert s.reqs[0].output_len == 2 and s.reqs[0].spec_cycles == 0
    assert s.kv.used <= used


def test_mixed_step_with_spec_costs_one_extend_over_every_row():
    # the rows ride in the extend forward as one-token rows: no verify cycle is costed
    from specsched.sim.cost_model import CostModel

    from tests.conftest import tiny_profile

    s = sched(enable_mixed_chunk=True, speculative_algorithm="dspark", speculative_num_draft_tokens=4,
              chunked_prefill_size=100, max_prefill_tokens=100)
    for i in range(3):
        running(s, i, 10, 50, 1)
    s.add_request(Req(5, 500, 5))
    p = s.schedule()
    assert p.mode is ForwardMode.MIXED
    cm = CostModel(tiny_profile(), s.server)
    cost = cm.gpu(p)
    assert cost.decode_s == 0.0
    assert cost.extend_s == cm.extend_s(p.extend_lens, p.prefix_lens)


# --- batch_is_full latch (get_next_batch_to_run / _get_new_batch_prefill_raw) --------------

def test_batch_is_full_latch_holds_until_a_request_leaves():
    s = sched(max_running_requests=2, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    for i in range(3):
        s.add_request(Req(i, 10, 3))
    p = s.schedule()
    assert len(p.rids) == 2 and s.batch_is_full
    commit_all(s, p)
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.batch_is_full
    commit_all(s, p, 2)               # both finish
    p = s.schedule()                  # they ride this step (overlap lag)...
    commit_all(s, p, 0)
    p = s.schedule()                  # ...and leave here: the latch clears, rid 2 is admitted
    assert not s.batch_is_full and p.rids == (2,)


# --- SchedulePolicy.calc_priority: the queue is sorted in place ---------------------------

def _lpm_queue(policy: str = "lpm") -> Scheduler:
    s = sched(schedule_policy=policy, prefill_max_requests=1, chunked_prefill_size=-1, max_prefill_tokens=10**6,
              max_running_requests=256)
    prefix = list(range(1000, 1064))
    s.cache.insert(prefix)  # 64 cached tokens
    a, b, c = Req(0, 100, 5), Req(1, 100, 5), Req(2, 100, 5)
    a.tokens = list(range(100))                   # no cached prefix
    b.tokens = prefix + list(range(36))
    c.tokens = prefix + list(range(50, 86))
    for r in (a, b, c):
        s.add_request(r)
    return s


def test_lpm_above_128_waiting_is_fcfs_over_the_queue_the_last_sort_left():
    # calc_priority sorts waiting_queue in place; above 128 waiting _determine_active_policy
    # returns FCFS, which leaves the queue as it is: the last lpm order, then arrivals
    s = _lpm_queue()
    p = s.schedule()
    assert p.rids == (1,)                         # lpm: b, c (64 cached), then a
    assert [r.rid for r in s.waiting] == [2, 0]
    commit_all(s, p)
    for i in range(3, 131):
        s.add_request(Req(i, 10, 5))
    p = s.schedule()                              # 130 waiting: fcfs over [c, a, 3..130]
    assert p.mode is ForwardMode.EXTEND and p.rids == (2,)
    fcfs = _lpm_queue("fcfs")
    assert fcfs.schedule().rids == (0,) and [r.rid for r in fcfs.waiting] == [1, 2]


# --- prefill_max_requests, prefill_decode_interval, priority -------------------------------

def test_prefill_max_requests_caps_a_pass():
    s = sched(prefill_max_requests=2, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    for i in range(5):
        s.add_request(Req(i, 10, 5))
    assert s.schedule().rids == (0, 1)


def test_prefill_decode_interval_decodes_between_prefills():
    s = sched(prefill_decode_interval=2, prefill_max_requests=1, chunked_prefill_size=-1,
              max_prefill_tokens=10**6)
    for i in range(3):
        s.add_request(Req(i, 10, 50))
    modes = []
    for _ in range(7):
        p = s.schedule()
        modes.append(p.mode)
        commit_all(s, p)
    E, D = ForwardMode.EXTEND, ForwardMode.DECODE
    assert modes == [E, D, D, E, D, D, E]


def test_priority_scheduling_orders_fcfs_by_priority():
    s = sched(enable_priority_scheduling=True, prefill_max_requests=1)
    s.add_request(Req(0, 10, 5, priority=1))
    s.add_request(Req(1, 10, 5, priority=9))
    assert s.schedule().rids == (1,)


def test_priority_preemption_makes_room_for_a_higher_priority_request():
    # PrefillAdder.preempt_to_schedule: slots full, a waiting request whose priority beats
    # a running one's by more than the threshold retracts the lowest priority (latest
    # queued first) and takes its place
    s = sched(max_running_requests=2, enable_priority_scheduling=True, priority_scheduling_preemption_threshold=5,
              chunked_prefill_size=-1, max_prefill_tokens=10**6)
    s.add_request(Req(0, 10, 50, priority=1))
    s.add_request(Req(1, 10, 50, priority=1))
    commit_all(s, s.schedule())
    s.add_request(Req(2, 10, 50, priority=3))   # not enough above: waits
    p = s.schedule()
    assert p.mode is ForwardMode.DECODE and s.num_preemptions == 0
    commit_all(s, p)
    s.add_request(Req(3, 10, 50, priority=20))
    p = s.schedule()
    assert p.mode is ForwardMode.EXTEND and p.rids == (3,)
    assert s.num_preemptions == 1 and s.reqs[1].status is ReqStatus.WAITING  # the later of the two
    assert [r.rid for r in s.waiting] == [2, 1]
    off = sched(max_running_requests=2, enable_priority_scheduling=True, disable_priority_preemption=True,
                chunked_prefill_size=-1, max_prefill_tokens=10**6)
    off.add_request(Req(0, 10, 50, priority=1))
    off.add_request(Req(1, 10, 50, priority=1))
    commit_all(off, off.schedule())
    off.add_request(Req(3, 10, 50, priority=20))
    assert off.schedule().mode is ForwardMode.DECODE



def test_priority_preemption_needs_a_difference_above_the_threshold_not_equal_to_it():
    """0.5.23 schedule_policy.py ``PrefillAdder.preempt_to_schedule``: a running request is
    preemptible only if ``priority_diff > priority_scheduling_preemption_threshold``: a
    difference equal to the threshold waits, one more preempts."""
    for prio, preempts in ((6, False), (7, True)):
        s = sched(max_running_requests=2, enable_priority_scheduling=True, priority_scheduling_preemption_threshold=5,
                  chunked_prefill_size=-1, max_prefill_tokens=10**6)
        s.add_request(Req(0, 10, 50, priority=1))
        s.add_request(Req(1, 10, 50, priority=1))
        commit_all(s, s.schedule())
        s.add_request(Req(2, 10, 50, priority=prio))
        p = s.schedule()
        assert (p.mode is ForwardMode.EXTEND) is preempts and s.num_preemptions == int(preempts), prio


def test_priority_preemption_counts_only_the_preempted_requests_reservations():
    """0.5.23 ``preempt_to_schedule``: ``min_tokens_to_remove`` = the request's extend +
    min(max_new, 4096) - the pass's remaining KV budget, less each preemptible request's
    *reservation* (``_get_running_request_total_token_offset``: remaining output x ratio),
    not the KV it holds; if that stays > 0 nothing is preempted ("Check max token count
    limit can be met"). Two running prompts of 4000 hold 8000 of 10000 tokens, but reserve
    only 2 x 49 x 0.7: a 3000-token request of higher priority does not preempt them."""
    for prompt, preempts in ((3000, False), (1900, True)):
        s = sched(max_running_requests=2, enable_priority_scheduling=True,
                  priority_scheduling_preemption_threshold=5, chunked_prefill_size=-1, max_prefill_tokens=10**6,
                  max_total_num_tokens=10_000)
        for i in range(2):
            r = running(s, i, 4000, 50, 1, ignore_eos=False)
            r.priority = 1
        s.add_request(Req(2, prompt, 50, priority=20))
        p = s.schedule()                 # budget: 1998 - 2 x 34.3; need: prompt + 50 - that
        assert (p.mode is ForwardMode.EXTEND) is preempts and s.num_preemptions == int(preempts), prompt
        assert (2 in [r.rid for r in s.waiting]) is not preempts, prompt

def test_after_a_preemption_each_later_request_of_the_pass_must_preempt_for_itself():
    # sglang 0.5.23 scheduler.py _get_new_batch_prefill_raw: batch_is_full stays set after
    # PrefillAdder.preempt_to_schedule, so the next waiting request is admitted only if it
    # can preempt too. A high-priority request that needs both running requests' KV
    # preempts both; the low-priority one queued behind it does not take the second slot
    s = sched(max_running_requests=2, max_total_num_tokens=3000, enable_priority_scheduling=True,
              priority_scheduling_preemption_threshold=5, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    s.add_request(Req(0, 600, 400, priority=1))
    s.add_request(Req(1, 600, 400, priority=1))
    commit_all(s, s.schedule())
    s.add_request(Req(2, 1395, 400, priority=20))
    s.add_request(Req(3, 10, 10, priority=1))
    p = s.schedule()
    assert p.mode is ForwardMode.EXTEND and p.rids == (2,)
    assert s.num_preemptions == 2
    assert sorted(r.rid for r in s.waiting) == [0, 1, 3]


def _two_preemptible(**kw) -> tuple[Scheduler, Req, Req]:
    """Slots full with requests 0 and 1 (priority 1, batch order 0, 1; 0 queued first), each
    holding a 40-token cached prefix locked; 14 tokens free; request 2 (priority 20) waits and
    needs both running requests' reservations (500 each), so one pass preempts both."""
    s = sched(max_running_requests=2, max_total_num_tokens=2000, enable_priority_scheduling=True,
              priority_scheduling_preemption_threshold=5, chunked_prefill_size=-1, max_prefill_tokens=10**6, **kw)
    reqs = []
    for rid, base in ((0, 5000), (1, 6000)):
        r = Req(rid, 5, 500, status=ReqStatus.RUNNING, ignore_eos=True, priority=1)
        s.reqs[rid] = r
        s.kv.reserve(r, 5)
        r.prefill_done = 5
        s.running.append(r)
        s._entries += 1
        s._entry[rid] = s._entries
        holder = Req(90 + rid, 40, 1)
        s.kv.reserve(holder, 40)
        s.cache.insert(list(range(base, base + 40)))
        s.kv.to_tree(holder, 40)
        node = s.cache.match_prefix(list(range(base, base + 40)))[1]
        s.cache.inc_lock_ref(node)
        s._locks[rid] = node
        reqs.append(r)
    s.kv.reserve(Req(99, 1, 1), s.kv.available - 14)   # the rest of the pool held elsewhere
    s.add_request(Req(2, 10, 4, priority=20, ignore_eos=True))
    return s, reqs[0], reqs[1]


def test_preempted_requests_are_released_in_batch_order():
    # sglang 0.5.23 schedule_policy.py PrefillAdder.preempt_to_schedule chooses the lowest
    # priority, then the latest queued (request 1 before 0), but releases the chosen ones in
    # running_batch.reqs order: release_req(i, len(reqs) - release_counter). Request 0 goes
    # first with one request left behind it, so its unlocked prefix is evicted until
    # 1 x SGLANG_RETRACT_DECODE_STEPS = 20 tokens are free (5 + 14 < 20); request 1 goes
    # last with none left, its prefix kept. Released in the chosen order, it was the other
    # way round (request 1's prefix evicted, request 0's kept).
    s, a, b = _two_preemptible()
    p = s.schedule()
    assert p.rids == (2,) and s.num_preemptions == 2
    assert s.cache.match_prefix(list(range(5000, 5040)))[0] == 0
    assert s.cache.match_prefix(list(range(6000, 6040)))[0] == 40


def test_preempted_requests_reenter_the_queue_in_batch_order():
    # sglang 0.5.23 scheduler.py _get_new_batch_prefill_raw re-queues adder.preempt_list after
    # the pass (_add_request_to_queue: a new wait_queue_entry_time each). preempt_to_schedule
    # extends that list with a set of the chosen requests, whose order is their identity
    # hashes' (memory addresses): SGLang defines none. The model takes its release order, the
    # running batch's, so that equal priorities keep their order among themselves (fcfs with
    # priority sorts by priority, then entry time); it re-queued them latest-queued first.
    s, a, b = _two_preemptible()
    s.schedule()
    assert [r.rid for r in s.waiting] == [0, 1]


def test_a_request_without_priority_takes_sglangs_default_in_preemption_and_order():
    # sglang 0.5.23 scheduler.py _set_or_validate_priority: a request without a priority gets
    # -sys.maxsize - 1 (higher values first) or sys.maxsize (lower first); preempt_to_schedule
    # and _sort_by_priority_and_fcfs read that value. With it taken as -(1 << 62) a priority-0
    # request did not preempt an unprioritised one at a threshold of 2**62 + 10 (the
    # difference is 2**63 in SGLang), and one of priority 2**62 + 1 sorted after an
    # unprioritised one with lower values first.
    import sys

    from specsched.sim.schedule_policy import unset_priority

    assert unset_priority(low_first=False) == -sys.maxsize - 1 and unset_priority(low_first=True) == sys.maxsize
    s = sched(max_running_requests=1, enable_priority_scheduling=True,
              priority_scheduling_preemption_threshold=2**62 + 10, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    s.add_request(Req(0, 10, 50))
    commit_all(s, s.schedule())
    s.add_request(Req(1, 10, 50, priority=0))
    p = s.schedule()
    assert p.rids == (1,) and s.num_preemptions == 1
    low = sched(max_running_requests=1, enable_priority_scheduling=True, schedule_low_priority_values_first=True,
                disable_priority_preemption=True, chunked_prefill_size=-1, max_prefill_tokens=10**6)
    low.add_request(Req(0, 10, 1))
    commit_all(low, low.schedule())
    low.add_request(Req(1, 10, 5))
    low.add_request(Req(2, 10, 5, priority=2**62 + 1))
    commit_all(low, low.schedule())    # request 0 finishes
    assert low.schedule().rids == (2,)


def test_workload_priorities_reach_the_scheduler_and_high_priority_goes_first():
    from specsched.sim.config import Scenario
    from specsched.sim.engine import run_scenario

    sc = Scenario.model_validate(dict(
        name="prio", profile="mi355x-dsv41-flash-tp4",
        server=dict(max_running_requests=8, enable_priority_scheduling=True, chunked_prefill_size=4096,
                    max_prefill_tokens=4096, speculative_algorithm="dspark", speculative_num_draft_tokens=4),
        acceptance=dict(mean_accept_length=2.0),
        workload=dict(kind="burst", num_requests=64, priorities=[0, 100],
                      input_len=dict(kind="fixed", value=1000), output_len=dict(kind="fixed", value=20))))
    res = run_scenario(sc)
    from specsched.sim.workload import make_requests

    prio = {s.index: s.priority for s in make_requests(sc.workload, sc.seed)}
    req = res.requests.assign(priority=res.requests["rid"].map(prio))
    assert set(prio.values()) == {0, 100}
    hi, lo = req[req.priority == 100], req[req.priority == 0]
    assert hi["ttft_s"].median() < lo["ttft_s"].median()


# --- SchedulePolicy._touch_waiting_prefixes (SGLANG_ENABLE_WAITING_PREFIX_REFRESH) ---------

def _refresh_queue(preset: str = "0.5.23", **kw) -> tuple[Scheduler, list[int], list[int]]:
    """Two cached prefixes, ``old`` inserted before ``new``; the queue holds a long request
    that ends the pass (it is cut to the chunk) and behind it one that would hit ``old``."""
    s = sched(preset, **kw)
    old, new = list(range(1000, 1064)), list(range(2000, 2064))
    s.cache.insert(old)
    s.cache.insert(new)
    head, behind = Req(0, 2000, 5), Req(1, 100, 5)
    head.tokens = list(range(5000, 7000))
    behind.tokens = old + list(range(36))
    s.add_request(head)
    s.add_request(behind)
    return s, old, new


def _survivor(s: Scheduler, old: list[int], new: list[int]) -> str:
    s.cache.evict(64)   # one prefix's worth: LRU takes the least recently used one
    return "old" if s.cache.match_prefix(old)[0] == 64 else "new" if s.cache.match_prefix(new)[0] == 64 else "none"


def test_waiting_prefixes_are_refreshed_so_lru_keeps_them_for_the_queue():
    # 0.5.23 calc_priority -> _touch_waiting_prefixes: with a cache-agnostic policy (fcfs)
    # and LRU eviction, the first pass (then every 32nd) bumps the cached prefixes of the
    # first 128 waiting requests, the head last. The pass stops at the head (cut to the
    # chunk), so the request behind it is never matched by the admission loop; only the
    # refresh keeps its prefix from being the least recently used
    s, old, new = _refresh_queue()
    p = s.schedule()
    assert p.rids == (0,) and s.chunked_req is not None
    assert _survivor(s, old, new) == "old"
    for preset, rules in (("mi355x-dsv41", None), ("0.5.23", {"waiting_prefix_refresh": False})):
        s, old, new = _refresh_queue(preset, semantics_rules=rules) if rules else _refresh_queue(preset)
        assert s.schedule().rids == (0,)
        assert _survivor(s, old, new) == "new"   # without the refresh the older prefix goes


def test_waiting_prefix_refresh_runs_on_the_first_pass_then_every_32nd():
    # _touch_waiting_prefixes: refresh = calls % WAITING_PREFIX_REFRESH_INTERVAL == 0, then
    # calls += 1; lpm at or below 128 waiting is cache-aware and neither refreshes nor counts
    s, old, _ = _refresh_queue()
    node = s.cache.match_prefix(old)[1]
    touched = []
    for _ in range(33):
        before = node.last_access
        s._refresh_waiting(list(s.waiting))
        touched.append(node.last_access != before)
    assert touched == [True] + [False] * 31 + [True]
    lpm, old, _ = _refresh_queue(schedule_policy="lpm")
    node = lpm.cache.match_prefix(old)[1]
    before = node.last_access
    lpm._refresh_waiting(list(lpm.waiting))
    assert node.last_access == before and lpm._refresh_calls == 0


# --- mem_cache/common.py checkpoint_kv_cache / release_kv_cache after a retraction ---------

def test_a_retracted_request_enters_the_cache_again_after_its_re_prefill_and_at_finish():
    # 0.5.23 inserts a request into the radix tree after every prefill chunk and at finish
    # (checkpoint_kv_cache, release_kv_cache(checkpoint=True)); only skip_radix_cache_insert
    # (fake bootstrap, embedding overrides, a failed load) keeps it out, a retraction does not
    s = sched()
    prompt, out = list(range(64)), list(range(500, 508))
    a = Req(0, 64, 8)
    a.tokens = prompt + out
    s.add_request(a)
    commit_all(s, s.schedule())                    # prefill: the prompt enters the tree
    commit_all(s, s.schedule())                    # a decode step: 2 tokens out
    s.running.remove(a)                            # retract_decode -> release_req
    s._retract_req(a)
    s._requeue([a])
    s._make_room(s.kv.capacity)                    # memory pressure evicts the whole tree
    assert s.cache.match_prefix(prompt)[0] == 0
    p = s.schedule()                               # re-prefill of prompt + 2 outputs
    assert p.rids == (0,) and p.extend_lens == (66,)
    commit_all(s, p)
    assert s.cache.match_prefix(prompt)[0] == 64   # checkpointed again
    while not a.finished:
        commit_all(s, s.schedule())
    # at finish the tree keeps prompt + output but the last token (its KV never computed)
    assert s.cache.match_prefix(prompt + out + [9, 9])[0] == 71
    assert s.kv.used == s.kv.tree == s.cache.total_size   # INV-8: every slot has one holder


def test_lpm_above_128_waiting_matches_no_waiting_request_beyond_the_refresh():
    # _determine_active_policy: above 128 waiting lpm is fcfs, so calc_priority skips
    # _compute_prefix_matches; only the periodic refresh (first pass, then every 32nd)
    # touches the waiting prefixes. On the second pass the prefix of a request the loop
    # never reaches is not touched, so LRU evicts it before a more recently used one
    s, old, new = _refresh_queue(schedule_policy="lpm", max_running_requests=256)
    for i in range(2, 131):
        r = Req(i, 10, 5)
        r.tokens = [9000 + i] * 10
        s.add_request(r)
    assert len(s.waiting) == 131
    commit_all(s, s.schedule())          # the head is cut to the chunk (refresh pass)
    s.cache.match_prefix(new)            # ``new`` is now the most recently used
    p = s.schedule()                     # the head's next chunk ends the pass: no refresh
    assert p.rids == (0,)
    assert _survivor(s, old, new) == "new"
