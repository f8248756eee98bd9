"""The closed-loop split: what one request costs alone and what each concurrent request adds
to every other's lifetime, read from throughputs at several client concurrencies
(bench_serving ``--request-rate inf --max-concurrency C``), and the concurrency where
speculative decoding stops winning. Used on the public MI355X DSpark report
(benchmarks/public_cases.py, docs/analytic-profiles.md) and on measured sweeps
(benchmarks/closed_loop_crossover.py)."""

from __future__ import annotations

import numpy as np


def closed_loop_split(conc: list[int], tok_s: list[float], output_len: float) -> tuple[float, float]:
    """Split closed-loop throughputs into what a request costs alone and what each other
    concurrent request adds to it.

    In a closed loop of ``C`` clients running requests of ``output_len`` tokens back to back
    (bench_serving ``--max-concurrency C`` with whole rounds: P1 sends 4 x C prompts), each
    client finishes one request per lifetime ``L(C) = C x output_len / tok_s`` seconds
    (TTFT plus every decode step). Fitting ``L(C) = a + b x C`` by least squares gives ``a``
    (s): the lifetime with no one else running (``a / output_len`` is a lone request's time
    per token), and ``b`` (s): what one more concurrent request adds to everyone's lifetime:
    its own prefill, which stalls the running batch, plus the growth of the decode step with
    batch. The split needs no assumption about the server; it says which of the two a
    prediction misses.

    Args:
        conc: concurrencies (at least two distinct).
        tok_s: output tok/s at each, > 0.
        output_len: output tokens per request (the mean, where lengths vary).

    Returns:
        (a, b) in seconds.

    Raises:
        ValueError: fewer than two distinct concurrencies, or a throughput <= 0.
    """
    c = np.asarray(conc, dtype=float)
    t = np.asarray(tok_s, dtype=float)
    if len(set(conc)) < 2 or len(c) != len(t) or (t <= 0).any():
        raise ValueError("need >= 2 distinct concurrencies and one positive throughput each")
    b, a = np.polyfit(c, c * output_len / t, 1)
    return float(a), float(b)


def crossover(plain: tuple[float, float], spec: tuple[float, float]) -> float | None:
    """The concurrency where speculation stops winning, from two :func:`closed_loop_split`
    results: where ``a_spec + b_spec C = a_plain + b_plain C``. None when speculation never
    loses (its per-request cost ``b`` is no larger) or never wins (its ``a`` is larger)."""
    (ap, bp), (as_, bs) = plain, spec
    if bs <= bp or as_ >= ap:
        return None
    return (ap - as_) / (bs - bp)
