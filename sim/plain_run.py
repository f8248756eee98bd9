"""A non-speculative decode stretch in closed form: the scheduler and device side (time-free).

The fast path of :mod:`sim.decode_run` for plain decoding (no speculative decoding, window
1). It collapses the same iterations (same notation: plan P_j, device counts D, host counts
H, one-step-late results) but needs no (iterations x requests) grid, because without
speculation every count is a known function of the iteration index:

- D_i[j] = min(d0_i + j, cap_i) (each decode commits one token until the target) and
  H_i[j] = D_i[j - 1] for j >= 1 (H_i[0] = h0_i);
- a request live at the start (h0 < cap) finishes at the processing of iteration
  f_i = cap_i - d0_i (the first j with D_i[j] = cap_i) and is in the plans P_0 .. P_{L_i},
  L_i = f_i (it rides one more step after its last commit), or L_i = f_i - 1 with
  ``skip_finishing`` (sglang 0.5.23 ``_reqs_finishing_inflight``: a request whose step in
  flight commits its last token sits out; at j = 0 this holds exactly when the forward in
  flight holds it, since a live request in a decode forward always commits one token);
- so the batch size is piecewise constant (it drops at the L_i + 1), the plans' context
  sums are arithmetic series between those points (each member's context grows by one
  token a pass), and KV use is a sum of per-request linear terms. On a paged pool
  (page_size p > 1, :class:`sim.kv_ledger.KVLedger` ``paged``) a request whose KV holds
  len0_i positions at the start gains ceil_p(len0_i + t) - ceil_p(len0_i) slots over t
  passes (a page at each pass that starts one: sglang 0.5.23 ``alloc_decode``), in place
  of t (:meth:`PlainRun._grown`).

Everything is then computed per request or per breakpoint in plain Python ints (a
stretch holds a handful of requests; a burst a few hundred), and the per-iteration
quantities the engine needs (batch size, context sum) are handed out as breakpoints
(:attr:`PlainRun.changes`). The results are those of :meth:`DecodeRun.compute` with
window 1, which equal the step-by-step passes (INV-7, tests/test_sim_speed_equivalence.py
compares both against ``schedule()`` / ``process_result()``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

import numpy as np
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.kv_ledger import KVLedger
from specsched.sim.plan import BatchPlan, StepOutput, decode_plan
from specsched.sim.request import Req

MAX_STOP = 1 << 62
"""Larger than any iteration count (no finish ahead)."""


def _grown(len0: int, t: int, page: int) -> int:
    """Slots a request whose KV holds ``len0`` positions gains over ``t`` decode passes on a
    paged pool: the pages its new positions start (ceil_page(len0 + t) - ceil_page(len0))."""
    return (-len0 // page - -(len0 + t) // page) * page if t > 0 else 0


def _both(delta: dict[int, int], n: int) -> list[int]:
    """Requests delivering at both j - 1 and j, for j = 1 .. n - 1, from the changes of that
    count (``delta``: j -> change); it is constant between the points where requests start
    or stop delivering."""
    both: list[int] = []
    c, j0 = 0, 1
    for p in sorted(delta):
        if p > j0:
            both.extend([c] * (p - j0))
            j0 = p
        c += delta[p]
    if n > j0:
        both.extend([c] * (n - j0))
    return both


def _both_from_ends(at_one: int, from_two: int, ends: list[int], n: int) -> list[int]:
    """:func:`_both` when every request starts delivering at iteration 0 or 1 (a closed-form
    stretch): ``at_one`` requests deliver at both 0 and 1; for j >= 2 the requests delivering
    at both j - 1 and j are those whose last delivery is at j or later: ``from_two`` of them
    at j = 2, one fewer after each of ``ends`` (the last delivering iterations below n - 1
    that are >= 2, sorted here). Counting these in :meth:`PlainRun.outcome` takes a compare
    per request instead of two dict updates."""
    if n < 2:
        return []
    if not ends:   # no request stops delivering inside the run (most stretches)
        return [at_one] + [from_two] * (n - 2)
    both = [at_one]
    c, j = from_two, 2
    ends.sort()
    for b in ends:
        both.extend([c] * (b + 1 - j))   # iterations j .. b
        j = b + 1
        c -= 1
    if n > j:
        both.extend([c] * (n - j))
    return both


class PlainOutcome:
    """What applying the first n iterations of a :class:`PlainRun` changes
    (:meth:`PlainRun.outcome`). Lists per request, in the run's order.

    Attributes:
        n: iterations applied.
        outs, held, done: output tokens committed on the host, KV slots held, finished.
        kept: the requests in the plan left in flight (P_{n-1}), in order: the running batch
            after (the Scheduler's apply_stretch takes this list as its own).
        device: the device's committed counts.
        used, peak: KV pool slots in use after the n iterations; the KV ledger's peak after
            them: the larger of its peak before the stretch (:attr:`PlainRun.peak0`) and the
            stretch's largest reservation (:meth:`PlainRun.kv_after`), which is not summed
            when every reservation of the n passes together stays within the former.
        plan, output: P_{n-1} and what the device commits for it.
        deliver: (spans, both): a (rid, first, last delivering iteration) tuple for each
            request that gets tokens, and ``both`` of :meth:`PlainRun.deliveries` (what
            :meth:`sim.records.Recorder.deliver_ones` takes).
        finished: indices of the requests completed by the n iterations (at T_{fin + 1}).
        lens: each request's KV positions after the n iterations on a paged pool (they do
            not move with its slots there), else None.
    """

    __slots__ = ("n", "outs", "held", "done", "kept", "device", "used", "peak", "plan", "output",
                 "deliver", "finished", "lens")


class PlainRun:
    """The next iterations of a non-speculative decode stretch (module docstring).

    Built by :meth:`compute` (the Scheduler calls it from ``decode_stretch``); the
    Scheduler's ``apply_stretch`` applies the first ``n <= stop`` iterations; the engine
    times them from :attr:`bs0`, :attr:`ctx0` and :attr:`changes`.

    Attributes (``m`` = requests at the start, in batch order; lists of int, length m):
        stop: iterations that may be applied (the scheduler side allows no more).
        reqs: the m requests. rid_list: their ids. num_merged: how many (the last) join
            from the prefill in flight.
        cap, h0, d0, inp, kv0, x0: output target, host and device committed counts, prompt
            length, KV slots held, tokens the forward in flight commits (0 if not in it).
        fin: iteration whose processing completes the request (-1: finished before).
        last: last plan index holding the request (-1: none).
        rows: per request, the tuple (req, last, cap, d0, fin, rid, inp, kv0, x0, h0):
            what :meth:`compute` read and :meth:`outcome` reads back, as one tuple per
            request (one append here and one unpacking there; six lists built with
            appends and read back through a zip of nine cost about twice as much over
            a stretch's handful of requests). cap, d0, h0, inp and kv0 are its columns.
        bs0, ctx0: batch size and context sum (tokens) of P_0.
        changes: (j, bs, base) for j >= 1 in increasing j: from iteration j on, P_j holds
            ``bs`` requests with contexts summing to base + j * bs (until the next entry).
        pbs0: batch size of the forward in flight (processed at iteration 0).
        page: the KV page on a paged pool, else 1. len0: each request's KV positions at
            the start (page > 1 only, else None).
        used0, peak0: KV pool slots in use at the start; the pool's peak use before the
            stretch (the ledger's; :attr:`PlainOutcome.peak`).
        first_step: the plan index of P_0.
    """

    __slots__ = ("stop", "reqs", "rid_list", "num_merged", "rows", "x0", "fin", "last",
                 "bs0", "ctx0", "changes", "pbs0", "first_step", "used0", "peak0", "count_delayed", "min_fin",
                 "all_live", "_outcome", "page", "len0")
    spec = False
    window = 1

    @classmethod
    def compute(
        cls,
        reqs: list[Req],
        num_merged: int,
        device: DeviceTokens,
        prev_plan: BatchPlan,
        prev_output: StepOutput,
        *,
        first_step: int,
        kv: KVLedger,
        num_waiting: int,
        delays: Callable[[int, int], bool],
        max_iters: int,
        stop_at_finish: bool,
        finishes_left: int,
        skip_finishing: bool = False,
        filter_first: bool = False,
        latched: bool = False,
    ) -> PlainRun | None:
        """Compute the run; arguments as :meth:`sim.decode_run.DecodeRun.compute` (window 1,
        no speculative decoding). ``max_iters`` bounds ``stop`` only: the cost of this
        computation does not grow with the number of iterations.

        Returns:
            The run, or None when host and device disagree or it would be empty.
        """
        m = len(reqs)
        get = device.committed.get
        n_prev = m - prev_plan.batch_size
        x0 = [0] * n_prev + prev_output.counts()
        if len(x0) != m:
            raise ValueError(f"the forward in flight has {prev_plan.batch_size} rows and {len(x0) - n_prev} counts")
        rids, rows = [], []
        fin = [-1] * m
        last = [-1] * m
        nlive = fin0 = bs0 = ctx0 = held = base = 0    # held: slots all plans would reserve
        min_fin = MAX_STOP
        order = []   # (first plan without it, its context in P_1 minus 1) for P_1's requests
        drop = 1 if skip_finishing else 0
        # x0 read by index (its length is checked above): zip(..., strict=True) builds a
        # keyword dict per call, ~0.4 us over a stretch's handful of requests (a few times
        # per arrival on the hot path, docs/performance.md)
        for i, r in enumerate(reqs):
            xi = x0[i]
            rid = r.rid   # four reads, not a four-tuple built and unpacked
            c = r.max_new_tokens
            h = r.output_len
            n_in = r.input_len
            d = get(rid)
            if d is None:
                return None
            rids.append(rid)
            if h >= c:
                if d != c:
                    return None  # host and device disagree
                rows.append((r, -1, c, d, -1, rid, n_in, r.kv_allocated, xi, h))
                continue
            if d - h != xi:
                return None  # host and device disagree (e.g. tokens discarded by a retraction)
            f = c - d
            x = f - drop
            rows.append((r, x, c, d, f, rid, n_in, r.kv_allocated, xi, h))
            fin[i] = f
            last[i] = x
            nlive += 1
            if f < min_fin:
                min_fin = f
            if x >= 0:
                bs0 += 1
                ctx0 += n_in + h
                held += x + 1
                if x >= 1:
                    g = n_in + d - 1
                    order.append((x + 1, g))
                    base += g
        page = kv.page_size if kv.paged else 1
        len0 = [r.kv_len for r in reqs] if page > 1 else None
        if page > 1:
            # slots all plans would reserve: each member's new pages (module docstring)
            held = 0
            for i, x in enumerate(last):
                if x >= 0:
                    held += _grown(len0[i], x + 1, page)
        if nlive == 0 or (nlive > kv.available and page == 1):
            return None
        fin0 = fin.count(0)
        if fin0 >= finishes_left or (stop_at_finish and fin0):
            return None
        run = cls()
        run._outcome = None
        run.reqs, run.rid_list, run.num_merged, run.first_step = reqs, rids, num_merged, first_step
        run.rows, run.x0, run.fin, run.last = rows, x0, fin, last
        run.pbs0 = prev_plan.batch_size
        run.used0 = kv.used
        run.peak0 = kv.peak
        run.min_fin = min_fin
        run.all_live = nlive == m
        run.page, run.len0 = page, len0

        # where the run must end (scheduler side): an empty batch, a finish a client
        # reacts to, the last finish, max_iters
        # min(a, b) written out as b if b < a else a where it runs once a stretch: builtin
        # min/max parse their arguments through a tuple on every call in 3.11
        stop = max(last) + 1
        if stop_at_finish and min_fin < stop:
            stop = min_fin
        fs = None
        if finishes_left <= nlive or num_waiting:
            fs = sorted(f for f in fin if f >= 0)
            if finishes_left <= nlive:
                stop = min(stop, fs[finishes_left - 1])
        cap_iters = int(max_iters)
        if cap_iters < 1:
            cap_iters = 1
        if cap_iters < stop:
            stop = cap_iters
        if stop >= 1 and kv.used + held > kv.capacity and kv.used + run._held_by(stop) > kv.capacity:
            stop = min(stop, run._first_over(kv.capacity, stop))
        # admission: with requests waiting, every pass must be delayed (or the batch full)
        run.count_delayed = bool(num_waiting) and not latched
        if num_waiting and stop >= 1:
            if latched:
                stop = min(stop, min(last) + 1)  # batch_is_full holds until one leaves
            else:
                stop = run._delayed_until(stop, delays, filter_first, m, nlive, fs)
        if stop < 1:
            return None
        run.stop = stop

        # P_0 and the breakpoints of (batch size, context sum) from P_1 on
        run.bs0, run.ctx0 = bs0, ctx0
        order.sort()
        bs = len(order)
        changes = [(1, bs, base)]   # base: P_1's context sum minus bs (summed in the loop above)
        at = 1                      # changes[-1]'s iteration
        for e, g in order:
            bs -= 1
            base -= g
            if at == e:
                changes[-1] = (e, bs, base)
            else:
                changes.append((e, bs, base))
                at = e
        run.changes = changes
        return run

    @property
    def cap(self) -> list[int]:
        """Each request's output target."""
        return [t[2] for t in self.rows]

    @property
    def d0(self) -> list[int]:
        """The device's committed count of each request at the start."""
        return [t[3] for t in self.rows]

    @property
    def inp(self) -> list[int]:
        """Each request's prompt length."""
        return [t[6] for t in self.rows]

    @property
    def kv0(self) -> list[int]:
        """KV slots each request holds at the start."""
        return [t[7] for t in self.rows]

    @property
    def h0(self) -> list[int]:
        """The host's committed count of each request at the start."""
        return [t[9] for t in self.rows]

    def _held_by(self, t: int) -> int:
        """Slots the plans P_0 .. P_{t-1} reserve in all."""
        if self.page == 1:
            return sum(min(x + 1, t) for x in self.last)
        p, len0 = self.page, self.len0
        return sum(_grown(len0[i], min(x + 1, t), p) for i, x in enumerate(self.last) if x >= 0)

    def _gain(self, i: int, t: int) -> int:
        """Slots request i gains over its first t passes."""
        return t if self.page == 1 else _grown(self.len0[i], t, self.page)

    # ------------------------------------------------------------ scheduler side
    def _delayed_until(self, stop: int, delays: Callable[[int, int], bool], filter_first: bool, m: int,
                       nlive: int, fs: list[int]) -> int:
        """The first pass below ``stop`` the admission policy does not delay, else stop.
        The gate's inputs (running and active batch sizes) change only at j = 1 and where
        requests finish or leave, so the policy is asked once per such segment."""
        lasts = sorted(self.last)
        nf = len(fs)
        points = sorted({0, 1, *(f + 1 for f in fs), *(x + 2 for x in lasts if x >= 0)})
        cache: dict[tuple[int, int], bool] = {}
        for j in points:
            if j >= stop:
                break
            active = nlive if j == 0 else nf - bisect_left(fs, j)         # unfinished on the host
            if filter_first:
                rb = active
            else:
                rb = m if j == 0 else m - bisect_left(lasts, j - 1)        # len(P_{j-1})
            key = (rb, active)
            d = cache.get(key)
            if d is None:
                d = cache[key] = delays(*key)
            if not d:
                return j
        return stop

    def _first_over(self, capacity: int, stop: int) -> int:
        """The first iteration below ``stop`` whose reservation exceeds ``capacity`` (it would
        retract instead), else stop. One step per iteration: only near the KV limit."""
        for j, s in enumerate(self._scheduled_iter(stop)):
            if s > capacity:
                return j
        return stop

    def _scheduled_iter(self, n: int):
        """KV pool slots in use after each of P_0 .. P_{n-1}'s reservation (ints)."""
        if self.page > 1:
            yield from self._scheduled_paged(n)
            return
        ends: dict[int, int] = {}
        freed: dict[int, int] = {}
        bs = 0
        kv0 = self.kv0
        for i, x in enumerate(self.last):
            if x >= 0:
                bs += 1
                ends[x + 1] = ends.get(x + 1, 0) + 1
            f = self.fin[i]
            if f >= 0:
                freed[f] = freed.get(f, 0) + kv0[i] + x + 1
        s = self.used0
        for j in range(n):
            bs -= ends.get(j, 0)
            s += bs - freed.get(j - 1, 0)
            yield s

    def _scheduled_paged(self, n: int):
        """:meth:`_scheduled_iter` on a paged pool: pass j takes a page for each member whose
        KV length len0 + j starts one."""
        p, len0, kv0 = self.page, self.len0, self.kv0
        take: dict[int, int] = {}
        freed: dict[int, int] = {}
        for i, x in enumerate(self.last):
            f = self.fin[i]
            if f >= 0:
                freed[f] = freed.get(f, 0) + kv0[i] + self._gain(i, x + 1)
            end = x if x < n else n - 1
            j = -len0[i] % p   # the first pass at a page boundary
            while j <= end:
                take[j] = take.get(j, 0) + p
                j += p
        s = self.used0
        for j in range(n):
            s += take.get(j, 0) - freed.get(j - 1, 0)
            yield s

    def kv_scheduled(self, n: int) -> np.ndarray:
        """KV pool slots in use after each of the first n passes' reservation, int (n,)."""
        return np.fromiter(self._scheduled_iter(n), dtype=np.int64, count=n)

    def kv_after(self, n: int) -> tuple[int, int]:
        """(slots in use after n iterations, the largest reservation among them).

        Between two iterations where requests finish the reservation only grows, so the
        peak is at iteration n - 1 or at an iteration whose processing frees slots."""
        last, fin, kv0 = self.last, self.fin, self.kv0
        held = freed = 0     # slots reserved by P_0 .. P_{n-1}; freed by finishes before n - 1
        points = set()
        free_last = 0        # ... and at n - 1
        gain = self._gain
        for i, x in enumerate(last):
            held += gain(i, x + 1 if x < n else n)
            f = fin[i]
            if 0 <= f < n:
                if f < n - 1:
                    freed += kv0[i] + gain(i, x + 1)
                    points.add(f)
                else:
                    free_last += kv0[i] + gain(i, x + 1)
        peak = self.used0 + held - freed   # scheduled[n - 1]
        used = peak - free_last
        if points:
            peak = self._peak_at(points, n, peak)
        return used, peak

    def _peak_at(self, points, n: int, peak: int) -> int:
        """The largest of ``peak`` and the reservations after the passes ``points`` (< n - 1)."""
        # scheduled[j] = used0 + sum_i min(last_i + 1, j + 1) - sum_{fin_i < j} freed_i;
        # loops, not generators (a resume per request; about one stretch in four gets here)
        if self.page > 1:
            gain = self._gain
            frees = [(f, k0 + gain(i, x + 1)) for i, (_, x, _, _, f, _, _, k0, _, _) in enumerate(self.rows)
                     if 0 <= f < n - 1]
            for j in points:
                s = self.used0 + self._held_by(j + 1) - sum(g for f, g in frees if f < j)
                if s > peak:
                    peak = s
            return peak
        lasts = sorted(self.last)
        frees = []
        for _, x, _, _, f, _, _, k0, _, _ in self.rows:
            if 0 <= f < n - 1:
                frees.append((f, k0 + x + 1))
        frees.sort()
        a_sum = a_cnt = b_sum = ia = ib = 0
        ne, nb = len(lasts), len(frees)
        for j in sorted(points):
            while ia < ne and lasts[ia] < j + 1:     # last + 1 <= j + 1
                a_sum += lasts[ia] + 1
                a_cnt += 1
                ia += 1
            while ib < nb and frees[ib][0] < j:
                b_sum += frees[ib][1]
                ib += 1
            s = self.used0 + a_sum + (j + 1) * (ne - a_cnt) - b_sum
            if s > peak:
                peak = s
        return peak

    def outcome(self, n: int) -> PlainOutcome:
        """Everything applying the first n (1 <= n <= stop) iterations changes, in one pass
        over the requests (the Scheduler's ``apply_stretch``, the device's counts and the
        records each read their part). Each field equals what the per-purpose method gives
        (:meth:`state_after`, :meth:`kv_after`, :meth:`in_plan` and :meth:`plan_at` at
        n - 1, :meth:`device_after`, :meth:`deliveries`): the same formulas, evaluated in
        one loop instead of six (tests/test_plain_run.py compares them). Computed once per n."""
        o = self._outcome
        if o is not None and o.n == n:
            return o
        if n <= self.min_fin and self.all_live and self.page == 1:
            o = self._outcome = self._outcome_running(n)
            return o
        j = n - 1
        outs, held, done, kept, dev = [], [], [], [], []
        p_rids, p_pre, p_h, p_cap, p_out = [], [], [], [], []
        spans = []
        at_one = from_two = 0    # requests delivering at both 0 and 1; last delivering at >= 2
        fins, points, ends = [], [], []
        tot = freed = free_last = 0
        # one tuple per request (:attr:`rows`); the formulas of the per-purpose methods
        paged = self.page > 1
        gain = self._gain
        lens = [] if paged else None
        for i, (r, x, c, d, f, rid, n_in, k0, x0, h0) in enumerate(self.rows):
            k = x + 1 if x < n else n          # passes of P_0 .. P_{n-1} holding it
            if paged:
                lens.append(self.len0[i] + k)
                k = gain(i, k)                 # ... and the slots they took
            tot += k
            h = d + j
            # the device's count min(d + n, c) is c here and h + 1 below (h + 1 <= c there)
            if h >= c:
                outs.append(c)
                done.append(True)
                held.append(0)
                dev.append(c)
            else:
                outs.append(h)
                done.append(False)
                held.append(k0 + k)
                dev.append(h + 1)
            if x >= j:
                # in P_j: x = f - drop >= j with f = c - d, so h = d + j <= c and the host's
                # count min(h - 1, c) before P_j is h - 1
                kept.append(r)
                hj = h - 1 if j else h0
                p_rids.append(rid)
                p_pre.append(n_in + hj)
                p_h.append(hj)
                p_cap.append(c)
                p_out.append(1 if h < c else 0)
            if f >= 0:
                a = 0 if x0 else 1
                b = f if f < j else j
                if a <= b:
                    spans.append((rid, a, b))
                    if b >= 2:
                        from_two += 1
                        if a == 0:
                            at_one += 1
                    elif a == 0 and b == 1:
                        at_one += 1
                if f < n:
                    fins.append(i)
                    g = k0 + (gain(i, x + 1) if paged else x + 1)
                    if f < j:
                        freed += g
                        points.append(f)
                        if f >= 2:
                            ends.append(f)
                    else:
                        free_last += g
        o = PlainOutcome()
        o.n = n
        o.outs, o.held, o.done, o.kept, o.device, o.finished = outs, held, done, kept, dev, fins
        o.lens = lens
        peak = self.used0 + tot - freed
        o.used = peak - free_last
        peak0 = self.peak0
        if self.used0 + tot <= peak0:
            # no pass reserves more than used0 + tot (every reservation of the n passes,
            # nothing freed): the ledger's peak stays, whatever the largest reservation is
            o.peak = peak0
        else:
            if len(points) == 1:
                # one finish before n - 1, the run's first (min_fin): nothing is freed before
                # it, so the reservation there is used0 + sum of min(last + 1, min_fin + 1);
                # summed here only (about one stretch in three has such a finish)
                s = self.used0 + self._held_by(self.min_fin + 1)
                if s > peak:
                    peak = s
            elif points:
                peak = self._peak_at(points, n, peak)
            o.peak = peak if peak > peak0 else peak0
        o.plan = decode_plan(self.first_step + j, False, 1, p_rids, p_pre, p_h, p_cap)
        o.output = StepOutput.from_list(p_out)
        o.deliver = (spans, _both_from_ends(at_one, from_two, ends, n))
        self._outcome = o
        return o

    def _outcome_running(self, n: int) -> PlainOutcome:
        """:meth:`outcome` where every request runs through the n iterations: each was live at
        the start (:attr:`all_live`), none finishes in them (``n <= min_fin``) and the pool is
        not paged. Then, for every request, with j = n - 1: f = c - d >= n, so its last plan
        index x = f - drop >= n - 1 = j (it is in every plan P_0 .. P_j: k = n passes hold
        it), h = d + j < c (not done; the device's count h + 1; P_j's output 1), its
        deliveries run from a = 0 (in the forward in flight) or 1 to b = min(f, j) = j, no
        finish frees a slot (no freed slots, no points, no ends) and the pool's use is
        used0 + m n. The general loop's formulas with those branches decided, in one loop
        without the tests; the same lists in the same order (tests/test_plain_run.py
        compares both)."""
        j = n - 1
        outs, held, dev, p_pre, p_h, p_cap, spans = [], [], [], [], [], [], []
        zeros = 0   # requests in the forward in flight (x0 > 0): they deliver from iteration 0
        for _, _, c, d, _, rid, n_in, k0, x0, h0 in self.rows:
            h = d + j
            outs.append(h)
            held.append(k0 + n)
            dev.append(h + 1)
            hj = h - 1 if j else h0
            p_pre.append(n_in + hj)
            p_h.append(hj)
            p_cap.append(c)
            if x0:
                spans.append((rid, 0, j))
                zeros += 1
            elif j:
                spans.append((rid, 1, j))
        m = len(outs)
        o = PlainOutcome()
        o.n = n
        o.outs, o.held, o.done, o.kept, o.device, o.finished = outs, held, [False] * m, list(self.reqs), dev, []
        o.lens = None
        used = self.used0 + m * n
        o.used = used
        o.peak = used if used > self.peak0 else self.peak0
        o.plan = decode_plan(self.first_step + j, False, 1, self.rid_list, p_pre, p_h, p_cap)
        o.output = StepOutput.from_list([1] * m)
        # at_one: requests delivering at both 0 and 1; from_two: those whose last delivery
        # is at >= 2 (every one with j >= 2)
        o.deliver = (spans, _both_from_ends(zeros if j else 0, len(spans) if j >= 2 else 0, [], n))
        return o

    def delayed_passes(self, n: int) -> int:
        """Admission passes the policy delayed among the first n iterations."""
        return n if self.count_delayed else 0

    def in_plan(self, j: int) -> list[bool]:
        """Each request is in plan P_j."""
        return [x >= j for x in self.last]

    def state_after(self, n: int) -> tuple[list[int], list[int], list[bool], None]:
        """Each request after n >= 1 iterations: (output tokens committed on the host, KV
        slots held, finished, None: no verify cycles)."""
        outs, held, done = [], [], []
        for i, (_, x, c, d, _, _, _, k0, _, _) in enumerate(self.rows):
            h = min(d + n - 1, c)
            f = h >= c
            outs.append(h)
            done.append(f)
            held.append(0 if f else k0 + self._gain(i, max(0, min(x + 1, n))))
        return outs, held, done, None

    def device_after(self, n: int) -> tuple[list[int], None]:
        """The device's committed counts after n iterations (no verify cycles)."""
        return [min(d + n, c) for d, c in zip(self.d0, self.cap, strict=True)], None

    def plan_at(self, j: int) -> tuple[BatchPlan, StepOutput]:
        """Plan P_j (from the one decode plan builder) and what the device commits for it."""
        rids, pre, hs, caps, out = [], [], [], [], []
        for _, x, c, d, _, rid, n_in, _, _, h0 in self.rows:
            if x < j:
                continue
            h = h0 if j == 0 else min(d + j - 1, c)
            rids.append(rid)
            pre.append(n_in + h)
            hs.append(h)
            caps.append(c)
            out.append(1 if d + j < c else 0)
        return decode_plan(self.first_step + j, False, 1, rids, pre, hs, caps), StepOutput(np.array(out, dtype=np.int64))

    # ------------------------------------------------------------------ records
    @property
    def rids(self) -> np.ndarray:
        """The requests' ids, int (m,)."""
        return np.array(self.rid_list, dtype=np.int64)

    def delivered(self, n: int) -> np.ndarray:
        """Tokens delivered at iterations 0..n-1, int (n, m) (0 = no delivery)."""
        jj = np.arange(n)[:, None]
        fin = np.array(self.fin, dtype=np.int64)
        first = np.where(np.array(self.x0, dtype=np.int64) > 0, 0, 1)
        return ((jj >= first) & (jj <= fin)).astype(np.int64)

    def finish_iter(self) -> np.ndarray:
        """Iteration whose deliveries complete each request, -1 if none, (m,)."""
        return np.array(self.fin, dtype=np.int64)

    def deliveries(self, n: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """The requests that get tokens in the first n iterations: (their indices, first
        and last delivering iteration, requests delivering at both j - 1 and j for
        j = 1 .. n - 1). Each delivers one token at every iteration in between."""
        idx, first, lastd = [], [], []
        delta: dict[int, int] = {}
        for i, f in enumerate(self.fin):
            if f < 0:
                continue
            a = 0 if self.x0[i] else 1
            b = f if f < n - 1 else n - 1
            if a > b:
                continue
            idx.append(i)
            first.append(a)
            lastd.append(b)
            delta[a + 1] = delta.get(a + 1, 0) + 1
            delta[b + 1] = delta.get(b + 1, 0) - 1
        return idx, first, lastd, _both(delta, n)

    def batch_size_at(self, j: int) -> int:
        """len(P_j)."""
        return sum(1 for x in self.last if x >= j)

    def batch_sizes(self, n: int) -> list[int]:
        """len(P_j) for j = 0 .. n - 1."""
        ls = sorted(self.last)
        m = len(ls)
        return [m - bisect_left(ls, j) for j in range(n)]

    def commits(self, n: int) -> list[int]:
        """Tokens the device commits at each of steps 0..n-1 (one per unfinished request)."""
        fs = sorted(f for f in self.fin if f >= 0)
        return [len(fs) - bisect_left(fs, j + 1) for j in range(n)]
