"""Statistics used by the plots and comparisons: ECDFs, percentiles, confidence intervals of
a mean and bootstrap intervals of a percentage change. (Metric definitions, ITL included,
live in :mod:`specsched.sim.metrics`.)"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats


def ecdf(values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite values: ``(x sorted ascending, F(x) in (0, 1])``."""
    x = np.asarray(values, dtype=float)
    x = np.sort(x[np.isfinite(x)])
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def ecdf_band_halfwidth(n: int, confidence: float = 0.95) -> float:
    """Half-width of the distribution-free confidence band of an empirical CDF of ``n``
    independent samples: with probability ``confidence`` the true CDF lies within this of the
    ECDF at every x at once (the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant:
    ``sqrt(ln(2 / (1 - confidence)) / (2 n))``; 0.095 at n = 200).

    Raises:
        ValueError: ``n`` < 1 or ``confidence`` outside (0, 1)."""
    if n < 1 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need n >= 1 and confidence in (0, 1), got n={n}, confidence={confidence}")
    return math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * n))


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation) of the finite values; NaN if none."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of the mean: ``(mean, low, high)``.

    With fewer than two finite values the interval is ``(nan, nan)``; with zero spread it
    collapses to the mean. When no value is negative (a throughput, a latency, a count) the
    interval is cut at 0, the mean's own bound: with two seeds the t quantile is 12.7 and
    the raw interval of a throughput ran below zero (317.8 [-622.4, 1,258] tok/s).
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
    return m, (max(m - h, 0.0) if (x >= 0).all() else m - h), m + h


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
        Paired with fewer than :data:`SMALL_SAMPLE_SEEDS` seeds, the interval is at least
        the Student-t interval of the per-seed change (of ln(change / base) where every ratio
        is positive).

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
    if paired and b.size < SMALL_SAMPLE_SEEDS and np.all(b != 0):
        # a bootstrap over a handful of seeds undercovers (3 seeds have 10 distinct resamples):
        # the interval is at least the Student-t interval of the per-seed change, taken on
        # ln(change / base) where every ratio is positive (ratios scatter multiplicatively, as
        # compare.noise_pct says), else on the percent change
        t = float(stats.t.ppf(0.5 + confidence / 2, b.size - 1)) / math.sqrt(b.size)
        d, is_log = per_seed_changes(b, c)
        h = t * float(d.std(ddof=1))
        if is_log:
            m = float(d.mean())
            t_lo, t_hi = 100.0 * math.expm1(m - h), 100.0 * math.expm1(m + h)
        else:
            t_lo, t_hi = point - h, point + h
        if math.isfinite(t_lo) and math.isfinite(t_hi):
            lo, hi = min(lo, t_lo), max(hi, t_hi)
    return point, lo, hi


MAX_SEEDS_SUGGESTED = 200
"""The most seeds :func:`seeds_to_resolve` suggests: a change that needs more is smaller than
anything a scheduling decision turns on, and the answer says so by giving none."""


def seeds_to_resolve(base: Sequence[float] | np.ndarray, change: Sequence[float] | np.ndarray, *,
                     confidence: float = 0.95, max_seeds: int = MAX_SEEDS_SUGGESTED) -> int | None:
    """How many paired seeds would resolve a change these seeds leave open: the smallest n
    whose Student-t interval of the mean per-seed change excludes 0, were the per-seed mean
    and spread what these seeds show (:func:`per_seed_changes`, the scale of
    :func:`pct_change_ci`'s small-sample floor). An
    estimate for the next run's ``--seeds``, not a promise: the spread of 2-3 seeds is itself
    uncertain.

    Args:
        base, change: one metric's per-seed values of two arms, paired by seed (equal
            lengths; non-finite pairs dropped).
        confidence: the interval's level. max_seeds: the largest answer given.

    Returns:
        n (> the seeds given), or None: fewer than two pairs, no spread (the change is
        already what it is), a zero mean change, the interval already excludes 0, or more
        than ``max_seeds`` would be needed.
    """
    b = np.asarray(base, dtype=float)
    c = np.asarray(change, dtype=float)
    if b.shape != c.shape:
        return None
    keep = np.isfinite(b) & np.isfinite(c) & (b != 0)
    b, c = b[keep], c[keep]
    if b.size < 2:
        return None
    d, _ = per_seed_changes(b, c)
    m, sd = abs(float(d.mean())), float(d.std(ddof=1))
    if not (m > 0 and sd > 0 and math.isfinite(m) and math.isfinite(sd)):
        return None
    q = 0.5 + confidence / 2

    def resolves(n: int) -> bool:
        return float(stats.t.ppf(q, n - 1)) * sd / math.sqrt(n) < m

    if resolves(b.size):
        return None
    if not resolves(max_seeds):
        return None
    lo, hi = b.size, max_seeds          # resolves(hi) holds, resolves(lo) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if resolves(mid) else (mid, hi)
    return hi


def per_seed_changes(base: np.ndarray, change: np.ndarray) -> tuple[np.ndarray, bool]:
    """The per-seed change of paired values (float arrays of one shape, no zero in ``base``)
    on the scale the small-sample intervals take it: ``(ln(change / base), True)`` where every
    ratio is positive (ratios scatter multiplicatively, as compare.noise_pct says), else
    ``(100 (change / base - 1), False)``, the percent change."""
    r = change / base
    return (np.log(r), True) if np.all(r > 0) else (100.0 * (r - 1.0), False)


SMALL_SAMPLE_SEEDS = 20
"""Paired seeds below which :func:`pct_change_ci` widens its bootstrap interval to at least
the Student-t interval of the per-seed change: a bootstrap's coverage falls short of
its level at small n (its resamples take only the sample's own values; Efron & Tibshirani,
An Introduction to the Bootstrap, ch. 13-14, on small-sample undercoverage), which the t
interval's n - 1 degrees of freedom account for (t 4.30 at 3 seeds against the normal's
1.96)."""


# ---------------------------------------------------------------- across seeds

PERCENTILE_STATS = {"median": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
"""Summary-key prefixes that are order statistics, and their percentile."""
SAMPLED = ("ttft", "tpot", "itl", "e2e_latency")
"""Latencies whose samples a run keeps (per request, or per token for ITL)."""


def percentile_metric(metric: str) -> tuple[str, float] | None:
    """``("ttft", 99.0)`` for ``p99_ttft_ms`` (an order statistic of a sampled latency),
    None for any other summary key (means, throughputs, counts)."""
    stat, _, rest = metric.partition("_")
    if stat in PERCENTILE_STATS and rest.endswith("_ms") and rest[:-3] in SAMPLED:
        return rest[:-3], PERCENTILE_STATS[stat]
    return None


class PooledSamples:
    """One latency's samples from several runs (seeds), pooled.

    The across-seeds value of a percentile is the percentile of the pooled samples (every
    request, or token for ITL, of every seed counts once): what a plot of the pooled
    distribution shows, and what one long run would give. :meth:`percentile` also takes a
    multiplicity per seed, which is how a bootstrap over seeds resamples whole runs.

    Args:
        per_seed: per seed, ``(values, counts)`` (counts: int multiplicities, e.g. the
            compact ITL pairs) or a plain array of values. NaNs are dropped.
    """

    _BLOCK = 1024

    def __init__(self, per_seed: Sequence[Any]) -> None:
        vals, seeds, counts = [], [], []
        for i, item in enumerate(per_seed):
            v, c = item if isinstance(item, tuple) else (item, None)
            v = np.asarray(v, dtype=float)
            c = np.ones(v.size, dtype=np.int64) if c is None else np.asarray(c, dtype=np.int64)
            keep = np.isfinite(v) & (c > 0)
            vals.append(v[keep])
            counts.append(c[keep])
            seeds.append(np.full(int(keep.sum()), i, dtype=np.int64))
        self.num_seeds = len(per_seed)
        v = np.concatenate(vals) if vals else np.zeros(0)
        order = np.argsort(v)
        self.values = v[order]
        self.counts = (np.concatenate(counts) if counts else np.zeros(0, np.int64))[order]
        self.seed_of = (np.concatenate(seeds) if seeds else np.zeros(0, np.int64))[order]
        # per block of sorted samples, the count of each seed: a resample's cumulative
        # weights are then found block by block (exact, O(blocks x seeds) per resample)
        nb = max(1, -(-self.values.size // self._BLOCK))
        block = np.arange(self.values.size) // self._BLOCK
        k = max(self.num_seeds, 1)
        flat = np.bincount(block * k + self.seed_of, weights=self.counts, minlength=nb * k)
        self._block_counts = np.rint(flat).astype(np.int64).reshape(nb, k)

    def percentile(self, q: float, multiplicity: np.ndarray | None = None) -> float:
        """``np.percentile`` (linear) of the pooled samples, each seed's samples repeated
        ``multiplicity[seed]`` times (default once). NaN when nothing is left."""
        m = np.ones(self.num_seeds, dtype=np.int64) if multiplicity is None else np.asarray(multiplicity, np.int64)
        cbw = np.cumsum(self._block_counts @ m)
        n = int(cbw[-1]) if cbw.size else 0
        if n == 0:
            return float("nan")
        h = (n - 1) * np.true_divide(q, 100)
        lo = int(np.floor(h))

        def at(rank: int) -> float:
            b = int(np.searchsorted(cbw, rank, side="right"))
            a0 = b * self._BLOCK
            w = self.counts[a0 : a0 + self._BLOCK] * m[self.seed_of[a0 : a0 + self._BLOCK]]
            cw = np.cumsum(w) + (int(cbw[b - 1]) if b else 0)
            return float(self.values[a0 + int(np.searchsorted(cw, rank, side="right"))])

        if h >= n - 1:
            return at(n - 1)
        a, b = np.float64(at(lo)), np.float64(at(lo + 1))
        t = np.float64(h - lo)
        d = b - a
        return float(b - d * (1 - t)) if t >= 0.5 else float(a + d * t)


def across_seeds(values: Sequence[float] | np.ndarray, pooled: PooledSamples | None = None, q: float | None = None,
                 confidence: float = 0.95, n_resamples: int = 2000, seed: int | None = 0) -> tuple[float, float, float]:
    """One metric over seeds: ``(value, ci_low, ci_high)``; the one definition used by the
    compare table, the sweep summary and the plots.

    A percentile (``pooled`` and ``q`` given) is the percentile of the pooled samples of
    all seeds, its interval a percentile bootstrap that resamples whole seeds. Any other
    metric is the mean of the per-seed ``values`` with its Student-t interval
    (:func:`mean_ci`). Intervals are NaN with fewer than two seeds.
    """
    if pooled is None or q is None:
        return mean_ci(values, confidence)
    point = pooled.percentile(q)
    k = pooled.num_seeds
    if k < 2 or not math.isfinite(point):
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    m = rng.multinomial(k, np.full(k, 1.0 / k), size=n_resamples)
    boot = np.array([pooled.percentile(q, mi) for mi in m])
    boot = boot[np.isfinite(boot)]
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [a, 1 - a]) if boot.size else (float("nan"), float("nan"))
    return point, float(lo), float(hi)


def pooled_pct_change_ci(base: PooledSamples, change: PooledSamples, q: float, *, confidence: float = 0.95,
                         n_resamples: int = 2000, seed: int | None = 0) -> tuple[float, float, float]:
    """% change of a pooled percentile, ``100 (change - base) / base``, with a percentile
    bootstrap interval over seeds paired by index (the same resampled seeds in both arms:
    same seed, same arrivals, lengths and accept draws). NaN interval with fewer than two
    seeds or unequal seed counts (then no pairing)."""
    b, c = base.percentile(q), change.percentile(q)
    point = (c - b) / b * 100.0 if b else float("nan")
    k = base.num_seeds
    if k < 2 or change.num_seeds != k or not math.isfinite(point):
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boot = []
    for mi in rng.multinomial(k, np.full(k, 1.0 / k), size=n_resamples):
        bb = base.percentile(q, mi)
        if bb:
            boot.append((change.percentile(q, mi) - bb) / bb * 100.0)
    boot = np.asarray(boot)
    boot = boot[np.isfinite(boot)]
    if not boot.size:
        return point, float("nan"), float("nan")
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [a, 1 - a])
    return point, float(lo), float(hi)
