"""Whole KV pages over int arrays: the page rounding of a paged pool (``ceil_page``) for the
collapsed stretches' (k, m) grids (:meth:`sim.kv_ledger.KVLedger.stretch_usage`,
:mod:`sim.swa_stretch`)."""

from __future__ import annotations

import numpy as np


def ceil_pages(x: np.ndarray, p: int, out: np.ndarray | None = None) -> np.ndarray:
    """``-(-x // p) * p`` of an int64 array (each value rounded up to a multiple of the page
    size ``p`` >= 1), written into ``out`` (``x`` itself, another array of its shape, or
    None: a new one) and returned.

    Where ``p`` is a power of two (every paged pool SGLang sets up; 1 included) it is
    ``(x + p - 1) & -p``: adding p - 1 and clearing the low bits is p times the floor of
    (x + p - 1) / p, which is the ceiling of x / p for every integer x (negative too, in
    two's complement), so the same integers, without int64 division (~4x faster over a
    stretch's grid). Any other ``p`` takes the division."""
    if out is None:
        out = np.empty_like(x)
    if p & (p - 1) == 0:
        np.add(x, p - 1, out=out)
        np.bitwise_and(out, -p, out=out)
    else:
        np.negative(x, out=out)
        np.floor_divide(out, p, out=out)
        np.multiply(out, -p, out=out)
    return out


def page_sums(x: np.ndarray, p: int) -> np.ndarray:
    """Row sums of ``ceil_pages(x, p)`` for an int (k, m) grid, computed in x's own buffer
    (x is overwritten by its pages: the same integers, no temporary grid)."""
    return ceil_pages(x, p, out=x).sum(axis=1)
