"""Order statistics of a weighted sample without sorting all of it.

The compact records keep the inter-token latencies as (value, multiplicity) pairs, ~43
per request (:mod:`sim.compact_records`); the summary's median and percentiles are values
at a handful of ranks of the repeated sample ``np.sort(np.repeat(values, weights))``.
Sorting every pair (an argsort and two gathers in random order) took ~6 s of a
million-request run's ~100 s (43 million pairs), more per pair as the arrays outgrow the
caches. :func:`values_at_ranks` finds the same values from a sort of a few narrow value
ranges instead: a strided sample of the pairs brackets each rank by two values (cuts), one
pass counts the weight of every range (the values equal to a cut, and those strictly
between two cuts), and only the pairs of a range that holds a rank are sorted (a range of
one cut's value needs no sort). Equal values always share a range (ranges are cut by
value), so each range, sorted, is exactly its stretch of the whole sorted sample, and the
rank inside it is the rank less the weight of every range below: the values are those of
the full sort whatever the sample is. The sample decides only how many pairs are sorted (a
range that came out wide, where the sample misplaced a rank, is bracketed again by the same
method while it holds at most half the pairs, else sorted); a bad sample makes the call
slower, never different.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SAMPLE = 1 << 16
"""Pairs in the bracketing sample; samples this small or less (x4) are sorted whole."""
MARGIN = 0.004
"""Each bracket spans the rank's estimate +- this share of the sample's weight."""
_BLOCK = 1 << 15
"""Pairs per block of the counting pass: its temporaries (two int64 searches, the float
weights of the count) stay ~256 KB, memory the allocator reuses from block to block; at
2**20 they were ~25 MB of fresh pages a block (~2,700 of a 10k-request run's page faults).
The counts are exact whatever the blocks (integer weights summed below 2**53)."""


def _by_sort(v: np.ndarray, w: np.ndarray, ranks: Sequence[int]) -> list[np.float64]:
    """The values at ``ranks`` of the repeated sample, from a full sort of the pairs."""
    order = np.argsort(v, kind="stable")   # (see values_at_ranks)
    cw = np.cumsum(w[order], dtype=np.int64)
    vs = v[order]
    return [vs[int(np.searchsorted(cw, r, side="right"))] for r in ranks]


def _unique_sorted(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` for a 1-d float array without NaN, by the same steps (numpy's
    ``_unique1d``: sort, keep each value unequal to the one before it). np.unique itself
    imports numpy.ma on its first call (~5-13 ms, once per process: every run whose ITL
    pairs outgrow the sample, i.e. from ~5,000 requests on)."""
    a.sort()
    keep = np.empty(a.shape, dtype=bool)
    keep[:1] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def values_at_ranks(values: np.ndarray, weights: np.ndarray, ranks: Sequence[int],
                    sample: int = SAMPLE, margin: float = MARGIN) -> list[np.float64]:
    """The values at 0-based ``ranks`` of ``np.sort(np.repeat(values, weights))``.

    Args:
        values: float64 (N,), no NaN (a NaN has no place between two values).
        weights: int (N,), every one > 0 (their sum W < 2**53).
        ranks: ints in [0, W).
        sample, margin: the bracketing sample's size and each bracket's half-width (a share
            of the sample's weight); they change the work, not the result.

    Returns:
        One float64 scalar per rank, in the order given: the element of ``values`` there.
    """
    v, w = values, weights
    if v.size <= 4 * sample:
        return _by_sort(v, w, ranks)
    step = v.size // sample
    sv, sw = np.ascontiguousarray(v[::step]), w[::step]
    # a stable sort of a contiguous copy: equal values may come in either order, which
    # changes no value read off the sorted sample (nor the ranges' sorts, _by_sort), and
    # numpy's stable argsort of the sample took about half the time of its default one of
    # the strided view (4.0 against 8.5 ms for the 10k-request run's 74,177 pairs, which
    # come in time order, in runs)
    o = np.argsort(sv, kind="stable")
    sv, scw = sv[o], np.cumsum(sw[o], dtype=np.int64)
    total = int(w.sum(dtype=np.int64))
    scale = int(scw[-1]) / total
    pad = margin * int(scw[-1])
    last = sv.size - 1
    edges = []
    for r in ranks:
        c = (r + 0.5) * scale          # the rank's place in the sample
        edges.append(sv[min(int(np.searchsorted(scw, c - pad, side="right")), last)])
        edges.append(sv[min(int(np.searchsorted(scw, c + pad, side="right")), last)])
    cuts = _unique_sorted(np.array(edges, dtype=v.dtype))
    # range 2i + 1 holds the values equal to cuts[i], range 2i those strictly between
    # cuts[i - 1] and cuts[i] (the ends open); their weights, by blocks (no N-long index)
    # the range of x is 2i + (x == cuts[i]) for i its left insertion point (one search:
    # x <= cuts[i], so x equals a cut exactly there; past the last cut, the NaN after it
    # equals nothing)
    nb = 2 * cuts.size + 1
    bins = np.empty(v.size, dtype=np.uint8 if nb <= 256 else np.intp)
    weight = np.zeros(nb, dtype=np.int64)
    cut_at = np.append(cuts, np.nan)
    for i in range(0, v.size, _BLOCK):
        x = v[i : i + _BLOCK]
        b = np.searchsorted(cuts, x, side="left")
        eq = x == cut_at[b]
        b += b
        b += eq
        bins[i : i + _BLOCK] = b
        # float64 sums of ints below 2**53 are exact
        weight += np.bincount(b, weights=w[i : i + _BLOCK], minlength=nb).astype(np.int64)
    below = np.concatenate(([0], np.cumsum(weight)))   # weight of the ranges before range k
    at: dict[int, list[int]] = {}
    for r in ranks:
        at.setdefault(int(np.searchsorted(below, r, side="right")) - 1, []).append(r)
    found: dict[int, np.float64] = {}
    for k, rs in at.items():
        if k % 2:          # every value there is the cut itself
            found.update((r, cuts[k // 2]) for r in rs)
            continue
        sel = bins == k
        sub_v, sub_w, local = v[sel], w[sel], [r - int(below[k]) for r in rs]
        # a rank the sample misplaced lands in a wide range: bracketed again from its own
        # sample while it is at most half the pairs (so the levels are few), else sorted
        got = (values_at_ranks(sub_v, sub_w, local, sample, margin) if 2 * sub_v.size <= v.size
               else _by_sort(sub_v, sub_w, local))
        found.update(zip(rs, got, strict=True))
    return [found[r] for r in ranks]
