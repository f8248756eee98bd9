"""The bench_serving-style text report of one run (plus the scheduler's own figures and,
where the scenario carries them, the reference figures with the model's error)."""

from __future__ import annotations

import math
from typing import Any

from specsched.sim.metrics import error_pct

_W = 50


def _line(label: str, value: Any, fmt: str = "{:.2f}") -> str:
    # NaN marks a figure that does not apply (no accept length without speculation); the
    # summary files keep the NaN, the text says so as bench_serving does
    if value is None or (isinstance(value, float) and math.isnan(value)):
        text = "n/a"
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = fmt.format(value)
        except (TypeError, ValueError):
            text = str(value)
    return f"{label:<41}{text:>9}" if len(text) <= 9 else f"{label:<41}{text}"


def _head(title: str, ch: str = "-") -> str:
    return f" {title} ".center(_W, ch)


def format_report(summary: dict[str, Any], reference: dict[str, float] | None = None, title: str = "Serving Benchmark Result") -> str:
    """Render ``summary`` (bench_serving keys, ms for latencies) as bench_serving prints it.

    ``reference``: figures for the same keys; each is shown with the model's % error.
    """
    s = summary.get
    out = [_head(title, "=")]
    out += [
        _line("Scenario / arm:", f"{s('scenario', '?')} / {s('arm', '?')}"),
        _line("Source / seed:", f"{s('source', 'sim')} / {s('seed', '?')}"),
        _line("Successful requests:", s("completed"), "{:d}"),
        _line("Benchmark duration (s):", s("duration")),
        _line("Total input tokens:", s("total_input_tokens"), "{:d}"),
        _line("Total generated tokens:", s("total_output_tokens"), "{:d}"),
        _line("Request throughput (req/s):", s("request_throughput")),
        _line("Input token throughput (tok/s):", s("input_throughput")),
        _line("Output token throughput (tok/s):", s("output_throughput")),
        _line("Total token throughput (tok/s):", s("total_throughput")),
        _line("Concurrency:", s("concurrency")),
        _line("Accept length:", s("accept_length")),
    ]
    for title_, key, stats in (
        ("End-to-End Latency", "e2e_latency", ("mean", "median", "p90", "p99", "max")),
        ("Time to First Token", "ttft", ("mean", "median", "p90", "p99", "max")),
        ("Time per Output Token (excl. 1st token)", "tpot", ("mean", "median", "p90", "p99", "max")),
        ("Inter-Token Latency", "itl", ("mean", "median", "p95", "p99", "max")),
    ):
        out.append(_head(title_))
        label = {"e2e_latency": "E2E Latency", "ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}[key]
        for st in stats:
            out.append(_line(f"{st.capitalize() if st in ('mean', 'median', 'max') else st.upper()} {label} (ms):", s(f"{st}_{key}_ms")))
    out.append(_head("Scheduler"))
    out += [
        _line("Verify cycles/s (steady batch):", s("verify_cycles_per_s")),
        _line("Decode tok/s (steady batch):", s("decode_throughput")),
        _line("GPU busy fraction:", s("gpu_busy_fraction"), "{:.3f}"),
        _line("Host blocked (s):", s("host_blocked_s")),
        _line("Delayed admission passes:", s("num_delayed_passes"), "{:d}"),
        _line("Retractions:", s("num_retractions"), "{:d}"),
    ]
    if "swa_token_usage_peak" in summary:
        out.append(_line("Peak SWA token usage:", s("swa_token_usage_peak"), "{:.3f}"))
    if "cache_hit_rate" in summary:
        out.append(_line("Prefix cache hit rate:", s("cache_hit_rate"), "{:.3f}"))
    if reference:
        out.append(_head("Reference (measured) vs model"))
        out.append(f"{'metric':<24}{'reference':>12}{'model':>12}{'error':>9}")
        for k, ref in reference.items():
            got = s(k)
            e = error_pct(got, ref) if isinstance(got, (int, float)) else math.nan
            err = f"{e:+.1f}%" if math.isfinite(e) else "n/a"
            gtxt = f"{got:.2f}" if isinstance(got, (int, float)) else "n/a"
            out.append(f"{k:<24}{ref:>12.2f}{gtxt:>12}{err:>9}")
    out.append("=" * _W)
    return "\n".join(out)
