"""The Scheduler's collapsed decode stretch (the simulator's fast path).

:meth:`Stretch.decode_stretch` decides whether the state is a decode-only stretch and has
:mod:`sim.plain_run` (closed form, no speculative decoding) or :mod:`sim.decode_run` (with
hybrid sliding-window pools through :mod:`sim.swa_stretch`) compute it;
:meth:`Stretch.apply_stretch` applies its first iterations as that many passes of
``schedule()`` and ``process_result()`` would. :class:`Stretch` is a mixin of
:class:`sim.scheduler.Scheduler`: it holds no state of its own; every attribute it reads or
writes is the Scheduler's, set in its ``__init__``. KV changes only through the ledger.

Invariant kept here: INV-7 the collapsed stretch equals the passes it replaces.
"""

from __future__ import annotations

from specsched.sim.decode_run import DecodeRun
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.plain_run import PlainRun
from specsched.sim.plan import EXTEND, BatchPlan, StepOutput
from specsched.sim.request import FINISHED, PREFILLING, RUNNING


class Stretch:
    """The collapsed decode stretch of :class:`sim.scheduler.Scheduler` (a mixin: no state
    of its own)."""

    def decode_stretch(self, device: DeviceTokens, prev_plan: BatchPlan, prev_output: StepOutput,
                       max_iters: int, stop_at_finish: bool, finishes_left: int,
                       closed_form: bool = True) -> DecodeRun | PlainRun | None:
        """The decode-only stretch that starts at this pass, computed at once, or None.

        Call at the top of the overlap loop with one forward in flight (``prev_plan``,
        launched; ``prev_output`` its commits, results not processed). A stretch is a run of
        passes in which nothing but decoding happens: no chunked request, no admission
        (nothing waits, or a stateless policy delays every pass or the batch is full), the
        in-flight forward is a decode/verify of the running batch or a prefill whose
        requests all complete, and no pass needs a retraction. Nothing is changed here.
        Without speculative decoding (with ``closed_form`` and no SWA pool) the stretch is a
        :class:`sim.plain_run.PlainRun` (closed form), else a :class:`sim.decode_run.DecodeRun`
        (hybrid sliding-window pools through :mod:`sim.swa_stretch`).

        Args:
            device: the device's committed counts (read only).
            max_iters, stop_at_finish, finishes_left: see :meth:`sim.decode_run.DecodeRun.compute`.
            closed_form: allow the closed form (the caller can time it: its costs are keyed
                on the batch's mean context, see :mod:`sim.plain_timeline`).
        """
        if self.chunked_req is not None or self.interval.remaining:
            return None
        if self.mode == "prefill" or (self.mode == "decode" and (
                self.waiting or self.prealloc_queue or self.transfer_queue or self.retracted_queue)):
            return None  # a prefill server never decodes; a decode server's queues move each pass
        if stop_at_finish and self.rules.skip_finishing_decode:
            return None  # a client reacts to finishes: not yet exact with skip_finishing_decode
        n_wait = len(self.waiting)
        if n_wait and not getattr(self.admission, "stateless", False):
            return None
        if n_wait and self.server.enable_priority_scheduling and not self.server.disable_priority_preemption:
            return None  # every pass may preempt for a waiting request  # a stateful policy's state would change at every delayed pass
        merged = self._last_prefill
        if merged:
            # the last forward is a prefill whose requests all complete and join the batch
            if (prev_plan.mode is not EXTEND or prev_plan.chunked_rid is not None
                    or len(prev_plan.new_rids) != prev_plan.batch_size or len(merged) != prev_plan.batch_size):
                return None
            rids = prev_plan.rids   # as long as merged (checked above); no list or generator per stretch
            for i, r in enumerate(merged):
                if r.rid != rids[i] or r.status is not PREFILLING:
                    return None
            if self.cache is not None and (self._swa or self._any_tokens and any(r.tokens is not None for r in merged)):
                return None  # their prompts (and SWA) enter the prefix cache at that prefill's results
            reqs = self.running + merged
        else:
            if prev_plan.num_extend or prev_plan.mode is EXTEND:
                return None
            if [r.rid for r in self.running] != list(prev_plan.rids):
                return None
            reqs = list(self.running)
        m = len(reqs)
        if m == 0:
            return None
        if not stop_at_finish and self.cache is not None and self._any_tokens and any(
                r.tokens is not None and min(len(r.tokens), r.input_len + r.max_new_tokens - 1) > r.cache_protected_len
                for r in reqs):
            # a finish inserts tokens past the request's cached prefix into the prefix cache
            # (_cache_finished): its output, or with page_size > 1 the prompt's partial last
            # page, whose insert finds the cached pages and marks them used (LRU; sglang 0.5.23
            # mem_cache/radix_cache.py ``checkpoint`` inserts and matches on every release):
            # step by step
            stop_at_finish = True
            if self.rules.skip_finishing_decode:
                return None
        rules = self.rules
        latched = self.batch_is_full and not self._swa  # hybrid SWA resets the latch every pass
        if n_wait and not latched:
            # the first pass must delay admission (checked before any array is built)
            active = sum(1 for r in reqs if not r.finished)
            if not self._delays(active if rules.filter_finished_before_delay else m, active):
                return None
        skip = self.skip_finishing
        if closed_form and self.window == 1 and not self.spec and not self._swa:
            # without speculative decoding every count is known in closed form
            return PlainRun.compute(
                reqs, len(merged), device, prev_plan, prev_output, first_step=self.step, kv=self.kv,
                num_waiting=n_wait, delays=self._delays, max_iters=max_iters, stop_at_finish=stop_at_finish,
                finishes_left=finishes_left, skip_finishing=skip,
                filter_first=rules.filter_finished_before_delay, latched=latched,
            )
        return DecodeRun.compute(
            reqs, len(merged), device, prev_plan, prev_output, window=self.window, spec=self.spec,
            first_step=self.step, kv=self.kv, max_running_requests=self.server.max_running_requests,
            num_waiting=n_wait, delays=self._delays, max_iters=max_iters,
            stop_at_finish=stop_at_finish, finishes_left=finishes_left,
            skip_finishing=skip, filter_first=rules.filter_finished_before_delay, latched=latched,
        )

    def apply_stretch(self, run: DecodeRun | PlainRun, n: int) -> tuple[BatchPlan, StepOutput]:
        """Apply the first ``n`` (1 <= n <= run.stop) iterations of ``run`` (from
        :meth:`decode_stretch`, state unchanged since), as n passes of schedule() and
        process_result() would: the prefill's requests join the batch, tokens are committed,
        requests finish, KV moves through the ledger, new_token_ratio decays once per pass,
        delayed admissions are counted. The device's counts are the caller's
        (``run.device_after(n)``).

        Returns:
            The forward left in flight: P_{n-1} and its output.

        Raises:
            ValueError: n out of range.
        """
        if not 1 <= n <= run.stop:
            raise ValueError(f"can apply 1..{run.stop} iterations, not {n}")
        last = n - 1
        if self._last_prefill and not self.running:
            # every merged request completes its prefill (decode_stretch checks): they join
            self._adopt_prefill_batch()   # (self.running is still the batch before the merge)
        for r in self._last_prefill:
            r.status = RUNNING
        self._last_prefill = []
        if self._stale_decode_count:
            self.processed_tokens += n * self._running_batch_extend_tokens   # n decode forwards
        finished = FINISHED
        if type(run) is PlainRun:
            o = run.outcome(n)   # one pass over the requests (sim/plain_run.py)
            outs, held, done, used, peak = o.outs, o.held, o.done, o.used, o.peak
            for i, r in enumerate(run.reqs):   # outcome's lists are per request, in this order
                r.output_len = outs[i]
                if done[i]:
                    r.status = finished
            running = o.kept
        else:
            outs, held, done, cycles = run.state_after(n)
            for i, r in enumerate(run.reqs):
                r.output_len = outs[i]
                if cycles is not None:
                    r.spec_cycles += cycles[i]
                if done[i]:
                    r.status = finished
            used, peak = run.kv_after(n)
            running = [r for r, k in zip(run.reqs, run.in_plan(last), strict=True) if k]
        lens = o.lens if type(run) is PlainRun else None if run.kv.lens is None else run.kv.lens[last].tolist()
        self.kv.settle(run.reqs, held, used, peak, finished=done, lens=lens)
        if self._swa:
            self.kv.settle_swa(run.reqs, run.swa, n, done)
        self.running = running
        if len(self.running) < len(run.reqs):
            self.batch_is_full = False  # requests left the batch
        if True in done:
            reqs = run.reqs   # by index: zip(..., strict=True) builds a keyword dict per call
            for i, d in enumerate(done):
                if d:
                    self._release_prefix(reqs[i])
        ratio = self.ratio
        for _ in range(n):   # one decay per pass without retraction
            if ratio.value == ratio.floor:
                # at the floor the rest change nothing; below it (a retraction's estimate, 0 after
                # an out-of-memory abort emptied the batch) the next pass lifts it to the floor, as
                # 0.5.23 NewTokenRatioTracker.decay_step takes max(ratio - decay, min_new_token_ratio)
                break
            ratio.on_decode_step()
        self.num_delayed_passes += run.delayed_passes(n)
        self.step += n
        plan, out = (o.plan, o.output) if type(run) is PlainRun else run.plan_at(last)
        self._in_flight = plan
        return plan, out
