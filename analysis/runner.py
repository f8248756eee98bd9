"""One simulator run as a picklable unit of work (for process pools and Dask workers).

A *runner* is a callable ``runner(scenario, seed) -> run`` where ``run`` is a ``RunResult``
(anything with a ``summary`` dict) or a summary dict itself. The default,
:func:`simulate`, is ``sim.engine.run_scenario``. Runners handed to executors must be
picklable: module-level functions.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Runner = Callable[[Any, int], Any]

NON_METRIC_KEYS = frozenset({"seed"})
"""Numeric summary keys that describe the run rather than measure it."""


def simulate(scenario: Any, seed: int) -> Any:
    """Default runner: ``sim.engine.run_scenario(scenario, seed=seed)`` (imported lazily),
    its range warnings left to the caller (:attr:`RunOutcome.range_notes`: a command of many
    runs writes them once, merged)."""
    from specsched.sim.engine import run_scenario

    return run_scenario(scenario, seed=seed, warn=False)


def summary_metrics(run: Any) -> dict[str, float]:
    """The numeric bench_serving metrics of a run (or of a summary dict), as floats.

    Strings (``scenario``, ``arm``, ``source``), booleans, ``None`` and ``seed`` are left out.
    """
    summary = run if isinstance(run, Mapping) else run.summary
    out: dict[str, float] = {}
    for k, v in summary.items():
        if k in NON_METRIC_KEYS or isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)) or hasattr(v, "dtype"):
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                continue
    return out


@dataclass(frozen=True)
class RunTask:
    """One run to do: a resolved scenario and a seed; ``key`` identifies it to the caller;
    ``out``, when set, is the results directory the run is kept in (written by the worker,
    :func:`specsched.sim.results.write_results`; a runner returning a summary dict writes
    nothing)."""

    scenario: Any
    seed: int
    key: Any = None
    runner: Runner | None = field(default=None, compare=False)
    out: str | None = None


def latency_samples(run: Any) -> dict[str, np.ndarray]:
    """A run's latency samples in ms, for percentiles pooled across seeds
    (:class:`analysis.stats.PooledSamples`): ``ttft``, ``tpot``, ``e2e_latency`` per
    completed request and ``itl`` per token (:func:`sim.metrics.itl_values`; absent for
    compact records, which keep no chunk table). Empty for a summary dict."""
    from specsched.sim.metrics import itl_values, request_latencies

    req = getattr(run, "requests", None)
    if req is None or isinstance(run, Mapping):
        return {}
    done = req[req["finish_s"].notna()]
    ttft, e2e, tpot = request_latencies(done["start_s"].to_numpy(float), done["first_token_s"].to_numpy(float),
                                        done["finish_s"].to_numpy(float), done["output_len"].to_numpy())
    out = {"ttft": ttft * 1000.0, "tpot": tpot[np.isfinite(tpot)] * 1000.0, "e2e_latency": e2e * 1000.0}
    chunks = getattr(run, "chunks", None)
    if chunks is not None and len(chunks):
        c = chunks if len(done) == len(req) else chunks[chunks["rid"].isin(done["rid"])]
        out["itl"] = itl_values(c) * 1000.0
    return out


def arrival_span(run: Any) -> float | None:
    """The run's last request arrival after its first, in s (None for a summary dict): with
    the summary's ``duration`` (first arrival to last finish) it tells how long the run went
    on after its arrivals stopped (:func:`analysis.compare.rate_bound`). A simulated poisson or
    trace run gives its offered arrivals' span (``extra["offered_arrival_span_s"]``, the drawn
    send times): under ``max_concurrency`` a request is sent only when a slot frees
    (bench_serving's semaphore), so the start times of a server that falls behind stretch to
    the end of the run and would read as keeping pace; without a cap the two are the same."""
    req = getattr(run, "requests", None)
    if req is None or isinstance(run, Mapping) or not len(req):
        return None
    offered = (getattr(run, "extra", None) or {}).get("offered_arrival_span_s")
    if offered is not None:
        return float(offered)
    start = np.asarray(req["start_s"], dtype=float)
    start = start[np.isfinite(start)]
    return float(start.max() - start.min()) if start.size else None


@dataclass(frozen=True)
class RunOutcome:
    """What came back: ``metrics`` (and the latency ``samples`` in ms, see
    :func:`latency_samples`, and the run's ``range_notes``: where it left its profile's
    measured grids, :mod:`sim.grid_range`) on success, else ``error`` (exception type,
    message and the traceback's last lines)."""

    key: Any
    seed: int
    metrics: dict[str, float] | None = None
    error: str | None = None
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    range_notes: tuple = ()
    arrival_span_s: float | None = None
    """The last request's arrival after the first (s; :func:`arrival_span`)."""
    bench: dict[str, Any] | None = None
    """The run as one bench_serving result line (:func:`sim.bench_serving.bench_record`, no
    per-request lists); None for a runner that returns only a summary."""
    refusal: BaseException | None = None
    """The run refused its input (a :class:`sim.errors.ConfigError`, e.g. a profile that
    lacks a cost the scenario needs, or a request that can never be scheduled): the
    exception itself (both pickle), so a caller that stops at the first failure reports it
    as the one line a single run gives (exit 2), not as a traceback."""

    @property
    def ok(self) -> bool:
        """True when the run finished (``metrics`` set)."""
        return self.error is None


def execute(task: RunTask) -> RunOutcome:
    """Run ``task`` and return its metrics; an exception becomes ``RunOutcome.error`` (so one
    failing run never takes down a batch, and nothing unpicklable crosses processes)."""
    runner = task.runner or simulate
    try:
        run = runner(task.scenario, task.seed)
        metrics = summary_metrics(run)
        samples = latency_samples(run)
        span = arrival_span(run)
        notes = tuple(getattr(run, "extra", {}).get("range_notes", ())) if not isinstance(run, Mapping) else ()
        full = getattr(run, "requests", None) is not None and not isinstance(run, Mapping)   # not a summary
        bench = None
        if full:
            from specsched.sim.bench_serving import bench_record

            bench = bench_record(run, details=False)
        if task.out is not None and full:
            from specsched.sim.results import write_results

            write_results(run, task.out)
    except Exception as e:  # noqa: BLE001 - reported per run by the caller
        from specsched.sim.errors import ConfigError
        from specsched.sim.policy_loader import user_policy_failure
        from specsched.sim.scheduler import UnschedulableRequest

        tb = traceback.format_exc(limit=-3)
        refused = e if isinstance(e, (ConfigError, UnschedulableRequest)) else None
        # a user policy's own code failing: its spec, file and line, as `run` says it (the
        # process that loaded the policy knows its file; a parent given the text may not)
        said = user_policy_failure(e) or f"{type(e).__name__}: {e}"
        return RunOutcome(task.key, task.seed, error=f"{said}\n{tb}", refusal=refused)
    return RunOutcome(task.key, task.seed, metrics=metrics, samples=samples, range_notes=notes,
                      arrival_span_s=span, bench=bench)
