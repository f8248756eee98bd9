"""Append-only typed columns: ``array.array`` rows (8 bytes a value, no Python object per
row) and the numpy views they are read through. The run's records (:mod:`sim.records`,
:mod:`sim.compact_records`) keep every row in them and build tables once, at the end.
"""

from __future__ import annotations

from array import array

import numpy as np


def new_column(typecode: str) -> array:
    """An empty typed column (``array`` typecode: ``d`` float64, ``q`` int64, ``i`` int32)."""
    return array(typecode)


def extend_column(col: array, values: np.ndarray, dtype: str) -> None:
    """Append ``values`` to ``col`` as ``dtype`` (the column's numpy dtype, e.g. ``f8``, ``i8``),
    from the array's own bytes (no bytes copy: a large one is fresh memory each time)."""
    col.frombytes(memoryview(np.ascontiguousarray(values, dtype=dtype)).cast("B"))


def column_view(col: array, dtype: str) -> np.ndarray:
    """A read-only numpy view of ``col`` as ``dtype`` (an empty array when ``col`` is empty)."""
    return np.frombuffer(col, dtype=dtype) if len(col) else np.zeros(0, dtype=dtype)
