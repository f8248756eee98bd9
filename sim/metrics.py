"""Metrics with bench_serving's definitions (SGLang bench_serving.py).

TTFT = first non-empty chunk - request start; ITL = gaps between later chunks, a chunk
carrying n tokens adding n gaps of dt/n (this matters for speculative decoding); E2E = last
chunk - start; TPOT = (E2E - TTFT) / (output_len - 1) for output_len > 1; throughputs =
tokens / duration, duration = first start to last finish. Stats in ms: mean, median, std,
p90, p95, p99, max. Added: verify cycles/s (counted only while the batch is
steady: consecutive verify steps of equal batch size), accept length, decode throughput in
those windows, decode steps/s of a run without speculative decoding (the same window over
its plain decode steps), GPU busy fraction, host blocked time; bench_one_batch_server's
prefill-window input and decode-window output throughputs (:func:`_window_throughputs`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim.tables import column, notna
from specsched.sim.weighted_rank import SAMPLE, values_at_ranks

if TYPE_CHECKING:  # records imports this module's formulas
    from specsched.sim.compact_records import ItlSamples, StepTotals
    from specsched.sim.records import Recorder

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e_latency")
_PERCENTILES = (("p90", 90), ("p99", 99), ("p95", 95))


_DEVIATION_BLOCK = 1 << 15
"""Squared deviations :func:`mean_std` makes at once (a block of numpy's pairwise sum)."""


def pairwise_sum(n: int, fill: Callable[[int, np.ndarray], None], buf: np.ndarray) -> np.float64:
    """``np.add.reduce`` of a contiguous float64 array of ``n`` values without building it:
    ``fill(lo, out)`` writes the values lo .. lo + len(out) - 1 into ``out`` (a view of
    ``buf``, at most its size and at least one value).

    numpy reduces a contiguous float64 array as its pairwise sum
    (numpy/_core/src/umath/loops_utils.h.src ``pairwise_sum``: halve at a multiple of 8
    until a part of at most 128 values is summed in 8 lanes), which depends on the part's
    values alone; so the values are made ``buf``'s size at a time into that one buffer,
    each such part summed by numpy, and the parts' sums added as the halving adds them (a
    sample-sized temporary costs more to map than to fill: every page of it is fresh
    memory, docs/performance.md)."""
    size = buf.size

    def part(lo: int, k: int) -> np.float64:
        if k <= size:
            x = buf[:k]
            fill(lo, x)
            return np.add.reduce(x)
        half = k // 2
        half -= half % 8
        return part(lo, half) + part(lo + half, k - half)

    return part(0, n)


def mean_std(v: np.ndarray) -> tuple[float, float]:
    """``(np.mean(v), np.std(v))`` of a 1-D float64 array, bit for bit numpy's: the same
    operations as numpy/_core/_methods.py ``_mean`` and ``_var`` (one pairwise sum for the
    mean, the deviations squared, their pairwise sum, the square root), computed once for
    both, without an array of the n squared deviations: they are squared
    :data:`_DEVIATION_BLOCK` at a time into one buffer (:func:`pairwise_sum`; a sample's
    buffer of ~10^6 values costs more to map than to fill; the summary's largest, the
    burst's ITL sample, is the run's peak of memory).
    tests/test_sim_speed_equivalence.py checks it against numpy on both sides of the block."""
    n = v.size
    mean = np.add.reduce(v) / n

    def squared_deviations(lo: int, x: np.ndarray) -> None:
        np.subtract(v[lo : lo + x.size], mean, out=x)
        np.square(x, out=x)

    sq = pairwise_sum(n, squared_deviations, np.empty(min(n, _DEVIATION_BLOCK)))
    return float(mean), float(np.sqrt(sq / n))


def _stats(prefix: str, values_s: np.ndarray, out: dict[str, float], owned: bool = False) -> None:
    """The bench_serving statistics of ``values_s`` (seconds) in ms, into ``out``.
    ``owned``: ``values_s`` is a float64 array this call may overwrite (the ITL sample:
    no copy of it is made)."""
    if owned and values_s.size and values_s.dtype == np.float64:
        v = values_s
        v *= 1000.0
    else:
        v = np.asarray(values_s, dtype=float) * 1000.0
    if v.size == 0:
        v = np.array([np.nan])
    mean, std = mean_std(v)
    out[f"mean_{prefix}_ms"] = mean
    out[f"std_{prefix}_ms"] = std
    if math.isnan(mean):   # a NaN in v (or inf - inf, where numpy's own path gives the same)
        out[f"median_{prefix}_ms"] = float(np.median(v))
        p90, p99, p95 = np.percentile(v, [90, 99, 95]).tolist()
        mx = float(np.max(v))
    else:
        # one partition at the ranks the median, the percentiles and the max read; each
        # value is the one np.median / np.percentile give (same order statistics, same
        # interpolation; and np.median's NaN check imports numpy.ma, ~5 ms, on a run's first
        # summary): a value at a rank is the same float whether the sample around it is
        # sorted or only partitioned. One partition with every rank (numpy selects them in
        # one call, each in what is left between the ranks found before), not a full sort:
        # numpy's sort of a burst's ~786,000 ITL values takes ~37 ms on an AMD EPYC host
        # against ~5 ms for the partition, and ~4.6 against ~9 ms where its vectorised sort
        # runs: the partition's worst case costs the least (docs/performance.md, 2026-12-06).
        # v is this call's own (the owned sample, or the product above) and its order is
        # not needed once the mean and std are summed: it is partitioned in place, no copy
        n = v.size
        part = v
        part.partition(_order_ranks(n))
        if n % 2:
            out[f"median_{prefix}_ms"] = float(np.mean(part[n // 2 : n // 2 + 1]))
        else:
            out[f"median_{prefix}_ms"] = float(np.mean(part[n // 2 - 1 : n // 2 + 1]))
        p90, p99, p95 = (_percentile_sorted_at(part, n, q) for q in (90, 99, 95))
        mx = float(part[n - 1])
    out[f"p90_{prefix}_ms"] = p90
    out[f"p99_{prefix}_ms"] = p99
    out[f"max_{prefix}_ms"] = mx
    out[f"p95_{prefix}_ms"] = p95   # bench_serving 0.5.23 prints P95 of every latency


def _order_ranks(n: int) -> list[int]:
    """The 0-based ranks of a sample of ``n`` values that :func:`_stats` reads: the median's
    one or two, each percentile's two around its position (:func:`_percentile_sorted_at`)
    and the max, sorted, without repeats."""
    idx = {n - 1, n // 2, n // 2 - 1 if n % 2 == 0 else n // 2}
    for _, q in _PERCENTILES:
        lo = int(np.floor((n - 1) * np.true_divide(q, 100)))
        idx.add(lo)
        if lo + 1 < n:
            idx.add(lo + 1)
    return sorted(idx)


def finite_percentiles(v: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(v, q)`` (linear method) for each q of ``qs``, of a non-empty 1-D
    float array without NaN: the same values, from one partition of a copy at the order
    statistics they need (as :func:`_stats` takes them). np.percentile's first call
    imports numpy.ma (through np.unique in its NaN check: 5-15 ms of CPU), which a
    command would pay once only for these few figures (:mod:`sim.bench_serving`)."""
    n = v.size
    idx = set()
    for q in qs:
        lo = int(np.floor((n - 1) * np.true_divide(q, 100)))
        idx.update((lo, min(lo + 1, n - 1)))
    part = np.array(v, dtype=np.float64)
    part.partition(sorted(idx))
    return [_percentile_sorted_at(part, n, q) for q in qs]


def _percentile_sorted_at(part: np.ndarray, n: int, q: float) -> float:
    """np.percentile(v, q) from an array partitioned at the needed order statistics."""
    h = (n - 1) * np.true_divide(q, 100)
    lo = int(np.floor(h))
    if h >= n - 1:
        return float(part[n - 1])
    return _lerp(part[lo], part[lo + 1], h - lo)


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's linear interpolation between two order statistics (np.percentile's)."""
    a, b, t = np.float64(a), np.float64(b), np.float64(t)
    d = b - a
    return float(b - d * (1 - t)) if t >= 0.5 else float(a + d * t)


def weighted_percentile(sorted_values: np.ndarray, cum_weights: np.ndarray, q: float) -> float:
    """``np.percentile(np.repeat(v, w), q)`` (linear method) without the repeat.

    Args:
        sorted_values: distinct or repeated values, ascending (float array).
        cum_weights: cumulative multiplicities aligned with them (int array, last = N).
        q: percentile in [0, 100].
    """
    n = int(cum_weights[-1])
    h = (n - 1) * np.true_divide(q, 100)
    lo = int(np.floor(h))
    if h >= n - 1:
        return float(sorted_values[-1])
    gamma = h - lo
    i = int(np.searchsorted(cum_weights, lo, side="right"))
    j = int(np.searchsorted(cum_weights, lo + 1, side="right"))
    return _lerp(sorted_values[i], sorted_values[j], gamma)


def _stats_weighted(prefix: str, values_s: np.ndarray, weights: np.ndarray, out: dict[str, float]) -> None:
    """:func:`_stats` of ``np.repeat(values_s, weights)`` without building it: order
    statistics (median, percentiles, max) exactly as numpy computes them, mean and std to
    float rounding. Peak extra memory: about 2 bytes per (value, weight) pair, plus the
    few narrow value ranges sorted to find the order statistics (:mod:`sim.weighted_rank`)."""
    v = np.asarray(values_s, dtype=float)
    w = np.asarray(weights)
    if (w <= 0).any():
        keep = w > 0
        v, w = v[keep], w[keep]
    if v.size == 0:
        _stats(prefix, np.zeros(0), out)
        return
    n = int(w.sum(dtype=np.int64))
    # moments on the unsorted pairs (in ms), in blocks to bound the temporaries. The
    # products are summed by numpy's pairwise add.reduce, not np.dot: BLAS splits a long
    # dot product over its threads, so its last bits depend on the machine's core count
    # (and its idle threads spin, ~4 % of a 10k-request run's CPU)
    # Each block's products are made in one small buffer and summed as numpy sums the
    # block (pairwise_sum): the same floats as the block's own temporaries, whose pages
    # were fresh memory each time (~2,500 page faults of a 10k-request run's ~5,600 here)
    buf = np.empty(min(v.size, _DEVIATION_BLOCK))
    total = 0.0
    for i in range(0, v.size, 1 << 20):
        vb, wb = v[i : i + (1 << 20)], w[i : i + (1 << 20)]

        def products(lo: int, x: np.ndarray, vb=vb, wb=wb) -> None:
            np.multiply(vb[lo : lo + x.size], 1000.0, out=x)
            x *= wb[lo : lo + x.size]

        total += float(pairwise_sum(vb.size, products, buf))
    mean = total / n
    sq = 0.0
    for i in range(0, v.size, 1 << 20):
        vb, wb = v[i : i + (1 << 20)], w[i : i + (1 << 20)]

        def squares(lo: int, d: np.ndarray, vb=vb, wb=wb) -> None:
            np.multiply(vb[lo : lo + d.size], 1000.0, out=d)
            d -= mean
            d *= d
            d *= wb[lo : lo + d.size]

        sq += float(pairwise_sum(vb.size, squares, buf))
    # order statistics: x -> 1000 x is monotone, so pick in seconds and scale the picks.
    # Each is the value at a rank of the repeated sample (sim/weighted_rank.py: the values
    # of a full sort without sorting every pair; a NaN, whose place no range can hold,
    # takes the full sort, as before)
    pct = [(f"{key}_{prefix}_ms", q) for key, q in _PERCENTILES]
    ranks = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    for _, q in pct:
        h = (n - 1) * np.true_divide(q, 100)
        lo = int(np.floor(h))
        if h < n - 1:
            ranks += [lo, lo + 1]
    picked = dict(zip(ranks, values_at_ranks(v, w, ranks, sample=v.size if math.isnan(mean) else SAMPLE),
                      strict=True))
    top = v.max()

    def at(rank: int) -> float:
        return float(picked[rank] * 1000.0)

    out[f"mean_{prefix}_ms"] = mean
    if n % 2:
        out[f"median_{prefix}_ms"] = at(n // 2)
    else:
        out[f"median_{prefix}_ms"] = float(np.mean(np.array([at(n // 2 - 1), at(n // 2)])))
    out[f"std_{prefix}_ms"] = float(np.sqrt(sq / n))
    for name, q in pct:
        h = (n - 1) * np.true_divide(q, 100)
        lo = int(np.floor(h))
        if h >= n - 1:
            out[name] = float(top * 1000.0)
        else:
            out[name] = _lerp(picked[lo] * 1000.0, picked[lo + 1] * 1000.0, h - lo)
    out[f"max_{prefix}_ms"] = float(top * 1000.0)


def request_latencies(start_s: np.ndarray, first_token_s: np.ndarray, finish_s: np.ndarray,
                      output_len: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-request (TTFT, E2E, TPOT) in seconds, bench_serving's definitions.

    TTFT = first non-empty chunk - start (0.0 for a finished request that streamed no text:
    one of output_len 0, or one the server ended before its first token, whose row keeps
    the length it asked for; bench_serving's client keeps its initial 0.0); E2E = last
    chunk - start; TPOT = (E2E - TTFT) / (output_len - 1), NaN for output_len <= 1 (and
    every figure NaN for a request that has not got there). Arrays of shape (n,); floats
    except ``output_len`` (ints).
    """
    # a request that streams no text (it asked 0 tokens, or the server aborted it before its
    # first): bench_serving's client leaves its ttft at 0.0 (benchmark/serving.py
    # async_request_sglang_generate sets it at the first chunk with text) and
    # calculate_metrics averages that 0.0 in; its latency runs to the last chunk (NaN until
    # it finished, as every figure of a request that has not got there)
    e2e = finish_s - start_s
    ttft = np.where((output_len == 0) | np.isnan(first_token_s), e2e * 0.0, first_token_s - start_s)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output_len > 1, (e2e - ttft) / (output_len - 1), np.nan)
    return ttft, e2e, tpot


def itl_values(chunks: Any, per_chunk: bool = False) -> np.ndarray:
    """Inter-token latencies (s) from deliveries (a DataFrame or :class:`~sim.tables.Columns`
    with columns rid, time_s, n_tokens), bench_serving style: the first non-empty chunk of
    each request ends its TTFT; each later chunk of n tokens arriving dt after the request's
    previous one adds n gaps of dt / n (this matters for speculative decoding, where one
    chunk carries a whole accepted block). Empty chunks are ignored. Shape: (total tokens -
    requests with a chunk,), in rid order.

    The compact records' :class:`~specsched.sim.compact_records.ItlSamples` hold the same values as
    (value, multiplicity) pairs.

    ``per_chunk``: one gap dt per later chunk instead, as every other client records it
    (SGLang's OpenAI-API clients ``async_request_openai_completions`` /
    ``..._chat_completions``, benchmark/serving.py; vLLM's ``vllm bench serve``,
    vllm/benchmarks/lib/endpoint_request_func.py): shape (chunks - requests with a chunk,).
    """
    if len(chunks) == 0:
        return np.zeros(0)
    return _itl_of(column(chunks, "rid"), column(chunks, "time_s", float), column(chunks, "n_tokens", int),
                   per_chunk=per_chunk)[0]


def itl_stats(chunks: Any, per_chunk: bool = False) -> dict[str, float]:
    """The ITL statistics a summary holds (``mean_itl_ms`` ... ``p99_itl_ms``) from every
    delivery in ``chunks`` (:func:`itl_values`; ``per_chunk`` as there); {} without chunks."""
    if chunks is None or len(chunks) == 0:
        return {}
    out: dict[str, float] = {}
    _stats("itl", itl_values(chunks, per_chunk=per_chunk), out)
    return out


def median_itl_rung(chunks: Any) -> tuple[int, float] | None:
    """Where the median ITL sits on speculative decoding's ladder: (n, dt) of the delivery
    the median gap comes from, a chunk of n tokens arriving dt seconds after the request's
    previous one (its n gaps are dt / n each, as :func:`itl_values` splits them).

    Why: with speculative decoding each verify delivers 1..window tokens at once, so the ITL
    values sit on rungs cycle / n (bench_serving splits a chunk of n tokens into n equal
    gaps; mechanics read in SGLang's bench_serving.py ``async_request_sglang_generate``),
    and the median lands on one rung. Two runs whose accept-length mixes differ by a few
    percent can put their medians on adjacent rungs (cycle / 8 vs cycle / 6: 25 % apart)
    while every cycle and the mean ITL agree within 2 % (h200-v31 window8-highacc base:
    median 2.141 vs 2.494 ms on rungs 8 and 6, mean 5.035 vs 5.140 ms). The median taken is
    the lower middle value of the sorted gaps. None without two deliveries in a request.
    """
    if chunks is None or len(chunks) == 0:
        return None
    rid, t, n = column(chunks, "rid"), column(chunks, "time_s", float), column(chunks, "n_tokens", int)
    keep = n > 0
    rid, t, n = rid[keep], t[keep], n[keep]
    order = np.lexsort((t, rid))
    rid, t, n = rid[order], t[order], n[order]
    later = rid[1:] == rid[:-1]
    if not later.any():
        return None
    dt, nn = (t[1:] - t[:-1])[later], n[1:][later]
    gap = dt / nn
    by_gap = np.argsort(gap, kind="stable")
    cum = np.cumsum(nn[by_gap])
    i = by_gap[int(np.searchsorted(cum, (cum[-1] - 1) // 2, side="right"))]
    return int(nn[i]), float(dt[i])


def median_itl_rung_note(predicted_chunks: Any, measured_chunks: Any, predicted: dict[str, Any],
                         measured: dict[str, Any], tolerance_pct: float = 5.0) -> str | None:
    """One line when the predicted and measured median ITLs (summary ``median_itl_ms``) differ
    by more than ``tolerance_pct`` and come from different kinds of delivery
    (:func:`median_itl_rung`): a different token count n, or delivery intervals more than
    ``tolerance_pct`` apart (the intervals cluster too: plain verify cycles, and
    cycles stretched by a prefill between them). It names both deliveries and the mean
    ITLs, which do not jump between clusters. None when the medians agree, both come from
    the same kind of delivery, or a side has no deliveries."""
    pmed, mmed = predicted.get("median_itl_ms"), measured.get("median_itl_ms")
    if (isinstance(pmed, (int, float)) and isinstance(mmed, (int, float)) and mmed
            and abs(error_pct(pmed, mmed)) <= tolerance_pct):
        return None
    a, b = median_itl_rung(predicted_chunks), median_itl_rung(measured_chunks)
    if a is None or b is None:
        return None
    if a[0] == b[0] and abs(error_pct(a[1], b[1])) <= tolerance_pct:
        return None
    mean = ""
    pm, mm = predicted.get("mean_itl_ms"), measured.get("mean_itl_ms")
    if isinstance(pm, (int, float)) and isinstance(mm, (int, float)) and mm:
        mean = f"; mean ITL {pm:.3f} vs {mm:.3f} ms ({error_pct(pm, mm):+.1f} %)"
    return (f"median ITL comes from different deliveries (ITLs cluster at interval / tokens): predicted a "
            f"{a[1] * 1e3:.2f} ms interval carrying {a[0]}, measured {b[1] * 1e3:.2f} ms carrying {b[0]}{mean}")


def _itl_of(rid: np.ndarray, t: np.ndarray, n: np.ndarray, with_rids: bool = False,
            per_chunk: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`itl_values` of the delivery arrays (rid, time s, tokens), and with
    ``with_rids`` each value's request id (same shape; else None)."""
    if (n <= 0).any():
        keep = n > 0
        rid, t, n = rid[keep], t[keep], n[keep]
    if len(t) == 0:
        return np.zeros(0), (np.zeros(0, dtype=rid.dtype) if with_rids else None)
    if len(t) > 1 and (t[1:] >= t[:-1]).all():
        # rows in time order (as recorded): a stable sort by rid is the (rid, time) order;
        # ids below 2**16 sort as uint16 (numpy's stable sort is then a radix sort, ~100x
        # faster than int64's merge sort; the same order: the cast keeps every comparison)
        key = rid.astype(np.uint16) if rid.min() >= 0 and rid.max() < 1 << 16 else rid
        order = np.argsort(key, kind="stable")
    else:
        key = rid
        order = np.lexsort((t, rid))
    # (few full-length temporaries, each dropped once read: a burst's sample is ~10^6
    # values, fresh memory costs more than the arithmetic on it, and the summary's peak
    # is the run's: every page of it above the stretches' is mapped anew)
    key = key[order]
    later = key[1:] == key[:-1]         # row i + 1 continues row i's request
    del key
    t = t[order]
    dt = np.subtract(t[1:], t[:-1])[later]
    del t
    rows = order[1:][later]
    del order, later
    if per_chunk:
        return dt, (rid[rows] if with_rids else None)
    ids = rid[rows] if with_rids else None
    nn = n[rows]
    del rows
    dt /= nn
    if with_rids:
        ids = np.repeat(ids, nn)
    return np.repeat(dt, nn), ids


def steady_verify_windows(steps: Any) -> tuple[int, float, float]:
    """(intervals, seconds, tokens) over consecutive verify steps at the full batch.

    The full batch is the largest verify batch of the run (the closed loop's concurrency,
    the burst's settled running count). The interval between two consecutive verify steps
    at that size (no prefill between) is one verify cycle's wall time; tokens are those
    committed by the later step. Mirrors the reference's "verify cycles/s, counted only
    while every request of the batch is decoding". Computed by
    :class:`~specsched.sim.compact_records.StepTotals` (the compact records' running sums), so a
    steps table and compact records give the same window.
    """
    from specsched.sim.compact_records import StepTotals

    st = StepTotals()
    st.add_table(steps)
    return st.steady_window()


def summarize(
    requests: Any,
    chunks: Any,
    steps: Any,
    itl: ItlSamples | None = None,
    step_totals: StepTotals | None = None,
) -> dict[str, float]:
    """bench_serving summary (plus the additions above) from a run's tables (DataFrames or
    :class:`~sim.tables.Columns`; read as numpy columns, no pandas needed).

    Args:
        requests: one row per request with start_s, first_token_s, finish_s, input_len,
            output_len (completed requests only are counted), and ``error`` where the server
            rejected a request (counted as ``requests_aborted``).
        chunks: deliveries (rid, time_s, n_tokens).
        steps: forwards (mode, part, batch_size, gpu_start_s, gpu_end_s, accepted_tokens,
            decoding_reqs, host_blocked_s).
        itl: compact records (:mod:`sim.records`): ITL samples used instead of ``chunks``
            (every request is assumed completed).
        step_totals: compact records: step sums used instead of ``steps``.
    """
    done = notna(requests, "finish_s")
    n_done = int(done.sum())
    out: dict[str, float] = {"completed": n_done}
    # requests the server rejected (sim/records.py mark_aborted)
    failed = (np.array([bool(e) for e in column(requests, "error").tolist()], dtype=bool)
              if "error" in requests.columns else None)
    if failed is not None:
        out["requests_aborted"] = int(failed.sum())
    if n_done == 0:
        return out
    finish = column(requests, "finish_s", float)[done]
    start_all = column(requests, "start_s")
    # pandas' min/sum skip missing values: the same here (int columns have none)
    first_start = np.nanmin(start_all) if start_all.dtype.kind == "f" else start_all.min()
    end = float(finish.max())
    if failed is not None and failed.any():
        # bench_serving's duration runs until every request returned, a failed one too: a
        # rejected request returns its error right after it is sent (its start stands in)
        end = max(end, float(np.nanmax(start_all[failed])))
    duration = float(end - first_start)
    tin, tout = (int(_skipna_sum(column(requests, c)[done])) for c in ("input_len", "output_len"))
    out.update(
        duration=duration,
        total_input_tokens=tin,
        total_output_tokens=tout,
        request_throughput=n_done / duration,
        input_throughput=tin / duration,
        output_throughput=tout / duration,
        total_throughput=(tin + tout) / duration,
    )
    out_len = column(requests, "output_len")[done]
    ttft, e2e, tpot = request_latencies(column(requests, "start_s", float)[done],
                                        column(requests, "first_token_s", float)[done], finish, out_len)
    tpot = tpot[out_len > 1]
    _window_throughputs(column(requests, "first_token_s", float)[done], first_start, end, tin, tout, out)
    _stats("ttft", ttft, out)
    _stats("tpot", tpot, out)
    if itl is not None:
        _stats_weighted("itl", *itl.arrays(), out)
    elif len(chunks) == 0:
        _stats("itl", np.zeros(0), out)
    else:
        rid, t, n = column(chunks, "rid"), column(chunks, "time_s", float), column(chunks, "n_tokens", int)
        if n_done != len(requests):
            keep = np.isin(rid, column(requests, "rid")[done])
            rid, t, n = rid[keep], t[keep], n[keep]
        _stats("itl", _itl_of(rid, t, n)[0] if len(rid) else np.zeros(0), out, owned=True)
    _stats("e2e_latency", e2e, out)
    out["concurrency"] = float(e2e.sum() / duration)
    if step_totals is None:
        from specsched.sim.compact_records import StepTotals

        step_totals = StepTotals()
        step_totals.add_table(steps)
    _step_summary_from_totals(step_totals, out)
    return out


def _window_throughputs(first_token_s: np.ndarray, first_start: float, end: float, tin: int, tout: int,
                        out: dict[str, float]) -> None:
    """SGLang ``bench_one_batch_server``'s two throughputs (0.5.23 benchmark/one_batch_server.py
    ``run_one_case``), over the completed requests, into ``out`` (tokens/s):

    - ``prefill_window_input_throughput`` = input tokens / the time from the first send until
      every request got its first token (its ``input_throughput`` = batch_size x input_len /
      ``last_ttft``);
    - ``decode_window_output_throughput`` = output tokens (all of them, those before that
      time too) / the time from then until the last finish (its ``output_throughput`` =
      total output tokens / (``latency`` - ``last_ttft``) with ``ignore_eos``).

    NaN where a window is empty (no first token recorded; every request finished at its first
    token). For a burst the first window is ``max_ttft_ms``; for any run they are defined
    the same way."""
    ft = first_token_s[np.isfinite(first_token_s)]
    last_first = float(ft.max()) - first_start if ft.size else math.nan
    decode_s = end - first_start - last_first
    out["prefill_window_input_throughput"] = tin / last_first if last_first > 0 else math.nan
    out["decode_window_output_throughput"] = tout / decode_s if decode_s > 0 else math.nan


def _skipna_sum(x: np.ndarray) -> Any:
    """``Series.sum()``: NaN skipped in float columns (pandas' nansum, no bottleneck)."""
    return np.nansum(x) if x.dtype.kind == "f" else x.sum()


def _step_summary_from_totals(st: StepTotals, out: dict[str, float]) -> None:
    """The step-derived summary keys (one definition for full and compact records):
    accept length = tokens committed by verify steps / requests decoding in them; verify
    cycles/s, decode tok/s and verify wall time over the steady window; their plain-decode
    counterparts, decode steps/s and wall per decode step, over the steady decode window
    (:meth:`StepTotals.steady_decode_window`: consecutive main decode steps at the run's
    largest decode batch, NaN in a speculative run); GPU busy fraction =
    summed forward time / span of the forwards; host blocked = summed blocked time."""
    st.flush()
    dec = st.verify_decoding
    out["accept_length"] = st.verify_accepted / dec if dec else float("nan")
    n, secs, toks = st.steady_window()
    out["verify_cycles_per_s"] = n / secs if secs > 0 else float("nan")
    out["decode_throughput"] = toks / secs if secs > 0 else float("nan")
    out["verify_wall_ms"] = 1000.0 * secs / n if n else float("nan")
    n, secs = st.steady_decode_window()
    # math.nan itself (one object): a speculative run's summaries still compare equal
    out["decode_steps_per_s"] = n / secs if secs > 0 else math.nan
    out["decode_step_ms"] = 1000.0 * secs / n if n else math.nan
    if st.num_steps:
        out["gpu_busy_fraction"] = st.busy_fraction()
        out["host_blocked_s"] = st.host_blocked_s


def error_pct(predicted: Any, reference: Any) -> Any:
    """The error of ``predicted`` against ``reference`` (a measured or reference figure), in
    percent: ``(predicted - reference) / reference * 100``. Positive = predicted too high.

    Args:
        predicted, reference: numbers, or arrays/Series of equal shape.

    Returns:
        A float (NaN where the reference is 0, missing or not finite, or the prediction
        missing), or an array/Series of them (the reference's index kept).
    """
    if np.ndim(predicted) == 0 and np.ndim(reference) == 0:
        try:
            p, r = float(predicted), float(reference)
        except (TypeError, ValueError):
            return float("nan")
        if r == 0 or not (math.isfinite(p) and math.isfinite(r)):
            return float("nan")
        return (p - r) / r * 100
    p = np.asarray(predicted, float)
    r = np.asarray(reference, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(r != 0, (p - r) / r * 100, np.nan)
    pd = sys.modules.get("pandas")  # a Series comes with pandas imported; nothing else needs it
    if pd is not None and isinstance(reference, pd.Series):
        return pd.Series(out, index=reference.index)
    return out


def summarize_recorder(rec: Recorder, extra_cols: dict[int, tuple[float, int, int, int]]) -> tuple[tuple[Any, ...], dict[str, float]]:
    """A finished run's tables and summary from its :class:`~specsched.sim.records.Recorder`
    (the simulator's and the runtime's, full or compact records).

    Args:
        rec: the run's records.
        extra_cols: rid -> (accept_level, spec_cycles, retractions, preemptions) for the requests table.

    Returns:
        ``((requests, chunks, steps, timeseries), summary)``: the tables as
        :class:`~sim.tables.Columns` (no pandas), the summary of :func:`summarize`.
    """
    tables = rec.tables(extra_cols)
    requests, chunks, steps, _ = tables
    if rec.full:
        return tables, summarize(requests, chunks, steps)
    return tables, summarize(requests, chunks, steps, itl=rec.itl, step_totals=rec.step_totals)
