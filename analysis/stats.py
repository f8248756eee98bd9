"""Statistics used by the plots and comparisons: ECDFs, percentiles, confidence intervals of
a mean and bootstrap intervals of a percentage change. (Metric definitions, ITL included,
live in :mod:`specsched.sim.metrics`.)"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats


def ecdf(values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite values: ``(x sorted ascending, F(x) in (0, 1])``."""
    x = np.asarray(values, dtype=float)
    x = np.sort(x[np.isfinite(x)])
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation) of the finite values; NaN if none."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of the mean: ``(mean, low, high)``.

    With fewer than two finite values the interval is ``(nan, nan)``; with zero spread it
    collapses to the mean.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(x.mean())
    if x.size < 2:
        return m, float("nan"), float("nan")
    sem = float(x.std(ddof=1) / np.sqrt(x.size))
    if sem == 0.0:
        return m, m, m
    h = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * sem)
    return m, m - h, m + h


def _pct_change(base: np.ndarray, change: np.ndarray, axis: int = -1) -> np.ndarray:
    mb = np.mean(base, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.mean(change, axis=axis) - mb) / mb * 100.0


def pct_change_ci(
    base: Sequence[float] | np.ndarray,
    change: Sequence[float] | np.ndarray,
    *,
    paired: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    method: str = "BCa",
    seed: int | None = 0,
) -> tuple[float, float, float]:
    """Percentage change of the mean, ``100 (mean(change) - mean(base)) / mean(base)``, with a
    bootstrap confidence interval (``scipy.stats.bootstrap``).

    Args:
        base, change: per-seed values of one metric for the base arm and the changed arm.
        paired: resample (base_i, change_i) pairs together (same seed -> same arrivals,
            lengths and acceptance draws in both arms); the two must then have equal length.
            False resamples each arm independently.
        confidence: confidence level of the interval (0.95 -> 95 %).
        n_resamples: bootstrap resamples.
        method: ``"BCa"`` (default), ``"percentile"`` or ``"basic"``; if BCa cannot be
            computed (degenerate jackknife) the percentile interval is used.
        seed: seed of the resampling RNG (the result is reproducible for a given seed).

    Returns:
        ``(pct_change, ci_low, ci_high)`` in percent. The interval is NaN when either arm
        has fewer than two finite values or the base mean is 0 (then the change is NaN too).
        If every resample gives the same value (no spread), the interval is that value.

    Raises:
        ValueError: ``paired`` with samples of different lengths.
    """
    b = np.asarray(base, dtype=float)
    c = np.asarray(change, dtype=float)
    if paired:
        if b.shape != c.shape:
            raise ValueError(f"paired samples need equal lengths, got {b.size} and {c.size}")
        keep = np.isfinite(b) & np.isfinite(c)
        b, c = b[keep], c[keep]
    else:
        b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    nan = float("nan")
    if b.size == 0 or c.size == 0:
        return nan, nan, nan
    point = float(_pct_change(b, c))
    if not np.isfinite(point):
        return nan, nan, nan
    if b.size < 2 or c.size < 2:
        return point, nan, nan
    rng = np.random.default_rng(seed)

    def run(m: str) -> tuple[float, float, np.ndarray]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap(
                (b, c), _pct_change, paired=paired, vectorized=True, axis=-1,
                confidence_level=confidence, n_resamples=n_resamples, method=m, rng=rng,
            )
        return float(res.confidence_interval.low), float(res.confidence_interval.high), res.bootstrap_distribution

    lo, hi, dist = run(method)
    finite = dist[np.isfinite(dist)]
    if finite.size and np.ptp(finite) == 0.0:
        return point, point, point
    if not (np.isfinite(lo) and np.isfinite(hi)) and method != "percentile":
        lo, hi, _ = run("percentile")
    return point, lo, hi
