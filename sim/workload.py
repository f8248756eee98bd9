"""Workloads: request lengths and client behaviour, seeded (bench_serving semantics).

Lengths: ``fixed``; ``uniform`` as bench_serving's random dataset (an integer uniform in
[value x range_ratio, value]); ``file``: a CSV histogram (columns ``length,weight``) drawn
with replacement. Arrivals are produced by the engine's client processes; Poisson gaps come
from :func:`poisson_arrivals`. Randomness is split by purpose (lengths, arrivals) so that
changing one does not shift the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.sim.config import LengthDist, WorkloadConfig
from specsched.sim.errors import ConfigError

STREAM_ARRIVALS = 1
STREAM_LENGTHS = 2
STREAM_PRIORITIES = 4


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send: ``index`` (send order), prompt and output lengths (tokens), the
    prompt's token ids when the workload shares prefixes (None otherwise) and its priority
    (None: the server's default)."""

    index: int
    input_len: int
    output_len: int
    tokens: np.ndarray | None = None
    priority: int | None = None


def _histogram(path: str, base: Path | None, key: str) -> tuple[np.ndarray, np.ndarray]:
    p = Path(path)
    if not p.is_absolute() and base is not None and not p.is_file():
        p = base.parent / p
    if not p.is_file():
        raise ConfigError(str(base or "<scenario>"), key, path, "length histogram file does not exist")
    df = pd.read_csv(p)
    if not {"length", "weight"} <= set(df.columns) or len(df) == 0:
        raise ConfigError(str(p), key, list(df.columns), "CSV needs columns length,weight and >= 1 row")
    if (df["length"] < 1).any() or (df["weight"] < 0).any() or df["weight"].sum() <= 0:
        raise ConfigError(str(p), key, path, "lengths must be >= 1, weights >= 0 with a positive sum")
    w = df["weight"].to_numpy(float)
    return df["length"].to_numpy(int), w / w.sum()


def histogram_lengths(path: str, base: Path | None, key: str) -> np.ndarray:
    """The lengths a ``file`` histogram can draw (for size checks before a run).

    Raises:
        ConfigError: a missing or malformed histogram file.
    """
    return _histogram(path, base, key)[0]


def draw_lengths(dist: LengthDist, n: int, rng: np.random.Generator, base: Path | None, key: str) -> np.ndarray:
    """``n`` token lengths (int array, >= 1) from ``dist``.

    Raises:
        ConfigError: a ``file`` histogram that is missing or malformed.
    """
    if dist.kind == "fixed":
        return np.full(n, dist.value, dtype=np.int64)
    if dist.kind == "uniform":
        lo = max(1, int(dist.value * dist.range_ratio))
        return rng.integers(lo, dist.value + 1, size=n)
    lengths, p = _histogram(dist.path, base, key)
    return rng.choice(lengths, size=n, p=p)


def make_requests(cfg: WorkloadConfig, seed: int, scenario_path: str | None = None) -> list[RequestSpec]:
    """The run's requests in send order (seeded by ``seed``; lengths stream; priorities,
    when ``workload.priorities`` is given, from their own stream)."""
    specs = _make_requests(cfg, seed, scenario_path)
    if cfg.priorities:
        prng = np.random.default_rng([seed, STREAM_PRIORITIES])
        pr = prng.choice(np.array(cfg.priorities, dtype=np.int64), size=len(specs))
        specs = [RequestSpec(s.index, s.input_len, s.output_len, s.tokens, int(p)) for s, p in zip(specs, pr, strict=True)]
    return specs


def _make_requests(cfg: WorkloadConfig, seed: int, scenario_path: str | None) -> list[RequestSpec]:
    rng = np.random.default_rng([seed, STREAM_LENGTHS])
    base = Path(scenario_path) if scenario_path else None
    if cfg.shared_prefix is not None:
        from specsched.sim.prefix_workload import shared_prefix_requests

        outs = draw_lengths(cfg.output_len, cfg.num_requests, rng, base, "workload.output_len")
        return shared_prefix_requests(cfg.shared_prefix, outs, seed)
    ins = draw_lengths(cfg.input_len, cfg.num_requests, rng, base, "workload.input_len")
    outs = draw_lengths(cfg.output_len, cfg.num_requests, rng, base, "workload.output_len")
    return [RequestSpec(i, int(a), int(b)) for i, (a, b) in enumerate(zip(ins, outs, strict=True))]


def poisson_arrivals(n: int, request_rate: float, seed: int) -> np.ndarray:
    """Send times (s) of ``n`` requests with exponential gaps of mean 1/request_rate,
    the first at t = 0 + its gap (bench_serving's get_request)."""
    rng = np.random.default_rng([seed, STREAM_ARRIVALS])
    return np.cumsum(rng.exponential(1.0 / request_rate, size=n))
