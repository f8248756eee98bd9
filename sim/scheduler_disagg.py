"""The Scheduler's prefill and decode modes (SGLang 0.5.23 ``--disaggregation-mode``).

A disaggregated SGLang server runs the same Scheduler class in a mode (managers/scheduler.py
picks ``event_loop_overlap_disagg_prefill`` / ``event_loop_overlap_disagg_decode``, with the
mixins ``SchedulerDisaggregationPrefillMixin`` of disaggregation/prefill.py and
``SchedulerDisaggregationDecodeMixin`` of disaggregation/decode.py). So does this model:
:class:`Disagg` is a mixin of :class:`sim.scheduler.Scheduler` that holds no state of its own
(every queue it reads or writes is the Scheduler's, set in its ``__init__``); the admission,
KV, retraction and decode rules stay the Scheduler's own.

Prefill mode (``server.disaggregation_mode: prefill``):

- A request enters the waiting queue once its decode server has reserved KV for it (the
  bootstrap: ``PrefillBootstrapQueue.pop_bootstrapped`` under the default
  ``disaggregation_decode_allocation_policy: early``); the executor calls ``add_request`` then.
  Its ``max_new_tokens`` becomes 1 (``PrefillBootstrapQueue._process_req``), so admission
  reserves the prompt and one token.
- Only prefill batches run (``get_next_disagg_prefill_batch_to_run`` never builds a decode
  batch): the extend that completes a prompt samples the first token, and the request leaves
  for the in-flight queue instead of the running batch (``process_batch_result_disagg_prefill``).
- It keeps its KV until the transfer is done; then the prompt is offered to the radix cache
  and the slots are freed (``process_disagg_prefill_inflight_queue``: ``release_kv_cache(req,
  tree_cache, checkpoint=True)`` on ``KVPoll.Success``). The first token goes to the router,
  not to the client.

Decode mode (``server.disaggregation_mode: decode``):

- A request arrives from the router together with its prefill and waits in the prealloc
  queue until its prompt's KV is reserved (``DecodePreallocQueue.pop_preallocated``: in
  queue order, sorted by priority first with ``enable_priority_scheduling``, a request
  without one last; the first that does not fit stops the rest): a ``req_to_token`` slot
  and ``max(prompt + num_reserved_decode_tokens, prompt + min(max_new_tokens, 4096) -
  retractable)`` tokens within the budget ``available -
  max(num_reserved_decode_tokens x active requests, the largest running request's need)``;
  ``_allocatable_token_budgets``, ``_required_admission_tokens``). Then the executor lets the
  prefill start (:attr:`Scheduler.handoff`).
- While its KV arrives it is in the transfer queue; once the last chunk has arrived
  (``DecodeTransferQueue.pop_transferred``) it joins the waiting queue.
- The waiting requests, up to the free running slots, form a prebuilt batch (with
  ``enable_priority_scheduling`` the waiting queue is first put in the schedule policy's
  order, ``SchedulePolicy.calc_priority``; without it, arrival order) that runs no
  forward (``_get_new_prebuilt_batch``, ``ForwardMode.PREBUILT``): their first token is
  streamed to the client (``process_batch_result_prebuilt``) and they merge into the running
  batch, which decodes in the same pass (``get_next_disagg_decode_batch_to_run``). A decode
  server never runs an extend. With speculative decoding the first draft input is built from
  the transferred last token (speculative/dspark_disaggregation.py
  ``build_dspark_disagg_draft_input``; eagle_disaggregation.py for EAGLE): no draft prefill.
- Retracted requests wait in the retracted queue with their KV backed up on the host; they
  resume (KV restored, no new transfer) when ``prompt + output + num_reserved_decode_tokens``
  fits, and no new request is preallocated while any waits (``process_decode_queue``,
  ``resume_retracted_reqs``). The host copy's time is not modelled.

Not modelled: the ``prefill_complete`` allocation policy, optimistic prefill before the
bootstrap, the decode-side radix cache (off by default: ``disable_radix_cache`` is forced on
decode servers, arg_groups/pd_disaggregation_hook.py), host-pool receive, metadata-buffer
limits, hybrid sliding-window prealloc.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from specsched.sim.prefill_adder import CLIP_MAX_NEW_TOKENS, ceil_page
from specsched.sim.request import Req, ReqStatus
from specsched.sim.schedule_policy import Fcfs, QueueContext
from specsched.sim.scheduler_decode import UnschedulableRequest

DECODE_EXTRA_SLOTS_MAX_BATCH = 32
"""arg_groups/pd_disaggregation_hook.py: a decode server whose per-rank max_running_requests is
at most this many reserves 2x as many extra req_to_token slots for requests in transfer."""


def decode_extra_slots(max_running_requests: int) -> int:
    """Extra ``req_to_token`` slots a decode rank keeps for requests in transfer
    (``disaggregation_decode_extra_slots`` unset: 2 x the per-rank batch when it is <= 32,
    else 0; arg_groups/pd_disaggregation_hook.py ``handle_pd_disaggregation``)."""
    return 2 * max_running_requests if max_running_requests <= DECODE_EXTRA_SLOTS_MAX_BATCH else 0


def prealloc_need(slots: int, input_len: int, max_new_tokens: int, reserved_decode: int, retractable: int = 0) -> int:
    """Tokens a decode server's preallocation of a request must find within its budget
    (sglang 0.5.23 disaggregation/decode.py ``DecodePreallocQueue._required_admission_tokens``):
    its ``slots`` plus num_reserved_decode_tokens, or its prompt plus its output clipped at
    CLIP_MAX_NEW_TOKENS less what the running batch could give back by retraction, whichever
    is larger. The scheduler's admission and the pre-run check (sim/pool_fit.py) both read it."""
    return max(slots + reserved_decode, input_len + min(max_new_tokens, CLIP_MAX_NEW_TOKENS) - retractable)


class Disagg:
    """The prefill and decode modes of :class:`sim.scheduler.Scheduler` (a mixin: no state
    of its own). Read by executors: ``inflight`` (prefill: prompts computed, KV being sent),
    ``prealloc_queue`` / ``transfer_queue`` (decode), :meth:`take_pass_deliveries`."""

    handoff: Callable[[Req], None] | None

    # ------------------------------------------------------------- prefill mode
    def _release_transferred(self) -> None:
        """Prefill mode: requests whose KV has been sent offer their prompt to the radix
        cache and free their slots (``process_disagg_prefill_inflight_queue``)."""
        done = [r for r in self.inflight if r.kv_transferred]
        if not done:
            return
        self.inflight = [r for r in self.inflight if not r.kv_transferred]
        self._release_finished(done)
        self._transfer_blocked = False

    def _prefill_mode_pass(self):
        """Prefill mode's pass: release what was sent, drop the last batch's completed
        prompts (they are in the in-flight queue, never in a running batch), try a new
        prefill batch. Returns the plan or None."""
        self._release_transferred()
        self._stash_chunked_swa()   # checkpoint_disagg_prefill: the same checkpoint
        if self._last_prefill:
            self._last_prefill = []
        plan = self._new_prefill_batch()
        # nothing admitted while sent KV is still held: only a finished transfer can change
        # that (the executor wakes the loop then)
        self._transfer_blocked = plan is None and bool(self.waiting) and bool(self.inflight) and self.chunked_req is None
        return plan

    # -------------------------------------------------------------- decode mode
    def _slots_free(self) -> int:
        """Decode mode: free ``req_to_token`` rows (max_running_requests + the extra slots,
        less the running, waiting and in-transfer requests; DecodeReqToTokenPool)."""
        held = len(self.running) + len(self.waiting) + len(self.transfer_queue)
        return self.server.max_running_requests + self._extra_slots - held

    def _prealloc_budget(self, retractable: int | None, extra_reqs: int, count_retracted: bool) -> int:
        """``DecodePreallocQueue._allocatable_token_budgets``: free tokens less the larger of
        ``num_reserved_decode_tokens`` per active request and the largest running request's
        remaining need, less what retracted requests will need back."""
        reserve = self.server.num_reserved_decode_tokens
        active = len(self.running) + len(self.transfer_queue) + len(self.waiting) + extra_reqs
        single = 0
        if retractable is not None and self.running:
            single = max(min(r.admission_max_new, CLIP_MAX_NEW_TOKENS) + r.input_len for r in self.running) - retractable
        budget = self.kv.available - max(reserve * active, single)
        if count_retracted:
            budget -= sum(self._prealloc_tokens(r) + reserve for r in self.retracted_queue)
        return budget

    def _prealloc_tokens(self, r: Req) -> int:
        """KV slots a preallocation takes: the prompt plus the committed output but the last
        token (whose KV the next decode writes), page-aligned (``_pre_alloc_fill_len``)."""
        return ceil_page(r.input_len + max(r.output_len - 1, 0), self.server.page_size)

    def _take_slots(self, r: Req, n: int) -> None:
        fill = r.input_len + max(r.output_len - 1, 0)
        # a paged pool takes the fill's pages (n) and keeps its length as the KV positions
        # (``kv_allocated_len = fill_len``), which the decode memory check counts pages from
        self.kv.reserve(r, fill if self.kv.paged else n)
        r.prefill_done = fill

    def _resume_retracted(self) -> None:
        """``DecodePreallocQueue.resume_retracted_reqs``: retracted requests, in order, get
        their KV back when it fits with num_reserved_decode_tokens to spare.

        A resumed request continues from the output it had when it was retracted: the
        token its forward in flight then computed was dropped (managers/scheduler_components/
        batch_result_processor.py ``process_batch_result_decode`` skips a retracted request
        under overlap) and the backup holds the KV of the committed tokens only. Its first
        decode plan names it in ``resync_rids`` so the device's count restarts there (a
        colocated server's re-prefill does the same through its extend)."""
        reserve = self.server.num_reserved_decode_tokens
        resumed: list[Req] = []
        for r in self.retracted_queue:
            if self._slots_free() <= 0:
                break
            need = self._prealloc_tokens(r)
            if need + reserve > self._prealloc_budget(None, 0, count_retracted=False):  # resumed ones wait: active
                break
            self._take_slots(r, need)
            resumed.append(r)
            self.waiting.append(r)
            self._resync.add(r.rid)
        if resumed:
            self.retracted_queue = self.retracted_queue[len(resumed):]

    def _prealloc_need(self, r: Req, retractable: int) -> int:
        """Tokens ``r``'s preallocation must find within the budget (:func:`prealloc_need`)."""
        return prealloc_need(self._prealloc_tokens(r), r.input_len, r.admission_max_new,
                             self.server.num_reserved_decode_tokens, retractable)

    def _refuse_unpreallocatable(self, r: Req) -> None:
        """Decode mode: refuse a request whose preallocation would not fit even the empty
        server, before it joins the prealloc queue.

        SGLang 0.5.23 (disaggregation/decode.py): ``DecodePreallocQueue.add`` aborts a
        request with HTTP 400 only when its prompt alone exceeds max_total_num_tokens
        (``_check_if_req_exceed_kv_capacity``). One below that whose admission need
        (:meth:`_prealloc_need`) exceeds the empty pool's budget (``_allocatable_token_budgets``
        is the whole pool when nothing is active) is never preallocated: ``pop_preallocated``
        stops at it, the head of a FIFO queue, in every pass, so it and every request behind
        it wait forever (and their prefills, gated on the preallocation, never start). The
        simulator ends the run instead of idling: both cases raise.

        Raises:
            UnschedulableRequest: naming the request, its need and the decode server's pool.
        """
        need = self._prealloc_need(r, 0)
        if need > self.kv.capacity:
            raise UnschedulableRequest(
                f"request {r.rid}: a decode server preallocates max({r.input_len} prompt tokens + "
                f"num_reserved_decode_tokens={self.server.num_reserved_decode_tokens}, prompt + "
                f"{min(r.admission_max_new, CLIP_MAX_NEW_TOKENS)} output tokens) = {need} KV slots, which cannot fit its "
                f"max_total_num_tokens={self.kv.capacity} (server.disaggregation.decode.server.max_total_num_tokens)")

    def _pop_preallocated(self) -> None:
        """``DecodePreallocQueue.pop_preallocated``: reserve each new request's prompt KV in
        queue order while it fits (module docstring); each one reserved lets its prefill start.

        With ``server.enable_priority_scheduling`` the queue is sorted in place first
        (disaggregation/decode.py ``DecodePreallocQueue.pop_preallocated``: a stable sort on
        the priority, the highest first or with ``schedule_low_priority_values_first`` the
        lowest; a request without one is given the last, ``Scheduler._set_or_validate_priority``),
        so a later request of a higher priority is reserved, and its prefill started, first.
        The schedule policy plays no part here, and there is no preemption on a decode server
        (it never builds a prefill batch, where ``PrefillAdder.preempt_to_schedule`` runs)."""
        if not self.prealloc_queue:
            return
        self._sort_prealloc_queue()
        retractable = sum(r.input_len + r.output_len for r in self.running)
        while self.prealloc_queue:
            r = self.prealloc_queue[0]
            if self._slots_free() <= 0:
                break
            alloc = self._prealloc_tokens(r)
            need = self._prealloc_need(r, retractable)
            # the ones reserved in this pass are in the transfer queue already: counted active
            if need > self._prealloc_budget(retractable, 0, count_retracted=True):
                break
            self.prealloc_queue.popleft()
            self._take_slots(r, alloc)
            self.transfer_queue.append(r)
            if self.handoff is not None:
                self.handoff(r)

    def _sort_prealloc_queue(self) -> None:
        """With ``server.enable_priority_scheduling``, put the prealloc queue in priority order
        in place (a stable sort, see :meth:`_pop_preallocated`); otherwise leave it FIFO."""
        if self.server.enable_priority_scheduling and len(self.prealloc_queue) > 1:
            by_priority = Fcfs(True, self.server.schedule_low_priority_values_first)
            self.prealloc_queue = deque(by_priority.order(list(self.prealloc_queue), QueueContext()))

    def decode_queue_can_move(self) -> bool:
        """Decode mode: the next pass would resume a retracted request or preallocate the
        head of the prealloc queue (the loop must not sleep then: SGLang polls every
        iteration)."""
        reserve = self.server.num_reserved_decode_tokens
        if self._slots_free() <= 0:
            return False
        if self.retracted_queue:
            r = self.retracted_queue[0]
            return self._prealloc_tokens(r) + reserve <= self._prealloc_budget(None, 0, count_retracted=False)
        if not self.prealloc_queue:
            return False
        self._sort_prealloc_queue()   # the head the next pass tries
        r = self.prealloc_queue[0]
        retractable = sum(q.input_len + q.output_len for q in self.running)
        return self._prealloc_need(r, retractable) <= self._prealloc_budget(retractable, 0, count_retracted=True)

    def _pop_transferred(self) -> None:
        """``DecodeTransferQueue.pop_transferred``: requests whose KV has arrived join the
        waiting queue, in transfer-queue order."""
        if not any(r.kv_transferred for r in self.transfer_queue):
            return
        self.waiting.extend(r for r in self.transfer_queue if r.kv_transferred)
        self.transfer_queue = [r for r in self.transfer_queue if not r.kv_transferred]

    def _prebuild(self) -> None:
        """``_get_new_prebuilt_batch`` + ``process_batch_result_prebuilt``: waiting requests,
        up to the free running slots, stream their first token and join the running batch.

        With ``server.enable_priority_scheduling`` the waiting queue is first put in the
        schedule policy's order and kept in it (disaggregation/decode.py
        ``SchedulerDisaggregationDecodeMixin._get_new_prebuilt_batch`` calls
        ``SchedulePolicy.calc_priority``, which sorts in place; a decode server has no radix
        cache, so lpm and dfs-weight fall back to fcfs: priority, then entry order); without
        it the queue is taken in arrival order whatever the policy."""
        if not self.waiting:
            return
        if self.server.enable_priority_scheduling and len(self.waiting) > 1:
            self.waiting = deque(self._policy_order(None))   # no radix cache on a decode server
        room = self.server.max_running_requests - len(self.running)
        if room <= 0:
            return
        rid: list[int] = []
        fin: list[bool] = []
        for _ in range(min(room, len(self.waiting))):
            r = self.waiting.popleft()
            r.status = ReqStatus.RUNNING
            if r.output_len == 0:  # a new request: its first token came with the KV
                r.output_len = r.sent_len = 1   # streamed at once (output_streamer: the first token)
                rid.append(r.rid)
                fin.append(r.finished)
            if r.finished:
                r.status = ReqStatus.FINISHED
                self.kv.free([r])
            else:
                self.running.append(r)
                self.batch_is_full = False
        if rid:
            self._pass_delivery(rid, [1] * len(rid), fin)

    def _decode_mode_pass(self) -> None:
        """Decode mode's first half of a pass (``process_decode_queue`` then the prebuilt
        batch of ``get_next_disagg_decode_batch_to_run``); never an extend, so always None:
        the decode pass (:meth:`decode_pass`) follows."""
        self._filter_finished()
        if self.retracted_queue:
            self._resume_retracted()
        if not self.retracted_queue:  # process_decode_queue returns early while any wait
            self._pop_preallocated()
            self._pop_transferred()
        self._prebuild()
        return None
