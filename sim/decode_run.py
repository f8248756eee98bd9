"""A run of decode iterations computed at once: the scheduler and device side (time-free).

Between two events that change the batch's composition from outside (an arrival reaching
the scheduler, an admission, a retraction), an overlap-scheduled server repeats the same
iteration: build the decode (or verify) batch, launch it, process the previous step's
results. Every quantity of those iterations follows from each request's committed-token
counts, so ``k`` iterations can be computed with numpy over a (k, requests) grid instead of
one Python pass per step. The engine (:mod:`sim.engine`) adds the times
(:mod:`sim.host_timeline`) and applies the first iterations it can prove unaffected by
anything else. The step-by-step path stays the reference: tests/test_sim_speed_equivalence.py
checks that both give identical tables.

Notation for iteration j (0-based from the run's start). The overlap loop schedules plan
P_j, launches it (the device commits step j), then processes P_{j-1}'s results, so
the host sees results one step late:

- D[j]: tokens committed on the device before step j (D[0] from :class:`DeviceTokens`).
  D[j + 1] = min(cap, D[j] + accept length) (1 without speculative decoding); a capped
  request commits 0.
- H[j]: the host's committed count (``Req.output_len``) when P_j is built; H[0] from the
  scheduler, H[j] = D[j - 1] for j >= 1 (results land one step late).
- P_j holds the running requests with H[j] < cap (a finished request rides one more step,
  then is filtered); their context is prompt + H[j].
- Processing at iteration j delivers H[j + 1] - H[j] tokens; a request finishes there when
  H[j + 1] reaches cap.

A run starts at the top of the loop with one forward in flight: a decode/verify forward of
the running batch, or a prefill forward whose requests all complete (they join the running
batch at the first iteration's scheduling pass, as SGLang merges the last extend batch).
"""

from __future__ import annotations

import numpy as np
from specsched.sim.admission import AdmissionState
from specsched.sim.admission.min_free_slots import MinFreeSlots
from specsched.sim.admission.min_free_slots_waiting_aware import MinFreeSlotsWaitingAware
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.plan import BatchPlan, ForwardMode, StepOutput
from specsched.sim.request import ReqStatus
from specsched.sim.scheduler import Scheduler

STATELESS_DELAYS = (MinFreeSlots, MinFreeSlotsWaitingAware)
"""Admission policies whose decision is a pure function of the pass's state: a run may go
on while they keep delaying a non-empty waiting queue (others end a run when requests wait)."""

_STEPS = np.arange(1 << 16, dtype=np.int64)[:, None]  # iteration index column


class DecodeRun:
    """The next iterations of a decode-only stretch (see the module docstring).

    Build with :meth:`start`; read the per-iteration arrays; then :meth:`apply` the first
    ``n <= stop`` iterations to the scheduler and the device.

    Attributes (``m`` = running requests at the start, in batch order; ``k`` = iterations
    computed):
        stop: iterations that may be applied (the scheduler side allows no more).
        reqs: the m requests. rids: their ids, int (m,).
        D, H: int (k + 1, m): device and host committed counts (module docstring).
        member: bool (k, m): request in plan P_j. batch_size: int (k,): len(P_j).
        process_batch_size: int (k,): len(P_{j-1}), whose results iteration j processes.
        ctx_sum: int (k,): sum of P_j's context lengths (tokens).
        delivered: int (k, m): tokens delivered at iteration j (0 = none); a request's
            deliveries are consecutive iterations.
        finish_iter: int (m,): iteration whose deliveries complete the request, -1 if none.
        kv_scheduled: int (k,): KV pool tokens in use after P_j's reservation.
        delayed: int: passes of the first ``stop`` that counted a delayed admission, per
            iteration as a bool (k,) array, or None when nothing waits.
        first_step: the plan index of P_0.
    """

    __slots__ = ("stop", "k", "reqs", "rids", "merged", "cap", "h0", "d0", "window", "spec", "first_step",
                 "cyc0", "D", "H", "member", "batch_size", "process_batch_size", "inp", "ctx_sum", "fin",
                 "held", "kv0", "kv_scheduled", "freed", "spec_steps", "unused_cum", "delayed")

    # ------------------------------------------------------------------ build
    @classmethod
    def start(
        cls,
        sched: Scheduler,
        device: DeviceTokens,
        prev_plan: BatchPlan,
        prev_output: StepOutput,
        max_iters: int,
        stop_at_finish: bool,
        finishes_left: int,
    ) -> DecodeRun | None:
        """Compute up to ``max_iters`` iterations from the scheduler's current state.

        Args:
            sched: the scheduler, between two iterations of the overlap loop.
            device: the device's committed counts and accept draws.
            prev_plan, prev_output: the forward in flight (launched, results not processed).
            max_iters: at most this many iterations (>= 1).
            stop_at_finish: end before the first iteration that completes a request (a
                client then sends a new one).
            finishes_left: requests not yet complete; the run ends before the iteration that
                would complete the last (the engine stops the clock there).

        Returns:
            The run, or None when the state is not a decode-only stretch or it would be empty.
        """
        s = sched
        if s.chunked_req is not None:
            return None
        n_wait = len(s.waiting)
        if n_wait and not isinstance(s.admission, STATELESS_DELAYS):
            return None
        merged = s._last_prefill
        running = s.running
        if merged:
            # the last forward is a prefill whose requests all complete and join the batch
            if (prev_plan.mode is not ForwardMode.EXTEND or prev_plan.chunked_rid is not None
                    or len(prev_plan.new_rids) != prev_plan.batch_size
                    or [r.rid for r in merged] != list(prev_plan.rids)
                    or any(r.status is not ReqStatus.PREFILLING for r in merged)):
                return None
            reqs = running + merged
        else:
            if prev_plan.num_extend or prev_plan.mode is ForwardMode.EXTEND:
                return None
            if [r.rid for r in running] != list(prev_plan.rids):
                return None
            reqs = list(running)
        m = len(reqs)
        if m == 0:
            return None
        max_run = s.server.max_running_requests
        cap_l = [r.max_new_tokens for r in reqs]
        h0_l = [r.output_len for r in reqs]
        if n_wait and m < max_run:
            # the first pass must delay admission (checked before any array is built)
            bs0 = sum(1 for h, c in zip(h0_l, cap_l, strict=True) if h < c)
            if not s.admission.should_delay(AdmissionState(
                    running_bs=m, num_allocatable_reqs=max_run - m, waiting_bs=n_wait, active_running_bs=bs0)):
                return None
        rids = [r.rid for r in reqs]
        get = device.committed.get
        d0_l = [get(rid) for rid in rids]
        if None in d0_l:
            return None
        w = s.window
        cap = np.array(cap_l, dtype=np.int64)
        h0 = np.array(h0_l, dtype=np.int64)
        d0 = np.array(d0_l, dtype=np.int64)
        # the in-flight forward's commits per request (0 for requests it does not hold)
        n_prev = m - prev_plan.batch_size
        if n_prev:
            x_prev = np.zeros(m, dtype=np.int64)
            x_prev[n_prev:] = prev_output.committed
        else:
            x_prev = prev_output.committed
        live = h0 < cap
        if ((d0 - h0 - x_prev) * live).any():
            return None  # host and device disagree (e.g. tokens discarded by a retraction)
        # the first iteration's checks, before any grid is built
        left = (cap - d0)[live]
        if left.size == 0 or w * left.size > s.kv.available:
            return None
        fin0 = int(np.count_nonzero(left == 0))  # complete at the first processing
        if fin0 >= finishes_left or (stop_at_finish and fin0):
            return None
        # an upper bound of the iteration that completes a request (each step commits >= 1)
        k = max(1, int(max_iters))
        if stop_at_finish or finishes_left <= left.size:
            srt = np.sort(left)
            if stop_at_finish:
                k = min(k, int(srt[0]) + 1)
            if finishes_left <= left.size:
                k = min(k, int(srt[finishes_left - 1]) + 1)
        k = min(k, len(_STEPS) - 1)

        run = cls()
        run.reqs, run.rids, run.merged = reqs, np.array(rids, dtype=np.int64), merged
        run.cap, run.h0, run.d0, run.window, run.spec = cap, h0, d0, w, s.spec
        run.first_step = s.step
        # device counts D (k + 1, m) and host counts H
        if w > 1:
            cyc0 = np.array([device.cycles.get(rid, 0) for rid in rids], dtype=np.int64)
            draws = device.acceptance.draws(run.rids, cyc0, k)
            D = np.empty((k + 1, m), dtype=np.int64)
            D[0] = d0
            np.cumsum(draws, axis=0, out=D[1:])
            D[1:] += d0
            np.minimum(D, cap, out=D)
            run.cyc0 = cyc0
        else:
            D = np.minimum(d0 + _STEPS[: k + 1], cap)
        H = np.empty((k + 1, m), dtype=np.int64)
        H[0] = h0
        H[1:] = D[:k]
        member = H[:k] < cap
        bs = member.sum(axis=1)
        fin = member & (D[:k] >= cap)          # H[j + 1] = D[j] reaches cap
        n_fin = fin.sum(axis=1)
        cum_fin = np.cumsum(n_fin)

        # where the run must end (scheduler side)
        stop = int(np.count_nonzero(bs))      # an empty batch (bs only shrinks)
        if stop_at_finish:
            stop = min(stop, int(np.searchsorted(cum_fin, 1)))
        stop = min(stop, int(np.searchsorted(cum_fin, finishes_left)))
        # KV: reservations at each pass; frees of unused verify slots and finished requests
        kv0 = np.array([r.kv_allocated for r in reqs], dtype=np.int64)
        if w > 1:
            held = kv0 + w * np.cumsum(member, axis=0)             # after P_j's reservation
            dec_entry = member.copy()                               # processed decode entries
            if merged:
                dec_entry[0] = False                                # a prefill: no verify slots
            raw = np.empty((k, m), dtype=np.int64)
            raw[0] = x_prev
            raw[1:] = D[1:k] - D[: k - 1]
            unused = np.where(dec_entry, np.maximum(w - raw, 0), 0)
            unused_cum = np.cumsum(unused, axis=0)
            freed = unused.sum(axis=1) + ((held - unused_cum) * fin).sum(axis=1)
            run.spec_steps, run.unused_cum = dec_entry, unused_cum
        else:
            # a request finishing at iteration j held kv0 + (j + 1) slots (one per pass)
            held = None
            freed = (kv0 * fin).sum(axis=1) + n_fin * _STEPS[1 : k + 1, 0]
            run.spec_steps, run.unused_cum = None, None
        sched_cum = w * np.cumsum(bs)
        kv_sched = s.kv.used + sched_cum
        kv_sched[1:] -= np.cumsum(freed[:-1])
        if s.kv.used + sched_cum[-1] > s.kv.capacity:
            over = kv_sched > s.kv.capacity
            if over.any():
                stop = min(stop, int(over.argmax()))
        # admission: with requests waiting, every pass must be delayed (or the batch full)
        run.delayed = None
        if n_wait:
            running_bs = np.empty(k, dtype=np.int64)
            running_bs[0], running_bs[1:] = m, bs[:-1]
            delayed = np.zeros(k, dtype=bool)
            cache: dict[tuple[int, int], bool] = {}
            for j in range(min(stop, k)):
                rb = int(running_bs[j])
                if rb >= max_run:
                    continue
                key = (rb, int(bs[j]))
                d = cache.get(key)
                if d is None:
                    d = cache[key] = s.admission.should_delay(AdmissionState(
                        running_bs=rb, num_allocatable_reqs=max_run - rb, waiting_bs=n_wait,
                        active_running_bs=key[1]))
                if not d:
                    stop = j
                    break
                delayed[j] = True
            run.delayed = delayed
        if stop < 1:
            return None
        run.k, run.stop = k, stop
        run.D, run.H, run.member, run.batch_size = D, H, member, bs
        pbs = np.empty(k, dtype=np.int64)
        pbs[0], pbs[1:] = prev_plan.batch_size, bs[:-1]
        run.process_batch_size = pbs
        inp = np.array([r.input_len for r in reqs], dtype=np.int64)
        run.inp = inp
        run.ctx_sum = ((inp + H[:k]) * member).sum(axis=1)
        run.fin, run.held, run.kv0, run.kv_scheduled, run.freed = fin, held, kv0, kv_sched, freed
        return run

    # ---------------------------------------------------------------- outputs
    def commits(self, n: int) -> np.ndarray:
        """Tokens the device commits at steps 0..n-1, int (n, m)."""
        return self.D[1 : n + 1] - self.D[:n]

    def delivered(self, n: int) -> np.ndarray:
        """Tokens delivered at iterations 0..n-1, int (n, m) (0 = no delivery)."""
        return self.H[1 : n + 1] - self.H[:n]

    def finish_iter(self) -> np.ndarray:
        """Iteration whose deliveries complete each request, -1 if none in the run, (m,)."""
        fin = self.fin
        return np.where(fin.any(axis=0), fin.argmax(axis=0), -1)

    def plan_at(self, j: int) -> tuple[BatchPlan, StepOutput]:
        """Plan P_j and what the device commits for it."""
        sel = self.member[j]
        h = self.H[j][sel]
        bs = len(h)
        plan = BatchPlan(
            step=self.first_step + j,
            mode=ForwardMode.VERIFY if self.spec else ForwardMode.DECODE,
            rids=tuple(self.rids[sel].tolist()),
            extend_lens=(self.window,) * bs,
            prefix_lens=tuple((self.inp[sel] + h).tolist()),
            num_extend=0, spec_window=self.window,
            committed_before=tuple(h.tolist()),
            max_new_tokens=tuple(self.cap[sel].tolist()),
        )
        return plan, StepOutput(self.D[j + 1][sel] - self.D[j][sel])

    # ------------------------------------------------------------------ apply
    def apply(self, sched: Scheduler, device: DeviceTokens, n: int) -> tuple[BatchPlan, StepOutput]:
        """Apply the first ``n`` (1 <= n <= stop) iterations to the scheduler and the device,
        as n passes of the loop would. Returns the forward left in flight (P_{n-1} and its
        output)."""
        if not 1 <= n <= self.stop:
            raise ValueError(f"can apply 1..{self.stop} iterations, not {n}")
        s = sched
        last = n - 1
        for r in self.merged:
            r.status = ReqStatus.RUNNING
        s._last_prefill = []
        h_final = self.H[n]
        fin = h_final >= self.cap
        if self.held is None:
            held = self.kv0 + self.member[:n].sum(axis=0)   # one slot per pass
        else:
            held = self.held[last] - self.unused_cum[last]
        held = np.where(fin, 0, held)
        spec_add = self.spec_steps[:n].sum(axis=0).tolist() if self.spec_steps is not None else None
        outs, kvs, done = h_final.tolist(), held.tolist(), fin.tolist()
        finished = ReqStatus.FINISHED
        for i, r in enumerate(self.reqs):
            r.output_len = outs[i]
            r.kv_allocated = kvs[i]
            if spec_add is not None:
                r.spec_cycles += spec_add[i]
            if done[i]:
                r.status = finished
        s.running = [r for r, keep in zip(self.reqs, self.member[last].tolist(), strict=True) if keep]
        s.kv.used = int(self.kv_scheduled[last] - self.freed[last])
        peak = int(self.kv_scheduled[:n].max())
        if peak > s.kv.peak:
            s.kv.peak = peak
        ratio = s.ratio
        for _ in range(n):
            if ratio.value <= ratio.floor:
                break
            ratio.on_decode_step()
        if self.delayed is not None:
            s.num_delayed_passes += int(self.delayed[:n].sum())
        s.step += n
        rids = self.rids.tolist()
        device.committed.update(zip(rids, self.D[n].tolist(), strict=True))
        if self.window > 1:
            cycles = self.cyc0 + (self.D[:n] < self.cap).sum(axis=0)
            device.cycles.update(zip(rids, cycles.tolist(), strict=True))
        return self.plan_at(last)
