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
  D[j + 1] = min(cap, D[j] + accept length), and a capped request commits 0.
- H[j]: the host's committed count (``Req.output_len``) when P_j is built; H[0] from the
  scheduler, H[j] = D[j - 1] for j >= 1 (results land one step late).
- P_j holds the running requests with H[j] < cap (finished ones ride one step, then are
  filtered); their context is prompt + H[j].
- Processing at iteration j delivers H[j + 1] - H[j] tokens; a request finishes there when
  H[j + 1] reaches cap.

A run starts at the top of the loop with one forward in flight: a decode/verify forward of
the running batch, or a prefill forward whose requests all complete (they join the running
batch at the first iteration's scheduling pass, as SGLang merges the last extend batch).
"""

from __future__ import annotations

import numpy as np

from sim.admission import AdmissionState
from sim.admission.min_free_slots import MinFreeSlots
from sim.admission.min_free_slots_waiting_aware import MinFreeSlotsWaitingAware
from sim.device_tokens import DeviceTokens
from sim.plan import BatchPlan, ForwardMode, StepOutput
from sim.request import Req, ReqStatus
from sim.scheduler import Scheduler

STATELESS_DELAYS = (MinFreeSlots, MinFreeSlotsWaitingAware)
"""Admission policies whose decision is a pure function of the pass's state: a run may go
on while they keep delaying a non-empty waiting queue (others end a run when requests wait)."""


class DecodeRun:
    """The next ``k`` iterations of a decode-only stretch (see the module docstring).

    Build with :meth:`start`; read the per-iteration arrays; then :meth:`apply` the first
    ``K <= k`` iterations to the scheduler and the device.

    Attributes (``m`` = running requests at the start, in batch order):
        k: iterations computed.
        reqs: the m requests. rids: their ids (int array, (m,)).
        member: bool (k, m): request in plan P_j.
        batch_size: int (k,): requests in P_j. process_batch_size: int (k,): requests in the
            plan whose results iteration j processes (P_{j-1}).
        ctx_sum: int (k,): sum of P_j's context lengths (tokens).
        commits: int (k, m): tokens the device commits at step j.
        delivered: int (k, m): tokens delivered to clients at iteration j (0 = none).
        finish_iter: int (m,): iteration whose deliveries complete the request, -1 if none.
        kv_scheduled: int (k,): KV pool tokens in use after P_j's reservation.
        delayed: bool (k,): the pass counted a delayed admission.
        first_step: the plan index of P_0.
    """

    def __init__(self) -> None:
        self.k = 0

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
            max_iters: at most this many iterations.
            stop_at_finish: end before the first iteration that completes a request (a
                client then sends a new one).
            finishes_left: requests not yet complete; the run ends before the iteration that
                would complete the last (the engine stops the clock there).

        Returns:
            The run, or None when the state is not a decode-only stretch or it would be empty.
        """
        s = sched
        if s.chunked_req is not None or max_iters < 1:
            return None
        if s.waiting and not isinstance(s.admission, STATELESS_DELAYS):
            return None
        merged = s._last_prefill
        if merged:
            # the last forward is a prefill whose requests all complete and join the batch
            if (prev_plan.mode is not ForwardMode.EXTEND or prev_plan.chunked_rid is not None
                    or len(prev_plan.new_rids) != prev_plan.batch_size
                    or [r.rid for r in merged] != list(prev_plan.rids)
                    or any(r.status is not ReqStatus.PREFILLING for r in merged)):
                return None
            prev_decode = False
        else:
            if prev_plan.mode not in (ForwardMode.DECODE, ForwardMode.VERIFY) or prev_plan.num_extend:
                return None
            if [r.rid for r in s.running] != list(prev_plan.rids):
                return None
            prev_decode = True
        reqs = s.running + merged
        if not reqs:
            return None
        run = cls()
        run.reqs = reqs
        m = len(reqs)
        w = s.window
        rids = [r.rid for r in reqs]
        run.rids = np.array(rids, dtype=np.int64)
        cap = np.array([r.max_new_tokens for r in reqs], dtype=np.int64)
        h0 = np.array([r.output_len for r in reqs], dtype=np.int64)
        inp = np.array([r.input_len for r in reqs], dtype=np.int64)
        kv0 = np.array([r.kv_allocated for r in reqs], dtype=np.int64)
        d0, cyc0, known = device.state(rids)
        if not known.all():
            return None
        # the in-flight forward's commits, per request (0 for requests it does not hold)
        x_prev = np.zeros(m, dtype=np.int64)
        n_prev = len(s.running) if merged else 0
        x_prev[n_prev:] = prev_output.committed
        in_prev = np.zeros(m, dtype=bool)
        in_prev[n_prev:] = True
        live = h0 < cap
        if not (d0[live] == (h0 + x_prev)[live]).all() or (h0 > cap).any():
            return None  # host and device disagree (e.g. tokens discarded by a retraction)

        # device: D[j] for j = 0..k (k + 1 rows)
        k = int(max_iters)
        if w > 1:
            draws = device.acceptance.draws(run.rids, cyc0, k)
            D = np.empty((k + 1, m), dtype=np.int64)
            D[0] = d0
            np.cumsum(draws, axis=0, out=D[1:])
            D[1:] += d0
        else:
            D = d0 + np.arange(k + 1, dtype=np.int64)[:, None]
        np.minimum(D, cap, out=D)
        # host view when P_j is built: H[0] = h0, H[j] = D[j - 1]
        H = np.empty((k + 1, m), dtype=np.int64)
        H[0] = h0
        H[1:] = D[:-1]
        member = H[:-1] < cap
        bs = member.sum(axis=1)
        delivered = np.diff(H, axis=0)
        fin = (H[1:] >= cap) & (H[:-1] < cap)

        # where the run must end (scheduler side): empty batch, retraction, admission,
        # a finish that makes a client act, the last finish of the run
        stop = k
        empty = np.flatnonzero(bs == 0)
        if empty.size:
            stop = min(stop, int(empty[0]))
        n_fin = fin.sum(axis=1)
        if stop_at_finish:
            f = np.flatnonzero(n_fin)
            if f.size:
                stop = min(stop, int(f[0]))
        cum_fin = np.cumsum(n_fin)
        last = np.flatnonzero(cum_fin >= finishes_left)
        if last.size:
            stop = min(stop, int(last[0]))
        # KV: reservations at each pass; frees of unused verify slots and finished requests
        skipped = ~(H[:-1] < cap)
        proc = ~skipped
        proc[0] &= in_prev
        unused = np.zeros((k, m), dtype=np.int64)
        if w > 1:
            dec_entry = proc.copy()
            if not prev_decode:
                dec_entry[0] = False
            raw = np.empty((k, m), dtype=np.int64)
            raw[0] = x_prev
            raw[1:] = D[1:k] - D[: k - 1]
            unused = np.where(dec_entry, np.maximum(w - raw, 0), 0)
            run.spec_steps = dec_entry
        else:
            run.spec_steps = None
        alloc = w * bs
        held_after_sched = kv0 + w * np.cumsum(member, axis=0)          # (k, m)
        unused_cum = np.cumsum(unused, axis=0)
        finish_free = np.where(fin, held_after_sched - unused_cum, 0)
        freed = unused.sum(axis=1) + finish_free.sum(axis=1)
        kv_sched = s.kv.used + np.cumsum(alloc) - np.r_[0, np.cumsum(freed)[:-1]]
        over = np.flatnonzero(kv_sched > s.kv.capacity)
        if over.size:
            stop = min(stop, int(over[0]))
        # admission: with requests waiting, every pass must be delayed (or the batch full)
        delayed = np.zeros(k, dtype=bool)
        if s.waiting:
            srv = s.server
            running_bs = np.r_[m, bs[:-1]]
            full = running_bs >= srv.max_running_requests
            cache: dict[tuple[int, int], bool] = {}
            for j in range(min(stop, k)):
                if full[j]:
                    continue
                key = (int(running_bs[j]), int(bs[j]))
                d = cache.get(key)
                if d is None:
                    d = cache[key] = s.admission.should_delay(AdmissionState(
                        running_bs=key[0], num_allocatable_reqs=srv.max_running_requests - key[0],
                        waiting_bs=len(s.waiting), active_running_bs=key[1]))
                if not d:
                    stop = j
                    break
                delayed[j] = True
        if stop < 1:
            return None
        run.k = k
        run.stop = stop
        run.cap, run.inp, run.h0, run.kv0, run.cyc0 = cap, inp, h0, kv0, cyc0
        run.D, run.H, run.member, run.batch_size = D, H, member, bs
        run.process_batch_size = np.r_[prev_plan.batch_size, bs[:-1]]
        run.ctx_sum = (np.where(member, inp + H[:-1], 0)).sum(axis=1)
        run.commits = np.diff(D, axis=0)
        run.delivered = delivered
        fi = np.where(fin.any(axis=0), np.argmax(fin, axis=0), -1)
        run.finish_iter = fi
        run.kv_scheduled = kv_sched
        run.freed = freed
        run.unused_cum = unused_cum
        run.held_after_sched = held_after_sched
        run.delayed = delayed
        run.window = w
        run.first_step = s.step
        run.merged = merged
        run.spec = s.spec
        return run

    # ------------------------------------------------------------------ apply
    def plan_at(self, j: int) -> tuple[BatchPlan, StepOutput]:
        """Plan P_j and what the device commits for it."""
        sel = self.member[j]
        rids = self.rids[sel]
        h = self.H[j][sel]
        bs = len(rids)
        plan = BatchPlan(
            step=self.first_step + j,
            mode=ForwardMode.VERIFY if self.spec else ForwardMode.DECODE,
            rids=tuple(rids.tolist()),
            extend_lens=(self.window,) * bs,
            prefix_lens=tuple((self.inp[sel] + h).tolist()),
            num_extend=0, spec_window=self.window,
            committed_before=tuple(h.tolist()),
            max_new_tokens=tuple(self.cap[sel].tolist()),
        )
        return plan, StepOutput(self.commits[j][sel].copy())

    def apply(self, sched: Scheduler, device: DeviceTokens, n: int) -> tuple[BatchPlan, StepOutput]:
        """Apply the first ``n`` (1 <= n <= stop) iterations to the scheduler and the device,
        as n passes of the loop would. Returns the forward left in flight (P_{n-1} and its
        output)."""
        assert 1 <= n <= self.stop
        s = sched
        last = n - 1
        for r in self.merged:
            r.status = ReqStatus.RUNNING
        s._last_prefill = []
        h_final = self.H[n]
        fin = h_final >= self.cap
        held = np.where(fin, 0, self.held_after_sched[last] - self.unused_cum[last])
        spec_add = self.spec_steps[:n].sum(axis=0) if self.spec_steps is not None else None
        for i, r in enumerate(self.reqs):
            r.output_len = int(h_final[i])
            r.kv_allocated = int(held[i])
            if spec_add is not None:
                r.spec_cycles += int(spec_add[i])
            if fin[i]:
                r.status = ReqStatus.FINISHED
        keep = self.member[last]
        s.running = [r for r, k in zip(self.reqs, keep.tolist(), strict=True) if k]
        s.kv.used = int(self.kv_scheduled[last] - self.freed[last])
        s.kv.peak = max(s.kv.peak, int(self.kv_scheduled[:n].max()))
        for _ in range(n):
            if s.ratio.value <= s.ratio.floor:
                break
            s.ratio.on_decode_step()
        s.num_delayed_passes += int(self.delayed[:n].sum())
        s.step += n
        d_final = self.D[n]
        cycles = self.cyc0 + (self.D[:n] < self.cap).sum(axis=0) if self.window > 1 else self.cyc0
        device.set_state(self.rids.tolist(), d_final, cycles)
        return self.plan_at(last)
