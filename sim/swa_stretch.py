"""The SWA pool over a collapsed decode stretch: the step-by-step rules over a grid.

Hybrid sliding-window models keep a second, paged KV pool (sim/kv_ledger.py). One decode
pass P_j of a stretch (:mod:`sim.decode_run`) does, for the SWA pool, what
:class:`sim.kv_ledger.KVLedger` does step by step:

1. the decode memory check: the SWA slots in use plus the pass's new pages must fit
   (``Scheduler._decode_fits``; sglang 0.5.23 ``ScheduleBatch.check_decode_mem``), else the
   pass retracts and the stretch ends before it;
2. the eviction (``KVLedger.evict_swa``; 0.5.23 ``ScheduleBatch.maybe_evict_swa``): every
   member past its first decode pass moves its eviction frontier ``E`` to
   ``floor_page(pre - keep)`` when its trigger fires, ``pre`` = prompt + output - 1 when
   P_j is built. Token cadence (``_swa_eviction_trigger``): when ``pre - window >= E +
   interval`` (and the frontier moves at all); forward cadence: on every
   ``interval``-th forward;
3. the reservation (new pages up to the pass's ``kv_len``);
4. processing: returned verify positions give back whole pages; finishing requests free
   everything they hold (their pages, minus ``E``, plus the prompt tail the tree locks for
   them).

A request holds ``lock + ceil_page(kv_len) - E`` SWA slots. ``E`` only grows and ``pre`` is
non-decreasing along a stretch, so under the token cadence the passes at which a request's
frontier moves are found one move at a time for all requests at once (a column-wise
search over the running maximum of ``pre`` on its eligible passes), not pass by pass.
INV-7 (fast path == step by step) for hybrid-SWA runs is guarded by
tests/test_swa_stretch.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from specsched.sim.pages import ceil_pages, page_sums


@dataclass(frozen=True, slots=True)
class StretchSWA:
    """The SWA pool over k iterations of a decode stretch (:func:`stretch_swa`).

    Attributes (``m`` requests, ``k`` iterations):
        check: int (k,), SWA slots in use before P_j's eviction plus P_j's new pages (the
            decode memory check: the pass fits iff this is <= the pool).
        reserved: int (k,), slots in use after P_j's eviction and reservation.
        after: int (k,), slots in use after processing at iteration j.
        ev0, idx0, last: int (m,), eviction frontiers and decode passes now, and the number
            of plans each request is in (it is in P_0 .. P_{last-1}).
        moves: (rows, cols, values), the eviction frontier of request ``cols[t]`` becomes
            ``values[t]`` at P_{rows[t]}'s eviction.
    """

    check: np.ndarray
    reserved: np.ndarray
    after: np.ndarray
    ev0: np.ndarray
    idx0: np.ndarray
    last: np.ndarray
    moves: tuple[np.ndarray, np.ndarray, np.ndarray]

    def first_over(self, capacity: int) -> int:
        """The first iteration whose decode check fails (it would retract), or k."""
        over = self.check > capacity
        return int(over.argmax()) if over.any() else len(self.check)

    def evicted_after(self, n: int) -> np.ndarray:
        """Each request's eviction frontier after n iterations, int (m,)."""
        rows, cols, vals = self.moves
        e = self.ev0.copy()
        sel = rows < n
        np.maximum.at(e, cols[sel], vals[sel])
        return e

    def passes_after(self, n: int) -> np.ndarray:
        """Decode passes each request has taken after n iterations, int (m,)."""
        return self.idx0 + np.minimum(self.last, n)


def stretch_swa(*, used: int, page: int, window: int, keep: int, interval: int, by_forward: bool,
                first_step: int, len0: np.ndarray, ev0: np.ndarray, lock: np.ndarray, idx0: np.ndarray,
                lenres: np.ndarray | None, lenproc: np.ndarray, member: np.ndarray, fin: np.ndarray,
                pre: np.ndarray, pre_shift: int = 0,
                sums: tuple[np.ndarray, np.ndarray] | None = None) -> StretchSWA:
    """The SWA pool's counts over a stretch (see the module docstring for the rules).

    Args:
        used: SWA slots in use now.
        page, window, keep, interval: the page size, sliding window, positions kept behind
            ``pre`` when evicting (a page-rounded window with a prefix cache), and
            ``swa_eviction_interval``.
        by_forward: the forward cadence (``swa_eviction_cadence: forward_interval``).
        first_step: the plan index of P_0 (the forward counter of the forward cadence).
        len0, ev0, lock, idx0: int (m,), each request's ``kv_len``, eviction frontier
            (page-aligned), locked prompt tail and decode passes taken, now.
        lenres, lenproc: int (k, m), ``kv_len`` after P_j's reservation and after
            processing at j (constant once the request is in no more plans); both are
            overwritten (their page-rounded values replace them; they may be one array),
            unless ``sums`` is given.
        member: bool (k, m), request in P_j; each column is a run of True from row 0 (a
            request leaves the batch for good: :mod:`sim.decode_run`).
        fin: bool (k, m), request finishes at j's processing.
        pre: int (k, m), prompt + output - 1 when P_j is built (non-decreasing in j), less
            ``pre_shift`` (a caller holding prompt + output passes -1: no grid for it).
        sums: the row sums of ``lenres`` and ``lenproc`` rounded up to whole pages, where
            the caller has them (the full pool's paged window rule sums the same pages:
            :meth:`sim.kv_ledger.KVLedger.stretch_usage`); ``lenres`` is then not read
            (None) and ``lenproc`` only read.

    Returns:
        A :class:`StretchSWA`.
    """
    k, m = member.shape
    holds = len0 > 0   # requests that finished before the stretch hold nothing
    last = member.sum(axis=0)
    first = (idx0 < 1).astype(np.int64)   # the first decode pass evicts nothing (decode_batch_idx 0)
    # eviction moves: (row, column, new frontier, previous frontier)
    mr: list[np.ndarray] = []
    mc: list[np.ndarray] = []
    mv: list[np.ndarray] = []
    mp: list[np.ndarray] = []
    if by_forward:
        due = np.flatnonzero((first_step + np.arange(k)) % interval == 0)
        if due.size:
            d = due[:, None]
            cand = np.where((d >= first) & (d < last), (pre[due] + (pre_shift - keep)) // page * page, -1)
            e = np.maximum.accumulate(np.maximum(cand, ev0), axis=0)
            prev = np.empty_like(e)
            prev[0] = ev0
            prev[1:] = e[:-1]
            t, c = np.nonzero(e > prev)
            mr, mc, mv, mp = [due[t]], [c], [e[t, c]], [prev[t, c]]
    else:
        # the first pass in [first, last) with pre >= thr(E) moves E to floor_page(pre - keep)
        # (pre - window >= E + interval, and floor_page(pre - keep) > E); pre is
        # non-decreasing down each column, so every column is searched at once with one
        # searchsorted over the columns laid end to end
        cols = np.flatnonzero(holds & (last > first))
        if cols.size:
            top = int(pre.max()) + pre_shift + 2
            flat = np.empty((m, k), dtype=np.int64)   # (written in C order: ravel is a view)
            np.add(pre.T, (np.arange(m, dtype=np.int64) * top + pre_shift)[:, None], out=flat)
            flat = flat.ravel()
            e = ev0.astype(np.int64).copy()
            while cols.size:
                ec = e[cols]
                thr = np.minimum(np.maximum(ec + interval + window, ec + page + keep), top - 1)
                at = np.maximum(np.searchsorted(flat, thr + cols * top) - cols * k, first[cols])
                hit = at < last[cols]
                cols, at, ec = cols[hit], at[hit], ec[hit]
                new = (pre[at, cols] + (pre_shift - keep)) // page * page
                mr.append(at)
                mc.append(cols)
                mv.append(new)
                mp.append(ec)
                e[cols] = new
    rows, cols, vals, prevs = (np.concatenate(x) if x else np.zeros(0, dtype=np.int64) for x in (mr, mc, mv, mp))

    # row sums of what each request holds, lock + pages(kv_len) - E, while it holds: a
    # request finishing at row f holds through P_f's reservation and nothing after f's
    # processing; its kv_len stays at lenproc[f] after f
    fi = np.where(fin.any(axis=0), fin.argmax(axis=0), k)
    done = holds & (fi < k)
    c = np.where(done, ceil_pages(lenproc[np.minimum(fi, k - 1), np.arange(m)], page), 0)  # held pages after finishing
    if sums is not None:
        sres, sproc = sums
    else:
        sres = page_sums(lenres, page)
        sproc = sres if lenproc is lenres else page_sums(lenproc, page)
    p0 = ceil_pages(len0, page)
    base = np.where(holds, lock - ev0, 0)
    d_res = np.zeros(k + 2, dtype=np.int64)    # difference arrays over rows
    d_aft = np.zeros(k + 2, dtype=np.int64)
    d_res[0] = d_aft[0] = int(base.sum())
    np.add.at(d_res, fi[done] + 1, -(base + c)[done])
    np.add.at(d_aft, fi[done], -(base + c)[done])
    np.add.at(d_res, rows, prevs - vals)          # a move lowers the holding from its row on
    np.add.at(d_res, fi[cols] + 1, vals - prevs)  # ... until the request finishes
    np.add.at(d_aft, rows, prevs - vals)
    np.add.at(d_aft, fi[cols], vals - prevs)
    h_res = sres + np.cumsum(d_res)[:k]
    h_aft = sproc + np.cumsum(d_aft)[:k]
    other = used - int(np.where(holds, p0 + base, 0).sum())
    need = np.empty(k, dtype=np.int64)         # new pages of P_j (non-members' terms cancel)
    need[0] = sres[0] - int(p0.sum())
    need[1:] = sres[1:] - sproc[:-1]
    after = other + h_aft
    check = np.empty(k, dtype=np.int64)
    check[0] = used
    check[1:] = after[:-1]
    check += need
    return StretchSWA(check, other + h_res, after, ev0, idx0, last, (rows, cols, vals))
