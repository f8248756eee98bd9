"""A tiny stand-in serving model that writes results in the real format.

It exists so that the analysis code (plots, comparisons, sweeps) can be tested and demoed
without the simulator: it is NOT a prediction of anything, and its costs are made up. Its
events go through the simulator's :class:`~specsched.sim.records.Recorder` and
:func:`~specsched.sim.metrics.summarize_recorder`, so every table column and summary figure
has the product's definition. It
follows the scenario coarsely (request count and lengths, arrivals, running-slot limit,
prefill token budget, min-free-slots admission delay, verify window and accept length,
sync mode as a fixed per-cycle stall), with one seeded RNG split by purpose, so two arms run
with the same seed see the same lengths and acceptance draws.

:func:`synthetic_run` has the signature of ``sim.engine.run_scenario``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from specsched.sim.atomic import atomic_write_text
from specsched.sim.metrics import summarize_recorder
from specsched.sim.records import Recorder, RunResult

# Made-up costs (seconds).
PREFILL_FIXED_S = 2e-3
PREFILL_PER_TOKEN_S = 25e-6
VERIFY_FIXED_S = 6e-3
VERIFY_PER_REQ_S = 0.12e-3
SCHEDULE_S = 0.3e-3
INGEST_S = 0.2e-3
STALL_S = {"host_block": 0.6e-3, "stream_wait": 0.0, "cross_queue_wait": 1.2e-3}
JITTER = 0.03
"""Relative std of a forward's duration (what makes seeds differ)."""

FAIL_KEY = "synthetic_fail"
"""If a scenario's ``reference`` has this key, :func:`synthetic_run` raises (for tests)."""


def _lengths(dist: Any, n: int, rng: np.random.Generator, default: int) -> np.ndarray:
    value = dist.value or default
    if dist.kind == "uniform":
        lo = max(1, int(value * dist.range_ratio))
        return rng.integers(lo, value + 1, size=n)
    return np.full(n, value, dtype=np.int64)


def _accept_rate(mean: float, window: int) -> float:
    """Per-position acceptance p with E[1 + accepted run of p-draws, capped] = mean."""
    if window <= 1 or mean <= 1.0:
        return 0.0
    mean = min(mean, window - 1e-6)

    def expected(p: float) -> float:
        return sum(p**k for k in range(window))  # P(len >= k+1)

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected(mid) < mean else (lo, mid)
    return (lo + hi) / 2


def synthetic_run(scenario: Any, seed: int | None = None, progress: bool = False) -> RunResult:
    """Run the stand-in model on ``scenario`` (a ``sim.config.Scenario``).

    Args:
        scenario: the resolved scenario.
        seed: RNG seed (default ``scenario.seed``).
        progress: ignored (signature of ``sim.engine.run_scenario``).

    Returns:
        A ``RunResult`` with all four tables and a bench_serving summary
        (``source = "synthetic"``).

    Raises:
        RuntimeError: the scenario's ``reference`` contains :data:`FAIL_KEY` (test hook).
    """
    if FAIL_KEY in scenario.reference:
        raise RuntimeError(f"synthetic failure requested by reference.{FAIL_KEY}")
    seed = scenario.seed if seed is None else seed
    ss = np.random.SeedSequence(seed)
    r_arr, r_len, r_acc, r_jit = (np.random.default_rng(s) for s in ss.spawn(4))
    srv, wl = scenario.server, scenario.workload
    n = wl.num_requests
    in_len = _lengths(wl.input_len, n, r_len, 1024)
    out_len = _lengths(wl.output_len, n, r_len, 256)
    window = srv.spec_window
    spec = window > 1
    mean_acc = scenario.acceptance.mean_accept_length or min(3.0, float(window))
    p = _accept_rate(mean_acc, window)
    shift = r_acc.normal(0.0, 1.0, n) * scenario.acceptance.request_spread
    with np.errstate(divide="ignore"):
        logit = np.log(p) - np.log1p(-p) if 0 < p < 1 else (np.inf if p >= 1 else -np.inf)
    p_req = 1.0 / (1.0 + np.exp(-(logit + shift)))
    stall = STALL_S.get(getattr(srv.sync_mode, "value", srv.sync_mode), 0.0) if spec else 0.0
    threshold = 0
    policy = getattr(srv.admission_delay, "value", srv.admission_delay)
    if policy != "none" and srv.max_running_requests >= 8:
        threshold = srv.min_free_slots or min(4, max(2, (srv.max_running_requests + 5) // 6))

    # Arrival (reaching the scheduler) and client start times.
    if wl.kind == "poisson":
        arrive = np.cumsum(r_arr.exponential(1.0 / wl.request_rate, n))
        start = arrive.copy()
        released = n
    elif wl.kind == "closed_loop":
        released = min(wl.concurrency, n)
        arrive = np.full(n, np.inf)
        start = np.full(n, np.nan)
        arrive[:released] = np.arange(released) * INGEST_S
        start[:released] = 0.0
    else:
        arrive = np.arange(n) * INGEST_S
        start = np.zeros(n)
        released = n

    rec = Recorder("full")  # the simulator's records and summary: the same definitions
    for i in range(released):
        rec.request_sent(i, int(in_len[i]), int(out_len[i]), float(start[i]))
    finish = np.full(n, np.nan)
    committed = np.zeros(n, dtype=np.int64)
    cycles = np.zeros(n, dtype=np.int64)
    n_steps = 0
    running: list[int] = []
    next_wait = 0  # requests are admitted in arrival (= rid) order
    t = 0.0
    kv_used = 0

    def jitter(x: float) -> float:
        return x * max(0.5, 1.0 + JITTER * r_jit.standard_normal())

    while np.isnan(finish).any():
        t += SCHEDULE_S
        waiting = [i for i in range(next_wait, n) if arrive[i] <= t]
        free = srv.max_running_requests - len(running)
        admit: list[int] = []
        if policy == "min_free_slots_waiting_aware":
            delayed = threshold > 0 and free < min(threshold, len(waiting))
        else:
            delayed = threshold > 0 and bool(running) and free < threshold
        if waiting and not delayed:
            budget = srv.max_prefill_tokens
            for i in waiting[:free]:
                if admit and in_len[i] > budget:
                    break
                admit.append(i)
                budget -= int(in_len[i])
        kv_used += int(sum(in_len[i] + 1 for i in admit))
        rec.pass_state(t, len(running) + len(admit), len(waiting) - len(admit), kv_used)
        if admit:
            next_wait = admit[-1] + 1
            tokens = int(sum(in_len[i] for i in admit))
            dur = jitter(PREFILL_FIXED_S + PREFILL_PER_TOKEN_S * tokens)
            blocked = dur if (spec and srv.prefill_slot_expansion_sync) else 0.0
            rec.step(n_steps, "extend", "main", len(admit), tokens, t, t + dur, blocked, 0, 0)
            n_steps += 1
            t += dur
            ids = np.array(admit, dtype=np.int64)
            rec.deliver(t, ids, np.ones(len(ids), dtype=np.int64), out_len[ids] <= 1)
            for i in admit:
                committed[i] = 1
                if out_len[i] <= 1:
                    finish[i] = t
                else:
                    running.append(i)
        if running:
            t += stall
            bs = len(running)
            dur = jitter(VERIFY_FIXED_S + VERIFY_PER_REQ_S * bs * (window if spec else 1) / 2)
            end = t + dur
            total = 0
            got_n: list[int] = []
            still: list[int] = []
            for i in running:
                if spec:
                    acc = 1
                    while acc < window and r_acc.random() < p_req[i]:
                        acc += 1
                else:
                    acc = 1
                got = int(min(acc, out_len[i] - committed[i]))
                committed[i] += got
                cycles[i] += 1
                total += got
                got_n.append(got)
                kv_used += got
                if committed[i] >= out_len[i]:
                    finish[i] = end
                    kv_used -= int(in_len[i] + out_len[i])
                else:
                    still.append(i)
            rec.step(n_steps, "verify" if spec else "decode", "main", bs, 0, t, end, stall, total, bs)
            n_steps += 1
            ids = np.array(running, dtype=np.int64)
            rec.deliver(end, ids, np.array(got_n, dtype=np.int64), ~np.isnan(finish[ids]))
            for _ in range(int((~np.isnan(finish[ids])).sum())):
                if released < n:  # the closed loop's client sends its next request at once
                    arrive[released] = end + INGEST_S
                    rec.request_sent(released, int(in_len[released]), int(out_len[released]), end)
                    released += 1
            running = still
            t = end
        elif not admit:
            pending = arrive[next_wait:]
            pending = pending[np.isfinite(pending)]
            if pending.size == 0:  # pragma: no cover - guarded by the loop condition
                raise RuntimeError("synthetic model stalled")
            t = max(t, float(pending.min()))

    extra = {i: (float(p_req[i]), int(cycles[i]), 0, 0) for i in range(n)}
    (requests, chunks, steps, ts), summary = summarize_recorder(rec, extra)
    summary.update(scenario=scenario.name, arm=scenario.arm, seed=int(seed), source="synthetic")
    if not math.isfinite(summary["duration"]):  # pragma: no cover
        raise RuntimeError("synthetic run finished no request")
    return RunResult(requests=requests, chunks=chunks, steps=steps, timeseries=ts, summary=summary, scenario=scenario)


DEMO_SCENARIO = {
    "name": "demo-tiny",
    "description": "A small burst for tests and demos of the analysis code (not a calibrated cell).",
    "seed": 1,
    "server": {
        "max_running_requests": 8,
        "max_total_num_tokens": 200_000,
        "chunked_prefill_size": 4096,
        "max_prefill_tokens": 4096,
        "speculative_algorithm": "dspark",
        "speculative_num_draft_tokens": 6,
        "admission_delay": "min_free_slots",
        "sync_mode": "host_block",
    },
    "acceptance": {"mean_accept_length": 3.0, "request_spread": 0.5},
    "workload": {
        "kind": "burst",
        "num_requests": 12,
        "input_len": {"kind": "uniform", "value": 1024, "range_ratio": 0.5},
        "output_len": {"kind": "uniform", "value": 48, "range_ratio": 0.5},
    },
    "arms": {
        "stream_wait": {"server": {"sync_mode": "stream_wait"}},
        "waiting_aware": {"server": {"admission_delay": "min_free_slots_waiting_aware"}},
    },
}


def write_demo_scenario(path: str | Path, profile: str | None = None, **top_level: Any) -> Path:
    """Write :data:`DEMO_SCENARIO` (a 12-request burst with arms ``stream_wait`` and
    ``waiting_aware``) as YAML to ``path`` for tests and demos.

    Args:
        path: destination file.
        profile: profile name or path (default: the bundled MI355X DSpark profile, which
            has the verify grid a speculative scenario needs).
        top_level: extra top-level keys merged in (e.g. ``seed=5``).

    Returns:
        ``path``.
    """
    import yaml

    if profile is None:
        profile = "mi355x-dsv41-flash-tp4"
    data = {**DEMO_SCENARIO, "profile": profile, **top_level}
    p = Path(path)
    atomic_write_text(p, yaml.safe_dump(data, sort_keys=False))
    return p
