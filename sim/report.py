"""The text report of one run: SGLang 0.5.23 bench_serving's result block as it prints it
(rows, order, labels, widths, alignment), then specsched's own sections (the run, the
maxima, the scheduler's figures and, where the scenario carries them, the reference figures
with the model's error)."""

from __future__ import annotations

import math
from typing import Any

from specsched.sim.metrics import error_pct

_W = 50


def _text(value: Any, fmt: str) -> str:
    # NaN marks a figure that does not apply or is unknown; the summary files keep the NaN
    # (null in bench_serving.jsonl), the text says n/a
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, str):
        return value
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _row(label: str, value: Any, fmt: str = "{:.2f}") -> str:
    """One row as bench_serving prints it: ``"{:<40} {:<10}"`` (label and value left-aligned,
    the value padded to 10 characters)."""
    return f"{label:<40} {_text(value, fmt):<10}"


def _line(label: str, value: Any, fmt: str = "{:.2f}") -> str:
    # specsched's own sections (after bench_serving's block): figures right-aligned, names
    # (the scenario, the source) left-aligned as bench_serving prints its backend
    text = _text(value, fmt)
    return f"{label:<41}{text:>9}" if len(text) <= 9 and not isinstance(value, str) else f"{label:<41}{text}"


def _head(title: str, ch: str = "-") -> str:
    return f" {title} ".center(_W, ch)


def _sg_head(title: str, ch: str = "-") -> str:
    # bench_serving's section rule: the title without padding spaces, centred in 50
    return "{s:{c}^{n}}".format(s=title, n=_W, c=ch)


BENCH_ROWS: tuple[tuple[str, str], ...] = (
    ("Backend:", "backend"),
    ("Traffic request rate:", "request_rate"),
    ("Max request concurrency:", "max_concurrency"),
    ("Successful requests:", "completed"),
    ("Benchmark duration (s):", "duration"),
    ("Total input tokens:", "total_input_tokens"),
    ("Total input text tokens:", "total_input_text_tokens"),
    ("Total generated tokens:", "total_output_tokens"),
    ("Total generated tokens (retokenized):", "total_output_tokens_retokenized"),
    ("Request throughput (req/s):", "request_throughput"),
    ("Input token throughput (tok/s):", "input_throughput"),
    ("Output token throughput (tok/s):", "output_throughput"),
    ("Peak output token throughput (tok/s):", "max_output_tokens_per_s"),
    ("Peak concurrent requests:", "max_concurrent_requests"),
    ("Total token throughput (tok/s):", "total_throughput"),
    ("Concurrency:", "concurrency"),
    ("Accept length:", "accept_length"),
)
"""The rows of SGLang 0.5.23's result block before the latency sections, in its order
(``sglang/benchmark/serving.py`` ``benchmark()``, the print block after
``calculate_metrics``; a text-only run: no vision-token row, no goodput, no cache report),
each with the bench_serving.jsonl key that fills it."""
_COUNTS = {"completed", "total_input_tokens", "total_input_text_tokens", "total_output_tokens",
           "total_output_tokens_retokenized", "max_concurrent_requests"}
LATENCY_SECTIONS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("End-to-End Latency", "e2e_latency", "E2E Latency", ("mean", "median", "p90", "p95", "p99")),
    ("Time to First Token", "ttft", "TTFT", ("mean", "median", "p90", "p95", "p99")),
    ("Time per Output Token (excl. 1st token)", "tpot", "TPOT", ("mean", "median", "p90", "p95", "p99")),
    ("Inter-Token Latency", "itl", "ITL", ("mean", "median", "p90", "p95", "p99", "max")),
)
"""bench_serving 0.5.23's latency sections (same function): title, key, label, statistics."""


def _stat_label(stat: str, label: str) -> str:
    return f"{stat.capitalize() if stat in ('mean', 'median', 'max') else stat.upper()} {label} (ms):"


def bench_block(summary: dict[str, Any], bench: dict[str, Any] | None = None,
                title: str = "Serving Benchmark Result") -> list[str]:
    """SGLang 0.5.23's result block, row for row: labels, order, ``"{:<40} {:<10}"`` rows,
    ``.2f`` for rates, durations and latencies, integers for counts.

    Args:
        summary: the run's summary (bench_serving keys).
        bench: the run's bench_serving.jsonl record (``sim.bench_serving.bench_record``):
            backend, request rate, max concurrency, the peaks and the P95s come from it
            where the summary lacks them.
    """
    b = bench or {}

    def get(key: str) -> Any:
        v = summary.get(key)   # NaN (no sample): the record's figure, as bench_serving prints it
        return b.get(key) if v is None or (isinstance(v, float) and math.isnan(v)) else v

    out = ["", _sg_head(f" {title} ", "=")]
    for label, key in BENCH_ROWS:
        if key == "backend":
            v: Any = b.get("backend") or f"specsched-{summary.get('source', 'sim')}"
        elif key == "request_rate":
            v = b.get("request_rate")
            # bench_serving prints its float argument (inf for all at once, 4.0) or "trace"
            v = "n/a" if v is None else f"{float(v)}" if isinstance(v, (int, float)) else str(v)
        elif key == "max_concurrency":
            v = b.get("max_concurrency") or "not set"
        elif key == "total_input_text_tokens":   # every simulated prompt is text
            v = get(key) if get(key) is not None else summary.get("total_input_tokens")
        elif key == "total_output_tokens_retokenized":   # the tokens as generated (no text to re-tokenize)
            v = get(key) if get(key) is not None else summary.get("total_output_tokens")
        elif key == "accept_length":
            v = get(key)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                continue   # bench_serving prints the row only when the server reports one
        else:
            v = get(key)
        fmt = "{}" if key in ("backend", "request_rate", "max_concurrency") else "{:d}" if key in _COUNTS else "{:.2f}"
        out.append(_row(label, v, fmt))
    for head, key, label, stats in LATENCY_SECTIONS:
        out.append(_sg_head(head))
        out += [_row(_stat_label(st, label), get(f"{st}_{key}_ms")) for st in stats]
    out.append("=" * _W)
    return out


def steady_block(summary: dict[str, Any]) -> list[str]:
    """steady_state_serving's separate "Steady-State Result" block (SGLang 0.5.23
    benchmark/steady_state_serving.py ``_print_metrics``: its labels, order and formats),
    from the summary's ``steady_*`` keys (:mod:`sim.steady_state`); empty for a run without
    ``workload.steady_state_concurrency_ratio``. The input rows are one "N/A" row where the
    input throughput is unknown (a multi-turn replay), as there."""
    from specsched.sim.steady_state import steady_metrics_of_summary

    m = steady_metrics_of_summary(summary)
    if m is None:
        return []
    out = ["", _sg_head(" Steady-State Result ", "="),
           _row("Concurrency ratio:", m["concurrency_ratio"]),
           _row("Measurement duration (s):", m["duration"]),
           _row("Minimum concurrency:", m["concurrency_threshold"], "{}"),
           _row("Completed requests:", m["completed"], "{}")]
    if m["input_throughput"] is None:
        out.append(_row("Input token throughput (tok/s):", "N/A"))
    else:
        out += [_row("Input tokens:", m["total_input"], "{}"),
                _row("Input token throughput (tok/s):", m["input_throughput"])]
    out += [_row("Generated tokens:", m["total_output"]),
            _row("Output token throughput (tok/s):", m["output_throughput"]),
            _row("Output throughput, retokenized (tok/s):", m["output_throughput_retokenized"]),
            _row("Average concurrency:", m["average_concurrency"]),
            _row("Peak concurrency:", m["peak_concurrency"], "{}"),
            _row("Peak output throughput (tok/s):", m["peak_output_throughput"]),
            "=" * _W]
    return out


def peak_note(summary: dict[str, Any], bench: dict[str, Any] | None) -> list[str]:
    """A note when bench_serving's "Peak concurrent requests" is above "Max request
    concurrency" (empty otherwise): bench_serving counts a request in every whole second
    from its start's to its end's (``calculate_metrics``, :func:`sim.bench_serving._peaks`),
    so a request that ends and the one that takes its slot in the same second both count;
    the row is kept as bench_serving prints it."""
    import textwrap

    b = bench or {}
    peak = summary.get("max_concurrent_requests", b.get("max_concurrent_requests"))
    cap = b.get("max_concurrency")
    if not isinstance(peak, (int, float)) or not isinstance(cap, (int, float)) or isinstance(cap, bool) or peak <= cap:
        return []
    return textwrap.wrap(f"note: Peak concurrent requests ({int(peak)}) is counted in whole-second buckets, as "
                         "bench_serving does: a request that ends and the one taking its slot in the same second "
                         f"both count. At most {int(cap)} (Max request concurrency) ran at once.", _W)


def format_report(summary: dict[str, Any], reference: dict[str, float] | None = None,
                  title: str = "Serving Benchmark Result", bench: dict[str, Any] | None = None) -> str:
    """Render ``summary`` (bench_serving keys, ms for latencies) as bench_serving 0.5.23
    prints it (:func:`bench_block`), with a steady-state ratio steady_state_serving's block
    (:func:`steady_block`), then specsched's own sections: the run, the maxima
    bench_serving does not print, the scheduler's figures and, with ``reference``, the
    reference figures with the model's % error.

    ``bench``: the run's bench_serving.jsonl record (:func:`bench_block`).
    """
    s = summary.get
    out = bench_block(summary, bench, title)
    out += steady_block(summary)   # steady_state_serving prints it after bench_serving's block
    out.append(_head("specsched"))
    out += [
        _line("Scenario / arm:", f"{s('scenario', '?')} / {s('arm', '?')}"),
        _line("Source / seed:", f"{s('source', 'sim')} / {s('seed', '?')}"),
        # a roofline profile's figures read like a calibrated prediction unless said
        *([_line("Profile costs:", "analytic estimate, not measured")] if s("profile_costs") == "analytic" else []),
        *(_line(_stat_label("max", label), s(f"max_{key}_ms")) for _, key, label, _ in LATENCY_SECTIONS[:3]),
        *peak_note(summary, bench),
    ]
    out.append(_head("Scheduler"))
    if "dp_replicas" in summary:   # sim/dp_replicas.py: rates below per replica, counts summed
        out.append(_line("Data-parallel replicas:", s("dp_replicas"), "{:d}"))
    out += [
        _line("Verify cycles/s (steady batch):", s("verify_cycles_per_s")),
        _line("Decode tok/s (steady batch):", s("decode_throughput")),
        # the plain-decode counterpart of the verify cycles (a run without speculation)
        *([_line("Decode steps/s (steady batch):", s("decode_steps_per_s"))]
          if _finite(s("decode_steps_per_s")) else []),
        _line("GPU busy fraction:", s("gpu_busy_fraction"), "{:.3f}"),
        _line("Host blocked (s):", s("host_blocked_s")),
        _line("Delayed admission passes:", s("num_delayed_passes"), "{:d}"),
        _line("Retractions:", s("num_retractions"), "{:d}"),
    ]
    if "num_preemptions" in summary:
        out.append(_line("Priority preemptions:", s("num_preemptions"), "{:d}"))
    if "requests_oom_aborted" in summary:
        out.append(_line("Aborted out of memory:", s("requests_oom_aborted"), "{:d}"))
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
