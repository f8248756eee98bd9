"""The scheduler core: time-free, pure Python, shared by the simulator and the runtime.

Modelled on SGLang's scheduler (managers/scheduler.py ``get_next_batch_to_run``,
``_get_new_batch_prefill_raw``, ``update_running_batch``; managers/schedule_policy.py
``PrefillAdder``). Two calls, as in vLLM: :meth:`Scheduler.schedule` returns the next
:class:`~sim.plan.BatchPlan` (or None), :meth:`Scheduler.process_result` applies a
forward's :class:`~sim.plan.StepOutput`. It never reads a clock and never touches torch.

The overlap loop (:mod:`sim.loop`) calls ``schedule()`` for step N+1 *before* it calls
``process_result()`` for step N, so the scheduler sees results one step late, as SGLang's
overlap scheduler does: a request that finished at step k still rides step k+1 and is
filtered when step k+2 is built.

The :class:`Scheduler` owns all scheduling state (set in its ``__init__``); this module holds
its inputs, the admission (prefill) pass, preemption, the prefix-cache bookkeeping and
``process_result``. Two mixins add methods over that same state and hold none of their own:
:mod:`sim.scheduler_decode` (the decode pass: decode-memory check, reservation, retraction)
and :mod:`sim.scheduler_stretch` (the collapsed decode path, the simulator's fast path:
:meth:`Scheduler.decode_stretch` / :meth:`Scheduler.apply_stretch`). Both paths build decode
plans with :func:`sim.plan.decode_plan` and change KV only through the ledger
(:mod:`sim.kv_ledger`). :class:`Delivery` / :class:`Deliveries` (:mod:`sim.deliveries`),
:class:`UnschedulableRequest` and ``RETRACT_DECODE_STEPS`` are importable from here.

Invariants kept here (named in docs/architecture.md, tested in tests/test_invariants.py):
INV-1 running <= max_running_requests (admission caps the running slots); INV-2 KV within
capacity (a decode pass retracts until its reservation fits; the ledger refuses more);
INV-3 each request finishes once, with exactly its output length, and INV-4 tokens
conserved (process_result clips commits to max_new_tokens and skips finished and
retracted requests); INV-10 a forward holds <= max_running_requests requests;
INV-7 the collapsed stretch equals the passes it replaces.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

from specsched.sim.admission import SHIPPED as SHIPPED_DELAYS
from specsched.sim.admission import AdmissionPolicy, AdmissionState, NoDelay
from specsched.sim.deliveries import Deliveries, Delivery
from specsched.sim.kv_ledger import KVLedger, last_top_up_target
from specsched.sim.new_token_ratio import NewTokenRatio
from specsched.sim.output_streamer import streamed
from specsched.sim.plan import EXTEND, MIXED, BatchPlan, StepOutput
from specsched.sim.prefill_adder import (
    CLIP_MAX_NEW_TOKENS,
    CONTINUE,
    NO_TOKEN,
    OTHER,
    KVRefusals,
    PrefillAdder,
    admitted_output_reservation,
    ceil_page,
    reserved_decode_tokens,
    running_reservation,
    swa_chunk_cap,
    swa_never_admitted,
    swa_peak_tokens,
)
from specsched.sim.prefill_interval import PrefillDecodeInterval
from specsched.sim.radix_cache import RadixCache
from specsched.sim.request import FINISHED, PREFILLING, WAITING, Req, ReqStatus
from specsched.sim.schedule_policy import (
    CACHE_AWARE,
    FCFS_ABOVE_128,
    WAITING_PREFIX_REFRESH_INTERVAL,
    WAITING_QUEUE_PREFIX_MATCH_MAX,
    Fcfs,
    QueueContext,
    checked_order,
    make_queue_order,
    shortest_prefill_chunk_limit,
    unset_priority,
)
from specsched.sim.schedule_policy import SHIPPED as SHIPPED_ORDERS
from specsched.sim.scheduler_decode import RETRACT_DECODE_STEPS, DecodeMemory, UnschedulableRequest
from specsched.sim.scheduler_disagg import Disagg, decode_extra_slots
from specsched.sim.scheduler_stretch import Stretch
from specsched.sim.semantics import SemanticsRules
from specsched.sim.server_args import ServerArgs

# the public names of the scheduler, importable from here wherever they are defined
__all__ = ["RETRACT_DECODE_STEPS", "Deliveries", "Delivery", "Scheduler", "UnschedulableRequest"]


class Scheduler(DecodeMemory, Stretch, Disagg):
    """One serving instance's scheduling decisions.

    Args:
        server: the server arguments (budgets, spec window, admission-delay choice).
        admission: the admission-delay policy (fresh state per run).
        seed: seeds the ``random`` schedule policy (and a user order's ``rng``).
        scenario_path: the scenario file, where a user order named by a module path
            (``mypkg.rules:Order``) is looked for when it is not on sys.path, as at load
            (a worker process of ``compare --workers`` or a sweep has only the scenario).

    Read by executors: ``waiting``, ``running``, ``reqs``, ``kv`` (the ledger: ``used``,
    ``peak``, ``capacity``), ``num_running``, ``has_work``, ``decode_batch_reqs``; counters
    for the records: ``num_retractions``, ``num_delayed_passes``, ``kv_refusals`` (the
    admission passes the KV pool stopped, :class:`sim.prefill_adder.KVRefusals`). Everything
    else is private.
    """

    def __init__(self, server: ServerArgs, admission: AdmissionPolicy, seed: int = 0,
                 scenario_path: str | None = None) -> None:
        self.server = server
        self.admission = admission
        self.rules: SemanticsRules = server.rules
        self.policy = make_queue_order(server, seed, scenario_path)
        # the shipped fcfs without priorities admits in queue order: the admission pass
        # walks the queue itself (no copies) and pops the admitted head
        self._queue_order = type(self.policy) is Fcfs and not self.policy.priority
        # a user's order is checked pass by pass (checked_order); the shipped ones are not
        self._user_order = type(self.policy) not in SHIPPED_ORDERS.values()
        # lpm and dfs-weight: the queue keeps the order they return (SGLang sorts it in place)
        self._persist_order = not self._user_order and getattr(type(self.policy), "sorts_queue_in_place", False)
        # the shipped ``none`` policy never delays: its pass skips building the policy's state
        self._never_delays = type(admission) is NoDelay
        self._user_delay = type(admission) not in SHIPPED_DELAYS.values()
        # per-run facts of the (frozen) server arguments, read by every admission pass
        self._preempt = server.enable_priority_scheduling and not server.disable_priority_preemption
        self._spf = server.schedule_policy == "shortest-prefill-first"
        self.cache: RadixCache | None = None if server.disable_radix_cache else RadixCache(server.page_size)
        # the pass matches every waiting request against the prefix cache first (the
        # policies that order by it, and user policies, which may read it)
        self._match_waiting = (self.cache is not None and (self._spf or server.schedule_policy in CACHE_AWARE)
                               or ":" in server.schedule_policy)
        # SGLANG_ENABLE_WAITING_PREFIX_REFRESH (0.5.23 SchedulePolicy._touch_waiting_prefixes):
        # cache-agnostic shipped orders bump the waiting prefixes' LRU time (_refresh_waiting)
        self._refresh_prefixes = (self.cache is not None and self.rules.waiting_prefix_refresh
                                  and not self._user_order and server.disaggregation_mode != "decode"
                                  and server.schedule_policy not in CACHE_AWARE - FCFS_ABOVE_128)
        self._refresh_calls = 0
        self.interval = PrefillDecodeInterval(server.prefill_decode_interval, server.prefill_decode_interval_min_bs)
        self.batch_is_full = False
        self._idle_pass = False  # this pass's decode found the server fully idle (finish_pass)
        self.num_preemptions = 0
        self._preempted: list[Req] = []   # preempted in this pass: re-queued after it
        self._entry: dict[int, int] = {}  # rid -> queue-entry order (wait_queue_entry_time)
        self._entries = 0
        self._locks: dict[int, object] = {}  # rid -> the radix node whose prefix it holds
        self._in_flight: BatchPlan | None = None  # the last plan built whose results are pending
        self.cache_hit_tokens = 0    # first-attempt prefills: tokens found in the prefix cache
        self.cache_input_tokens = 0  # ... and tokens computed (SGLang's #new-token)
        self.window = server.spec_window
        self.spec = server.speculative_algorithm.enabled
        # sglang 0.5.23 tops spec requests up to committed + spec_kv_reserve (sim/kv_ledger.py)
        self._topup = self.spec and self.rules.spec_kv_reservation == "topup"
        # hybrid sliding-window models: a second, SWA pool (sim/kv_ledger.py)
        self._swa = server.sliding_window_size is not None
        self.kv = KVLedger(server.max_total_num_tokens, server.spec_kv_reserve if self._topup else 0,
                           server.page_size, swa_capacity=server.swa_max_total_num_tokens,
                           window=server.sliding_window_size or 0, swa_interval=server.swa_eviction_interval,
                           prefix_sharing=self.cache is not None,
                           swa_by_forward=self.rules.swa_eviction_cadence == "forward_interval",
                           # SGLang's paged allocator hands out whole pages to every
                           # extend and decode/verify reservation (sim/kv_ledger.py)
                           paged=True)
        self.ratio = NewTokenRatio(server.schedule_conservativeness)
        # the lone admission pass (_admit_lone) where no flag of the run changes what a pass
        # with one waiting request does: queue order, no preemption, no shortest-prefill
        # cut, no prefix match of the waiting queue, no SWA pool, a request allowed a pass
        self._lone_admission = (self._queue_order and not self._preempt and not self._spf
                                and not self._match_waiting and not self._swa
                                and (server.prefill_max_requests is None or server.prefill_max_requests >= 1))
        from specsched.sim.pool_fit import longest_pool_prompt

        # SGLang aborts a longer prompt (managers/utils.py validate_input_length; the pool's part
        # of max_req_input_len, tp_worker.py; the context's is checked before the run)
        self._longest_prompt = longest_pool_prompt(server)
        self.waiting: deque[Req] = deque()
        # extend tokens of every forward launched (sglang 0.5.23 Scheduler.run_batch adds
        # batch.extend_num_tokens to processed_tokens_counter): hrrn's aging clock
        self.processed_tokens = 0
        # extend_num_tokens the running batch object carries (the prefill batch that found it
        # empty); each decode forward adds it again under processed_tokens_decode stale_extend
        self._running_batch_extend_tokens = 0
        self._last_prefill_extend_tokens = 0
        self.running: list[Req] = []
        self.chunked_req: Req | None = None
        self.reqs: dict[int, Req] = {}
        self._any_tokens = False     # a request with token ids (prefix sharing) was added
        self._last_prefill: list[Req] = []
        self.step = 0
        self.num_retractions = 0
        self.num_delayed_passes = 0
        self.kv_refusals = KVRefusals()
        # prefill-decode disaggregation (sim/scheduler_disagg.py): the server's mode and its queues
        self.mode = server.disaggregation_mode
        # a co-located server's decode forwards add the running batch's stale extend count
        # (a disaggregated server's batches are built another way: left at 0)
        self._stale_decode_count = (self.rules.processed_tokens_decode == "stale_extend"
                                    and self.mode not in ("prefill", "decode"))
        self.inflight: list[Req] = []            # prefill: prompt computed, KV being sent
        self._transfer_blocked = False           # prefill: admission waits for a transfer to end
        self.prealloc_queue: deque[Req] = deque()  # decode: waiting for its prompt's KV slots
        self.transfer_queue: list[Req] = []      # decode: KV reserved, arriving
        self.retracted_queue: list[Req] = []     # decode: retracted, KV backed up on the host
        self._resync: set[int] = set()           # decode: resumed, the device's count restarts at the host's
        # a resolved scenario states them (sim/defaults.py decode_extra_slots_default); a bare
        # ServerArgs reads its max_running_requests as stated
        extra = server.disaggregation_decode_extra_slots
        self._extra_slots = (decode_extra_slots(server.max_running_requests) if extra is None else extra) if self.mode == "decode" else 0
        # deliveries made while the pass was built, not by a forward's results: a decode
        # server's prebuilt first tokens, the end of a request aborted out of memory
        self._pass_out: Deliveries | None = None
        # rid -> output tokens its client got before SGLang aborted it out of memory
        # (DecodeMemory._abort_out_of_memory)
        self.oom_aborted: dict[int, int] = {}
        self.handoff = None  # decode: the executor's callback when a request's KV is reserved

    # ------------------------------------------------------------------ inputs
    def add_request(self, req: Req) -> None:
        """A request reached the scheduler: append it to the waiting queue (FCFS order).

        Raises:
            UnschedulableRequest: its prompt plus reserved output can never fit the pool (a
                decode server: its preallocation never fits, :meth:`_refuse_unpreallocatable`),
                or SGLang's SWA budget never admits it (:meth:`_refuse_never_swa_admitted`).
        """
        # what PrefillAdder charges (page-rounded prompt + clipped output + a page; sglang
        # 0.5.23 schedule_policy.py PrefillAdder.add_one_req), which every output SGLang cuts
        # passes (scheduler.py init_req_max_new_tokens keeps it so); under the older window
        # rule of speculative decoding, plus the verify windows of the two passes the overlap
        # loop keeps in flight; under the top-up rule, the last pass's top-up must fit the pool
        # (last_top_up_target). min(max_new_tokens, clip) written out (once per request:
        # builtin min/max parse their arguments through a tuple on every call in 3.11)
        page = self.server.page_size
        ahead = 2 * self.window if self.window > 1 and not self._topup else 0
        m = req.max_new_tokens - req.asked_no_output   # Req.admission_max_new inlined
        out = m if m < CLIP_MAX_NEW_TOKENS else CLIP_MAX_NEW_TOKENS
        need = ceil_page(req.input_len, page) + out + page + ahead
        if need >= self.kv.capacity or req.input_len > self._longest_prompt:
            # the key the user sets: a disaggregated role's server has its own pool
            key = ("server.max_total_num_tokens" if self.mode not in ("prefill", "decode")
                   else f"server.disaggregation.{self.mode}.server.max_total_num_tokens")
            raise UnschedulableRequest(
                f"request {req.rid}: {req.input_len} prompt + {req.max_new_tokens} output tokens "
                f"{f'(+ {ahead} slots of the verify steps in flight) ' if ahead else ''}cannot fit "
                f"max_total_num_tokens={self.kv.capacity} ({key})"
            )
        if (self._topup and self.mode != "prefill" and req.max_new_tokens >= 2 and last_top_up_target(
                req.input_len, req.max_new_tokens, self.kv.reserve_ahead, page) > self.kv.capacity):
            raise UnschedulableRequest(
                f"request {req.rid}: {req.input_len} prompt + {req.max_new_tokens} output tokens: its last verify "
                f"pass tops it up to committed + {self.kv.reserve_ahead} positions, past "
                f"max_total_num_tokens={self.kv.capacity}; SGLang aborts it out of memory (retract_decode)")
        if self._swa:
            self._refuse_never_swa_admitted(req)
        if self.mode == "decode":
            self._refuse_unpreallocatable(req)
        req.status = WAITING
        if req.tokens is not None:
            self._any_tokens = True
        self.reqs[req.rid] = req
        self._entry[req.rid] = self._entries = self._entries + 1
        if self.mode == "decode":  # the router's copy: waits for its KV slots, then the transfer
            self.prealloc_queue.append(req)
            return
        if self.mode == "prefill":  # PrefillBootstrapQueue._process_req: only the first token
            req.max_new_tokens = 1
        req.arrival_processed_tokens = self.processed_tokens  # _add_request_to_queue
        self.waiting.append(req)

    @property
    def prefix_cache_on(self) -> bool:
        """The radix prefix cache is on (``server.disable_radix_cache`` false): SGLang then
        reports a cache hit rate, 0.0 when nothing hit (:func:`run_counts`)."""
        return self.cache is not None

    @property
    def skip_finishing(self) -> bool:
        """A request whose in-flight step commits its last token sits out the next decode
        (sglang 0.5.23 managers/scheduler.py ``Scheduler._reqs_finishing_inflight``). Only the
        co-located overlap loop turns it on: ``_dispatch_event_loop_once`` clears
        ``enable_skip_finishing_decode`` and ``event_loop_overlap`` alone sets it again, so a
        decode server (``event_loop_overlap_disagg_decode``) and a server without the overlap
        scheduler let such a request ride one more decode, which commits nothing for it."""
        return (self.rules.skip_finishing_decode and self.server.enable_overlap_schedule
                and self.mode != "decode")

    @property
    def has_work(self) -> bool:
        """True while anything waits, runs or is being prefilled. Not counted: prefill mode's
        waiting requests while only a finished transfer can make room for them, decode mode's
        requests before their KV has arrived (the executor wakes the loop for those)."""
        if self._transfer_blocked:  # prefill: a finished transfer makes room
            return bool(self.running or self.chunked_req or self._last_prefill
                        or any(r.kv_transferred for r in self.inflight))
        if self.mode == "decode":
            return bool(self.waiting or self.running or self.decode_queue_can_move()
                        or any(r.kv_transferred for r in self.transfer_queue))
        return bool(self.waiting or self.running or self.chunked_req or self._last_prefill)

    @property
    def num_running(self) -> int:
        """Requests holding a running slot: the running batch, the last prefill batch (the
        prompts it completes and, in a mixed step, the decode rows riding in it, which
        sglang 0.5.23 ``get_new_batch_prefill`` moves out of ``running_batch`` by
        ``mix_with_running``; they rejoin it at the next pass) and the chunked request.
        Read right after a pass (the timeseries' ``running``), when the batch just built is
        the last prefill batch."""
        last = self._last_prefill
        n = len(self.running) + len(last)
        c = self.chunked_req
        if c is not None and not any(r is c for r in last):
            n += 1
        return n

    @property
    def decode_batch_reqs(self) -> list[Req]:
        """The requests the next decode pass would hold: the running batch, then the last
        prefill batch's requests about to join it (a new list)."""
        return self.running + self._last_prefill

    # ---------------------------------------------------------------- schedule
    def schedule(self) -> BatchPlan | None:
        """Build the next forward (SGLang ``get_next_batch_to_run``).

        The last prefill batch joins the running batch; finished requests leave it
        (``filter_finished_before_delay``); a new prefill batch runs if one can be formed
        (prefill has priority, unless ``prefill_decode_interval`` defers it), otherwise the
        running batch decodes. Returns None when there is nothing to run.
        """
        plan = self.prefill_pass()
        return self.finish_pass(plan if plan is not None else self.decode_pass())

    def _adopt_prefill_batch(self) -> None:
        """The last prefill batch's requests joined a running batch that held none: SGLang
        ``get_next_batch_to_run`` makes that prefill batch the running batch (``running_batch
        = last_batch``; checked before the running batch's own filter, so one that holds only
        finished requests is merged into instead), which then carries the prefill's
        ``extend_num_tokens`` into every decode forward
        (:attr:`sim.semantics.SemanticsRules.processed_tokens_decode`). Callers: the merge of
        :meth:`prefill_pass` and of a collapsed stretch (:meth:`apply_stretch`)."""
        self._running_batch_extend_tokens = self._last_prefill_extend_tokens

    def prefill_pass(self) -> BatchPlan | None:
        """The first half of :meth:`schedule`: merge the last prefill batch, filter finished
        requests, try a new prefill batch (SGLang ``get_new_batch_prefill``). A DP-attention
        group (sim/dp_attention.py) gathers every rank's answer before it decides whether
        the ranks without one decode (:meth:`decode_pass`) or run an idle batch; every pass
        ends with :meth:`finish_pass`. A disaggregated server's pass is its mode's
        (:mod:`sim.scheduler_disagg`)."""
        if self.mode == "prefill":
            return self._prefill_mode_pass()
        if self.mode == "decode":
            return self._decode_mode_pass()
        self._stash_chunked_swa()
        if self._last_prefill:
            was_empty = not self.running
            for r in self._last_prefill:
                # SGLang merges the last extend batch minus the chunked request, after
                # filtering finished (and retracted) requests out of it
                if r is self.chunked_req or r.status in (ReqStatus.WAITING, ReqStatus.FINISHED):
                    if r is not self.chunked_req:
                        self.batch_is_full = False  # a request left
                    continue
                r.status = ReqStatus.RUNNING
                self.running.append(r)
            if was_empty and self.running:
                self._adopt_prefill_batch()
            self._last_prefill = []
        if self.rules.filter_finished_before_delay:
            self._filter_finished()
        if self.interval.should_defer(len(self.running)):
            return None
        return self._new_prefill_batch()

    def _stash_chunked_swa(self) -> None:
        """The chunked request's last chunk enters the radix cache before the next pass is
        built, and with it the SWA of its prefix behind the window (sglang 0.5.23
        managers/scheduler.py ``get_next_batch_to_run`` -> ``stash_chunked_request`` ->
        mem_cache/common.py ``checkpoint_kv_cache`` -> unified_radix_cache.py
        ``checkpoint_into_tree``, whose lock moves to the new leaf and holds only its last
        window: "only the sliding window stays locked between chunks",
        mem_cache/prefill_budget.py ``SWAPrefillBudget._chunk_cap``). Without it a chunked
        prompt would hold the SWA of every chunk until its last one, and a retracted
        request re-extending prompt + output past the pool's free slots could never take its
        next chunk (a livelock: nothing runs, nothing frees). A chunk parked for want of SWA
        computed nothing and stashes nothing (``extend_end > prefix_len``)."""
        r = self.chunked_req
        if r is not None and self._swa and self.cache is not None:
            self.kv.swa_prompt_cached(r)

    def decode_pass(self) -> BatchPlan | None:
        """The running batch's decode/verify forward (SGLang ``update_running_batch``), or None
        (always on a prefill server: ``get_next_disagg_prefill_batch_to_run`` builds no decode)."""
        if self.mode == "prefill":
            return None
        return self._decode_batch()

    def finish_pass(self, plan: BatchPlan | None, group_runs: bool = False) -> BatchPlan | None:
        """Close a pass that built ``plan`` (None: nothing runs on this scheduler).

        A pass that found the server fully idle resets new_token_ratio (0.5.23
        ``Scheduler.on_idle``, called when no batch runs), unless ``group_runs``: a rank of
        a DP-attention group whose peers run a forward runs an idle batch in lock-step
        (``maybe_prepare_mlp_sync_batch``), so it does not reach ``on_idle``."""
        if plan is not None:
            if plan.num_extend:
                # run_batch: batch.extend_num_tokens, the extend rows and (mixed) one per decode row
                n = sum(plan.extend_lens)
                self.processed_tokens += n
                self._last_prefill_extend_tokens = n
            elif self._stale_decode_count:
                self.processed_tokens += self._running_batch_extend_tokens
            self.interval.on_batch(plan.is_prefill)
            self.step += 1
            self._in_flight = plan
        elif self._idle_pass and not group_runs:
            self.ratio.on_idle()
        self._idle_pass = False
        return plan

    def _filter_finished(self) -> None:
        """Finished requests leave the running batch (SGLang ``filter_batch``); a request
        leaving clears the batch_is_full latch."""
        running = self.running
        for r in running:
            if r.output_len >= r.max_new_tokens:   # r.finished (inlined)
                break
        else:
            return   # none finished: no new list (most passes)
        self.batch_is_full = False
        self.running = [r for r in running if r.output_len < r.max_new_tokens]

    def _kv_room(self) -> int:
        """KV tokens an allocation can get now: free plus evictable cached tokens (SGLang
        ``PrefillBudget._available_and_evictable``)."""
        return self.kv.available + (self.cache.evictable_size if self.cache is not None else 0)

    def _make_room(self, n: int) -> None:
        """Evict cached prefixes (LRU) until ``n`` tokens are free, if they are not."""
        short = n - self.kv.available
        if short > 0 and self.cache is not None:
            self.kv.evicted(self.cache.evict(short))

    def _delays(self, running_bs: int, active_running_bs: int) -> bool:
        """The admission policy's decision for a pass with this running batch (requests,
        incl. finished ones not filtered yet; ``active_running_bs`` excludes them)."""
        delay = self.admission.should_delay(AdmissionState(
            running_bs=running_bs,
            num_allocatable_reqs=self.server.max_running_requests - running_bs,
            waiting_bs=len(self.waiting),
            active_running_bs=active_running_bs,
        ))
        if self._user_delay and delay is None:
            # a user policy's forgotten return read as "admit" without a word
            from specsched.sim.errors import ConfigError

            raise ConfigError("<scenario>", "server.admission_delay", self.server.admission_delay,
                              "should_delay() must return True or False; it returned None")
        return delay

    def _match_prefix(self, r: Req) -> None:
        """Match ``r`` against the prefix cache (SGLang ``Req.init_next_round_input``): at
        most all but one token of what it must (re-)prefill can be reused."""
        if self.cache is None or r.tokens is None or r.prefill_done:
            return
        limit = min(r.input_len, r.fill_len - 1)
        r.cached_len, r.last_node = self.cache.match_prefix(r.tokens[:limit]) if limit > 0 else (0, None)

    def _refuse_never_swa_admitted(self, req: Req) -> None:
        """Refuse an arriving request that SGLang's SWA budget never admits, even with the
        SWA pool empty (:func:`swa_never_admitted`: 0.5.23 mem_cache/prefill_budget.py
        ``SWAPrefillBudget.check_prefill``, ``swa_never_fits`` and ``_chunk_cap``); SGLang
        would keep it waiting forever. A prompt longer than the SWA pool is not refused
        with chunked prefill on: it is admitted with its chunk cut to the free SWA
        (``_chunk_cap``), later chunks take what is free (``available_chunk_tokens``), and
        between chunks only the window stays held (:meth:`_stash_chunked_swa`, or without
        the radix cache ``KVLedger.evict_swa_extend``).

        Raises:
            UnschedulableRequest: naming the request, its SWA estimate and the pool.
        """
        s, page = self.server, self.server.page_size
        chunk = s.chunked_prefill_size if s.chunked_prefill_size > 0 else None
        eos_path = self.cache is None and req.ignore_eos  # add_one_req_ignore_eos: the raw extend, no cut
        extend = req.input_len if eos_path else ceil_page(req.input_len, page)
        new = min(req.admission_max_new, CLIP_MAX_NEW_TOKENS)
        if not swa_never_admitted(extend, new, chunk, self.kv.window, page, self.kv.swa_capacity,
                                  ignore_eos_path=eos_path):
            return
        need = swa_peak_tokens(extend, new, chunk, self.kv.window, page)
        why = ("with chunked prefill off; turn on chunked_prefill_size or enlarge the pool" if chunk is None else
               "and an ignore_eos request with the prefix cache off is never cut to the free SWA "
               "(add_one_req_ignore_eos); lower chunked_prefill_size or enlarge the pool" if eos_path else
               "and a first chunk cut to the pool less its decode headroom (min(output, window) + a page) "
               "has no page left; enlarge the pool")
        raise UnschedulableRequest(
            f"request {req.rid}: {req.input_len} prompt + {req.max_new_tokens} output tokens need {need} SWA slots "
            f"at admission, {'more than' if eos_path else 'not fewer than'} the SWA pool's {self.kv.swa_capacity} "
            f"(max_total_num_tokens x swa_full_tokens_ratio), {why}")

    def _refuse_outgrown_swa(self, req: Req) -> None:
        """Nothing runs and, with chunked prefill off, ``req`` (the head of the queue) would
        need more SWA slots than the whole pool holds: it can never be admitted again.

        add_request checks the prompt alone (:meth:`_refuse_never_swa_admitted`); a retracted
        request re-extends its prompt plus the output it had made (0.5.23
        mem_cache/prefill_budget.py ``SWAPrefillBudget.check_prefill`` refuses it for good),
        so the loop would idle forever. Raises UnschedulableRequest.
        """
        page = self.server.page_size
        eos_path = self.cache is None and req.ignore_eos  # add_one_req_ignore_eos: raw extend, fits at <=
        raw = req.input_len + req.output_len - req.prefill_done
        extend = raw if eos_path else ceil_page(raw, page)
        new = reserved_decode_tokens(req)
        need = swa_peak_tokens(extend, new, None, self.kv.window, page)
        if need > self.kv.swa_capacity or (need == self.kv.swa_capacity and not eos_path):
            raise UnschedulableRequest(
                f"request {req.rid}: re-extending {extend} tokens after {req.retractions} retraction(s) and "
                f"{req.preemptions} priority preemption(s) needs "
                f"{need} SWA slots, more than the SWA pool's {self.kv.swa_capacity} "
                "(max_total_num_tokens x swa_full_tokens_ratio); turn on chunked_prefill_size or enlarge the pool")

    def _refuse_idle_swa_stuck(self, req: Req) -> None:
        """Nothing runs, nothing is in flight, the SWA pool is empty and ``req`` (the head of
        the queue) still fails the SWA check: with its matched prefix's window locked
        (:meth:`KVLedger.swa_prefix_lock`) the rest of the pool is short of its SWA peak,
        and that peak is not one that ``_chunk_cap`` cuts (sglang 0.5.23
        mem_cache/prefill_budget.py ``SWAPrefillBudget.check_prefill``: a transient
        shortfall waits; ``swa_never_fits`` is checked against the whole pool, so a
        prefix hit whose extend fits the pool but not the pool less the lock waits, and so
        does one whose cut chunk leaves no page). Nothing can free SWA, so SGLang would
        wait forever; raises UnschedulableRequest naming the scenario keys instead."""
        s, kv = self.server, self.kv
        page, window = s.page_size, kv.window
        chunk = s.chunked_prefill_size if s.chunked_prefill_size > 0 else None
        # an ignore_eos request with the cache off: add_one_req_ignore_eos takes the raw
        # extend, fits at need <= free, and is never cut to the free SWA
        eos_path = self.cache is None and req.ignore_eos
        raw = req.input_len + req.output_len - req.cached_len
        extend = raw if eos_path else ceil_page(raw, page)
        new = reserved_decode_tokens(req)
        lock = kv.swa_prefix_lock(req.cached_len)
        free = kv.swa_capacity - lock
        need = swa_peak_tokens(extend, new, chunk, window, page)
        if need < free or (eos_path and need == free):
            return
        if (not eos_path and chunk is not None and need >= kv.swa_capacity
                and swa_chunk_cap(free, new, window, page) > 0):
            return
        raise UnschedulableRequest(
            f"request {req.rid}: its {extend} uncached tokens + {new} output need {need} SWA slots at admission "
            f"and its cached prefix locks {lock} more, not fewer than the SWA pool's {kv.swa_capacity} with "
            f"nothing running; raise server.swa_full_tokens_ratio or lower server.sliding_window_size "
            f"(window {window})")

    def _refuse_parked_chunk(self, req: Req) -> None:
        """The chunked request ``req`` gets no next chunk for want of SWA slots
        (0.5.23 ``SWAPrefillBudget.available_chunk_tokens`` is None: ``add_chunked_req``
        parks it), and nothing runs or is in flight that could free any: it holds the SWA
        that is missing, and its own SWA behind the window is freed only while it is in an
        extend batch. That happens without the radix cache under the overlap schedule,
        where a request's first two extend batches free nothing (managers/schedule_batch.py
        ``ScheduleBatch.maybe_evict_swa``): two chunks can fill the pool, and SGLang parks
        the same way forever. Raises UnschedulableRequest instead of an idle loop."""
        raise UnschedulableRequest(
            f"request {req.rid}: its chunked prefill holds {self.kv.swa_held(req)} SWA slots at position "
            f"{req.prefill_done} of {req.fill_len} and its next chunk needs more than the {self.kv.swa_available} "
            f"free of the SWA pool's {self.kv.swa_capacity}, with nothing running that could free them "
            "(max_total_num_tokens x swa_full_tokens_ratio); enlarge the pool, lower chunked_prefill_size "
            "or turn on the radix cache")

    def _policy_order(self, cache) -> list[Req]:
        """The waiting queue in the schedule policy's order (``SchedulePolicy.calc_priority``),
        given the running batch, the prefix ``cache`` (None: none) and the tokens processed; a
        policy of the user's own is checked to return the queue's requests
        (:func:`sim.schedule_policy.checked_order`)."""
        order = self.policy.order(list(self.waiting), QueueContext(tuple(self.running), cache, self.processed_tokens))
        if self._user_order:
            order = checked_order(order, self.waiting, self.server.schedule_policy)
        return order

    def _new_prefill_batch(self) -> BatchPlan | None:
        s = self.server
        preempt = self._preempt
        if not self.running or preempt or self._swa:
            # an empty batch has no request left to clear the latch; with priority
            # preemption every pass may try to make room; hybrid-SWA models reset it
            # every pass too (0.5.23 scheduler.py get_new_batch_prefill: is_hybrid_swa)
            self.batch_is_full = False
        running_bs = len(self.running)
        if (self.batch_is_full or not self.waiting) and self.chunked_req is None:
            return None
        if self.chunked_req is None and not self._never_delays:
            # min-free-slots check: skipped while a chunked request is in progress. The
            # unfinished running requests counted by a loop with r.finished inlined (a
            # generator resumes once per request: the burst asks it at ~90 passes over up
            # to 256 requests, ~1 % of its simulation)
            active = 0
            for r in self.running:
                if r.output_len < r.max_new_tokens:
                    active += 1
            if self._delays(running_bs, active):
                self.num_delayed_passes += 1
                return None
        allocatable = s.max_running_requests - running_bs  # INV-1: admissions fill free slots only
        if allocatable <= 0 and self.chunked_req is None and not preempt:
            self.batch_is_full = True
            return None

        # enable_mixed_chunk: the running batch rides in the extend batch; every budget
        # shrinks by one token per running request (0.5.23 passes running_bs, even with spec)
        mixed = s.enable_mixed_chunk and s.chunked_prefill_size > 0 and bool(self.running)
        waiting = self.waiting
        if self._lone_admission and len(waiting) == 1 and self.chunked_req is None and not mixed:
            plan = self._admit_lone(waiting[0])
            if plan is not None:
                return plan
        rules = self.rules
        cache = self.cache
        # cache-aware orders match every waiting request (calc_priority ->
        # _compute_prefix_matches); lpm and hrrn above 128 waiting are fcfs and match none
        # (_determine_active_policy), so no prefix is touched (only _refresh_waiting's)
        if self._match_waiting and not (s.schedule_policy in FCFS_ABOVE_128 and len(waiting) > WAITING_QUEUE_PREFIX_MATCH_MAX):
            for r in waiting:
                self._match_prefix(r)
        adder = PrefillAdder.start(
            self._kv_room(), self.running, self.ratio.value, s.max_prefill_tokens,
            s.chunked_prefill_size, s.page_size, running_bs if mixed else 0,
            prefill_max_requests=s.prefill_max_requests, chunk_fill=rules.chunk_fill,
            ignore_eos_full_reservation=rules.ignore_eos_full_reservation,
            swa=(self.kv.swa_available, self.kv.window, self.kv.swa_capacity) if self._swa else None,
            ignore_eos_path=cache is None,
        )
        # queue order: the queue itself (nothing joins or leaves it during the loop below);
        # any other order gets its own list (the policy interface hands it a list)
        in_queue_order = self._queue_order
        if in_queue_order:
            order = waiting
        else:
            order = self._policy_order(cache)
            if self._persist_order:
                # SchedulePolicy.calc_priority sorts the waiting queue in place: the next pass
                # (and lpm's fcfs fallback above 128 waiting) starts from this order
                self.waiting = deque(order)
        if self._refresh_prefixes:
            self._refresh_waiting(order)
        spf = self._spf
        prev_chunked = self.chunked_req
        still_chunked = False
        if prev_chunked is not None:
            limit = (shortest_prefill_chunk_limit(prev_chunked, order, adder.rem_chunk_tokens or 0, s.page_size)
                     if spf else None)
            still_chunked = adder.add_chunked_req(prev_chunked, limit)
        for req in order:
            if adder.budget_state() is OTHER:
                # a spent pass admits no one and matches no one: the resumed chunk or the
                # mixed decode rows spent it (0.5.23 checks before init_next_round_input,
                # whose match would refresh the request's prefix in LRU order)
                break
            if len(adder.can_run) >= allocatable:  # INV-1, INV-10 (can_run counts the chunked request)
                self.batch_is_full = True
            if self.batch_is_full:
                # the latch stays set after a preemption (0.5.23 _get_new_batch_prefill_raw:
                # preempt_to_schedule clears nothing), so every later request of the pass
                # must preempt for itself: a freed slot is not free for a request that
                # could not have preempted its holder
                freed = self._preempt_for(req, adder) if preempt else 0
                if not freed:
                    break
                allocatable += freed
            self._match_prefix(req)
            node = req.last_node if req.cached_len else None
            if node is not None:
                # the pin keeps the matched prefix out of the evictable budget
                adder.kv_changed(cache.inc_lock_ref(node))
                # and its window's SWA out of the SWA budget (KVLedger.swa_prefix_lock: the
                # reservation takes the same lock, the adder charges the extend only)
                swa_pin = self.kv.swa_prefix_lock(req.cached_len) if adder.swa_rem is not None else 0
                if swa_pin:
                    adder.swa_rem -= swa_pin
                req.prefill_done = req.cached_len
            res = adder.add_one_req(req, has_chunked_req=still_chunked,
                                    spf=spf)
            if adder.can_run and adder.can_run[-1][0] is req:
                req.cache_protected_len = req.prefill_done
                if node is not None:
                    self._locks[req.rid] = node
            elif node is not None:
                cache.dec_lock_ref(node)
                if swa_pin:
                    adder.swa_rem += swa_pin
                req.prefill_done = 0
            if res is not CONTINUE:
                if res is NO_TOKEN:
                    self.batch_is_full = bool(adder.can_run) or bool(self.running)
                    self._count_kv_refusal(adder, order, prev_chunked)
                break
        if not adder.can_run:
            if self._preempted:
                self._requeue(self._preempted)
            if self._swa and not self.running and prev_chunked is None and adder.rem_chunk_tokens is None:
                self._refuse_outgrown_swa(order[0])
            if (self._swa and not self.running and prev_chunked is None and not self.kv.swa_used
                    and self._in_flight is None and not self.inflight):
                self._refuse_idle_swa_stuck(order[0])
            if (prev_chunked is not None and still_chunked and adder.swa_rem is not None
                    and int(adder.swa_rem) - s.page_size <= 0 and not self.running
                    and self._in_flight is None and not self.inflight):
                self._refuse_parked_chunk(prev_chunked)
            return None

        batch = []   # a loop, not a comprehension (a function call per pass for ~1 request)
        for r, _ in adder.can_run:
            batch.append(r)
        admitted = batch if prev_chunked is None else [r for r in batch if r is not prev_chunked]
        if admitted:
            self._leave_queue(admitted, in_queue_order)
            self.admission.on_prefill_admitted(len(admitted))
        if self._preempted:
            self._requeue(self._preempted)
        rids, ext, pre, new, before, maxnew = [], [], [], [], [], []
        # without a prefix cache, SWA behind a chunk's start is freed as the batch is prepared
        evict_extend = self._swa and self.cache is None
        overlap_chunk = None
        if s.enable_overlap_schedule:   # max(chunked_prefill_size, 0), written out as above
            overlap_chunk = s.chunked_prefill_size
            if overlap_chunk < 0:
                overlap_chunk = 0
        if self.kv.paged and self.cache is not None:
            # a paged extend evicts first for its tokens plus a page per request (sglang 0.5.23
            # mem_cache/allocation.py alloc_paged_token_slots_extend: conservative_num_tokens =
            # extend_num_tokens + bs x page_size, then evict_from_tree_cache): a request's
            # extend can start a page more than its tokens, which evicting for the tokens alone
            # left short
            self._make_room(sum(n for _, n in adder.can_run) + len(adder.can_run) * s.page_size)
        for r, n in adder.can_run:
            rids.append(r.rid)
            ext.append(n)
            pre.append(r.prefill_done)
            before.append(r.output_len)
            maxnew.append(r.max_new_tokens)
            if r is not prev_chunked and r.requeues == 0:
                self.cache_hit_tokens += r.cached_len
            if r.requeues == 0:
                self.cache_input_tokens += n
            self._make_room(n)
            if evict_extend:
                self.kv.evict_swa_extend(r, r.prefill_done, overlap_chunk)
            self.kv.reserve(r, n)
            r.prefill_done += n
            r.status = PREFILLING
            if r.prefill_done >= r.fill_len:
                new.append(r.rid)
        self.chunked_req = adder.new_chunked or (prev_chunked if still_chunked else None)
        self._last_prefill = batch
        num_extend = len(rids)
        decoders: list[Req] = []
        if mixed:
            # mix_with_running: finishing requests sit out; the decode rows join only if
            # their KV fits, and this path neither retracts nor decays new_token_ratio
            batch = self._without_finishing(self.running)
            if len(batch) < len(self.running):
                self.batch_is_full = False
                self.running = batch
            need = self._decode_need(batch)
            if batch and self._decode_room() >= need:
                self._make_room(need)
                self._reserve_decode(batch)
                decoders = batch
        # a running row of a mixed step is a plain one-token decode, speculative or not
        # (0.5.23 schedule_batch.py mix_with_running: extend_end = prefix_len + 1; "mixed
        # steps degrade running requests to a plain 1-token decode", speculative_hook.py)
        for r in decoders:
            rids.append(r.rid)
            ext.append(1)
            pre.append(r.seq_len)
            before.append(r.output_len)
            maxnew.append(r.max_new_tokens)
        if decoders:
            self._last_prefill.extend(decoders)
            self.running = []
        # positional: (step, mode, rids, extend_lens, prefix_lens, num_extend, chunked_rid,
        # new_rids, spec_window, committed_before, max_new_tokens)
        return BatchPlan(
            self.step, MIXED if decoders else EXTEND,
            tuple(rids), tuple(ext), tuple(pre), num_extend, self.chunked_req.rid if self.chunked_req else None,
            tuple(new), 1, tuple(before), tuple(maxnew),
        )

    def _count_kv_refusal(self, adder: PrefillAdder, order: Any, prev_chunked: Req | None) -> None:
        """A pass that ``adder`` stopped for KV (NO_TOKEN): counted in :attr:`kv_refusals`
        when it left a request of ``order`` waiting with the running batch (the requests it
        admits, and ``prev_chunked`` while it holds a slot, included) below
        max_running_requests: the pool, not the cap, kept that request out."""
        admitted = 0
        for r, _ in adder.can_run:
            if r is not prev_chunked:
                admitted += 1
        running = len(self.running) + len(adder.can_run)
        if prev_chunked is not None and not any(r is prev_chunked for r, _ in adder.can_run):
            running += 1
        left = len(order) - admitted
        if left > 0 and running < self.server.max_running_requests:
            self.kv_refusals.add(running, left)

    def _admit_lone(self, req: Req) -> BatchPlan | None:
        """The admission pass of :meth:`_new_prefill_batch` when ``req`` is the only waiting
        request and it is admitted whole (most passes of an open-arrival run: one arrival,
        one prefill), without the :class:`PrefillAdder` and the loops over the queue and
        the admitted list; None, with nothing changed, when the pass could do anything else
        (the general pass then runs).

        It collapses the general pass for one request: the caller has checked what comes
        before the adder (the batch is not full, the admission policy does not delay, a
        slot is free) and that no flag of the run (``_lone_admission``), no chunked request
        and no mixed step is involved; here the request needs no prefix match (no tokens,
        nothing cached: ``_match_prefix`` returns at once and no node is pinned), is not an
        ignore_eos request without the prefix cache (``add_one_req_ignore_eos``) and, with
        no preempted request pending, must pass ``PrefillAdder.add_one_req``'s KV check and
        fit the chunk budget whole. Exact because every value is computed by the
        operations of those functions in their order, for their one-request case: the
        adder's budgets as ``PrefillAdder.start`` opens them (``running_reservation``, or
        the floor it cannot go below where that floor decides both KV outcomes; the mixed
        tokens are 0), its KV check, ``_spend`` and ``budget_state`` after it (the
        batch_is_full latch), then the plan loop's counters, evictions and reservation
        (tests/test_sim_speed_equivalence.py compares whole runs with it on and off)."""
        if req.tokens is not None or req.cached_len or self._preempted:
            return None
        cache = self.cache
        if cache is None and req.ignore_eos:
            return None
        s, rules = self.server, self.rules
        rem_input = s.max_prefill_tokens
        chunk = s.chunked_prefill_size if s.chunked_prefill_size > 0 else None
        if rem_input <= 0 or (chunk is not None and chunk <= 0):
            return None   # a spent pass (budget_state OTHER)
        page = s.page_size
        extend = req.input_len + req.output_len - req.prefill_done
        paged = -(-extend // page) * page
        left = req.max_new_tokens - req.asked_no_output - req.output_len
        new = left if 0 <= left <= CLIP_MAX_NEW_TOKENS else (0 if left < 0 else CLIP_MAX_NEW_TOKENS)
        need = extend + new + page                              # add_one_req's KV check
        charge = paged + page + admitted_output_reservation(req)   # _spend's KV charge
        # The adder's KV budget is room - running_reservation(...), a float sum of one term
        # per running request, each min(left, clip) x ratio with ratio <= 1: each term is
        # at most clip and, float addition and subtraction being monotonic, the budget is
        # at least room - running x clip (an int). Below that floor both outcomes are
        # known (admitted; no latch), and the sum is not taken.
        room = self._kv_room()
        if need < room - len(self.running) * CLIP_MAX_NEW_TOKENS > charge:
            latch = False
        else:
            rem_total = room - running_reservation(self.running, self.ratio.value,
                                                   rules.ignore_eos_full_reservation)
            if need >= rem_total:
                return None   # NO_TOKEN
            # _spend's charge, then budget_state: NO_TOKEN (checked first, so the compute
            # budgets, which end with the pass, decide nothing here) sets the latch
            latch = rem_total - charge <= 0
        raw = rules.chunk_fill == "exact_tokens"
        if chunk is not None and (extend if raw else paged) > chunk:
            return None   # cut to the chunk
        if self._refresh_prefixes:
            self._refresh_waiting(self.waiting)
        req.cache_protected_len = req.prefill_done
        if latch:
            self.batch_is_full = True
        self.waiting.popleft()
        self.admission.on_prefill_admitted(1)
        # the plan loop of _new_prefill_batch for one request
        if self.kv.paged and cache is not None:
            self._make_room(extend + page)
        rid, pre, before = req.rid, req.prefill_done, req.output_len
        if req.requeues == 0:
            self.cache_hit_tokens += req.cached_len
            self.cache_input_tokens += extend
        self._make_room(extend)
        self.kv.reserve(req, extend)
        req.prefill_done += extend
        req.status = PREFILLING
        self.chunked_req = None
        self._last_prefill = [req]
        return BatchPlan(self.step, EXTEND, (rid,), (extend,), (pre,), 1, None,
                         (rid,) if req.prefill_done >= req.fill_len else (), 1, (before,), (req.max_new_tokens,))

    def _refresh_waiting(self, order: Any) -> None:
        """Bump the LRU time of the waiting requests' cached prefixes on the first pass and
        every 32nd after it (sglang 0.5.23 managers/schedule_policy.py
        ``SchedulePolicy._touch_waiting_prefixes``, called at the end of ``calc_priority``,
        on by SGLANG_ENABLE_WAITING_PREFIX_REFRESH): only for a cache-agnostic order (lpm
        above 128 waiting is fcfs, ``_determine_active_policy``; cache-aware orders match
        every waiting request anyway) with the radix cache on and LRU eviction (the only
        eviction policy modelled), not on a decode server. The first 128 requests of the
        order are touched back to front, so the head is the most recent (mem_cache/common.py
        ``touch_waiting_prefix``: a match of prompt + output that locks nothing)."""
        if self.server.schedule_policy in FCFS_ABOVE_128 and len(self.waiting) <= WAITING_QUEUE_PREFIX_MATCH_MAX:
            return  # lpm and hrrn at or below 128 waiting are cache-aware: no refresh, no count
        calls = self._refresh_calls
        self._refresh_calls = calls + 1
        if calls % WAITING_PREFIX_REFRESH_INTERVAL or not self._any_tokens:
            return
        head = list(islice(order, WAITING_QUEUE_PREFIX_MATCH_MAX))
        match = self.cache.match_prefix
        for r in reversed(head):
            if r.tokens is not None:
                match(r.tokens[: r.input_len + r.output_len])

    def _leave_queue(self, admitted: list[Req], in_queue_order: bool) -> None:
        """Admitted requests leave the waiting queue, which keeps its order.

        In queue order they are the queue's head (the pass takes the queue front to back
        and stops at the first request it cannot admit): popped in O(admitted) instead of a
        rebuild of the whole queue (checked, so the rebuild stays the fallback)."""
        waiting = self.waiting
        if in_queue_order and len(admitted) == 1 and admitted[0] is waiting[0]:
            waiting.popleft()   # the common pass: one request admitted, the queue's head
            return
        if in_queue_order and all(a is b for a, b in zip(admitted, waiting, strict=False)):  # admitted <= queue
            for _ in admitted:
                waiting.popleft()
            return
        ids = {id(r) for r in admitted}
        self.waiting = deque(r for r in waiting if id(r) not in ids)

    def _requeue(self, reqs: list[Req]) -> None:
        """Retracted or preempted requests re-enter the waiting queue (a new entry time); on a
        decode server, the retracted queue (``DecodePreallocQueue.add(is_retracted=True)``)."""
        done = self.processed_tokens
        for r in reqs:
            self._entries += 1
            self._entry[r.rid] = self._entries
            r.arrival_processed_tokens = done  # _add_request_to_queue(req, is_retracted=True)
        (self.retracted_queue if self.mode == "decode" else self.waiting).extend(reqs)
        if reqs is self._preempted:
            self._preempted = []

    def _preempt_for(self, req: Req, adder: PrefillAdder) -> int:
        """Priority preemption (sglang 0.5.23 schedule_policy.py
        ``PrefillAdder.preempt_to_schedule``); returns how many running requests were
        preempted (0: none can make room).

        Choice: the unfinished running requests sorted lowest priority first (a request
        without one has :func:`sim.schedule_policy.unset_priority`), ties the latest queued
        first (``-wait_queue_entry_time``: the last queue entry, its arrival or its latest
        re-queue); taken in that order while ``req``'s priority exceeds theirs by more than
        ``priority_scheduling_preemption_threshold`` (the first that does not ends the
        walk), until their reservations (:func:`reserved_decode_tokens` x the new-token
        ratio, x 1 for ignore_eos) cover ``req``'s extend + min(max_new_tokens, 4096) less
        the pass's remaining budget. Nothing is preempted when they do not.

        Release: the chosen requests leave in the running batch's order, not the order they
        were chosen, each evicting cached prefixes until 20 tokens per request still in the
        batch are free (``release_req(i, len(running_batch.reqs) - release_counter)``; see
        :meth:`_retract_req`); which prefixes survive depends on it.

        Re-queue: after the pass (:meth:`_requeue` of ``_preempted``), whether or not
        ``req`` was admitted (scheduler.py ``_get_new_batch_prefill_raw`` re-queues
        ``adder.preempt_list``), in preemption order across the pass. Within one
        preemption SGLang's order is that of the Python set ``preempt_to_schedule`` builds
        of the chosen requests, whose hashes are their identities (memory addresses): it
        defines none. The model re-queues them in their release order, the running batch's,
        so that equal priorities keep their relative order when re-sorted."""
        s = self.server
        sign = 1 if s.schedule_low_priority_values_first else -1
        default = unset_priority(s.schedule_low_priority_values_first)

        def prio(r: Req) -> int:
            return r.priority if r.priority is not None else default

        cands = sorted((r for r in self.running if not r.finished),
                       key=lambda r: (prio(r) * -sign, -self._entry.get(r.rid, 0)))
        ratio = self.ratio.value
        ign = self.rules.ignore_eos_full_reservation

        def offset(r: Req) -> float:
            return reserved_decode_tokens(r) * (1.0 if ign and r.ignore_eos else ratio)

        need = req.extend_remaining + min(req.admission_max_new, CLIP_MAX_NEW_TOKENS) - adder.rem_total_tokens
        chosen: list[Req] = []
        for r in cands:
            if (prio(req) - prio(r)) * -sign <= s.priority_scheduling_preemption_threshold:
                break
            chosen.append(r)
            need -= offset(r)
            if need <= 0:
                break
        if not chosen or need > 0:
            return 0
        gone = {id(r) for r in chosen}
        released = [r for r in self.running if id(r) in gone]   # batch order
        for k, r in enumerate(released, 1):
            adder.rem_total_tokens += offset(r)
            adder.kv_changed(r.kv_allocated)
            self._retract_req(r, len(self.running) - k, preemption=True)
        self.running = [r for r in self.running if id(r) not in gone]
        self.num_preemptions += len(released)
        self._preempted.extend(released)
        return len(released)

    def _checkpoint(self, r: Req, up_to: int) -> None:
        """Insert ``r.tokens[:up_to]`` (KV computed) into the prefix cache and hold it while
        the request runs (0.5.23 mem_cache/radix_cache.py ``RadixCache.checkpoint``).

        The request's own slots past ``cache_protected_len`` pass to the tree; those the
        tree already held (another request cached them meanwhile) are freed as duplicates;
        a partial last page stays with the request. A retracted request is inserted again
        as it re-prefills (0.5.23 ``checkpoint_kv_cache`` skips only a request marked
        ``skip_radix_cache_insert``: a fake bootstrap, embedding overrides or a failed KV
        load, none modelled; ``release_req`` frees a retracted request's KV without
        inserting it, and the prompt it had offered stays in the tree, evictable)."""
        cache = self.cache
        if up_to <= r.cache_protected_len:
            return
        toks = r.tokens[:up_to]
        old = self._locks.get(r.rid)
        # the held prefix ends at cache_protected_len: the walk starts there
        present, node = cache.insert_from(toks, old, r.cache_protected_len, r.rid)
        stored = len(toks) // cache.page_size * cache.page_size
        own_from = r.cache_protected_len
        dup = min(max(0, present - own_from), max(0, stored - own_from))
        if dup:
            self.kv.release(r, min(dup, r.kv_allocated))
        moved = min(stored - max(present, own_from), r.kv_allocated)
        if moved > 0:
            self.kv.to_tree(r, moved)
        cache.move_lock(old, node)
        self._locks[r.rid] = r.last_node = node
        r.cache_protected_len = max(own_from, stored)

    def _cache_finished(self, r: Req) -> None:
        """A finished request offers its whole sequence, prompt and output, to the prefix
        cache before its slots are freed (0.5.23 mem_cache/common.py ``release_kv_cache(req,
        tree_cache, checkpoint=True)`` from ``process_batch_result_decode``: the tree keeps
        ``fill_ids[:owned_kv_len]``). The last output token has no KV yet, so it is left
        out; output ids exist only when the workload gives them (a multi-turn conversation
        resends them), else the prompt is offered. A request retracted on the way is offered
        too (``release_kv_cache`` checks only ``skip_radix_cache_insert``)."""
        if r.tokens is None:
            return
        self._checkpoint(r, min(len(r.tokens), r.input_len + r.output_len - 1))

    def _release_finished(self, reqs: list[Req]) -> None:
        """Requests done with their KV (finished, or a prefill server's sent) offer it to the
        prefix cache, free their slots and let go of their cached prefix (0.5.23
        mem_cache/common.py ``release_kv_cache``)."""
        if self.cache is not None:
            for r in reqs:
                self._cache_finished(r)
        self.kv.free(reqs)
        for r in reqs:
            self._release_prefix(r)

    def _release_prefix(self, r: Req) -> None:
        """A finished or retracted request lets go of its cached prefix (it becomes evictable)."""
        node = self._locks.pop(r.rid, None)
        if node is not None:
            self.cache.dec_lock_ref(node)
        r.cached_len = 0
        r.cache_protected_len = 0

    # ------------------------------------------------------------------ results
    def take_pass_deliveries(self) -> Deliveries | None:
        """What the last pass delivered while it was built, once (None: nothing): a decode
        server's first tokens (its prebuilt batch, :meth:`_prebuild`) and the end of a
        request aborted out of memory (:meth:`_abort_out_of_memory`, no token). The loop hands
        them to the clients before the pass's forward."""
        d, self._pass_out = self._pass_out, None
        return d

    def _pass_delivery(self, rids: list[int], n_tokens: list[int], finished: list[bool]) -> None:
        """Add deliveries of the pass being built (:meth:`take_pass_deliveries`)."""
        d = self._pass_out
        if d is None:
            self._pass_out = Deliveries(rids, n_tokens, finished)
        else:
            self._pass_out = Deliveries(d.rid_list + rids, d.n_list + n_tokens, d.fin_list + finished)

    def process_result(self, plan: BatchPlan, output: StepOutput) -> Deliveries:
        """Apply a forward's committed tokens (SGLang ``process_batch_result``).

        Requests retracted since the plan was built, or already finished, are skipped (their
        tokens are discarded). Verify reservations not used are returned to the pool; a
        request that completes frees its KV. Returns the deliveries to clients (a
        :class:`Deliveries`: iterable of :class:`Delivery`, with array fields).
        """
        d_rid: list[int] = []
        d_n: list[int] = []
        d_fin: list[bool] = []
        window = plan.spec_window
        spec_step = window > 1
        # a decode row's reservation: a mixed step's rows hold a verify window's and commit one token
        reserved = self.window if plan.mode is MIXED else window
        num_extend = plan.num_extend
        reqs = self.reqs
        skip = (WAITING, FINISHED)
        returning: list[Req] = []    # decode entries with unused reserved slots
        unused_n: list[int] = []
        finished: list[Req] = []
        counts = output.counts()
        if len(counts) != plan.batch_size:
            raise ValueError(f"step {plan.step}: {len(counts)} committed counts for {plan.batch_size} rows")
        # by index (lengths checked above): zip(..., strict=True) builds a keyword dict per call
        for i, rid in enumerate(plan.rids):
            n = counts[i]
            r = reqs[rid]
            if r.status in skip:  # INV-3: a finished (or retracted) request takes no more tokens
                continue
            if i >= num_extend:
                unused = reserved - n
                if unused > 0:
                    returning.append(r)
                    unused_n.append(unused)
                if spec_step:
                    r.spec_cycles += 1
            if n <= 0:
                continue
            left = r.max_new_tokens - r.output_len
            if n > left:  # INV-3/INV-4: never past max_new_tokens (the device clips the same way)
                n = left
            r.output_len += n
            done = n == left
            d_rid.append(rid)
            d_n.append(n)
            d_fin.append(done)
            if done:
                r.status = FINISHED
                finished.append(r)
        if self.cache is not None:
            # the chunk's KV exists once its forward ran: what it computed enters the tree
            # here (0.5.23 ``checkpoint_kv_cache`` -> ``RadixCache.checkpoint(req,
            # up_to=req.extend_end)``, called from ``process_batch_result_prefill`` and
            # ``stash_chunked_request`` after every chunk), one step after the next pass was
            # built under overlap
            for i in range(plan.num_extend):
                r = reqs[plan.rids[i]]
                if r.status in skip or r.tokens is None:
                    continue
                self._checkpoint(r, min(plan.prefix_lens[i] + plan.extend_lens[i], r.input_len))
            if self._swa:  # the prompt's SWA behind its window becomes the tree's (evictable)
                aborted = self.oom_aborted
                for rid in plan.new_rids:
                    r = reqs[rid]
                    # not a retracted request, nor one aborted out of memory: both freed theirs
                    if r.status is not ReqStatus.WAITING and rid not in aborted:
                        self.kv.swa_prompt_cached(r)
        if returning and not self._topup:  # the top-up keeps its unused slots
            self.kv.commit(returning, unused_n)
        if finished and self.mode == "prefill":
            # the KV stays until it has been sent (process_batch_result_disagg_prefill)
            self.inflight.extend(finished)
        elif finished:
            self._release_finished(finished)
        if self._in_flight is not None and plan.step == self._in_flight.step:
            self._in_flight = None
        if self.server.stream_interval > 1 and d_rid:
            # what the client gets now: the first token, then chunks of >= stream_interval
            # tokens, and the finish (0.5.23 output_streamer.py OutputStreamer.accept)
            d_rid, d_n, d_fin = streamed(reqs, d_rid, d_n, d_fin, self.server.stream_interval)
        return Deliveries(d_rid, d_n, d_fin)


def run_counts(sched: Any) -> dict[str, float]:
    """What a run's summary carries of a scheduler's counts, the same under both clocks
    (sim/engine.py, runtime/engine.py), so predicted and measured runs report the same keys:
    retractions, delayed admission passes, the KV peak; the admission passes the KV pool stopped
    below max_running_requests when there were any (``kv_refused_passes``, with the most
    requests running and left waiting at one: :class:`sim.prefill_adder.KVRefusals`); the
    priority preemptions when there were any (SGLang's ``PrefillAdder.preempt_to_schedule``; a preempted request is
    re-prefilled, as a retracted one is; the report prints them as "Priority preemptions"); the
    requests aborted out of memory when there were any (``requests_oom_aborted``,
    :meth:`DecodeMemory._abort_out_of_memory`);
    on a hybrid sliding-window pool its peak and peak usage (SGLang logs "swa token usage" =
    used / pool); and with the radix cache on, SGLang's cache hit rate (hit / (hit +
    computed) over first-attempt prefills; 0.0 without a hit or a prefill, as SGLang reports it:
    scheduler_components/metrics_reporter.py ``cache_hit_rate = ... if total_tokens > 0 else
    0.0``, logged whenever the cache is on); absent with it off (nothing to report). ``sched``: a :class:`Scheduler`, or what stands
    for one over several (a DP-attention group, a disaggregated deployment's roles)."""
    out: dict[str, float] = {"num_retractions": sched.num_retractions, "num_delayed_passes": sched.num_delayed_passes,
                             "kv_peak_tokens": sched.kv.peak}
    if sched.num_preemptions:
        out["num_preemptions"] = sched.num_preemptions
    refused = sched.kv_refusals
    if refused.passes:   # the KV pool, not max_running_requests, kept requests waiting
        out.update(kv_refused_passes=refused.passes, kv_refused_running_peak=refused.running_peak,
                   kv_refused_waiting_peak=refused.waiting_peak)
    if sched.oom_aborted:   # a lone request SGLang aborted out of memory (DecodeMemory._abort_out_of_memory)
        out["requests_oom_aborted"] = len(sched.oom_aborted)
    kv = sched.kv
    if kv.swa_capacity:
        out.update(swa_peak_tokens=kv.swa_peak, swa_token_usage_peak=kv.swa_peak / kv.swa_capacity)
    hit, new = sched.cache_hit_tokens, sched.cache_input_tokens
    if sched.prefix_cache_on:
        out["cache_hit_rate"] = hit / (hit + new) if hit + new else 0.0
    return out
