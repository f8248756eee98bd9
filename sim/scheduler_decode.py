"""The Scheduler's decode pass: decode-memory check, KV reservation and retraction.

SGLang ``update_running_batch`` (managers/scheduler.py) with ``ScheduleBatch.check_decode_mem``,
``retract_decode`` and ``prepare_for_decode`` (managers/schedule_batch.py). The methods live
on :class:`DecodeMemory`, a mixin of :class:`sim.scheduler.Scheduler`: it holds no state of
its own; every attribute it reads or writes (``running``, ``kv``, ``ratio``,
``batch_is_full``, ``num_retractions``, ...) is the Scheduler's, set in its ``__init__``.
KV changes only through the ledger (:mod:`sim.kv_ledger`).

Invariant kept here: INV-2 KV within capacity (a decode pass retracts until its
reservation fits; the ledger refuses more).
"""

from __future__ import annotations

from specsched.sim.plan import BatchPlan, decode_plan
from specsched.sim.request import Req, ReqStatus
from specsched.sim.schedule_policy import unset_priority

RETRACT_DECODE_STEPS = 20
"""Older retract_decode kept retracting until this many decode steps per request fit."""


class UnschedulableRequest(RuntimeError):
    """A request can never run: its prompt plus reserved output exceeds the empty KV pool."""


class DecodeMemory:
    """The decode pass of :class:`sim.scheduler.Scheduler` (a mixin: no state of its own)."""

    def _decode_room(self) -> int:
        """KV tokens a decode pass can get: :meth:`_kv_room`, and with an SWA pool no more
        than its free slots (sglang 0.5.23 ``SWATokenToKVPoolAllocator.available_size``:
        min(full, swa), as ``check_decode_capacity`` asks)."""
        room = self._kv_room()
        return min(room, self.kv.swa_available) if self._swa else room

    def _decode_fits(self, batch: list[Req]) -> bool:
        """The next decode/verify pass of ``batch`` gets its KV (sglang 0.5.23
        ``ScheduleBatch.check_decode_mem``): its slots in the full pool and, with an SWA
        pool, its new SWA pages there (checked before that pass's SWA eviction)."""
        if self._kv_room() < self._decode_need(batch):
            return False
        return not self._swa or self.kv.swa_available >= self.kv.swa_decode_need(batch, self.window)

    def _without_finishing(self, batch: list[Req]) -> list[Req]:
        """SGLang ``_reqs_finishing_inflight`` (:attr:`skip_finishing`: the co-located overlap
        loop only): requests whose in-flight step commits their last token sit out the next
        decode."""
        inflight = self._in_flight
        if not self.skip_finishing or inflight is None:
            return [r for r in batch if not r.finished]
        ids = set(inflight.rids)
        return [r for r in batch if not r.finished and not (r.rid in ids and r.output_len + 1 >= r.max_new_tokens)]

    def _decode_batch(self) -> BatchPlan | None:
        """SGLang ``update_running_batch``: filter finished (and finishing) requests, check
        decode memory (retract or decay new_token_ratio), prepare one decode/verify step."""
        self._filter_finished()
        batch = self._without_finishing(self.running)
        finishing = len(batch) < len(self.running)
        if finishing:
            self.running = batch
            self.batch_is_full = False
        if not batch:
            # nothing runs, is in flight, is chunked or waits: the pass is idle and
            # finish_pass resets new_token_ratio (0.5.23 Scheduler.on_idle after
            # ``is_fully_idle``, which counts the waiting queue too: a pass that could
            # admit no waiting request keeps the ratio)
            self._idle_pass = not finishing and not self.has_work
            return None
        if not self._decode_fits(batch):
            if finishing:
                return None  # the finishing requests free their KV after this step
            self._retract()
            if not self.running:
                return None   # its last request was aborted out of memory: nothing decodes
        else:
            self.ratio.on_decode_step()
        decoders = self.running
        self._make_room(self._decode_need(decoders))
        self._reserve_decode(decoders)
        resync: tuple[int, ...] = ()
        if self._resync:  # resumed on a decode server: the device restarts at the host's count
            resync = tuple(r.rid for r in decoders if r.rid in self._resync)
            self._resync.difference_update(resync)
        return decode_plan(self.step, self.spec, self.window, [r.rid for r in decoders],
                           [r.seq_len for r in decoders], [r.output_len for r in decoders],
                           [r.max_new_tokens for r in decoders], resync)

    def _decode_need(self, batch: list[Req]) -> int:
        """KV slots the next decode/verify pass of ``batch`` takes: a window each, or the
        top-up (sglang 0.5.23 ``ScheduleBatch.new_tokens_required_next_decode``). Plain
        decoding with page_size > 1 counts pages: page_size for each request whose KV
        length is at a page boundary, none for the others (``new_tokens_required_next_decode``
        with ``kv_committed_len % page_size == 0``; :meth:`sim.kv_ledger.KVLedger.window_need`).
        ``check_decode_mem`` and ``retract_decode``'s stopping rule compare it with the free
        slots, so retraction stops once the kept requests' new pages fit."""
        return self.kv.top_up_need(batch) if self._topup else self.kv.window_need(batch, self.window)

    def _reserve_decode(self, batch: list[Req]) -> None:
        """Reserve the next decode/verify pass's KV for ``batch`` (:meth:`_decode_need`),
        after freeing SWA slots that slid out of the window (prepare_for_decode)."""
        if self._swa:
            self.kv.evict_swa(batch, self.step)
        if self._topup:
            self.kv.top_up(batch)
        else:
            self.kv.reserve_window(batch, self.window)

    def _retraction_order(self) -> list[Req]:
        """The running batch, most preferred to keep first (retraction pops from the end).

        ``length`` (sglang 0.5.23 ``ScheduleBatch._get_decode_retraction_order``): sorted by
        (output length, -prompt length) descending, so the request with the least output
        goes first, ties the longest prompt (a stable sort: equal keys keep batch order, so
        the later one goes first). With ``server.retraction_policy: priority`` the key is
        preceded by the priority (the lowest goes first, a request without one first of
        all; ``schedule_low_priority_values_first`` flips it). ``spec_batch_tail`` (older
        builds, which have no retraction policy): speculative decoding pops from the back
        of the batch."""
        if self.spec and self.rules.retraction_order == "spec_batch_tail":
            return list(self.running)
        if self.server.retraction_policy == "priority":
            low_first = self.server.schedule_low_priority_values_first
            # a request without a priority: SGLang's default (the lowest), negated as the others
            none = -unset_priority(low_first) if low_first else unset_priority(low_first)

            def key(r: Req) -> tuple[int, int, int]:
                p = none if r.priority is None else (-r.priority if low_first else r.priority)
                return p, r.output_len, -r.input_len

            return sorted(self.running, key=key, reverse=True)
        return sorted(self.running, key=lambda r: (r.output_len, -r.input_len), reverse=True)

    def _retract_req(self, r: Req, remaining: int = 0, preemption: bool = False) -> None:
        """``r`` leaves the running batch for the waiting queue: its KV freed, its cached
        prefix let go, to re-prefill prompt + committed output later (0.5.23
        managers/schedule_batch.py ``release_req``, ``Req.reset_for_retract``). A retraction
        and a priority preemption (:meth:`sim.scheduler.Scheduler._preempt_for`,
        ``preemption``) alike; each is counted on its own (``Req.retractions``,
        ``Req.preemptions``), as the summary counts them. The caller takes ``r`` out of
        ``running``.

        ``remaining``: requests still in the batch after this one goes (``release_req``'s
        ``remaing_req_count``). Then ``release_req`` evicts cached prefixes (LRU) until
        ``remaining`` x SGLANG_RETRACT_DECODE_STEPS (20) tokens are free
        (mem_cache/common.py ``evict_from_tree_cache`` -> ``evict_to_free_tokens``: "use
        the newly evictable memory instantly"), beyond what the next step needs. Evictable
        tokens count as free for every budget, so this changes which cached prefixes survive
        a retraction, not what is admitted; the MI355X reference cells (no retraction, no
        shared prefixes) are unchanged, so every preset does it."""
        self.kv.retract(r)
        self._release_prefix(r)
        if remaining > 0:
            self._make_room(remaining * RETRACT_DECODE_STEPS)
        r.prefill_done = 0
        r.status = ReqStatus.WAITING
        if preemption:
            r.preemptions += 1
        else:
            r.retractions += 1

    def _abort_out_of_memory(self, r: Req) -> None:
        """The last request of the batch cannot get its next step's KV even alone: SGLang
        0.5.23 aborts it instead of crashing the scheduler (managers/schedule_batch.py
        ``ScheduleBatch.retract_decode``: "Out of memory even after retracting all other
        requests in the decode batch. Aborting the last request."), frees its slots without
        caching them (``release_req`` with ``offload_kv=False``, as a retraction) and sends
        the abort (scheduler.py ``update_running_batch`` -> ``send_abort_output``). Tokens
        the in-flight forward commits for it are dropped (its state is gone from the
        tokenizer). The client's stream ends there with what it got: bench_serving counts the
        request completed (HTTP 200; the abort chunk brings no new token,
        benchmark/serving.py ``async_request_sglang_generate``; tokenizer_manager.py
        ``_handle_abort_req``), its output the tokens streamed to it (none streamed: the
        length it asked for, with TTFT 0.0, :meth:`sim.records.Recorder.end_early`); tokens
        the stream interval held back never reach it. It can happen after the checks made before the run
        (sim/pool_fit.py) when the acceptance drawn lines a lone request's SWA evictions up
        worse than full acceptance does."""
        self.kv.retract(r)
        self._release_prefix(r)
        r.status = ReqStatus.FINISHED
        self.oom_aborted[r.rid] = r.sent_len if self.server.stream_interval > 1 else r.output_len
        self._pass_delivery([r.rid], [0], [True])

    def _retract(self) -> None:
        """Retract running requests (SGLang ``retract_decode``) until the next step fits.

        ``next_step_fits`` (0.5.23): at least one request goes, then retraction stops once
        the batch's next step fits. ``decode_steps_headroom`` (older): until 20 x bs tokens
        (plus a verify window per request) are free. The last request is never retracted.
        Retracted requests free their KV and re-queue; they re-prefill prompt + committed
        output later; new_token_ratio becomes min(1, (decoded + 20 x bs) / (sum max_new + 1))
        over the kept batch.

        When even the last request kept cannot get its next step's KV, SGLang 0.5.23 aborts
        it (:meth:`_abort_out_of_memory`); the older rule's build kept it and failed the
        allocation ("No space left for only one request"), and the simulator stops there.

        Raises:
            UnschedulableRequest: under ``decode_steps_headroom``, the requests retraction
                kept cannot get their next step's KV.
        """
        keep = self._retraction_order()
        w = self.window
        headroom = self.rules.retraction_stop == "decode_steps_headroom"

        def short(kept: list[Req]) -> bool:
            if not headroom:
                return not self._decode_fits(kept)
            return self._decode_room() < len(kept) * (RETRACT_DECODE_STEPS + (w if self.spec else 0))

        retracted: list[Req] = []
        first = True
        while first or short(keep):
            if len(keep) == 1:
                break
            first = False
            r = keep.pop()
            self._retract_req(r, len(keep))
            retracted.append(r)
        aborted: list[Req] = []
        if not self._decode_fits(keep) and len(keep) == 1 and not headroom:
            aborted.append(keep.pop())
            self._abort_out_of_memory(aborted[0])
        elif not self._decode_fits(keep):
            who = (f"request {keep[0].rid} alone" if len(keep) == 1 else
                   f"the {len(keep)} requests retraction kept (request {keep[0].rid} first)")
            if self._kv_room() >= self._decode_need(keep):
                # only the SWA pool is short: its need is in whole pages, the headroom rule's
                # stop counts tokens
                raise UnschedulableRequest(
                    f"{who} cannot get SWA slots for the next step ({self.kv.swa_decode_need(keep, w)} needed, "
                    f"{self.kv.swa_available} free of the SWA pool's {self.kv.swa_capacity}); the pool is "
                    f"server.max_total_num_tokens x server.swa_full_tokens_ratio = {self.server.max_total_num_tokens} x "
                    f"{self.server.swa_full_tokens_ratio}: raise the ratio, or lower workload.output_len or "
                    "server.speculative_num_draft_tokens"
                    + (f", or a smaller server.page_size (now {self.server.page_size}: the SWA need is whole pages, "
                       "while this build's retraction stops on a count of free tokens)" if self.server.page_size > 1 else ""))
            raise UnschedulableRequest(
                f"{who} cannot get KV for the next step "
                f"({self.kv.available} tokens free of {self.kv.capacity}); raise server.max_total_num_tokens "
                f"(now {self.server.max_total_num_tokens}) or lower workload.output_len")
        gone = {id(r) for r in retracted + aborted}
        self.running = [r for r in self.running if id(r) not in gone]
        if gone:
            self.batch_is_full = False   # scheduler.py: the batch shrank
        self.num_retractions += len(retracted)
        self._requeue(retracted)
        bs = len(self.running)  # the batch after retraction, as its decoded and max_new sums
        decoded = sum(r.output_len for r in self.running)
        self.ratio.on_retract(decoded, bs, sum(r.max_new_tokens for r in self.running))
