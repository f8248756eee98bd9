"""Stopping a pool of runs on Ctrl-C or SIGTERM without an exception inside the pool's locks.

Python's default SIGINT handler raises KeyboardInterrupt at whatever bytecode the main thread
is running. While the main thread waits on a pool's futures (``concurrent.futures.as_completed``
and ``wait`` take every future's condition lock in turn), the exception can land after some of
those locks were taken and before the code that releases them runs; the main thread then keeps
a future's lock, and the pool's manager thread, setting that future's result, blocks on it for
good. Here the handler only records the signal; the waiting loop (:func:`completed`) looks at
the record between short waits and raises KeyboardInterrupt itself, outside the pool's code.
:func:`stop_pool` then stops the pool's workers without leaving the process a thread its exit
would wait on forever (a sweep sent SIGTERM on a loaded 2-core machine saved its runs and then
hung at exit: a worker killed midway through sending its result).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

POLL_S = 0.2
"""Seconds between looks at the record while runs are pending: the longest a stop waits."""


class StopSignals:
    """The first of the watched signals received while installed (``received``: its number,
    None before any). Recording only, so a second signal cannot cut a final save short."""

    def __init__(self) -> None:
        self.received: int | None = None

    def __call__(self, signum: int, _frame: Any) -> None:
        if self.received is None:
            self.received = signum


@contextlib.contextmanager
def stop_signals(signums: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[StopSignals]:
    """Install a :class:`StopSignals` for ``signums`` and restore the previous handlers on exit.
    Off the main thread (where Python takes no handler) nothing is installed and the record
    stays empty: the process's own handlers apply."""
    stop = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {s: signal.signal(s, stop) for s in signums}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def completed(futures: Sequence[Future], stop: StopSignals, poll_s: float = POLL_S) -> Iterator[Future]:
    """``futures`` in the order they finish, as ``as_completed`` gives them, until every one is
    done. Each future's done-callback puts it on a queue that the loop reads with a timeout of
    ``poll_s``: O(1) a future (``wait`` over the pending futures at every turn took each one's
    lock each time, O(N^2) over a sweep: 10 s of CPU at 10,000 runs finishing one by one).

    Raises:
        KeyboardInterrupt: once ``stop`` recorded a signal, before the next future is given or,
            after the last one, instead of ending (futures already given were the caller's to
            handle): a signal as the last run finished still stops the caller.
    """
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    unique = list(dict.fromkeys(futures))
    for f in unique:
        f.add_done_callback(finished.put)   # called at once for a future already done
    left = len(unique)
    while True:
        if stop.received is not None:
            raise KeyboardInterrupt
        if not left:
            return
        try:
            f = finished.get(timeout=poll_s)
        except queue.Empty:
            continue
        left -= 1
        yield f


def stop_pool(ex: ProcessPoolExecutor) -> None:
    """Shut a process pool down now: queued runs cancelled, running workers terminated.

    A worker terminated midway through sending its result (a run's outcome, latency samples
    included, is larger than a pipe holds, so it goes in several writes) leaves the pool's
    manager thread reading the rest of that message from the result pipe. The pipe's write end
    is held by this process too, so with the workers gone that read never ends, and the
    interpreter's exit, which joins the manager thread (concurrent.futures.process
    ``_python_exit``), waited forever: a sweep sent SIGTERM on a loaded machine saved its runs
    and then never exited. Closing this process's write end once the workers are stopped
    makes the read end with end-of-file; the manager thread then marks the pool broken and
    returns, as it does when a worker dies between results."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    results = getattr(ex, "_result_queue", None)   # shutdown() drops the executor's reference
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
    writer = getattr(results, "_writer", None)   # CPython 3.11-3.13's SimpleQueue; elsewhere left as is
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()   # the manager thread only reads; the workers held the other write ends
