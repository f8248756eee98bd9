"""How far one measured run's latency figures could move by chance: the sampling interval of
each TTFT, TPOT and E2E-latency statistic of a bench_serving line with per-request details.

A bench_serving run is one sample of N requests. Its median, p90 and mean are statistics of that
sample and move from run to run even with the server unchanged; a prediction (the mean over
seeds of the simulated statistic) that misses by less than that is no evidence of a model error.
Where the distribution has a gap the movement is large: a multi-turn run whose first turns (a
sixth of its requests) take 300-750 ms and whose later turns 30-60 ms measured a p90 TTFT of
69.1 and 62.4 ms in two runs of one arm on one card (docs/measurements/h100-v49.md), its other
figures within 3 %.

Intervals, distribution-free where a quantile is concerned:

- a percentile (``median_*``, ``p90_*``, ``p99.9_*``): the order-statistic confidence interval
  of that quantile (``scipy.stats.quantile_test(...).confidence_interval()``: the ranks a
  binomial count of requests below the true quantile reaches with the given confidence);
- a mean (``mean_*``): Student's t interval of the sample's mean.

Samples, as SGLang's bench_serving computes them (0.5.23 ``benchmark/serving.py``
``calculate_metrics``) over the successful requests: a run's ``requests`` table (a measured
line's as :func:`sim.bench_serving.to_run_data` reads its details, the one reading of them):
TTFT per request; E2E latency per request (vLLM's ``latencies``, else TTFT plus the sum of the
request's ITLs); TPOT per request of more than one output token, (latency - TTFT) / (output
tokens - 1). ITL statistics get none: the gaps of one request are not independent draws (one
slow step delays several), so an interval over gaps would read too narrow.

The requests are taken as independent draws. Under load they are not quite (a slow step delays
every request in flight), so an interval is a floor on how far another run could move, not a
ceiling.

An interval is given only where the details reproduce the line's own figure (within
:data:`SAME_FIGURE_REL`): a line whose figures count otherwise (a client that records one gap a
chunk, a run without streaming, a vLLM line's per-token TPOT) gets none rather than an interval
around another number.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

CONFIDENCE = 0.95
"""Confidence level of every interval (the printed column says it)."""

SAME_FIGURE_REL = 0.01
"""Relative difference within which a statistic recomputed from the details is the line's own
(bench_serving rounds nothing; vLLM's and SGLang's percentiles are numpy's linear ones)."""

MIN_REQUESTS = 10
"""Fewest successful requests for which intervals are given: below it an order-statistic
interval of a p90 spans the whole sample."""

LATENCIES = ("ttft", "tpot", "e2e_latency")
"""The latency families given intervals (bench_serving's ``<stat>_<family>_ms`` keys)."""


def _stat_of(metric: str) -> tuple[str, float | None] | None:
    """``(family, percentile)`` of a bench_serving key (``p90_ttft_ms`` -> ("ttft", 90.0),
    ``mean_tpot_ms`` -> ("tpot", None)), or None for a key that gets no interval."""
    if not metric.endswith("_ms"):
        return None
    head, _, rest = metric.partition("_")
    family = rest.removesuffix("_ms")
    if family not in LATENCIES:
        return None
    if head == "mean":
        return family, None
    if head == "median":
        return family, 50.0
    if head.startswith("p"):
        try:
            pct = float(head[1:])
        except ValueError:
            return None
        return (family, pct) if 0.0 < pct < 100.0 else None
    return None


def request_samples(requests: Any) -> dict[str, np.ndarray]:
    """Per-request samples in milliseconds, keyed by latency family, from a results run's
    ``requests`` table (``ttft_s``, ``e2e_s``, ``tpot_s``: a measured line's as
    :func:`sim.bench_serving.to_run_data` reads its details, a simulated or runtime run's own);
    a request without a finite value (no second token: no TPOT; no latency in the line: no
    E2E) is left out of that family."""
    out = {}
    for family, column in (("ttft", "ttft_s"), ("e2e_latency", "e2e_s"), ("tpot", "tpot_s")):
        v = requests[column].to_numpy(float) * 1e3 if column in requests else np.zeros(0)
        v = v[np.isfinite(v)]
        if v.size:
            out[family] = v
    return out


def _point(sample: np.ndarray, pct: float | None) -> float:
    return float(sample.mean()) if pct is None else float(np.percentile(sample, pct))


def interval(sample: np.ndarray, pct: float | None, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The ``confidence`` interval of a sample's mean (``pct`` None: Student's t) or of its
    ``pct``-th percentile (order statistics, ``scipy.stats.quantile_test``), in the sample's
    units; NaNs when the sample is too small for one (an order-statistic interval with no rank
    below or above the quantile at that confidence).

    Raises:
        ValueError: ``pct`` outside (0, 100), or ``confidence`` outside (0, 1)."""
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    x = np.asarray(sample, dtype=float)
    x = x[np.isfinite(x)]
    nan = (math.nan, math.nan)
    if x.size < 2:
        return nan
    if pct is None:
        half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
        m = float(x.mean())
        return m - half, m + half
    if not 0.0 < pct < 100.0:
        raise ValueError(f"percentile must lie in (0, 100), got {pct}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy warns where a bound has no rank: NaN says it
        ci = stats.quantile_test(x, q=float(np.percentile(x, pct)), p=pct / 100.0).confidence_interval(confidence)
    lo, hi = float(ci.low), float(ci.high)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else nan


def intervals_of(requests: Any, figures: Any, metrics: list[str],
                 confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """``{metric: (low, high)}`` in ms for each of ``metrics`` that has a sampling interval: a
    TTFT, TPOT or E2E-latency mean or percentile of a run of at least :data:`MIN_REQUESTS`
    requests (``requests``, :func:`request_samples`) whose recomputed figure is the run's own
    (``figures[metric]``, within :data:`SAME_FIGURE_REL`)."""
    if len(requests) < MIN_REQUESTS:
        return {}
    samples = request_samples(requests)
    out: dict[str, tuple[float, float]] = {}
    for m in metrics:
        stat = _stat_of(m)
        figure = figures.get(m)
        if stat is None or stat[0] not in samples or not isinstance(figure, (int, float)) or not math.isfinite(figure):
            continue
        sample = samples[stat[0]]
        if sample.size < MIN_REQUESTS:
            continue
        own = _point(sample, stat[1])
        if not math.isclose(own, figure, rel_tol=SAME_FIGURE_REL, abs_tol=1e-6):
            continue   # the run counts this figure otherwise than its requests give it
        lo, hi = interval(sample, stat[1], confidence)
        if math.isfinite(lo) and math.isfinite(hi):
            out[m] = (lo, hi)
    return out


def measured_intervals(run: Any, metrics: list[str], confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """:func:`intervals_of` a bench_serving line (:class:`sim.bench_serving.BenchRun`) with
    per-request details, its requests as :func:`sim.bench_serving.to_run_data` reads them and
    its figures the line's own. Empty for a line without details, or one not streamed (each
    "TTFT" there is the whole reply: bench_serving's figures are not a first token's)."""
    from specsched.sim.bench_serving import to_run_data

    details = getattr(run, "details", None)
    if details is None or not details.streamed:
        return {}
    return intervals_of(to_run_data(run).requests, {**run.extra, **run.summary}, metrics, confidence)


def run_intervals(run: Any, metrics: list[str], confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """:func:`intervals_of` a results run (``specsched validate``'s measured run on a device):
    its requests table and its summary."""
    return intervals_of(run.requests, run.summary, metrics, confidence)


def interval_line(rows: list[dict[str, Any]], found: dict[str, tuple[float, float]]) -> str | None:
    """One ``note:`` line giving each of ``rows``' (``metric``, ``predicted``) measured
    interval in ``found``, saying where it holds the prediction; None when ``found`` is empty."""
    parts = []
    for r in rows:
        if r["metric"] not in found:
            continue
        lo, hi = found[r["metric"]]
        p = r.get("predicted")
        inside = isinstance(p, (int, float)) and lo <= p <= hi
        parts.append(f"{r['metric']} {lo:.3f}-{hi:.3f}{' (holds the prediction)' if inside else ''}")
    if not parts:
        return None
    return (f"note: measured {CONFIDENCE * 100:.0f} % intervals (the run's requests as one sample, "
            f"analysis/measured_noise.py): " + ", ".join(parts))
