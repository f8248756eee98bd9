"""A run of decode iterations computed at once: the scheduler and device side (time-free).

Between two events that change the batch's composition from outside (an arrival reaching
the scheduler, an admission, a retraction), an overlap-scheduled server repeats the same
iteration: build the decode (or verify) batch, launch it, process the previous step's
results. Every quantity of those iterations follows from each request's committed-token
counts, so ``k`` iterations can be computed with numpy over a (k, requests) grid instead of
one Python pass per step. This module is that computation only, a pure function of the
values it is given: the Scheduler decides whether its state is such a stretch and applies
the iterations (:meth:`sim.scheduler.Scheduler.decode_stretch`, ``apply_stretch``); KV
counts come from the ledger's rules (:meth:`sim.kv_ledger.KVLedger.stretch_usage`); plans
from the one decode plan builder (:func:`sim.plan.decode_plan`). The engine
(:mod:`sim.engine`) adds the times (:mod:`sim.host_timeline`) and applies the first
iterations it can prove unaffected by anything else. INV-7 (fast path == step by step) is
guarded by tests/test_sim_speed_equivalence.py.

Notation for iteration j (0-based from the run's start). The overlap loop schedules plan
P_j, launches it (the device commits step j), then processes P_{j-1}'s results, so
the host sees results one step late:

- D[j]: tokens committed on the device before step j (D[0] from :class:`DeviceTokens`).
  D[j + 1] = min(cap, D[j] + accept length) (1 without speculative decoding); a capped
  request commits 0.
- H[j]: the host's committed count (``Req.output_len``) when P_j is built; H[0] from the
  scheduler, H[j] = D[j - 1] for j >= 1 (results land one step late).
- P_j holds the running requests with H[j] < cap (a finished request rides one more step,
  then is filtered); with ``skip_finishing`` (sglang 0.5.23 ``_reqs_finishing_inflight``)
  those with H[j] = cap - 1 sit out too, since the step in flight commits their last token.
  Their context is prompt + H[j].
- Processing at iteration j delivers H[j + 1] - H[j] tokens; a request finishes there when
  H[j + 1] reaches cap.

A run starts at the top of the loop with one forward in flight: a decode/verify forward of
the running batch, or a prefill forward whose requests all complete (they join the running
batch at the first iteration's scheduling pass, as SGLang merges the last extend batch).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.kv_ledger import KVLedger
from specsched.sim.plan import BatchPlan, StepOutput, decode_plan
from specsched.sim.request import Req

_STEPS = np.arange(1 << 16, dtype=np.int64)[:, None]  # iteration index column
MAX_ITERS = len(_STEPS) - 1
"""The most iterations one run computes."""


class DecodeRun:
    """The next iterations of a decode-only stretch (see the module docstring).

    Built by :meth:`compute` (the Scheduler calls it from ``decode_stretch``); read the
    per-iteration arrays; the Scheduler's ``apply_stretch`` applies the first
    ``n <= stop`` iterations.

    Attributes (``m`` = requests of the batch at the start, in batch order; ``k`` =
    iterations computed):
        stop: iterations that may be applied (the scheduler side allows no more).
        reqs: the m requests. rids: their ids, int (m,). num_merged: how many of them (the
            last) join from the prefill in flight.
        cap: int (m,), output targets. window: tokens per request per pass. spec: verify
            (True) or decode passes.
        D, H: int (k + 1, m): device and host committed counts (module docstring).
        cyc0: int (m,), verify cycles each request had drawn at the start (window > 1).
        member: bool (k, m): request in plan P_j. batch_size: int (k,): len(P_j).
        process_batch_size: int (k,): len(P_{j-1}), whose results iteration j processes.
        processed: bool (k, m): decode entries processed at iteration j (window > 1), else None.
        ctx_sum: int (k,): sum of P_j's context lengths (tokens).
        fin: bool (k, m): request finishes at iteration j's processing.
        kv: the stretch's KV usage (:class:`sim.kv_ledger.StretchKV`).
        swa: the SWA pool's counts (:class:`sim.swa_stretch.StretchSWA`), or None without one.
        delayed: bool (k,): pass j counted a delayed admission, or None when nothing waits.
        first_step: the plan index of P_0.
    """

    __slots__ = ("stop", "k", "reqs", "rids", "num_merged", "cap", "window", "spec", "first_step",
                 "cyc0", "D", "H", "member", "batch_size", "process_batch_size", "inp", "ctx_sum", "fin",
                 "processed", "kv", "swa", "delayed")

    # ------------------------------------------------------------------ build
    @classmethod
    def compute(
        cls,
        reqs: list[Req],
        num_merged: int,
        device: DeviceTokens,
        prev_plan: BatchPlan,
        prev_output: StepOutput,
        *,
        window: int,
        spec: bool,
        first_step: int,
        kv: KVLedger,
        max_running_requests: int,
        num_waiting: int,
        delays: Callable[[int, int], bool],
        max_iters: int,
        stop_at_finish: bool,
        finishes_left: int,
        skip_finishing: bool = False,
        filter_first: bool = False,
        latched: bool = False,
    ) -> DecodeRun | None:
        """Compute up to ``max_iters`` iterations of the batch ``reqs``.

        Args:
            reqs: the batch the next pass decodes: the running requests, then the
                ``num_merged`` requests of the prefill in flight (their prefill completes).
            device: the device's committed counts and accept draws (read only).
            prev_plan, prev_output: the forward in flight (launched, results not processed).
            window, spec: the decode/verify window and mode.
            first_step: the plan index of the next plan.
            kv: the KV ledger (read only here: its rules give the stretch's usage).
            max_running_requests: the running-slot limit.
            num_waiting: requests in the waiting queue.
            delays: ``delays(running_bs, active_running_bs)``: the (stateless) admission
                policy delays a pass of that state; asked only when requests wait.
            max_iters: at most this many iterations (>= 1).
            stop_at_finish: end before the first iteration that completes a request (a
                client then sends a new one).
            finishes_left: requests not yet complete; the run ends before the iteration that
                would complete the last (the engine stops the clock there).
            skip_finishing: requests whose in-flight step commits their last token sit out.
            filter_first: the admission gate counts only unfinished requests (finished ones
                leave at the top of the pass); else the last plan's batch.
            latched: the batch_is_full latch is set: no pass tries admission until a
                request leaves the batch (the run ends there).

        Returns:
            The run, or None when host and device disagree or it would be empty.
        """
        m = len(reqs)
        rids = [r.rid for r in reqs]
        get = device.committed.get
        d0_l = [get(rid) for rid in rids]
        if None in d0_l:
            return None
        w = window
        cap = np.array([r.max_new_tokens for r in reqs], dtype=np.int64)
        h0 = np.array([r.output_len for r in reqs], dtype=np.int64)
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
        if left.size == 0 or (w * left.size > kv.available and not kv.paged):
            return None  # (a paged pool's first pass may need less: first_over decides)
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
        k = min(k, MAX_ITERS)

        run = cls()
        run.reqs, run.rids, run.num_merged = reqs, np.array(rids, dtype=np.int64), num_merged
        run.cap, run.window, run.spec = cap, w, spec
        run.first_step = first_step
        # host and device counts in one array: X[0] = H[0] and X[j + 1] = D[j], so that
        # H = X[: k + 1] (H[j] = D[j - 1] for j >= 1) and D = X[1:] are views, no copy
        X = np.empty((k + 2, m), dtype=np.int64)
        X[0] = h0
        D = X[1:]
        if w > 1:
            cyc0 = np.array([device.cycles.get(rid, 0) for rid in rids], dtype=np.int64)
            # accepted since the start, capped at the output left: d0 + min(cap - d0, sum)
            # is min(cap, d0 + sum)
            device.acceptance.cumulative(run.rids, cyc0, k, out=D, limits=cap - d0)
            D += d0
            run.cyc0 = cyc0
        else:
            np.minimum(d0 + _STEPS[: k + 1], cap, out=D)
        H = X[: k + 1]
        live_h = H[:k] < cap
        if skip_finishing:
            # H[j] = cap - 1 means the step in flight commits the last token: from j = 1 on
            # such a request rode P_{j-1}; at j = 0 only if the forward in flight holds it
            member = H[:k] < cap - 1
            in_prev = np.isin(np.array(rids, dtype=np.int64), np.array(prev_plan.rids, dtype=np.int64))
            member[0] |= live_h[0] & ~in_prev
        else:
            member = live_h
        bs = member.sum(axis=1)
        fin = live_h & (D[:k] >= cap)          # H[j + 1] = D[j] reaches cap
        cum_fin = np.cumsum(fin.sum(axis=1))

        # where the run must end on the scheduler's side
        stop = int(np.count_nonzero(bs))      # an empty batch (bs only shrinks)
        if stop_at_finish:
            stop = min(stop, int(np.searchsorted(cum_fin, 1)))
        stop = min(stop, int(np.searchsorted(cum_fin, finishes_left)))
        # admission: with requests waiting, every pass must be delayed (or the batch full);
        # the policy is stateless, so asking it before the pool checks below changes nothing
        run.delayed = None
        if num_waiting:
            running_bs = np.empty(k, dtype=np.int64)
            if filter_first:
                # the gate sees P_{j-1}'s requests still unfinished on the host at pass j
                running_bs[0] = int(live_h[0].sum())
                running_bs[1:] = (member[:-1] & live_h[1:]).sum(axis=1)
                active = running_bs
            else:
                running_bs[0], running_bs[1:] = m, bs[:-1]
                active = live_h.sum(axis=1)
            if latched:
                shrunk = np.flatnonzero(bs < m)
                hold = int(shrunk[0]) if len(shrunk) else k
                stop = min(stop, hold)
            delayed = np.zeros(k, dtype=bool)
            # batch_is_full latched: no admission pass (a full batch without the latch
            # still asks the delay gate first, as SGLang does). Else every pass asks the
            # (stateless) policy: its inputs change only where the batch does, so it is
            # asked once per run of equal inputs, in order, and the first refusal ends it
            lim = min(stop, k)
            if not latched and lim > 0:
                rb, ac = running_bs[:lim], active[:lim]
                starts = np.flatnonzero((rb[1:] != rb[:-1]) | (ac[1:] != ac[:-1])) + 1
                delayed[:lim] = True
                for j in [0, *starts.tolist()]:
                    if not delays(int(rb[j]), int(ac[j])):
                        stop = j
                        delayed[j:] = False
                        break
            run.delayed = delayed
        if stop < 1:
            return None
        # no iteration from ``stop`` on is applied: the pools' rules (and everything kept)
        # cover the first k = stop rows only (each row depends on earlier rows alone)
        k = min(stop, k)
        member, live_h, fin, bs = member[:k], live_h[:k], fin[:k], bs[:k]
        D, H = D[: k + 1], H[: k + 1]
        if run.delayed is not None:
            run.delayed = run.delayed[:k]
        # KV: the ledger's rules; a pass that would exceed the pool retracts instead
        kv0 = np.array([r.kv_allocated for r in reqs], dtype=np.int64)
        inp0 = np.array([r.input_len for r in reqs], dtype=np.int64)
        ctx = H[:k] + inp0      # each request's context when P_j is built (prompt + output)
        if w > 1:
            # decode entries processed at j: P_{j-1}'s requests not finished on the host
            processed = np.empty_like(member)
            processed[0] = False if num_merged else live_h[0]  # a prefill: no verify slots
            processed[1:] = member[:-1] & live_h[1:]
            raw = np.empty((k, m), dtype=np.int64)
            raw[0] = x_prev
            np.subtract(D[1:k], D[: k - 1], out=raw[1:])
            top = None
            if kv.reserve_ahead:  # the top-up rule: committed KV positions when P_j is built
                pd = np.array([r.prefill_done for r in reqs], dtype=np.int64)
                len0 = np.array([r.kv_len for r in reqs], dtype=np.int64)
                top = (len0, np.maximum(pd, ctx - 1))
            elif kv.paged:        # the window rule on a paged pool: pages follow the positions
                top = (np.array([r.kv_len for r in reqs], dtype=np.int64),)
            usage = kv.stretch_usage(kv0, member, fin, w, raw, processed, *(top or ()))  # (raw reused)
        else:
            processed = None
            len0 = np.array([r.kv_len for r in reqs], dtype=np.int64) if kv.paged else None
            usage = kv.stretch_usage(kv0, member, fin, w, None, None, len0)
        if kv.reserve_ahead or kv.paged or kv.used + w * int(bs.sum()) > kv.capacity:
            stop = min(stop, usage.first_over(kv.capacity))
        run.swa = None
        if kv.swa_capacity:  # hybrid sliding-window: the SWA pool's rules too (sim/swa_stretch.py)
            run.swa = kv.stretch_swa(reqs, usage, member, fin, ctx, first_step)
            stop = min(stop, run.swa.first_over(kv.swa_capacity))
        if stop < 1:
            return None
        run.k, run.stop = k, stop
        run.D, run.H, run.member, run.batch_size = D, H, member, bs
        pbs = np.empty(k, dtype=np.int64)
        pbs[0], pbs[1:] = prev_plan.batch_size, bs[:-1]
        run.process_batch_size = pbs
        run.inp = inp0
        ctx *= member
        run.ctx_sum = ctx.sum(axis=1)
        run.fin, run.processed, run.kv = fin, processed, usage
        return run

    # ---------------------------------------------------------------- outputs
    def commits(self, n: int) -> np.ndarray:
        """Tokens the device commits at steps 0..n-1, int (n, m)."""
        return self.D[1 : n + 1] - self.D[:n]

    def delivered_and_commits(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`delivered`, :meth:`commits`) of the first n iterations from one grid: the
        host sees a step's commits one iteration later (H[j + 1] = D[j]), so both are slices
        of D[: n + 1] - H[: n + 1]."""
        g = self.D[: n + 1] - self.H[: n + 1]
        return g[:n], g[1:]

    def delivered(self, n: int) -> np.ndarray:
        """Tokens delivered at iterations 0..n-1, int (n, m) (0 = no delivery)."""
        return self.H[1 : n + 1] - self.H[:n]

    def finish_iter(self) -> np.ndarray:
        """Iteration whose deliveries complete each request, -1 if none in the run, (m,)."""
        fin = self.fin
        return np.where(fin.any(axis=0), fin.argmax(axis=0), -1)

    def kv_scheduled(self, n: int) -> np.ndarray:
        """KV pool slots in use after each of the first n passes' reservation, int (n,)."""
        return self.kv.scheduled[:n]

    def kv_after(self, n: int) -> tuple[int, int]:
        """(KV slots in use after n iterations, the largest reservation among them)."""
        return int(self.kv.scheduled[n - 1] - self.kv.freed[n - 1]), int(self.kv.scheduled[:n].max())

    def in_plan(self, j: int) -> list[bool]:
        """Each request is in plan P_j."""
        return self.member[j].tolist()

    def delayed_passes(self, n: int) -> int:
        """Admission passes the policy delayed among the first n iterations."""
        return int(self.delayed[:n].sum()) if self.delayed is not None else 0

    def plan_at(self, j: int) -> tuple[BatchPlan, StepOutput]:
        """Plan P_j (from the one decode plan builder) and what the device commits for it."""
        sel = self.member[j]
        h = self.H[j][sel]
        plan = decode_plan(self.first_step + j, self.spec, self.window, self.rids[sel].tolist(),
                           (self.inp[sel] + h).tolist(), h.tolist(), self.cap[sel].tolist())
        return plan, StepOutput(self.D[j + 1][sel] - self.D[j][sel])

    def state_after(self, n: int) -> tuple[list[int], list[int], list[bool], list[int] | None]:
        """Each request after n iterations: (output tokens committed on the host, KV slots
        held, finished, verify cycles added or None without speculative decoding)."""
        h = self.H[n]
        fin = h >= self.cap
        held = self.kv.held_after(n, self.member, fin)
        cycles = self.processed[:n].sum(axis=0).tolist() if self.processed is not None else None
        return h.tolist(), held.tolist(), fin.tolist(), cycles

    def device_after(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The device's committed counts and verify cycles drawn after n iterations, (m,)
        each (cycles None without speculative decoding)."""
        if self.window > 1:
            return self.D[n], self.cyc0 + (self.D[:n] < self.cap).sum(axis=0)
        return self.D[n], None
