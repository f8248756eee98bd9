"""bench_serving's steady-state figures: the separate result of ``steady_state_serving``.

sglang 0.5.23 ships a serving benchmark entry point with steady-state reporting
(benchmark/steady_state_serving.py, ``--steady-state-concurrency-ratio R``): the run and its
full-run result are bench_serving's own, unchanged (every throughput, the duration, the peaks
and the TTFT, TPOT, ITL and E2E statistics over every request, the start burst and the drain
included; its ``--output-file`` line likewise). The steady figures are a separate
``SteadyStateMetrics`` (benchmark/steady_state.py ``calculate_steady_state_metrics``), printed
as a "Steady-State Result" block after bench_serving's (``_print_metrics``) and appended as
one JSON line to ``--steady-state-output-file`` (``_append_metrics``):

- the window (``find_steady_state_window``): the longest continuous interval in which the
  requests in flight number at least ``ceil(R x peak)``, peak being the most in flight at any
  time (a closed loop's concurrency);
- output throughput: each request's output tokens times the share of its token timestamps
  (first token, then one per ITL) inside the window, over the window's length
  (``_output_tokens_in_window``);
- input throughput: prompt tokens of the requests sent inside ``[start, end)`` over the
  window's length (an arrival-based definition; bench_serving 0.5.23 reports N/A for the
  multi-turn replay, whose rows carry no per-turn prompt length: ``input_known`` False gives
  None, as there);
- completed: requests finished inside the window; average concurrency: the requests' time in
  flight inside the window over its length; peak concurrency: the run's most in flight;
- peak output throughput: the most output tokens in one 1-second bucket of the window, the
  buckets counted from its start, each token weighted output_len / (its request's number of
  token times), a token on a bucket's end in that bucket.

The token timestamps: a run with full records has each delivery's time (the chunks table),
from which bench_serving's timestamps are rebuilt (:func:`sim.bench_serving.token_times`).
A run with compact records keeps no per-token times, so a request's tokens after the first
are spread evenly (as a constant rate) between its first token and its finish, for the token
count and for the peak's buckets alike (its decode is close to even; the error is a fraction
of one request's tokens at each edge of the window or of a bucket).

No text is generated, so the retokenized counts are the generated ones.
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


STEADY_KEYS: tuple[str, ...] = (
    "concurrency_ratio", "window_start", "window_end", "duration", "concurrency_threshold", "completed",
    "total_input", "input_throughput", "total_output", "total_output_retokenized", "output_throughput",
    "output_throughput_retokenized", "average_concurrency", "peak_concurrency", "peak_output_throughput",
)
"""The fields of SGLang 0.5.23's ``SteadyStateMetrics`` (benchmark/steady_state.py), in its
order: the keys of a ``--steady-state-output-file`` line."""

SUMMARY_KEYS: dict[str, str] = {
    "window_start": "steady_window_start_s", "window_end": "steady_window_end_s",
    **{k: f"steady_{k}" for k in STEADY_KEYS if k not in ("window_start", "window_end")},
}
"""``SteadyStateMetrics`` field -> the run summary's key (the full-run keys stay
bench_serving's own)."""


def _bucket(t: np.ndarray, t0: float, n: int) -> np.ndarray:
    """SGLang's 1-second bucket of a token time inside the window ``[t0, t0 + ...]``: the
    elapsed time's ceiling less one (a time on a second's end is in the second that ends
    there), at least 0 and at most ``n - 1``."""
    b = np.ceil(np.maximum(t - t0, 0.0)) - 1
    return np.clip(b, 0, n - 1).astype(np.int64)


def _spread_tokens_upto(x: np.ndarray, a: np.ndarray, b: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Tokens emitted at or before each ``x`` by requests emitting ``rate`` tokens per second
    evenly on ``[a, b]`` (the sum over requests of ``rate x clip(x - a, 0, b - a)``), by
    prefix sums over the requests sorted by ``a`` and by ``b``: O((n + len(x)) log n)."""
    def part(edge: np.ndarray) -> np.ndarray:
        o = np.argsort(edge, kind="stable")
        e, r = edge[o], rate[o]
        cr, ce = np.r_[0.0, np.cumsum(r)], np.r_[0.0, np.cumsum(r * e)]
        k = np.searchsorted(e, x, side="left")   # requests with edge < x
        return x * cr[k] - ce[k]
    return part(a) - part(b)


def steady_state_metrics(requests: Any, ratio: float, chunks: Any = None, input_known: bool = True) -> dict[str, Any]:
    """The run's ``SteadyStateMetrics`` (module docstring), SGLang's field names and units.

    Args:
        requests: the run's requests table (rid, start_s, first_token_s, finish_s, input_len,
            output_len; :class:`~sim.tables.Columns` or DataFrame).
        ratio: ``--steady-state-concurrency-ratio``, in (0, 1].
        chunks: the chunks table (rid, time_s, n_tokens) of a run with full records, whose
            token times are then bench_serving's; None or empty (compact records): a request's
            later tokens are spread evenly between its first token and its finish.
        input_known: False for a multi-turn replay: ``total_input`` and ``input_throughput``
            are None (0.5.23 serving.py passes no input requests for it).

    Returns:
        :data:`STEADY_KEYS` -> value: seconds for the window and duration, tokens or requests
        for the totals, tokens per second for the throughputs.

    Raises:
        ValueError: as :func:`steady_window`.
    """
    done = notna(requests, "finish_s")
    start = column(requests, "start_s", float)[done]
    first = column(requests, "first_token_s", float)[done]
    finish = column(requests, "finish_s", float)[done]
    n_out = column(requests, "output_len", float)[done]
    n_in = column(requests, "input_len", float)[done]
    t0, t1, threshold, peak = steady_window(start, finish, ratio)
    dur = t1 - t0
    nb = max(1, math.ceil(dur))
    buckets = np.zeros(nb)
    if chunks is not None and len(chunks):
        from specsched.sim.bench_serving import token_times

        times, owner = token_times(requests, chunks, done, with_owner=True)
        per = np.bincount(owner, minlength=len(start)).astype(float)
        weight = n_out[owner] / per[owner]
        inside = (times >= t0) & (times <= t1)
        tout = float(weight[inside].sum())
        np.add.at(buckets, _bucket(times[inside], t0, nb), weight[inside])
    else:
        # the first token at first_token_s; the other n - 1 at a constant rate up to finish_s
        # (all at the first token where the request finished with it); a request that streamed
        # no text has its one time at its start (TTFT 0.0), its whole count there
        quiet = (n_out == 0) | np.isnan(first)
        first = np.where(quiet, start, first)
        spread = (n_out > 1) & (finish > first) & ~quiet
        first_in = (first >= t0) & (first <= t1)
        lump = np.where(spread, 1.0, np.maximum(n_out, 1.0)) * first_in
        rate = np.where(spread, (n_out - 1) / np.where(spread, finish - first, 1.0), 0.0)
        later = np.clip(np.minimum(finish, t1) - np.maximum(first, t0), 0.0, None) * rate
        tout = float(np.where(n_out > 0, lump, 0.0).sum() + later.sum())
        np.add.at(buckets, _bucket(first[first_in], t0, nb), np.where(n_out > 0, lump, 0.0)[first_in])
        edges = np.minimum(t0 + np.arange(nb + 1, dtype=float), t1)
        cum = _spread_tokens_upto(edges, first[spread], finish[spread], rate[spread])
        buckets += np.diff(cum)
    tin = float(n_in[(start >= t0) & (start < t1)].sum()) if input_known else None
    n_fin = int(((finish >= t0) & (finish <= t1)).sum())
    overlap = float(np.clip(np.minimum(finish, t1) - np.maximum(start, t0), 0.0, None).sum())
    return {
        "concurrency_ratio": ratio, "window_start": t0, "window_end": t1, "duration": dur,
        "concurrency_threshold": threshold, "completed": n_fin,
        "total_input": None if tin is None else int(round(tin)),
        "input_throughput": None if tin is None else tin / dur,
        "total_output": tout, "total_output_retokenized": tout,
        "output_throughput": tout / dur, "output_throughput_retokenized": tout / dur,
        "average_concurrency": overlap / dur, "peak_concurrency": peak,
        "peak_output_throughput": float(buckets.max()),
    }


def steady_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """:func:`steady_state_metrics` as the run summary's ``steady_*`` keys
    (:data:`SUMMARY_KEYS`), plus ``steady_concurrency`` (the average concurrency under its
    earlier name). The summary's full-run keys are not touched."""
    out = {SUMMARY_KEYS[k]: metrics[k] for k in STEADY_KEYS}
    out["steady_concurrency"] = metrics["average_concurrency"]
    return out


def steady_metrics_of_summary(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The ``SteadyStateMetrics`` fields back from a run summary's ``steady_*`` keys (the
    ``steady_state.jsonl`` line), or None when the run had no steady-state ratio."""
    if summary.get("steady_duration") is None:
        return None
    return {k: summary.get(SUMMARY_KEYS[k]) for k in STEADY_KEYS}


def run_steady_summary(scenario: Any, requests: Any, chunks: Any) -> dict[str, Any]:
    """The run summary's ``steady_*`` keys for a run of ``scenario`` (:func:`steady_summary`
    of :func:`steady_state_metrics`), empty when its workload sets no
    ``steady_state_concurrency_ratio``; shared by the simulator (sim/engine.py) and the
    runtime (runtime/engine.py), so a measured run reports what a simulated one does.

    Args:
        scenario: the resolved scenario (its ``workload``).
        requests: the run's requests table.
        chunks: its chunks table (one row per delivery), or None for compact records.

    Raises:
        FieldError: ``workload.steady_state_concurrency_ratio``, when the run has no window
            (the message says why).
    """
    from specsched.sim.errors import FieldError

    w = scenario.workload
    ratio = w.steady_state_concurrency_ratio
    if ratio is None:
        return {}
    try:
        return steady_summary(steady_state_metrics(requests, ratio, chunks, input_known=w.kind != "multi_turn"))
    except ValueError as e:
        raise FieldError("workload.steady_state_concurrency_ratio", ratio, str(e)) from None
