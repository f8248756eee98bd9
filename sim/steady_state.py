"""bench_serving's steady-state throughput: the figures of ``steady_state_serving``.

sglang 0.5.23 ships a serving benchmark entry point with steady-state reporting
(benchmark/steady_state_serving.py, ``--steady-state-concurrency-ratio R``): the run and its
full-run result are bench_serving's own (TTFT, TPOT, ITL and E2E statistics over every
request, the start burst and the drain included), and the throughputs are also reported over
a steady window (benchmark/steady_state.py):

- the window (``find_steady_state_window``): the longest continuous interval in which the
  requests in flight number at least ``ceil(R x peak)``, peak being the most in flight at any
  time (a closed loop's concurrency);
- output throughput: each request's output tokens times the share of its token timestamps
  (first token, then one per ITL) inside the window, over the window's length
  (``_output_tokens_in_window``);
- input throughput: prompt tokens of the requests sent inside ``[start, end)`` over the
  window's length (an arrival-based definition; bench_serving 0.5.23 reports N/A for the
  multi-turn replay, whose rows carry no per-turn prompt length: here every request's prompt
  is known, so the same definition is applied);
- completed: requests finished inside the window; request throughput is that over the length.

Not modelled: the token timestamps. A run with compact records keeps no per-token times, so a
request's tokens after the first are spread evenly up to its finish (its decode is close to
even; the error is a fraction of one request's tokens at each edge of the window).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from specsched.sim.tables import column, notna


def steady_window(start_s: np.ndarray, finish_s: np.ndarray, ratio: float) -> tuple[float, float, int, int]:
    """bench_serving's steady window: ``(start, end, threshold, peak)``.

    Args:
        start_s, finish_s: per completed request, seconds (float arrays of shape (n,), n >= 1,
            finish after start).
        ratio: the concurrency ratio, in (0, 1].

    Raises:
        ValueError: ``ratio`` outside (0, 1], no request, or no interval at the threshold
            (as benchmark/steady_state.py ``find_steady_state_window``).
    """
    if not 0 < ratio <= 1:
        raise ValueError(f"steady-state concurrency ratio must be in (0, 1], got {ratio}")
    if len(start_s) == 0:
        raise ValueError("no completed request")
    # concurrency steps: +1 at each start, -1 at each finish, summed per distinct time
    times = np.concatenate([start_s, finish_s])
    delta = np.concatenate([np.ones(len(start_s)), -np.ones(len(finish_s))])
    t, inv = np.unique(times, return_inverse=True)
    step = np.bincount(inv, weights=delta, minlength=len(t))
    level = np.cumsum(step)[:-1]          # in flight on [t[i], t[i + 1])
    peak = int(level.max()) if len(level) else 0
    threshold = max(1, math.ceil(peak * ratio))
    best, best_len, span_start = None, -1.0, None
    for i, c in enumerate(level):         # runs of intervals at or above the threshold
        if c >= threshold:
            if span_start is None:
                span_start = t[i]
            span_end = t[i + 1]
        elif span_start is not None:
            if span_end - span_start > best_len:
                best, best_len = (span_start, span_end), span_end - span_start
            span_start = None
    if span_start is not None and span_end - span_start > best_len:
        best = (span_start, span_end)
    if best is None:
        raise ValueError("no steady-state measurement window could be determined")
    return float(best[0]), float(best[1]), threshold, peak


def steady_throughputs(requests: Any, ratio: float) -> dict[str, float]:
    """The steady-state figures of a run (module docstring), as summary keys.

    Args:
        requests: the run's requests table (start_s, first_token_s, finish_s, input_len,
            output_len; :class:`~sim.tables.Columns` or DataFrame).
        ratio: ``--steady-state-concurrency-ratio``.

    Returns:
        ``steady_window_start_s``, ``steady_window_end_s``, ``steady_duration``,
        ``steady_concurrency_threshold``, ``steady_completed``, ``steady_concurrency`` (time
        average in flight inside the window), and the throughputs to put in place of the
        full-run ones: ``request_throughput``, ``input_throughput``, ``output_throughput``,
        ``total_throughput`` (tokens or requests per second).

    Raises:
        ValueError: as :func:`steady_window`.
    """
    done = notna(requests, "finish_s")
    start = column(requests, "start_s", float)[done]
    first = column(requests, "first_token_s", float)[done]
    finish = column(requests, "finish_s", float)[done]
    n_out = column(requests, "output_len", float)[done]
    n_in = column(requests, "input_len", float)[done]
    t0, t1, threshold, _ = steady_window(start, finish, ratio)
    dur = t1 - t0
    # share of a request's n token times inside [t0, t1]: the first at first_token_s, the
    # other n - 1 evenly up to finish_s
    with np.errstate(invalid="ignore", divide="ignore"):
        later = np.where(finish > first, (np.minimum(finish, t1) - np.maximum(first, t0)) / (finish - first), 0.0)
    later = np.clip(later, 0.0, 1.0)
    first_in = ((first >= t0) & (first <= t1)).astype(float)
    share = np.where(n_out > 1, (first_in + later * (n_out - 1)) / np.maximum(n_out, 1), first_in)
    tout = float((n_out * share).sum())
    tin = float(n_in[(start >= t0) & (start < t1)].sum())
    n_fin = int(((finish >= t0) & (finish <= t1)).sum())
    overlap = float(np.clip(np.minimum(finish, t1) - np.maximum(start, t0), 0.0, None).sum())
    return {
        "steady_window_start_s": t0, "steady_window_end_s": t1, "steady_duration": dur,
        "steady_concurrency_threshold": threshold, "steady_completed": n_fin,
        "steady_concurrency": overlap / dur,
        "request_throughput": n_fin / dur, "input_throughput": tin / dur,
        "output_throughput": tout / dur, "total_throughput": (tin + tout) / dur,
    }
