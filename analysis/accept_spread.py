"""How a speculative run's acceptance differs between requests, read from a detailed
bench_serving line (``--output-details``), and the scenario's ``acceptance.request_spread``
that reproduces it.

A line's ``accept_length`` is one mean over the run; the requests around it differ (their
prompts draft well or badly), and that decides how a saturated batch drains: the requests
that accept least hold their slots longest. On round 55's speculative Poisson sweep
(docs/measurements/h100-v55-spec-holdout/README.md) a scenario without the spread predicted
output tok/s 5-7 % high at saturation. Each request's streamed chunks carry one verify's
accepted block (SGLang streams every verify with ``stream_interval`` 1, 0.5.23
``scheduler_components/output_processor.py``), so its accept length is its tokens after the
first over its chunks after the first; bench_serving's ``sglang`` client splits a chunk of n
tokens into n equal gaps (``async_request_sglang_generate``: ``output.itl.extend([adjust_itl]
* num_new_tokens)``), so a chunk is a run of equal gaps, and a client that records one gap per
chunk (:func:`sim.bench_serving.details_itl_per_chunk`) gives the count directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from specsched.sim.bench_serving import BenchRun, details_itl_per_chunk

MIN_TOKENS = 16
"""Requests with fewer output tokens are left out: a handful of verifies says little of the
request's own level."""

MIN_REQUESTS = 20
"""Fewer usable requests than this give no estimate (the spread's sampling error is about
1 / sqrt(2 n))."""

CHUNK_AGREEMENT = 0.03
"""The chunks' verify-weighted accept length (all tokens over all chunks) must be within this
of the line's ``accept_length``; further off, chunks are not verifies (a client that fell
behind and received several verifies as one chunk, ``stream_interval`` > 1) and nothing is
estimated."""

SOLVE_REQUESTS = 512
"""At most this many requests (the line's first) enter the spread's solve: the standard
deviation of 512 is within ~3 % of the whole run's, and a line of 10,000 requests would
otherwise draw 640,000 requests' verifies."""

SOLVE_SEEDS = 4
"""Acceptance draws averaged per trial spread (their own seeds, not the run's)."""

MAX_SPREAD = 3.0
"""The largest request spread tried (the schema allows 5; 3 already spreads a window-6
drafter's requests over nearly its whole range)."""


@dataclass(frozen=True)
class ChunkAcceptance:
    """Per-request accept lengths read from a line's streamed chunks.

    Attributes:
        accept: tokens after the first / chunks after the first, per usable request, (n,).
        output_lens: those requests' output tokens, (n,).
        verify_weighted: all their tokens after the first over all their chunks after the
            first (what SGLang's avg_spec_accept_length weighs alike).
    """

    accept: np.ndarray
    output_lens: np.ndarray
    verify_weighted: float


def chunk_acceptance(run: BenchRun) -> ChunkAcceptance | None:
    """The per-request accept lengths of ``run`` from its ``itls``; None when the line has no
    per-request ITLs, fewer than :data:`MIN_REQUESTS` successful requests of at least
    :data:`MIN_TOKENS` tokens, or is specsched's own simulated line (a simulated batch's
    consecutive verifies can take identical times, so two chunks read as one run of equal
    gaps: 3.37 against the 3.17 its chunks held, round 55)."""
    d = run.details
    if d is None or not d.has_itls or str(run.args.get("backend", "")).startswith("specsched-sim"):
        return None
    per_chunk = details_itl_per_chunk(run)
    accept, outs = [], []
    for out, gaps, err in zip(d.output_lens, d.itls, d.errors, strict=True):
        if err or out < MIN_TOKENS or len(gaps) == 0:
            continue
        if per_chunk:
            chunks = len(gaps)
        else:   # n equal gaps a chunk; a new chunk wherever the gap changes
            g = np.asarray(gaps, dtype=float)
            chunks = 1 + int(np.count_nonzero(g[1:] != g[:-1]))
        accept.append((int(out) - 1) / chunks)
        outs.append(int(out))
    if len(accept) < MIN_REQUESTS:
        return None
    acc, o = np.array(accept), np.array(outs)
    return ChunkAcceptance(acc, o, float((o - 1).sum() / ((o - 1) / acc).sum()))


def request_spread_for(chunks: ChunkAcceptance, mean_accept_length: float, window: int) -> float:
    """The ``acceptance.request_spread`` at which the acceptance model's requests (their
    output lengths ``chunks.output_lens``, the stated ``mean_accept_length`` and verify
    ``window``; sim/acceptance.py ``AcceptanceModel``, ``verifies_to_deliver``) spread their
    accept lengths as ``chunks.accept`` does (its first :data:`SOLVE_REQUESTS`): the standard deviation over requests, averaged
    over :data:`SOLVE_SEEDS` draws, matched by bisection in [0, :data:`MAX_SPREAD`]. The
    measured spread holds each request's own cycle-to-cycle draws as well as its level, and so
    does the simulated one, which is why the solve draws rather than inverting a formula.
    0 when even no spread scatters the requests as much as measured."""
    from specsched.sim.acceptance import AcceptanceModel, verifies_to_deliver
    from specsched.sim.acceptance_config import AcceptanceConfig

    target = float(np.std(chunks.accept[:SOLVE_REQUESTS]))
    tokens = [int(o) - 1 for o in chunks.output_lens[:SOLVE_REQUESTS]]

    def spread_sd(s: float) -> float:
        cfg = AcceptanceConfig(mean_accept_length=mean_accept_length, request_spread=s)
        sds = []
        for k in range(SOLVE_SEEDS):
            model = AcceptanceModel(cfg, window, 7919 + k)
            sds.append(np.std([t / verifies_to_deliver(model, rid, t) for rid, t in enumerate(tokens)]))
        return float(np.mean(sds))

    lo, hi = 0.0, MAX_SPREAD
    if spread_sd(lo) >= target:
        return 0.0
    if spread_sd(hi) <= target:
        return hi
    for _ in range(14):   # to ~2e-4 of the spread, far inside its sampling error
        mid = (lo + hi) / 2
        if spread_sd(mid) < target:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 4)


def acceptance_from_chunks(run: BenchRun, accept_length: float, window: int) -> tuple[dict, str] | None:
    """The acceptance block for ``run`` read from its chunks (the requests' own mean as
    ``mean_accept_length``, which is over requests' means, and the solved
    ``request_spread``), with the assumption line that says so; None when the line gives no
    usable chunks (:func:`chunk_acceptance`) or they disagree with its ``accept_length`` by
    more than :data:`CHUNK_AGREEMENT` (chunks that are not verifies)."""
    chunks = chunk_acceptance(run)
    if chunks is None or not math.isfinite(accept_length) or accept_length <= 0:
        return None
    if abs(chunks.verify_weighted / accept_length - 1) > CHUNK_AGREEMENT:
        return None
    mean = float(min(max(np.mean(chunks.accept), 1.0), window))
    spread = request_spread_for(chunks, mean, window)
    note = (f"acceptance: mean accept length {mean:.3f} and request_spread {spread:g} from the line's "
            f"{len(chunks.accept)} requests' streamed chunks (per request: tokens over chunks, "
            f"{np.mean(chunks.accept):.3f} +- {np.std(chunks.accept):.3f}; all chunks {chunks.verify_weighted:.3f} "
            f"against the line's accept_length {accept_length:.3f})")
    return {"mean_accept_length": round(mean, 6), "request_spread": spread}, note
