"""Metrics with bench_serving's definitions (SGLang bench_serving.py).

TTFT = first non-empty chunk - request start; ITL = gaps between later chunks, a chunk
carrying n tokens adding n gaps of dt/n (this matters for speculative decoding); E2E = last
chunk - start; TPOT = (E2E - TTFT) / (output_len - 1) for output_len > 1; throughputs =
tokens / duration, duration = first start to last finish. Stats in ms: mean, median, std,
p90, p99, max (ITL adds p95). Added: verify cycles/s (counted only while the batch is
steady: consecutive verify steps of equal batch size), accept length, decode throughput in
those windows, GPU busy fraction, host blocked time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e_latency")


def _stats(prefix: str, values_s: np.ndarray, out: dict[str, float]) -> None:
    v = np.asarray(values_s, dtype=float) * 1000.0
    if v.size == 0:
        v = np.array([np.nan])
    out[f"mean_{prefix}_ms"] = float(np.mean(v))
    out[f"median_{prefix}_ms"] = float(np.median(v))
    out[f"std_{prefix}_ms"] = float(np.std(v))
    out[f"p90_{prefix}_ms"] = float(np.percentile(v, 90))
    out[f"p99_{prefix}_ms"] = float(np.percentile(v, 99))
    out[f"max_{prefix}_ms"] = float(np.max(v))
    if prefix == "itl":
        out["p95_itl_ms"] = float(np.percentile(v, 95))


def itl_values(chunks: pd.DataFrame) -> np.ndarray:
    """Inter-token latencies (s) from deliveries (columns rid, time_s, n_tokens), bench_serving
    style: the first chunk of each request is TTFT, each later chunk of n tokens arriving dt
    after the previous adds n gaps of dt / n."""
    if chunks.empty:
        return np.zeros(0)
    c = chunks.sort_values(["rid", "time_s"], kind="stable")
    rid = c["rid"].to_numpy()
    t = c["time_s"].to_numpy(float)
    n = c["n_tokens"].to_numpy(int)
    later = np.r_[False, rid[1:] == rid[:-1]]
    dt = np.r_[0.0, np.diff(t)][later]
    nn = n[later]
    return np.repeat(dt / nn, nn)


def steady_verify_windows(steps: pd.DataFrame) -> tuple[int, float, float]:
    """(intervals, seconds, tokens) over consecutive verify steps at the full batch.

    The full batch is the largest verify batch of the run (the closed loop's concurrency,
    the burst's settled running count). The interval between two consecutive verify steps
    at that size (no prefill between) is one verify cycle's wall time; tokens are those
    committed by the later step. Mirrors the reference's "verify cycles/s, counted only
    while every request of the batch is decoding".
    """
    s = steps[steps["part"] == "main"] if "part" in steps else steps
    if s.empty:
        return 0, 0.0, 0.0
    mode = s["mode"].to_numpy()
    bs = s["batch_size"].to_numpy()
    end = s["gpu_end_s"].to_numpy(float)
    tok = s["accepted_tokens"].to_numpy(float)
    is_ver = mode == "verify"
    if not is_ver.any():
        return 0, 0.0, 0.0
    full = bs[is_ver].max()
    ok = is_ver[1:] & is_ver[:-1] & (bs[1:] == full) & (bs[:-1] == full)
    dts = np.diff(end)[ok]
    return int(ok.sum()), float(dts.sum()), float(tok[1:][ok].sum())


def summarize(requests: pd.DataFrame, chunks: pd.DataFrame, steps: pd.DataFrame) -> dict[str, float]:
    """bench_serving summary (plus the additions above) from a run's tables.

    Args:
        requests: one row per request with start_s, first_token_s, finish_s, input_len,
            output_len (completed requests only are counted).
        chunks: deliveries (rid, time_s, n_tokens).
        steps: forwards (mode, part, batch_size, gpu_start_s, gpu_end_s, accepted_tokens,
            decoding_reqs, host_blocked_s).
    """
    done = requests[requests["finish_s"].notna()]
    out: dict[str, float] = {"completed": int(len(done))}
    if len(done) == 0:
        return out
    duration = float(done["finish_s"].max() - requests["start_s"].min())
    tin, tout = int(done["input_len"].sum()), int(done["output_len"].sum())
    out.update(
        duration=duration,
        total_input_tokens=tin,
        total_output_tokens=tout,
        request_throughput=len(done) / duration,
        input_throughput=tin / duration,
        output_throughput=tout / duration,
        total_throughput=(tin + tout) / duration,
    )
    ttft = (done["first_token_s"] - done["start_s"]).to_numpy(float)
    e2e = (done["finish_s"] - done["start_s"]).to_numpy(float)
    multi = done["output_len"].to_numpy() > 1
    tpot = (e2e[multi] - ttft[multi]) / (done["output_len"].to_numpy()[multi] - 1)
    _stats("ttft", ttft, out)
    _stats("tpot", tpot, out)
    _stats("itl", itl_values(chunks[chunks["rid"].isin(done["rid"])]), out)
    _stats("e2e_latency", e2e, out)
    out["concurrency"] = float(e2e.sum() / duration)
    ver = steps[(steps["mode"] == "verify") & (steps["part"] == "main")] if not steps.empty else steps
    dec = ver["decoding_reqs"].sum() if len(ver) else 0
    out["accept_length"] = float(ver["accepted_tokens"].sum() / dec) if dec else float("nan")
    n, secs, toks = steady_verify_windows(steps)
    out["verify_cycles_per_s"] = n / secs if secs > 0 else float("nan")
    out["decode_throughput"] = toks / secs if secs > 0 else float("nan")
    out["verify_wall_ms"] = 1000.0 * secs / n if n else float("nan")
    if not steps.empty:
        busy = float((steps["gpu_end_s"] - steps["gpu_start_s"]).sum())
        span = float(steps["gpu_end_s"].max() - steps["gpu_start_s"].min())
        out["gpu_busy_fraction"] = busy / span if span > 0 else float("nan")
        out["host_blocked_s"] = float(steps["host_blocked_s"].sum())
    return out
