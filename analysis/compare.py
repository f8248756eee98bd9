"""Compare arms of a scenario over several seeds.

Each arm runs with seeds ``scenario.seed + i`` (i = 0..seeds-1). Because a seed fixes the
arrivals, lengths and acceptance draws, the same seed in two arms is a paired sample: the
percentage change of a metric gets a paired bootstrap confidence interval. The first arm is
the base.

Across seeds a metric is summarised one way everywhere (:func:`analysis.stats.across_seeds`):
a percentile (median, p90, p95, p99, max of TTFT, TPOT, ITL, E2E) is the percentile of the
pooled samples of all seeds (labelled "pooled"), its interval a bootstrap over seeds
(:func:`analysis.stats.pooled_pct_change_ci`); any other metric is the mean over seeds
(:func:`analysis.stats.pct_change_ci`).
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.table import Table
from specsched.analysis.io import atomic_write_text
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.analysis.runner import Runner, RunTask, execute
from specsched.analysis.stats import (
    PooledSamples,
    pct_change_ci,
    percentile_metric,
    pooled_pct_change_ci,
    seeds_to_resolve,
)
from specsched.analysis.stop_signals import completed, stop_signals
from specsched.sim.config import with_value
from specsched.sim.errors import ConfigError
from specsched.sim.grid_range import write_labelled_warnings
from tqdm.auto import tqdm

DEFAULT_METRICS = (
    "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "max_ttft_ms", "median_tpot_ms", "median_itl_ms", "verify_cycles_per_s", "accept_length",
)
ABORTED = "requests_aborted"
"""The summary key of the requests a run's server rejected (sim/served.py ``trace_aborts``);
absent from a run that rejected none (read as 0 beside one that did)."""


def aborted_note(samples: pd.DataFrame) -> str | None:
    """One warning line when some arm's runs had requests rejected by the server: the
    latencies and throughputs of such an arm are over its completed requests only, as
    bench_serving's are, so a change that makes the server reject requests looks faster."""
    rows = samples[(samples["metric"] == ABORTED) & (samples["value"] > 0)]
    if rows.empty:
        return None
    per_arm = rows.groupby("arm", sort=False)["value"].mean()
    said = ", ".join(f"{a} {v:g}" for a, v in per_arm.items())
    return (f"warning: the server rejected requests in some runs (requests_aborted, mean over the seeds that had any: "
            f"{said}): their latencies and throughputs are over the completed requests only, as bench_serving's "
            "are, so an arm that rejects more looks faster")


def kv_pool_notes(samples: pd.DataFrame, arm_scenarios: Sequence[tuple[str, Any]]) -> list[str]:
    """``specsched run``'s KV-pool note (:func:`sim.defaults.kv_pool_note`) for each arm whose
    runs had admission stopped by the KV pool below max_running_requests, named by arm: the
    most passes any seed stopped, and the peaks running and waiting over the seeds. A pool
    that binds in one arm and not the other is what the arms' difference is about, and the
    table alone does not say it."""
    from specsched.sim.defaults import kv_pool_note

    notes = []
    keys = ("kv_refused_passes", "kv_refused_running_peak", "kv_refused_waiting_peak")
    for arm, scenario in arm_scenarios:
        rows = samples[(samples["arm"] == arm) & samples["metric"].isin(keys)]
        worst = rows.groupby("metric")["value"].max()
        if worst.get("kv_refused_passes", 0) <= 0:
            continue
        note = kv_pool_note(scenario, {k: int(worst[k]) for k in keys})
        if note is not None:
            notes.append(note.replace("note: ", f"note: arm {arm}: ", 1))
    return notes


HIGHER_IS_BETTER = ("throughput", "verify_cycles_per_s", "decode_steps_per_s", "accept_length", "gpu_busy_fraction", "completed")
"""Metric name fragments where an increase is an improvement (else lower is better)."""

TABLE_COLUMNS = ("metric", "base_arm", "arm", "n_seeds", "base_value", "arm_value", "change_pct",
                 "ci_low_pct", "ci_high_pct", "across_seeds", "noise_pct", "rate_bound", "accept_length_differs",
                 "seeds_needed")
"""``base_value``/``arm_value``: each arm's value over seeds in the metric's unit (the mean, or
the pooled percentile; ``across_seeds`` says which); ``change_pct`` and its CI are the change;
``noise_pct`` the size below which a change counts as the same (:func:`noise_pct`);
``n_seeds`` the seeds these are over (paired: those where both arms have the metric, e.g.
``verify_cycles_per_s`` is missing for a run with no steady batch; 0 when no seed has it in
both arms, e.g. only one arm speculates: each value is then its own arm's mean and the change
is n/a); ``rate_bound`` True for a throughput of open-loop runs that kept pace with their
arrivals in both arms (:func:`rate_bound`); ``accept_length_differs`` True when the two arms'
accept length (tokens committed per verify cycle) is not the same by :func:`verdict`'s rule
(or only one arm has one): their ``verify_cycles_per_s`` is then judged neither better nor
worse (:data:`ACCEPT_NOTE`); ``seeds_needed`` for a paired change these seeds leave open,
about how many seeds would resolve it were its per-seed spread what these show
(:func:`analysis.stats.seeds_to_resolve`; NaN where none is suggested)."""
CYCLES_METRIC = "verify_cycles_per_s"
"""The verify-cycle rate, cycles/s: SGLang's speculative decoding rounds (draft, then one
target-model verify forward of the window) per second of the steady batch. A request gains
accept length tokens per cycle, so tokens/s = cycles/s x accept length: with the accept
length changed, more or fewer cycles per second says nothing about speed on its own."""
MIN_CHANGE_PCT = 1.0
"""Default smallest change (%, either way) that a comparison calls better or worse. A change
below it is below what the simulator resolves: its predictions of the reference figures sit
within a few % (docs/fidelity.md), so a 0.1 % difference between two arms is no finding."""
NOISE_REL = 1e-9
"""Relative change (fraction, not %) below which a CI bound counts as zero: two arms that run
the same schedule can still differ by float rounding (sums in another order, ~1e-13 relative),
and a verdict on that would be a verdict on noise."""
RATE_BOUND_METRICS = ("output_throughput", "input_throughput", "total_throughput", "request_throughput")
"""Metrics that are tokens (or requests) / duration: set by the arrival rate in an open-loop run
that keeps pace with its arrivals (:func:`rate_bound`)."""
RATE_BOUND_DRAIN = 0.10
"""Largest fraction of a run's duration after its last arrival for which an open-loop run
counts as keeping pace with its arrivals (:func:`rate_bound`)."""
ARRIVAL_SPAN = "arrival_span_s"
"""The tidy metric :func:`run_arms` adds for an open-loop arm (poisson or trace arrivals): the
run's last request arrival after its first, in s."""
OPEN_LOOP_KINDS = ("poisson", "trace")
"""Workload kinds whose arrival times do not depend on the server (multi_turn's turns and a
closed loop's requests wait for the previous answer)."""
POOLED_RESAMPLES = 2000
"""Bootstrap resamples (over seeds) for a pooled percentile's interval."""

Samples = dict[tuple[str, int], dict[str, Any]]
"""(arm, seed) -> latency samples in ms (:func:`analysis.runner.latency_samples`)."""


class RunFailed(RuntimeError):
    """A run of :func:`run_arms` raised; the message names the arm, the seed and the error."""


def noise_pct(base_values: Any, arm_values: Any, paired: bool, min_change_pct: float = MIN_CHANGE_PCT) -> float:
    """The change (%) below which a metric counts as unchanged: the seed spread of the
    change, and at least ``min_change_pct``.

    Paired (the same seeds in both arms, so the same arrivals, lengths and acceptance
    draws): the sample standard deviation over seeds of the per-seed change
    ``100 (arm_i - base_i) / base_i``; a mean change smaller than its own scatter from one
    draw to the next is not one a user could count on. Where every per-seed ratio is positive,
    the spread is the smaller of that and ``100 (exp(sd(ln(arm_i / base_i))) - 1)``: percent
    changes far above +100 % scatter in proportion to their size, so a change every seed shows
    as many-fold was called 'no clear change'. Unpaired: the base arm's spread
    (standard deviation / |mean|, in %). With fewer than two seeds: ``min_change_pct``.
    """
    b, c = np.asarray(base_values, dtype=float), np.asarray(arm_values, dtype=float)
    if paired and b.shape == c.shape:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = 100.0 * (c - b) / b
            ratios = c / b
        ok = np.isfinite(v)
        r = ratios[ok]
        if r.size >= 2 and np.all(r > 0):
            # A ratio scatters multiplicatively: per-seed changes of +1500 % and +7900 % have a
            # standard deviation of 4500 %, above their mean, though every seed is 16x worse or
            # more. The scatter of ln(arm / base), as a percent factor, is what those draws
            # share; below a few tens of percent the two agree to first order.
            log_spread = 100.0 * math.expm1(float(np.log(r).std(ddof=1)))
            return float(max(min_change_pct, min(float(v[ok].std(ddof=1)), log_spread)))
    else:
        b = b[np.isfinite(b)]
        v = 100.0 * (b - b.mean()) / abs(b.mean()) if b.size and b.mean() != 0 else b[:0]
    v = v[np.isfinite(v)]
    if v.size < 2:
        return float(min_change_pct)
    return float(max(min_change_pct, v.std(ddof=1)))


def check_arms(scenario_path: str | Path, arms: Sequence[str], seeds: int,
               overrides: Mapping[str, Any] | None) -> list[Any]:
    """The scenario of each arm, loaded with ``overrides``, after checking ``seeds`` and the
    arm list. Raises ConfigError naming ``--arms`` (an unknown arm: the arm and the allowed
    ones), ``--seeds`` or the scenario's own key."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError("<command line>", "--seeds", seeds, "must be an integer >= 1")
    if len(arms) < 1:
        raise ConfigError("<command line>", "--arms", ",".join(arms), "give at least one arm (the first is the base)")
    if len(set(arms)) != len(arms):
        raise ConfigError("<command line>", "--arms", ",".join(arms), "arms must be distinct")
    scenarios = []
    for arm in arms:
        try:
            scenarios.append(load_scenario_with_overrides(scenario_path, arm, overrides))
        except ConfigError as e:
            if e.key != "--arm":
                raise
            # the loader names its own option; this command's is --arms, with the arm at fault
            hint = (f"; to compare a key's values: specsched sweep {scenario_path} --grid {arm},OTHER "
                    "(or add an arm to the file's arms:)" if "=" in arm else "")
            raise ConfigError(e.file, "--arms", arm, e.allowed + hint) from None
    return scenarios


def run_arms(
    scenario_path: str | Path,
    arms: Sequence[str],
    seeds: int,
    *,
    overrides: Mapping[str, Any] | None = None,
    runner: Runner | None = None,
    executor: Executor | None = None,
    progress: bool = False,
    with_samples: bool = False,
    out_dirs: Callable[[str, int], str | Path] | None = None,
) -> pd.DataFrame | tuple[pd.DataFrame, Samples]:
    """Run every arm with ``seeds`` seeds and collect the summary metrics.

    Args:
        scenario_path: scenario YAML file.
        arms: arm names of the file (``base`` allowed); order is kept.
        seeds: runs per arm; run i uses seed ``scenario.seed + i`` (the arm's scenario).
        overrides: dotted key -> value applied to every arm after the arm's own settings
            (see :func:`analysis.overrides.load_scenario_with_overrides`), e.g.
            ``{"workload.num_requests": 32}``.
        runner: ``runner(scenario, seed) -> RunResult | summary dict`` (default
            ``sim.engine.run_scenario``); must be picklable with a process executor.
        executor: a ``concurrent.futures`` executor (process pool, Dask's
            ``client.get_executor()``); None runs serially in this process.
        progress: show a tqdm bar.
        with_samples: also return each run's latency samples (for pooled percentiles).
        out_dirs: ``(arm, seed) -> folder``: keep each run there as a results directory
            (:func:`specsched.sim.results.write_results`, replaced whole); its
            ``scenario.yaml`` carries the run's seed, so ``specsched run`` of it repeats it.

    Returns:
        Tidy DataFrame ``arm, seed, metric, value`` (every numeric summary key, and for an
        arm with poisson or trace arrivals ``arrival_span_s``: the run's last arrival after
        its first, s, for :func:`rate_bound`), sorted by arm order, seed and metric; with ``with_samples``, ``(table, samples)`` where
        samples maps (arm, seed) to the run's latency samples in ms.

    Raises:
        ConfigError: unknown arm, bad scenario file, ``seeds < 1``.
        RunFailed: a run raised (names arm and seed; other runs are not reported).
        ConfigError, UnschedulableRequest: a run refused its input (the first such run's).
    """
    scenarios = check_arms(scenario_path, arms, seeds, overrides)
    tasks = [RunTask(sc, sc.seed + i, key=(j, sc.arm), runner=runner)
             if out_dirs is None else
             RunTask(with_value(sc, "seed", sc.seed + i), sc.seed + i, key=(j, sc.arm), runner=runner,
                     out=str(out_dirs(sc.arm, sc.seed + i)))
             for j, sc in enumerate(scenarios) for i in range(seeds)]
    bar = tqdm(total=len(tasks), desc="compare", unit="run", disable=not progress)
    outcomes = []
    try:
        if executor is None:
            for t in tasks:
                outcomes.append(execute(t))
                bar.update()
        else:
            # Ctrl-C recorded and raised between waits, not inside the pool's locks (analysis/stop_signals.py)
            with stop_signals((signal.SIGINT,)) as stop:
                futures = [executor.submit(execute, t) for t in tasks]
                for f in completed(futures, stop):
                    outcomes.append(f.result())
                    bar.update()
    finally:
        bar.close()
    # once for the whole comparison: per grid and axis, the largest value any run reached
    write_labelled_warnings([(n, o.key[1]) for o in outcomes for n in o.range_notes], [sc.arm for sc in scenarios],
                            "arms")
    rows = []
    samples: Samples = {}
    open_loop = {j for j, sc in enumerate(scenarios) if sc.workload.kind in OPEN_LOOP_KINDS}
    for o in sorted(outcomes, key=lambda o: (o.key[0], o.seed)):
        if not o.ok:
            if o.refusal is not None:   # bad input found by the run: its one line, as `run` gives it
                raise o.refusal
            raise RunFailed(f"arm {o.key[1]!r} seed {o.seed} failed: {o.error}")
        rows += [(o.key[0], o.key[1], o.seed, m, v) for m, v in sorted(o.metrics.items())]
        if o.key[0] in open_loop and o.arrival_span_s is not None:   # for rate_bound()
            rows.append((o.key[0], o.key[1], o.seed, ARRIVAL_SPAN, o.arrival_span_s))
        samples[(o.key[1], o.seed)] = o.samples
    df = pd.DataFrame(rows, columns=["_order", "arm", "seed", "metric", "value"])
    df = df.drop(columns="_order").reset_index(drop=True)
    return (df, samples) if with_samples else df


def rate_bound(runs: pd.DataFrame) -> bool:
    """True when every run of an arm is an open-loop run below saturation, so that its
    throughput (:data:`RATE_BOUND_METRICS`) measures the arrival rate, not the server.

    ``runs``: one row per seed with the metrics ``duration`` and ``arrival_span_s`` (the last
    arrival after the first, s; :func:`run_arms` adds it for poisson and trace arrivals only,
    so a closed loop, a burst or multi-turn conversations are never rate-bound).

    Rule: a run is below saturation when it ends within :data:`RATE_BOUND_DRAIN` (10 %) of its
    duration after its last arrival, ``duration - arrival_span_s <= 0.1 duration``: its request
    throughput is within 10 % of the offered rate over the arrival span (completed /
    arrival_span_s). A server that keeps pace finishes each request one latency after it
    arrives whatever its speed, so two such arms differ in throughput only by when the last
    few requests finish (a seed has the same arrivals in both arms). A saturated run drains a
    backlog after its last arrival: a server at 80 % of the offered rate spends about 20 % of
    a long run there. A run so short that one request's latency is over 10 % of it is not
    called rate-bound (its throughput keeps its verdict)."""
    if ARRIVAL_SPAN not in runs or "duration" not in runs or not len(runs):
        return False
    dur = runs["duration"].to_numpy(float)
    span = runs[ARRIVAL_SPAN].to_numpy(float)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(dur) & np.isfinite(span) & (dur > 0) & (dur - span <= RATE_BOUND_DRAIN * dur)))


def _own_mean(values: pd.Series) -> float:
    v = values.to_numpy(float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


def pooled(samples: Samples | None, arm: str, seeds: list[int], latency: str) -> PooledSamples | None:
    """The pooled samples of ``latency`` over an arm's ``seeds`` (in that order), or None
    when some run has none."""
    if not samples:
        return None
    per = [samples.get((arm, s), {}).get(latency) for s in seeds]
    if any(p is None for p in per):
        return None
    return PooledSamples(per)


def summarize_comparison(
    samples: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    base: str | None = None,
    paired: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    latency: Samples | None = None,
    min_change_pct: float = MIN_CHANGE_PCT,
) -> pd.DataFrame:
    """Compare every arm with the base arm on each metric.

    Args:
        samples: tidy ``arm, seed, metric, value`` (from :func:`run_arms`).
        latency: the runs' latency samples (``run_arms(..., with_samples=True)``): with
            them a percentile metric is pooled over seeds (see the module docstring).
        metrics: metrics to compare (default :data:`DEFAULT_METRICS`, those some run has a
            value for; a metric asked for by name is shown even when every run's is NaN).
        base: the base arm (default: the first arm in ``samples``).
        paired: pair runs by seed (used only when both arms have the same seeds).
        confidence: level of the bootstrap interval.
        n_resamples: bootstrap resamples.
        min_change_pct: the smallest change (%) called better or worse (:func:`noise_pct`).

    Returns:
        One row per (changed arm, metric) with :data:`TABLE_COLUMNS`: the value over seeds
        in the metric's unit (``base_value``/``arm_value``: the mean, or for a percentile
        with ``latency`` given the pooled percentile; ``across_seeds`` says which),
        ``change_pct`` = 100 (change - base) / base, the bootstrap interval of
        ``change_pct`` (NaN with fewer than two seeds), ``noise_pct`` (:func:`noise_pct`
        of the arms' per-seed values) and ``rate_bound`` (a throughput of open-loop runs
        below saturation in both arms, :func:`rate_bound`; its verdict says so).

    Raises:
        ConfigError: a requested metric is not in the samples, or ``base`` is not an arm.
    """
    arms = list(dict.fromkeys(samples["arm"]))
    base = base or (arms[0] if arms else None)
    if base not in arms:
        raise ConfigError("<command line>", "base arm", base, f"allowed: {', '.join(map(str, arms))}")
    present = set(samples["metric"])
    if metrics is None:   # a metric no run has a value for (verify_cycles_per_s without speculation) is left out
        valued = set(samples.loc[samples["value"].notna(), "metric"])
        metrics = [m for m in DEFAULT_METRICS if m in valued]
        if ABORTED in present:   # an arm that rejects requests looks faster over the rest: shown first
            metrics = [ABORTED, *metrics]
    else:
        unknown = [m for m in metrics if m not in present]
        if unknown:
            raise ConfigError("<command line>", "--metrics", ",".join(unknown),
                              f"not in the run summaries; known: {', '.join(sorted(present))}")
    wide = samples.pivot_table(index=["arm", "seed"], columns="metric", values="value", aggfunc="first")
    # the pivot drops a metric that is NaN in every run (verify_cycles_per_s without
    # speculative decoding): put its column back so it reads n/a instead of a KeyError
    wide = wide.reindex(columns=wide.columns.union(pd.Index(list(metrics))))
    if ABORTED in wide.columns:   # a run that rejected nothing writes no requests_aborted: 0
        wide[ABORTED] = wide[ABORTED].fillna(0.0)
    rows = []
    for arm in arms:
        if arm == base:
            continue
        b, c = wide.loc[base], wide.loc[arm]
        same_seeds = paired and list(b.index) == list(c.index)
        both_rate_bound = rate_bound(b) and rate_bound(c)
        accept_differs = _accept_length_differs(b, c, same_seeds, confidence, n_resamples, min_change_pct)
        for m in metrics:
            bound = both_rate_bound and m in RATE_BOUND_METRICS
            noise = noise_pct(b[m].to_numpy(float), c[m].to_numpy(float), same_seeds, min_change_pct)
            pm = percentile_metric(m)
            if pm is not None and same_seeds:
                seeds = [int(x) for x in b.index]
                pb, pc = pooled(latency, base, seeds, pm[0]), pooled(latency, arm, seeds, pm[0])
                if pb is not None and pc is not None:
                    pct, lo, hi = pooled_pct_change_ci(pb, pc, pm[1], confidence=confidence,
                                                       n_resamples=min(n_resamples, POOLED_RESAMPLES))
                    rows.append((m, base, arm, len(seeds), pb.percentile(pm[1]), pc.percentile(pm[1]), pct, lo, hi,
                                 "pooled", noise, bound, accept_differs,
                                 _seeds_needed(*_paired_values(b[m], c[m], True), pct, noise, confidence)))
                    continue
            # paired: the seeds where both arms have the metric, so the means, the change and its CI agree
            bv, cv = _paired_values(b[m], c[m], same_seeds)
            pct, lo, hi = pct_change_ci(bv, cv, paired=same_seeds, confidence=confidence,
                                        n_resamples=n_resamples)
            if len(bv) and len(cv):
                bmean, cmean = float(bv.mean()), float(cv.mean())
            else:   # no seed to pair (only one arm speculates: its verify cycles/s): each arm's own, no change
                bmean, cmean = _own_mean(b[m]), _own_mean(c[m])
            rows.append((m, base, arm, int(min(len(bv), len(cv))), bmean, cmean, pct, lo, hi, "mean", noise, bound,
                         accept_differs, _seeds_needed(bv, cv, pct, noise, confidence) if same_seeds else math.nan))
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _seeds_needed(bv: np.ndarray, cv: np.ndarray, pct: float, noise: float, confidence: float) -> float:
    """``seeds_needed`` of one row: the seeds that would resolve a paired change larger than
    the noise (:func:`analysis.stats.seeds_to_resolve`), NaN for a change within the noise
    (more seeds could only call it ``same``) or where none is suggested."""
    if not (math.isfinite(pct) and abs(pct) > noise):
        return math.nan
    n = seeds_to_resolve(bv, cv, confidence=confidence)
    return math.nan if n is None else float(n)


def _paired_values(b: pd.Series, c: pd.Series, same_seeds: bool) -> tuple[np.ndarray, np.ndarray]:
    """One metric's per-seed values of two arms: the seeds both have when paired, else each arm's own."""
    if same_seeds:
        bv, cv = b.to_numpy(float), c.to_numpy(float)
        keep = np.isfinite(bv) & np.isfinite(cv)
        return bv[keep], cv[keep]
    return b.dropna().to_numpy(float), c.dropna().to_numpy(float)


def _accept_length_differs(b: pd.DataFrame, c: pd.DataFrame, same_seeds: bool, confidence: float,
                           n_resamples: int, min_change_pct: float) -> bool:
    """Whether two arms' per-seed runs (``b``, ``c``: one row a seed, one column a metric)
    have a different accept length (tokens committed per verify cycle): its :func:`verdict`
    is anything but ``same``, or only one arm has one. False when neither speculates (no
    ``accept_length`` value), so a ``verify_cycles_per_s`` row keeps its verdict then."""
    if "accept_length" not in b.columns or "accept_length" not in c.columns:
        return False
    has_b, has_c = bool(b["accept_length"].notna().any()), bool(c["accept_length"].notna().any())
    if not (has_b and has_c):
        return has_b or has_c
    bv, cv = _paired_values(b["accept_length"], c["accept_length"], same_seeds)
    if not (len(bv) and len(cv)):
        return True
    pct, lo, hi = pct_change_ci(bv, cv, paired=same_seeds, confidence=confidence, n_resamples=n_resamples)
    noise = noise_pct(b["accept_length"].to_numpy(float), c["accept_length"].to_numpy(float), same_seeds,
                      min_change_pct)
    return verdict({"metric": "accept_length", "change_pct": pct, "ci_low_pct": lo, "ci_high_pct": hi,
                    "noise_pct": noise, "base_value": float(bv.mean()), "arm_value": float(cv.mean())}) != "same"


def compare_arms(
    scenario_path: str | Path,
    arms: list[str],
    seeds: int,
    metrics: list[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    runner: Runner | None = None,
    executor: Executor | None = None,
    paired: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    progress: bool = False,
    min_change_pct: float = MIN_CHANGE_PCT,
) -> pd.DataFrame:
    """Run ``arms`` over ``seeds`` seeds and compare each with the first arm.

    :func:`run_arms` followed by :func:`summarize_comparison`; see both for the arguments.
    Format the result with :func:`to_rich_table`, :func:`to_markdown` or
    ``DataFrame.to_csv``.

    Returns:
        The comparison table (one row per changed arm and metric; see :data:`TABLE_COLUMNS`).

    Raises:
        ConfigError: bad scenario, arm, seed count or metric. RunFailed: a run raised.
    """
    samples, latency = run_arms(scenario_path, arms, seeds, overrides=overrides, runner=runner, executor=executor,
                                progress=progress, with_samples=True)
    return summarize_comparison(samples, metrics, paired=paired, confidence=confidence, n_resamples=n_resamples,
                                latency=latency, min_change_pct=min_change_pct)


# ---------------------------------------------------------------- formatting

def _num(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _pct(x: float) -> str:
    """A change in percent with its sign; a change that rounds to zero prints +0.00%, not -0.00%."""
    if not math.isfinite(x):
        return "n/a"
    text = f"{x:+.2f}%"
    return "+0.00%" if text == "-0.00%" else text


VERDICT_RULE = ("verdict: better/worse when the CI (bootstrap over seeds; under 20 seeds at least Student's t) "
                "excludes 0 and |change| > noise; same when the CI (one seed: "
                "the change) lies within ±noise; noise = the standard deviation over seeds of the per-seed change "
                "(of its log ratio where that is smaller), at least --min-change (default 1 %)")
"""The verdict rule as the tables state it (:func:`verdict`)."""
RATE_BOUND_NOTE = (f"rate-bound: a throughput of open-loop arrivals (poisson/trace) that every run of both arms kept "
                   f"pace with (ended within {RATE_BOUND_DRAIN:.0%} of its duration after the last arrival): it measures "
                   "the arrival rate, not capacity; its change is only when the last requests finished")
"""The footnote of a table with a ``rate-bound`` verdict (:func:`rate_bound`)."""
ACCEPT_NOTE = ("neutral: verify_cycles_per_s of arms whose accept length differs; each cycle commits that many "
               "tokens (tokens/s = cycles/s x accept length), so cycles/s alone says nothing about speed: read "
               "output_throughput and median_tpot_ms")
"""The footnote of a table with a ``neutral`` verdict (:data:`CYCLES_METRIC`)."""


def verdict(row: Any) -> str:
    """The comparison's word for one row (``change_pct``, ``ci_low_pct``, ``ci_high_pct``,
    ``noise_pct``; a row without ``noise_pct`` uses :data:`MIN_CHANGE_PCT`):

    - ``same``: the CI lies within ±noise (with one seed, no CI: the change does);
    - ``better``/``worse``: the CI excludes 0 and |change| > noise (one seed: |change| >
      noise, said as ``better (1 seed)``); direction from :data:`HIGHER_IS_BETTER`;
    - ``no clear change``: anything else (a wide CI, or a change clear but too small to
      call and not shown to be within the noise);
    - ``rate-bound``: a throughput of open-loop runs that kept pace with their arrivals in
      both arms (``rate_bound``, :func:`rate_bound`): it measures the arrival rate, not
      capacity, so its change is no better or worse (:data:`RATE_BOUND_NOTE`);
    - ``neutral``: ``verify_cycles_per_s`` of two arms whose accept length differs
      (``accept_length_differs``): a cycle commits accept length tokens, so a change in
      cycles/s is no better or worse on its own (:data:`ACCEPT_NOTE`);
    - ``n/a``: no change (a base of 0, or no seed where both arms have the metric), except
      ``requests_aborted`` from a base of 0: ``worse``.

    A CI bound within :data:`NOISE_REL` of zero counts as zero (float rounding).
    """
    change, lo, hi = row["change_pct"], row["ci_low_pct"], row["ci_high_pct"]
    noise = row.get("noise_pct", MIN_CHANGE_PCT) if hasattr(row, "get") else MIN_CHANGE_PCT
    if not math.isfinite(noise):
        noise = MIN_CHANGE_PCT
    if not math.isfinite(change):
        if row["metric"] == ABORTED and row["base_value"] == 0 and row["arm_value"] > 0:
            return "worse"   # rejects requests where the base rejected none (no percent change of 0)
        return "n/a"
    bound = row.get("rate_bound", False) if hasattr(row, "get") else False
    if isinstance(bound, (bool, np.bool_)) and bound:   # a CSV read back without the column: NaN
        return "rate-bound"
    differs = row.get("accept_length_differs", False) if hasattr(row, "get") else False
    if row["metric"] == CYCLES_METRIC and isinstance(differs, (bool, np.bool_)) and differs:
        return "neutral"
    higher_better = any(k in row["metric"] for k in HIGHER_IS_BETTER)
    if not (math.isfinite(lo) and math.isfinite(hi)):   # one seed
        if abs(change) <= noise:
            return "same"
        return ("better" if (change > 0) == higher_better else "worse") + " (1 seed)"
    if -noise <= lo and hi <= noise:
        return "same"
    tol = 100 * NOISE_REL   # the bounds are in %
    if (lo > tol or hi < -tol) and abs(change) > noise:
        return "better" if (lo > tol) == higher_better else "worse"
    return "no clear change"


def _metric_text(row: Any) -> str:
    """The metric's name, marked when it is a percentile pooled over seeds."""
    how = row.get("across_seeds", "mean") if hasattr(row, "get") else "mean"
    return f"{row['metric']} (pooled)" if how == "pooled" else str(row["metric"])


def _verdict_text(row: Any) -> str:
    """:func:`verdict` as the tables print it: a ``no clear change`` that more seeds would
    likely resolve names about how many (``seeds_needed``), the next run's ``--seeds``."""
    v = verdict(row)
    need = row.get("seeds_needed", math.nan) if hasattr(row, "get") else math.nan
    if v == "no clear change" and isinstance(need, (int, float, np.floating)) and math.isfinite(need):
        return f"{v} (~{int(need)} seeds would resolve it)"
    return v


def _display_rows(table: pd.DataFrame, confidence: float) -> tuple[list[str], list[list[str]]]:
    ci = f"{confidence:.0%} CI of change"
    header = ["metric", "base arm", "base", "arm", "arm value", "change", ci, "seeds", "noise", "verdict"]
    rows = [[_metric_text(r), str(r["base_arm"]), _num(r["base_value"]), str(r["arm"]), _num(r["arm_value"]),
             _pct(r["change_pct"]),
             "n/a" if not math.isfinite(r["ci_low_pct"]) else f"[{_pct(r['ci_low_pct'])}, {_pct(r['ci_high_pct'])}]",
             str(r["n_seeds"]), f"±{r.get('noise_pct', MIN_CHANGE_PCT):.2f}%", _verdict_text(r)]
            for _, r in table.iterrows()]
    return header, rows


def _rich_parts(table: pd.DataFrame, title: str | None, confidence: float
                ) -> tuple[list[str], list[list[str]], str, str, list[str | None]]:
    """(header, rows, title, caption, each row's style) of :func:`to_rich_table`."""
    header, rows = _display_rows(table, confidence)
    caption = "values over seeds: mean; (pooled) = percentile of the pooled samples of all seeds\n" + VERDICT_RULE
    if any(r[-1] == "rate-bound" for r in rows):
        caption += "\n" + RATE_BOUND_NOTE
    if any(r[-1] == "neutral" for r in rows):
        caption += "\n" + ACCEPT_NOTE
    styles = [{"better": "green", "worse": "red"}.get(r[-1].split(" (")[0]) for r in rows]
    return header, rows, title or "Arms compared (change = 100 (arm - base) / base, paired bootstrap CI)", caption, styles


def to_rich_table(table: pd.DataFrame, title: str | None = None, confidence: float = 0.95) -> Table:
    """The comparison as a rich Table (green = better, red = worse when the CI excludes 0)."""
    return _rich_table(*_rich_parts(table, title, confidence))


def _rich_table(header: list[str], rows: list[list[str]], title: str, caption: str, styles: list[str | None]) -> Table:
    t = Table(title=title, caption=caption)
    for h in header:
        t.add_column(h, justify="left" if h in ("metric", "base arm", "arm", "verdict") else "right")
    for r, style in zip(rows, styles, strict=True):
        t.add_row(*r, style=style)
    return t


def print_comparison(console: Any, table: pd.DataFrame, title: str | None = None, confidence: float = 0.95) -> None:
    """Print the comparison on ``console`` (rich): the table (:func:`to_rich_table`) where it
    fits the console's width, else one block per metric (:func:`analysis.narrow.print_table`:
    at 80 columns the ten columns were squeezed to six characters each, cut to ``outp…``)."""
    from specsched.analysis.narrow import print_table

    parts = _rich_parts(table, title, confidence)
    header, rows, title, caption, styles = parts
    print_table(console, _rich_table(*parts), header, rows, title=title, caption=caption, styles=styles)


def to_markdown(table: pd.DataFrame, confidence: float = 0.95) -> str:
    """The comparison as a GitHub-flavoured markdown table (one line per row, trailing newline)."""
    header, rows = _display_rows(table, confidence)
    right = {"base", "arm value", "change", f"{confidence:.0%} CI of change", "seeds", "noise"}
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if h in right else "---" for h in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    lines += ["", VERDICT_RULE + "."]
    if any(r[-1] == "rate-bound" for r in rows):
        lines += ["", RATE_BOUND_NOTE + "."]
    if any(r[-1] == "neutral" for r in rows):
        lines += ["", ACCEPT_NOTE + "."]
    if any(r[0].endswith(" (pooled)") for r in rows):
        lines += ["", "(pooled): the percentile of the pooled samples of all seeds; other values are means over seeds."]
    return "\n".join(lines) + "\n"


def write_csv(table: pd.DataFrame, path: str | Path) -> Path:
    """Write the comparison table as CSV (full precision), atomically."""
    return atomic_write_text(path, table.to_csv(index=False))
