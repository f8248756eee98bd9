"""Python's cyclic garbage collector held off while a simulation runs.

A run allocates millions of short-lived objects (floats of the timing walk, plans,
per-stretch lists) and keeps every request, its records and the scheduler's state alive
to the end. CPython's generational collector is triggered by allocation counts, not by
garbage: each young collection walks the young objects, and each full collection walks
everything alive, so a 100k-request run spent ~5 % of its CPU in collections that
found nothing (docs/performance.md, "The garbage collector"). Reference counting frees
the run's objects as before; only reference cycles wait for the collector, and a run
makes a fixed handful of them (a few dozen objects whatever the number of requests:
tests/test_gc_pause.py), so memory stays bounded with the collector off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(collect: bool = False) -> Iterator[None]:
    """Keep the cyclic garbage collector off for the block, then restore it.

    Only the outermost pause re-enables the collector (a nested pause, or a caller that
    turned the collector off itself, finds it off and leaves it so), also when the block
    raises. Collects nothing on exit: the garbage a run leaves is the next automatic
    collection's, as without the pause. ``collect``: the outermost pause collects once on
    entry (a graph capture's, runtime.graphs.collector_paused). Raises nothing of its own.
    """
    if not gc.isenabled():
        yield
        return
    if collect:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
