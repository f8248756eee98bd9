"""Costs and times of a non-speculative decode stretch in one pass (:mod:`sim.plain_run`).

The times of an overlap-loop iteration are a chain of float additions (the steps are
those of :mod:`sim.host_timeline`, without the publish wait, which only speculative
decoding has): with T_j the host time at the top of the loop and E_{j-1} the end of the
forward in flight,

1. schedule: t = T_j + hs_j; launch: t = t + hl_j; the forward runs from
   S_j = max(t, E_{j-1}) to E_j = S_j + c_j; the rest of the launch call: t = t + ht_j;
2. results: if E_{j-1} > t the host waits rw_j = (E_{j-1} - t) + wake, t = t + rw_j;
3. process: T_{j+1} = t + hp_j.

:func:`walk` runs that chain one iteration at a time with Python floats, exactly the
operations of the step-by-step engine, so the times are bit-identical to it; what it
saves is everything around them: the costs come from the run's breakpoints (the batch
size and the context sum change at a handful of known iterations, the cost key, the mean
context rounded to 10 tokens, every ~10 iterations, at a sum found ahead by
:func:`_key_until`), and the walk stops at the first
iteration that would reach the next outside event, so no iteration is computed in vain
and no array is built per iteration.
"""

from __future__ import annotations

from collections.abc import Callable

from specsched.sim.plain_run import PlainRun

_LIMITS: dict[tuple[int, int, int], int] = {}
"""(bs, key, sum mod bs) -> the sum at which the key changes (:func:`_key_until`)."""


def _key_until(ctx: int, bs: int, key: int) -> int:
    """The smallest context sum ctx + q * bs (q >= 1) whose cost key (round(sum / bs / 10),
    half to even) is not ``key``. It depends on ctx only through ctx mod bs (the key never
    decreases as the sum grows, so it is the first sum of that residue above the key's
    range): computed once per (bs, key, residue) by :func:`_key_limit`."""
    code = (bs, key, ctx % bs)
    lim = _LIMITS.get(code)
    if lim is None:
        if len(_LIMITS) >= 1 << 16:
            _LIMITS.clear()
        lim = _LIMITS[code] = _key_limit(ctx, bs, key)
    return lim


def _key_limit(ctx: int, bs: int, key: int) -> int:
    """:func:`_key_until` computed: the estimate from the rounding boundary is moved down
    while the step before it already changes the key, and up while it does not yet, each
    test being the exact key computation."""
    q = max(1, int(10 * key + 5 - ctx / bs))
    while q > 1 and round((ctx + (q - 1) * bs) / bs / 10.0) != key:
        q -= 1
    while round((ctx + q * bs) / bs / 10.0) == key:
        q += 1
    return ctx + q * bs


class PlainTimes:
    """The times of a closed-form stretch's first ``n`` iterations (:func:`walk`).

    Attributes:
        n: iterations to apply (0 = none).
        T: host times T_0 .. T_n at the top of each iteration (s; list, at least n + 1).
        E, S, RW: GPU ends, GPU starts and results waits (0.0 = none) per iteration (s;
            lists, at least n; only when ``detail``, else empty).
        blocked: ``blocked0`` plus every results wait of the n iterations, added in order.
        blocked_rows: the results waits of the first n - 1 iterations, added in order from 0.
        busy: ``busy0`` plus E_j - S_j of the n iterations, added in order.
        s0, s_last, e_last, rw_last: GPU start of the first and the last iteration, the
            last GPU end, the last wait.
        pieces: the n iterations' runs of one batch size, in order: (batch size,
            iterations, GPU end of the first, GPU end of the last) (s), the iterations
            summing to n (what the steady decode window needs:
            :meth:`sim.compact_records.StepTotals.add_decode_run`).
    """

    __slots__ = ("n", "T", "E", "S", "RW", "blocked", "blocked_rows", "busy", "s0", "s_last", "e_last", "rw_last",
                 "pieces")


def walk(run: PlainRun, t0: float, e0: float, t_next: float, wake: float,
         gpu: Callable[[int, int, int], float], host: Callable[[int], tuple[float, float, float]],
         blocked0: float = 0.0, busy0: float = 0.0, detail: bool = False, limit: int | None = None,
         tail: Callable[[int], float] | None = None, memo: dict | None = None) -> PlainTimes:
    """Time the iterations of ``run`` from host time ``t0`` until the next event.

    Args:
        run: the stretch (its first ``run.stop`` iterations may be applied).
        t0: host time (s) at the top of the first iteration. e0: end (s) of the forward in
            flight. t_next: time (s) of the next outside event (inf: none).
        wake: host wake-up seconds after a wait that really waited.
        gpu: ``gpu(bs, ctx_sum, key)``: GPU seconds of a decode of ``bs`` requests whose
            contexts sum to ``ctx_sum`` tokens, ``key`` = the mean context rounded to 10
            tokens, in tens (round half to even, as numpy's rint).
        host: ``host(bs)``: (schedule, launch, process) host seconds for a batch of bs.
        blocked0, busy0: start values of the running sums (s): the step-by-step engine adds
            each iteration's results wait and GPU time to its totals in launch order, so
            the sums continue those totals with the very same additions.
        detail: also keep every GPU start and results wait (full records).
        limit: apply at most this many iterations (below ``run.stop``).
        tail: ``tail(bs)``: host seconds of the launch call after its forward is queued
            (host.launch_tail_*); None: 0.
        memo: the caller's cache of segment costs for this ``gpu`` (a dict kept across
            calls: :func:`_segment`); None: a new one.

    Returns:
        :class:`PlainTimes`: n iterations to apply (every host time T_1 .. T_{n-1} is
        before t_next, and T_n is not t_next).

    The loop keeps only what every caller needs per iteration (T); a GPU start is the
    previous end unless the host was late (kept aside, rare when the GPU is the bottleneck),
    and the sums are taken as the iterations go, so nothing is walked twice. A segment of
    one batch size and cost key (~10 iterations) starts with one lookup of its GPU seconds
    and its end (:func:`_segment`); inside it the iterations count to that end, and the
    context sum, an int, is set where the next segment starts (at the key's limit or the
    next breakpoint), as the step-by-step sums give it. Where the batch size changes, the
    GPU ends on either side are kept (:attr:`PlainTimes.pieces`): the first iteration of a
    new batch size always takes the general iteration (its results are processed at the
    old size), and the first iteration's end is the loop's own arithmetic done ahead.
    """
    stop = run.stop if limit is None else limit
    changes = run.changes
    T = [t0]
    Ta = T.append
    E, S, RW = [], [], []
    if detail:
        Ea, Sa, RWa = E.append, S.append, RW.append
    late: dict[int, float] = {}      # GPU start of iterations where the host was late
    bs = run.bs0
    ctx = run.ctx0
    key = round(ctx / bs / 10.0)
    c = gpu(bs, ctx, key)
    klim = -1             # the iteration at which the key changes (set from P_1 on)
    seg: list = []        # the segment's memo entry (set with klim)
    lim = ctx             # the context sum at which it changes (set with klim)
    if memo is None:
        memo = {}
    hb = host(bs)         # the host seconds of the batch size bs (pure: asked again only when bs changes)
    hs, hl = hb[0], hb[1]
    ht = 0.0 if tail is None else tail(bs)
    u = t0 + hs
    u = u + hl
    e_first = (e0 if e0 > u else u) + c       # iteration 0's GPU end, as the loop computes it
    cuts: list[tuple[int, int, float]] = []   # (j, batch size from j on, GPU end of j - 1)
    firsts: list[float] = []                  # GPU end of the first iteration after each cut
    pbs = run.pbs0
    hp = hb[2] if pbs == bs else host(pbs)[2]
    ci = 0
    nxt, nbs, base = changes[0]
    t, ep = t0, e0
    blk, rows, busy = blocked0, 0.0, busy0
    j = 0
    lean = not detail and tail is None
    while True:
        if lean and bs == pbs:
            # the common iteration, before the general one below: the GPU ahead of the host
            # (a results wait), the same batch size after it (no breakpoint or stop at
            # j + 1), not the last (its host time stays before t_next). The same float
            # operations in the same order, less the tests that cannot fire; it stops
            # without changing anything at the first iteration that is not such. Where the
            # cost key changes (j reaches klim) the next segment starts here, as the general
            # iteration would start it (below): the key's limit is never a breakpoint here
            # (j < nxt), so the general iteration's other tests cannot fire there either.
            jend = stop - 1
            if 0 < nxt <= jend:
                jend = nxt - 1
            # t is computed in place and restored from T (whose last item it is at the top
            # of every iteration) where the lean iteration gives way: no copy per iteration
            while j < jend:
                t = t + hs
                t = t + hl
                if ep <= t:
                    t = T[-1]
                    break         # the host is late: the general iteration
                rw = (ep - t) + wake
                t = t + rw
                t = t + hp
                if t >= t_next:
                    t = T[-1]
                    break         # the walk's last iteration: the general one ends it
                Ta(t)
                e = ep + c
                blk = blk + rw
                rows = rows + rw
                busy = busy + (e - ep)
                ep = e
                j += 1
                if j == klim:      # the context sum reached the key's limit: the next segment
                    ctx = lim
                    after = seg[2]   # the one that starts at this sum, linked from the last
                    if after is None:
                        after = seg[2] = _segment(memo, gpu, ctx, bs)
                    seg = after
                    c, lim = seg[0], seg[1]
                    klim = j + (lim - ctx) // bs
        t = t + hs
        t = t + hl
        if ep > t:     # INV-6: a forward starts after the previous one ends
            s = ep
            e = ep + c
            t = t + ht
            if ep > t:
                rw = (ep - t) + wake
                t = t + rw
            else:
                rw = 0.0
        else:
            s = t
            e = t + c
            rw = 0.0
            late[j] = s
            t = t + ht
        t = t + hp
        Ta(t)
        if detail:
            Ea(e)
            Sa(s)
            RWa(rw)
        j += 1
        if t >= t_next or j == stop:
            if t == t_next:
                # rare: the last iteration's Recv would be at the event itself; the one
                # before is the last to apply (walked again, so the sums stop there)
                if j == 1:
                    out = PlainTimes()
                    out.n = 0
                    return out
                return walk(run, t0, e0, t_next, wake, gpu, host, blocked0, busy0, detail, j - 1, tail, memo)
            out = PlainTimes()
            out.n, out.T, out.E, out.S, out.RW = j, T, E, S, RW
            out.blocked, out.blocked_rows, out.busy = blk + rw, rows, busy + (e - s)
            out.s0 = late.get(0, e0)
            out.s_last, out.e_last, out.rw_last = s, e, rw
            if len(firsts) < len(cuts):
                firsts.append(e)              # the last cut's first iteration is the last one
            out.pieces = _pieces(run.bs0, cuts, firsts, e_first, e, j)
            return out
        blk = blk + rw
        rows = rows + rw
        busy = busy + (e - s)
        ep = e
        if bs != pbs:                # iteration j processes P_{j-1}'s results
            if j > 1:
                firsts.append(e)     # iteration j - 1 is the first after a cut
            pbs = bs
            hp = hb[2]
        if j == nxt:
            if nbs != bs:
                cuts.append((j, nbs, e))
                bs = nbs
                hb = host(bs)
                hs, hl = hb[0], hb[1]
                if tail is not None:
                    ht = tail(bs)
            ci += 1
            nxt, nbs, nbase = changes[ci] if ci < len(changes) else (-1, 0, 0)
            ctx = base + j * bs
            base = nbase
        elif j == klim:          # the context sum reached the key's limit
            ctx = lim
        else:
            continue
        # a new segment starts here (a breakpoint or the key's limit): its cost and end
        seg = _segment(memo, gpu, ctx, bs)
        c, lim = seg[0], seg[1]
        klim = j + (lim - ctx) // bs


def _pieces(bs0: int, cuts: list[tuple[int, int, float]], firsts: list[float], e_first: float, e_last: float,
            n: int) -> list[tuple[int, int, float, float]]:
    """:attr:`PlainTimes.pieces` of a walk of ``n`` iterations: the runs of one batch size
    between the ``cuts`` ((j, batch size from j on, GPU end of j - 1), in order), each
    (batch size, iterations, GPU end of its first iteration, of its last). ``bs0`` and
    ``e_first``: the first run's batch size and first GPU end; ``firsts``: the first GPU
    end after each cut (one per cut); ``e_last``: the walk's last GPU end. One loop over
    the cuts (none in most stretches): the pieces are read off the cuts as they are, no
    value is computed but the iteration counts (int differences)."""
    pieces = []
    j0, bs, first = 0, bs0, e_first
    for k, (j, nbs, end) in enumerate(cuts):
        pieces.append((bs, j - j0, first, end))
        j0, bs, first = j, nbs, firsts[k]
    pieces.append((bs, n - j0, first, e_last))
    return pieces


def _segment(memo: dict, gpu: Callable[[int, int, int], float], ctx: int, bs: int) -> list:
    """The segment of a decode of ``bs`` requests whose contexts sum to ``ctx``: the list
    [GPU seconds, the context sum at which its cost key (the mean context rounded to 10)
    changes (:func:`_key_until`), the next segment's entry or None], from ``memo`` under
    (bs, key, ctx mod bs) or computed and kept there: ``gpu`` depends on (bs, key) only (the
    cost model's key, see the engine's ``_run_costs``) and the limit on ctx only through ctx
    mod bs, so every context sum of that residue in the key's range has this pair. The
    third item is what :func:`walk` finds for the segment that starts at that limit (the
    same batch size), kept there the first time it is asked: the entry of a fixed sum, so
    a walk that reaches the limit again takes it without the key, the residue and the
    lookup (the next segment of every walk through this one is the same)."""
    key = round(ctx / bs / 10.0)
    v = memo.get((bs, key, ctx % bs))
    if v is None:
        if len(memo) >= 1 << 16:
            memo.clear()
        v = memo[(bs, key, ctx % bs)] = [gpu(bs, ctx, key), _key_until(ctx, bs, key), None]
    return v
