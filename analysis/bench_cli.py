"""Real-server commands: ``scenario from-bench`` and ``validate-bench``.

``specsched scenario from-bench FILE[:LINE] --profile P [--out F.yaml]`` writes a scenario
reproducing a bench_serving run's arguments (:mod:`analysis.from_bench`).

``specsched validate-bench FILE[:LINE] --scenario S`` (or ``--profile P`` to build the
scenario from the line itself) simulates the scenario over seeds and prints predicted (mean
over seeds) vs measured for every bench_serving metric the line has, writes the table (CSV
and markdown) and both runs as results directories, and with ``--plot`` overlays the
measured per-request TTFT/TPOT/ITL distributions (when the line has ``--output-details``)
on the predicted ones. ``specsched plot`` also accepts ``FILE[:LINE]`` arguments.

Bad input (a truncated line, a file that is not bench_serving output, a scenario or profile
error) is one line naming file, line, key and value, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from specsched.sim.atomic import file_above, probe_writable
from specsched.sim.cli_types import nonnegative_int, positive_int, seed_count
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.sglang_launch_args import same_setting


def mean_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-key mean of numeric summary values over runs (NaN ignored; non-numeric keys from
    the first run)."""
    out: dict[str, Any] = dict(summaries[0])
    for k in summaries[0]:
        vals = [s.get(k) for s in summaries]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) == len(vals):
            finite = [v for v in nums if not math.isnan(v)]
            out[k] = sum(finite) / len(finite) if finite else float("nan")
    return out


def comparison_rows(predicted: dict[str, Any], measured: dict[str, Any], keys: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Rows ``metric, predicted, measured, error_pct`` for every bench_serving metric the
    measured summary has (and the prefix-cache hit rate when the line has a cache report, and
    the steady-state figures, :data:`sim.bench_serving.STEADY_COMPARED`, when a
    steady_state_serving record follows the line) (error = (predicted - measured) / measured x 100; NaN when either is
    missing or measured is 0)."""
    from specsched.sim.bench_serving import EXTRA_SUMMARY_KEYS, METRIC_KEYS, STEADY_COMPARED

    rows = []
    for k in keys or (*METRIC_KEYS, *EXTRA_SUMMARY_KEYS, *STEADY_COMPARED):
        if k not in measured:
            continue
        q, p = measured[k], predicted.get(k)
        ok = isinstance(p, (int, float)) and p == p and q == q and q != 0
        rows.append({"metric": k, "predicted": p if isinstance(p, (int, float)) else None, "measured": q,
                     "error_pct": (p - q) / abs(q) * 100 if ok else float("nan")})
    return rows


def _percentile_of(metric: str) -> float:
    """The percentile a statistic's name states (``p99.9_ttft_ms`` 99.9, ``median_*`` 50), -1
    for the mean and standard deviation."""
    head = metric.split("_", 1)[0]
    if head == "median":
        return 50.0
    try:
        return float(head[1:]) if head.startswith("p") else -1.0
    except ValueError:
        return -1.0


def with_percentile_rows(rows: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each row of ``extra`` (a latency percentile outside bench_serving's own
    statistics, ``p99.9_ttft_ms``, ``p25_ttft_ms``) among the rows of the same latency
    (``..._ttft_ms``): after the last of them of a lower percentile (the mean and standard
    deviation count as lower), so p25 comes before p90 and p99.9 after p99; at the end when
    ``rows`` has none of that latency."""
    out = list(rows)
    for row in extra:
        metric, pct = row["metric"].split("_", 1)[1], _percentile_of(row["metric"])
        same = [i for i, r in enumerate(out) if r["metric"].split("_", 1)[-1] == metric]
        lower = [i for i in same if _percentile_of(out[i]["metric"]) <= pct]
        at = max(lower) if lower else (min(same) - 1 if same else len(out) - 1)
        out.insert(at + 1, row)
    return out


def _count_metric(metric: str) -> bool:
    """A bench_serving count: requests (completed, failed, peak concurrent) or tokens (the totals)."""
    return metric in ("completed", "failed", "max_concurrent_requests", "steady_completed", "steady_total_input",
                      "steady_concurrency_threshold", "steady_peak_concurrency") or (
        metric.startswith("total_") and "tokens" in metric)


def _figure(metric: str, v: Any) -> str:
    """A figure of the comparison: a whole count as an integer (500, not 500.000), anything
    else (a mean over seeds of a count included) with three decimals; n/a when missing."""
    if v is None or v != v:
        return "n/a"
    if _count_metric(metric) and math.isfinite(v) and float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3f}"


CI_LOW, CI_HIGH = "measured_ci_low", "measured_ci_high"
"""Row keys of the measured figure's sampling interval (:func:`with_measured_intervals`)."""
CI_PERCENT = 95
"""The intervals' confidence in percent (:data:`analysis.measured_noise.CONFIDENCE`, kept equal
by a test; named here so that the table's header needs no numpy import)."""


def with_measured_intervals(rows: list[dict[str, Any]], measured: Any) -> bool:
    """Give each row the measured figure's sampling interval (:data:`CI_LOW`, :data:`CI_HIGH`;
    NaN where it has none: :func:`analysis.measured_noise.measured_intervals`), in place;
    True when any row got one."""
    from specsched.analysis.measured_noise import measured_intervals

    found = measured_intervals(measured, [r["metric"] for r in rows])
    nan = float("nan")
    for r in rows:
        r[CI_LOW], r[CI_HIGH] = found.get(r["metric"], (nan, nan))
    return bool(found)


def _interval(r: dict[str, Any]) -> str:
    """The row's measured interval as ``[low, high]`` with ``*`` when the prediction lies in it."""
    lo, hi = r.get(CI_LOW), r.get(CI_HIGH)
    if lo is None or lo != lo:
        return ""
    inside = r["predicted"] is not None and lo <= r["predicted"] <= hi
    return f"[{lo:.3f}, {hi:.3f}]{'*' if inside else ''}"


def _has_intervals(rows: list[dict[str, Any]]) -> bool:
    return any(_interval(r) for r in rows)


def format_rows(rows: list[dict[str, Any]], title: str) -> str:
    """Plain-text table of :func:`comparison_rows`, with the measured figures' sampling
    intervals (:func:`with_measured_intervals`) as a last column where any row has one."""
    # a space between the columns: an error of 100000 % or more (a line read in another unit),
    # or a figure of 14 digits, ran into its neighbour ("0.001+303824.40%")
    ci = _has_intervals(rows)
    head = f"{'metric':<32}{'predicted':>14} {'measured':>14} {'error':>10}"
    out = [title, head + (f"  measured {CI_PERCENT} % interval" if ci else "")]
    for r in rows:
        p, m = _figure(r["metric"], r["predicted"]), _figure(r["metric"], r["measured"])
        e = f"{r['error_pct']:+.2f}%" if r["error_pct"] == r["error_pct"] else "n/a"
        line = f"{r['metric']:<32}{p:>14} {m:>14} {e:>10}"
        out.append((line + "  " + _interval(r)).rstrip() if ci else line)
    return "\n".join(out)


def markdown_rows(rows: list[dict[str, Any]], title: str) -> str:
    """Markdown table of :func:`comparison_rows` (with the measured intervals as
    :func:`format_rows` gives them)."""
    ci = _has_intervals(rows)
    lines = [f"## {title}", "", "| metric | predicted | measured | error |" + (f" measured {CI_PERCENT} % interval |" if ci else ""),
             "|---|---:|---:|---:|" + ("---|" if ci else "")]
    for r in rows:
        p, m = _figure(r["metric"], r["predicted"]), _figure(r["metric"], r["measured"])
        e = f"{r['error_pct']:+.2f} %" if r["error_pct"] == r["error_pct"] else "n/a"
        lines.append(f"| {r['metric']} | {p} | {m} | {e} |" + (f" {_interval(r).replace('*', ' (holds the prediction)')} |" if ci else ""))
    return "\n".join(lines) + "\n"


def interval_note(rows: list[dict[str, Any]], n_requests: int | None) -> str | None:
    """One ``note:`` on the measured intervals, naming the misses they account for; None
    when no row has one."""
    withci = [r for r in rows if _interval(r)]
    if not withci:
        return None
    inside = [r["metric"] for r in withci if _interval(r).endswith("*")]
    tail = (f"; the prediction lies inside for {', '.join(inside)} (* above): there the miss is within what another "
            "run of the same server could measure" if inside else "; no prediction lies inside one")
    return (f"note: measured {CI_PERCENT} % interval = how far the line's figure moves by chance, one run being one sample of "
            f"{f'{n_requests:g}' if n_requests else 'its'} requests taken as independent draws (order statistics for a percentile, Student's t for a mean; TTFT, TPOT and "
            f"E2E latency, not ITL: analysis/measured_noise.py){tail}")


TOKEN_TOTALS = ("total_input_tokens", "total_input_text_tokens", "total_output_tokens",
                "total_output_tokens_retokenized")
"""bench_serving's token totals over the successful requests (SGLang 0.5.23
``benchmark/serving.py`` ``calculate_metrics``): counts of the workload, which the model does
not predict (it times the requests it is given)."""
COUNTED_APART = "input lengths: the details' input_lens add up to"
"""The start of from-bench's note that SGLang sums the asked prompt lengths into
``total_input_tokens`` but records the server's counts in ``input_lens``
(:func:`analysis.from_bench`)."""


def token_total_note(rows: list[dict[str, Any]], assumptions: list[str] | None) -> str | None:
    """One ``note:`` saying whether the token totals' differences (:data:`TOKEN_TOTALS`) are
    the workload's, by design, or follow from the prediction; None when none differs.

    The simulator sends the scenario's requests at their lengths and generates each one's
    output length in full (SGLang with bench_serving's ``ignore_eos``), so while every request
    completes in both runs a token total differs only by the workload: the scenario's lengths
    are a draw from the line's (its dataset's rule, or the histogram of its own requests),
    not its prompts, and SGLang 0.5.23 sums the dataset's asked prompt lengths into
    ``total_input_tokens`` while from-bench prefills the server's counts (``input_lens``,
    ``assumptions`` then hold :data:`COUNTED_APART`). The throughputs (tokens / duration)
    carry the same share. Where ``completed`` differs, the totals differ by the requests the
    prediction did or did not finish: that is the prediction's, as ``completed`` is.

    Args:
        rows: :func:`comparison_rows` (``metric``, ``predicted``, ``measured``, ``error_pct`` in %).
        assumptions: the notes of the scenario from-bench built from the line, or None for a
            ``--scenario`` (its lengths are its own).
    """
    by = {r["metric"]: r for r in rows}
    diff = [(k, by[k]["error_pct"]) for k in TOKEN_TOTALS
            if k in by and math.isfinite(by[k]["error_pct"]) and abs(by[k]["predicted"] - by[k]["measured"]) >= 0.5]
    if not diff:
        return None
    said = ", ".join(f"{k} {e:+.2f} %" for k, e in diff)
    done = by.get("completed")
    if done is not None and isinstance(done["predicted"], (int, float)) and abs(done["predicted"] - done["measured"]) >= 0.5:
        return (f"note: {said}: the prediction completed {done['predicted']:g} requests, the measured run "
                f"{done['measured']:g}; the totals count completed requests only, so this follows from the prediction")
    counted = any(a.startswith(COUNTED_APART) for a in assumptions or ())
    whose = ("the scenario's own (--scenario), not the run's prompts, so their sums differ as the two workloads do"
             if assumptions is None else
             "a draw from the run's (the 'assumed: lengths' line), not its own prompts, so their sums differ by that draw")
    return (f"note: {said}: by design, not a prediction error: the model times the requests it is given, whose lengths "
            f"are {whose}"
            + ("; and SGLang sums the asked prompt lengths into total_input_tokens while the scenario prefills the "
               "server's counts (the 'input lengths' line)" if counted else "")
            + ". The throughput rows (tokens / duration) carry the same share; duration and the latency rows are "
              "the prediction's")


def length_notes(sc: Any, measured: Any) -> None:
    """One ``note:`` per side whose lengths in the scenario are not the ones the line's
    ``random`` dataset asked for (``analysis.from_bench.random_length_args``). A --scenario
    runs as written, so a scenario at other prompt lengths read as the model's latency
    error; from-bench writes fixed lengths for ratio 1, so fixed is compared as ratio 1."""
    from specsched.analysis.from_bench import random_length_args

    spec = random_length_args(measured)
    w = sc.workload
    if spec is None or w.kind not in ("burst", "closed_loop", "poisson") or getattr(w, "shared_prefix", None) is not None:
        return
    for side in ("input", "output"):
        dist, (want_v, want_r) = getattr(w, f"{side}_len", None), spec[side]
        if (dist is None or dist.kind not in ("fixed", "uniform") or dist.value is None
                or not isinstance(want_v, int) or not isinstance(want_r, int | float) or isinstance(want_r, bool)):
            continue
        have_r, want_r = (1.0 if dist.kind == "fixed" else min(float(dist.range_ratio), 1.0)), min(float(want_r), 1.0)
        if dist.value != want_v or not math.isclose(have_r, want_r):
            print(f"note: the scenario's {side} lengths are {dist.value} tokens at range ratio {have_r:g}, the "
                  f"measured run's {want_v} at range ratio {want_r:g} (bench_serving --random-{side}-len, "
                  "--random-range-ratio; `specsched scenario from-bench FILE --template S` writes the line's workload)")


def _arrivals(a: Mapping[str, Any]) -> tuple[float, int | None, float] | None:
    """(request rate, concurrency cap, burstiness) bench_serving arguments ``a`` send at, or
    None when they do not say (a trace replay's ``"trace"``). SGLang bench_serving (0.5.23
    ``benchmark/serving.py`` ``benchmark()``: ``request_rate``, default ``inf``, and
    ``max_concurrency``, ``None`` for no cap) and vLLM (``vllm/benchmarks/serve.py`` ``main``:
    ``request_rate`` ``"inf"``, read as inf, ``burstiness`` and ``max_concurrency``); a cap of 0
    is none (both clients build their semaphore only ``if max_concurrency``), and the
    burstiness shapes nothing at rate inf (``get_request`` sends every request at once)."""
    rate = a.get("request_rate", math.inf)
    rate = math.inf if rate is None else rate
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        return None
    cap = a.get("max_concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else None
    shape = a.get("burstiness")
    shape = float(shape) if isinstance(shape, int | float) and not isinstance(shape, bool) else 1.0
    return float(rate), cap, shape if math.isfinite(rate) else 1.0


def _rate_text(rate: float) -> str:
    return f"at {rate:g} req/s" if math.isfinite(rate) else "every request at once (request_rate inf)"


def arrival_notes(sc: Any, measured: Any, n_ok: int | None, n_meas: int | None) -> None:
    """One ``note:`` for each way the ``--scenario``'s arrivals are not the line's: the request
    rate (a finite rate against inf counts: a burst scenario against a line sent at 8 req/s
    said nothing, nor did a Poisson scenario against a line at ``inf``), the concurrency cap
    (bench_serving / vLLM ``--max-concurrency``) and vLLM's ``--burstiness``. A --scenario
    runs as written, so such a difference read as the model's latency error. The line's
    rate x its success share is the load from-bench builds for a line with failed requests (the
    successes of a Poisson stream): that is the line's load too."""
    from specsched.sim.bench_serving import workload_args

    line = _arrivals(measured.args)
    # the scenario's as the bench_serving arguments it is written as (rate inf and the
    # concurrency as the cap for a closed loop); a trace or conversations: not compared
    mine = _arrivals(workload_args(sc)) if sc.workload.kind in ("burst", "closed_loop", "poisson") else None
    if line is None or mine is None:
        return
    (rate_m, cap_m, shape_m), (rate_p, cap_p, shape_p) = line, mine
    how = "(`specsched scenario from-bench FILE --template S` writes the line's workload)"
    same_rate = (rate_p == rate_m or math.isfinite(rate_p) and math.isfinite(rate_m) and (
        math.isclose(rate_p, rate_m) or bool(n_ok and n_meas and math.isclose(rate_p, rate_m * n_ok / n_meas))))
    if not same_rate:
        print(f"note: the scenario sends {_rate_text(rate_p)}, the measured run {_rate_text(rate_m)} {how}")
    if cap_p != cap_m:
        print(f"note: the scenario's cap on requests in flight is {cap_p or 'none'}, the measured run's "
              f"{cap_m or 'none'} (bench_serving --max-concurrency) {how}")
    if same_rate and math.isfinite(rate_m) and not math.isclose(shape_p, shape_m):
        print(f"note: the scenario's arrival gaps have burstiness {shape_p:g}, the measured run's {shape_m:g} "
              f"(vLLM --burstiness: the gamma shape of the gaps; 1 is Poisson) {how}")


def server_differences(sc: Any, measured: Any) -> list[tuple[str, Any, Any]]:
    """(key, the line's value, the scenario's) for each server argument the line's
    ``server_info`` states (read as ``scenario from-bench`` reads it,
    :func:`analysis.from_bench.line_server_args`: DP-attention values back to the server's,
    CUDA-graph settings by version, the limit the server ran with) whose value is not the one
    the scenario runs (``sc.server``, its hardware defaults filled). Empty for a line without
    server_info and for a disaggregated scenario (its roles have servers of their own)."""
    from specsched.analysis.from_bench import line_server_args

    if getattr(sc.server, "disaggregation", None) is not None:
        return []
    out = []
    for key, want in line_server_args(measured).items():
        have = getattr(sc.server, key, None)
        if have is None:   # the scenario leaves it to SGLang's own choice (mem_fraction_static beside a stated pool)
            continue
        if not same_setting(want, have):
            out.append((key, getattr(want, "value", want), getattr(have, "value", have)))   # an enum as written
    return out


def server_notes(sc: Any, measured: Any) -> None:
    """One ``note:`` naming each server argument the line's server ran at another value than
    the ``--scenario`` does (:func:`server_differences`). A --scenario runs as written, so a
    scenario at specsched's defaults (chunked_prefill_size 16384, a KV pool sized from the
    profile) against a server launched otherwise read as the model's error; only the workload
    (rate, requests, lengths) was compared."""
    diff = server_differences(sc, measured)
    if diff:
        said = ", ".join(f"{k} {clipped(repr(w), 40)} (scenario {clipped(repr(h), 40)})" for k, w, h in diff)
        print(f"note: the line's server_info ran {said}: the prediction is for the scenario's server "
              "(`specsched scenario from-bench FILE --profile P` writes the line's)")


def load_run_or_bench(item: str) -> Any:
    """A results directory (``analysis.io.read_results``) or a bench_serving ``FILE[:LINE]``
    (as a measured run, :func:`sim.bench_serving.to_run_data`).

    Raises:
        ConfigError: ``item`` is neither (the message says what was looked for), or as the
            reader of what it is.
    """
    from specsched.analysis.io import read_results
    from specsched.sim.bench_serving import read_bench_one, split_spec, to_run_data

    if Path(item).is_dir():
        return read_results(item)
    if not split_spec(item)[0].exists():
        raise ConfigError(item, "<path>", item, "no such path: looked for a results directory (specsched run "
                          "--out) or a bench_serving result file (FILE[:LINE], JSONL or JSON)")
    return to_run_data(read_bench_one(item))


SWEEP_KEYS = (("request_rate", "rate {}/s"), ("max_concurrency", "concurrency {}"), ("tag", "{}"),
              ("dataset_name", "{}"), ("random_input_len", "input {}"), ("random_output_len", "output {}"),
              ("seed", "seed {}"))
"""(argument, label format) of what tells the runs of one bench_serving file apart in
``plot``'s legend: SGLang's and vLLM's sweeps append one line per run to one ``--output-file``
(a rate sweep: ``for r in 1 2 4 8; do ... --request-rate $r; done``), each line writing its
``request_rate`` and ``max_concurrency`` (0.5.23 ``benchmark/serving.py`` ``benchmark()``),
the dataset and its random lengths, and, set by hand, its ``--tag``; the seed (``--seed``, or
a specsched line's ``server_info.specsched.seed``: a sweep's file holds every seed of a point)."""


def _sweep_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "inf" if isinstance(v, float) and math.isinf(v) else str(v)


def _sweep_part(r: Any, key: str, fmt: str) -> str | None:
    """One run's label part for ``key``, or None where it says nothing (no tag; random
    lengths of a dataset other than random, which bench_serving writes but does not use)."""
    v = r.extra.get("tag") if key == "tag" else r.args.get(key)
    if key == "seed" and v is None:   # a specsched line's own seed (a sweep's seeds of one point)
        v = ((r.extra.get("server_info") or {}).get("specsched") or {}).get("seed")
    if key.startswith("random_") and not str(r.args.get("dataset_name") or "").startswith("random"):
        return None
    if v is None:
        return "no concurrency cap" if key == "max_concurrency" else None
    return fmt.format(_sweep_value(v))


def sweep_labels(runs: list[Any]) -> list[str]:
    """One legend label per run of a bench_serving file (:class:`sim.bench_serving.BenchRun`):
    ``line N`` (FILE:LINE names the run), then each argument of :data:`SWEEP_KEYS` whose
    value differs between the runs (``line 3: rate 4/s``; none for repeats of one
    command)."""
    def differs(k: str, fmt: str) -> bool:
        parts = {_sweep_part(r, k, fmt) for r in runs}
        if k.startswith("random_"):   # among the random runs only: another dataset's None says nothing
            parts.discard(None)
        return len(parts) > 1
    differ = [(k, fmt) for k, fmt in SWEEP_KEYS if differs(k, fmt)]
    out = []
    for r in runs:
        parts = [p for k, fmt in differ if (p := _sweep_part(r, k, fmt)) is not None]
        out.append(f"line {r.source.rsplit(':', 1)[1]}" + (f": {', '.join(parts)}" if parts else ""))
    return out


def load_plot_inputs(item: str) -> list[Any]:
    """What ``plot`` draws of one input: a results directory or a bench_serving ``FILE:LINE``
    (one run, :func:`load_run_or_bench`), or every run of a bench_serving ``FILE`` that holds
    several (a sweep appended run by run), each labelled by :func:`sweep_labels` so that they
    are overlaid one colour each (a file of several runs was refused: "name one as
    FILE:LINE"). A last line cut short is left out with a ``warning:`` line, as ``calibrate
    --from FILE`` leaves it out.

    Raises:
        ConfigError: as :func:`load_run_or_bench`, or runs joined on one line (no FILE:LINE
            names one of them).
    """
    from specsched.sim.bench_serving import (
        joined_runs,
        read_bench,
        split_spec,
        to_run_data,
        warn_notes,
    )

    path, line = split_spec(item)
    if Path(item).is_dir() or line is not None or not path.exists():
        return [load_run_or_bench(item)]
    left_out: list[str] = []
    runs = read_bench(path, left_out=left_out)
    at = [r.source.rsplit(":", 1)[1] for r in runs]
    shared = next((x for x in at if at.count(x) > 1), None)
    if len(runs) > 1 and shared is not None:
        raise joined_runs(path, int(shared), at.count(shared))
    warn_notes([*left_out, *(note for r in runs for note in r.notes)])
    if len(runs) == 1:
        return [to_run_data(runs[0])]
    out = [to_run_data(r, label=lab) for r, lab in zip(runs, sweep_labels(runs), strict=True)]
    if len({d.summary["scenario"] for d in out}) > 1:   # tags differ: the label says each; one title
        for d in out:
            d.summary["scenario"] = path.name
    return out


# ---------------------------------------------------------------- scenario from-bench

def warn_mismatches(assumptions: list[str]) -> None:
    """Print each setup-mismatch assumption (the line's server is not the one the profile
    prices: another TP size or model; analysis.from_bench.SETUP_MISMATCH) as one ``warning:``
    line on stderr, so it is not read as one assumption among many."""
    import sys

    from specsched.analysis.from_bench import SETUP_MISMATCH

    for note in assumptions:
        if note.startswith(SETUP_MISMATCH):
            print(f"warning: {note.removeprefix(SETUP_MISMATCH)}", file=sys.stderr)


def check_profile_arg(profile: str) -> None:
    """Load ``--profile`` as given on the command line (a bundled name, or a path from the
    working folder).

    Raises:
        ConfigError: naming ``<command line>: --profile`` when there is no such profile (not
            the scenario these commands build from it, a file the user never wrote), or the
            profile file's own key at fault.
    """
    from specsched.sim.profile import load_profile

    try:
        load_profile(profile)
    except ConfigError as e:
        if e.key == "profile":
            raise ConfigError("<command line>", "--profile", e.value, e.allowed) from None
        raise


def _check_built_runs(sc: dict[str, Any], tables: dict[str, Any], source: str) -> None:
    """Load the built scenario as ``run`` will (in a temporary folder, with its length
    tables) and refuse what ``run`` refuses before simulating (:func:`check_built_fits`), so
    that ``scenario from-bench`` writes no scenario every run of which fails: a DP-attention
    line against a profile whose TP group its ranks cannot split was written, then refused
    by ``run``.

    Raises:
        ConfigError: naming ``source`` (the line) and the key at fault.
    """
    from specsched.analysis.from_bench import write_scenario
    from specsched.analysis.overrides import load_scenario_with_overrides

    with tempfile.TemporaryDirectory() as tmp:
        path = write_scenario(dict(sc), tables, Path(tmp) / "from-bench.yaml")[0]
        try:
            loaded = load_scenario_with_overrides(path, "base", None)
        except ConfigError as e:
            raise ConfigError(source, f"{e.key} of the scenario built from the line", e.value, e.allowed) from None
        check_built_fits(loaded, None, source)


def refuse_out_over_inputs(out: Path, inputs: list[tuple[str, str | Path | None]]) -> None:
    """Refuse an ``--out`` that is one of the command's own inputs (``inputs``: what each is,
    its path; None for one not given): ``scenario from-bench --profile llama.yaml --out
    llama.yaml`` wrote the scenario over the profile it names, ``calibrate --from runs.jsonl
    --out runs.jsonl`` the fitted profile over the measured runs.

    Raises:
        ConfigError: naming ``--out`` and the input it would replace.
    """
    if not out.is_file():
        return
    for what, p in inputs:
        if p is not None and Path(p).is_file() and out.samefile(p):
            raise ConfigError("<command line>", "--out", str(out), f"is {what} this command reads: give another "
                              "file for what it writes")


def refuse_replacing_own_scenario(out: Path) -> None:
    """Refuse an ``--out`` that holds a file ``scenario from-bench`` did not write (no
    ``source: bench_serving ...``): it wrote over the user's own scenario without a word. A
    scenario from-bench wrote before is replaced, as running it again regenerates it
    (:func:`sim.atomic.refuse_replacing_foreign`).

    Raises:
        ConfigError: naming ``--out`` and how to go on.
    """
    from specsched.sim.atomic import refuse_replacing_foreign

    def written_by_from_bench(data: Any) -> bool:
        source = data.get("source") if isinstance(data, dict) else None
        return isinstance(source, str) and source.startswith("bench_serving ")

    refuse_replacing_foreign(out, written_by_from_bench,
                             "was not written by scenario from-bench (it has no source: bench_serving ...)",
                             "the scenario")


def refuse_replacing_own_tables(out: Path, keys: Iterable[str]) -> None:
    """Refuse the tables ``scenario from-bench`` writes beside ``out`` (its length histograms,
    its trace: :func:`analysis.from_bench.table_path`) where such a file is there and is not one
    the scenario from-bench wrote at ``out`` names: a user's own histogram of that name was
    replaced without a word (the YAML itself: :func:`refuse_replacing_own_scenario`).

    Raises:
        ConfigError: naming ``--out``, the file in the way and how to go on.
    """
    import yaml
    from specsched.analysis.from_bench import table_path

    named: set[str] = set()
    try:
        data = yaml.safe_load(out.read_text(encoding="utf-8", errors="replace")) if out.is_file() else None
    except yaml.YAMLError:
        data = None
    if isinstance(data, dict) and str(data.get("source", "")).startswith("bench_serving "):
        wl = data.get("workload") if isinstance(data.get("workload"), dict) else {}
        for k in ("input_len", "output_len", "trace"):
            v = wl.get(k)
            if isinstance(v, dict) and isinstance(v.get("path"), str):
                named.add(v["path"])
    for key in keys:
        p = table_path(out, key)
        if p.is_file() and p.name not in named:   # a folder there: the write names it (cannot write ...: Is a directory)
            raise ConfigError("<command line>", "--out", str(out), f"its {key} table goes beside it as {p}, which "
                              "exists and is no table of a scenario from-bench wrote there: not replaced; give "
                              "another --out, or remove it first")


def _from_bench_inputs(bench_file: str, profile: str, template: str | None) -> list[tuple[str, str | Path | None]]:
    """``scenario from-bench``'s input files for :func:`refuse_out_over_inputs`."""
    from specsched.sim.bundled import resolve_scenario_path
    from specsched.sim.profile import resolve_profile_path

    return [("the bench_serving result file", bench_file), ("the profile", resolve_profile_path(profile)),
            ("the template", resolve_scenario_path(template) if template else None)]


def validate_bench_stem(path: str) -> str:
    """The name ``validate-bench`` gives a result file's folder under results/validate-bench/:
    the file's stem, or for the bench_serving.jsonl of a results directory (``specsched run``,
    ``measure``: every one has that name) ``<scenario folder>-<run folder>``, e.g.
    ``mine-base-seed1``, so that two runs' lines do not write one folder (the second replaced the
    first's table and runs); ``bench_serving`` for a stream, as ``scenario from-bench`` names its
    scenario (``-:3`` gave ``stdin-line3`` here and ``bench_serving-line3.yaml`` there)."""
    from specsched.sim.input_files import is_stream

    p = Path(path)
    if p.name == "bench_serving.jsonl" and (p.parent / "summary.json").is_file():
        return f"{p.parent.parent.absolute().name}-{p.parent.name}"
    # a stream (stdin, <(zcat runs.gz)) has no name of its own: as scenario from-bench names it
    return "bench_serving" if is_stream(path) else p.stem


def cmd_from_bench(args: argparse.Namespace) -> int:
    """Write a scenario YAML reproducing a bench_serving run's arguments."""
    from specsched.analysis.from_bench import (
        check_drafter_priced,
        scenario_from_bench,
        write_scenario,
    )
    from specsched.sim.bench_serving import read_bench_one

    run = read_bench_one(args.file)
    check_profile_arg(args.profile)   # refuse an unknown profile before writing anything
    sc, tables = scenario_from_bench(run, args.profile, name=args.name, burstiness=args.burstiness,
                                     template=args.template, lengths=args.lengths, arrivals=args.arrivals,
                                     **agentic_args(args))
    if not args.template:   # a scenario every run of which the profile would refuse is not written
        check_drafter_priced(run, sc["server"], args.profile)
    _check_built_runs(sc, tables, run.source)
    out = Path(args.out) if args.out else Path(f"{sc['name']}.yaml")
    if out.is_dir():   # --out results/: the scenario goes in it, under its name (its histograms were
        out = out / f"{sc['name']}.yaml"   # written beside the folder, then the YAML refused naming a temporary file)
    refuse_out_over_inputs(out, _from_bench_inputs(run.source.rsplit(":", 1)[0], args.profile, args.template))
    refuse_replacing_own_scenario(out)
    refuse_replacing_own_tables(out, tables)
    for p in write_scenario(sc, tables, out):
        print(f"wrote {p}")
    warn_mismatches(sc["assumptions"])   # stderr, -q or not: the scenario is for another setup
    if getattr(args, "quiet", False):
        return 0
    if sc["assumptions"]:
        print("assumptions (also in the scenario's `assumptions`):")
    for note in sc["assumptions"]:
        print(f"  - {note}")
    return 0


def agentic_args(args: argparse.Namespace) -> dict[str, Any]:
    """The agentic-trace options of from-bench / validate-bench as scenario_from_bench's keywords."""
    return {"dataset_path": getattr(args, "dataset_path", None), "dataset_offset": getattr(args, "dataset_offset", None),
            "agentic_max_turns": getattr(args, "agentic_max_turns", None),
            "num_conversations": getattr(args, "num_prompts", None),
            "mooncake_num_rounds": getattr(args, "mooncake_num_rounds", None),
            "mooncake_slowdown_factor": getattr(args, "mooncake_slowdown_factor", None)}


def add_agentic_options(p: Any) -> None:
    p.add_argument("--dataset-path", metavar="TRACE.json",
                   help="agentic-trace and mooncake lines: the trace file the run replayed (bench_serving writes no path)")
    p.add_argument("--dataset-offset", type=int, help="agentic-trace lines: bench_serving's --dataset-offset (default 0)")
    p.add_argument("--agentic-max-turns", type=positive_int, help="agentic-trace lines: bench_serving's --agentic-max-turns")
    p.add_argument("--num-prompts", type=positive_int, help="agentic-trace lines: conversations (bench_serving's "
                   "--num-prompts; default: the count whose turns add up to the line's requests); mooncake lines: "
                   "trace rows (default: the line's requests / --mooncake-num-rounds)")
    p.add_argument("--mooncake-num-rounds", type=positive_int,
                   help="mooncake lines: bench_serving's --mooncake-num-rounds (default 1; the line does not write it)")
    p.add_argument("--mooncake-slowdown-factor", type=float,
                   help="mooncake lines: bench_serving's --mooncake-slowdown-factor (default 1.0; the line does not write it)")


# ---------------------------------------------------------------- validate-bench

def _scenario_for(args: argparse.Namespace, run: Any, workdir: Path) -> tuple[Any, tuple[dict[str, Any], dict[str, Any]] | None]:
    """The scenario to predict ``run`` with: ``--scenario`` as written, or built from the line
    with ``--profile`` (:func:`analysis.from_bench.scenario_from_bench`), written to
    ``workdir`` (with its length histograms when the lengths come from the details) and loaded
    back as ``scenario from-bench`` + ``validate --scenario`` would load it: the same hardware
    defaults, and ``--arm``/``--set`` apply either way. Returns (scenario, (scenario dict,
    tables) when built, else None)."""
    from specsched.analysis.from_bench import scenario_from_bench, write_scenario
    from specsched.analysis.overrides import load_scenario_with_overrides

    if args.scenario:
        if getattr(args, "arrivals", None) is not None:   # it would be ignored: the scenario's workload sends
            raise ConfigError("<command line>", "--arrivals", args.arrivals,
                              "applies to a scenario built from the line, not with --scenario (whose workload sets "
                              "the arrivals): leave out --scenario, or write one with `specsched scenario from-bench "
                              "FILE --arrivals details`")
        from specsched.analysis.from_bench import TRACE_OPTIONS

        for k, v in agentic_args(args).items():   # likewise ignored: the scenario's workload is the replay
            if v is not None:
                raise ConfigError("<command line>", TRACE_OPTIONS[k], v, "applies to a scenario built from the line, "
                                  "not with --scenario (whose workload sets the trace and its replay): leave out "
                                  f"--scenario, or build one with `specsched scenario from-bench FILE {TRACE_OPTIONS[k]} ...`")
        return load_scenario_with_overrides(args.scenario, args.arm, args.set or None), None
    if not args.profile:
        raise ConfigError("<command line>", "--scenario/--profile", "<missing>", "give --scenario S, or --profile P to build the scenario from the line")
    from specsched.analysis.calibrate_bench import replays

    # a line with send times is replayed with them (and its own lengths), as calibrate --from
    # does: one arrival draw's luck near saturation is then not read as the model's error
    from specsched.analysis.from_bench import AGENTIC_DATASET

    agentic = run.args.get("dataset_name") == AGENTIC_DATASET   # rebuilt from its trace file, conversation by conversation
    if agentic and getattr(args, "arrivals", None) == "details":   # as scenario from-bench refuses it
        raise ConfigError("<command line>", "--arrivals", "details", "an agentic-trace line is rebuilt from its "
                          "trace file only (its send times are the conversations' turns): leave --arrivals out")
    arrivals = "details" if not agentic and replays(run, getattr(args, "arrivals", None) or "auto") else "rate"
    from specsched.analysis.overrides import nest, parse_overrides

    # --set acceptance.* stands in for an accept length the line lacks (applied again on loading)
    given = nest({k: v for k, v in parse_overrides(args.set or []).items() if k.startswith("acceptance.")})
    sc, tables = scenario_from_bench(run, args.profile, lengths="details" if args.lengths == "details" else "args",
                                     arrivals=arrivals, **agentic_args(args),
                                     state_with="--set server.KEY=VALUE, or --scenario S",
                                     acceptance=given.get("acceptance"))
    path = write_scenario(dict(sc), tables, workdir / "from-bench.yaml")[0]
    try:
        return load_scenario_with_overrides(path, args.arm, args.set or None), (sc, tables)
    except ConfigError as e:   # a refused --set/--arm names the line, not the temporary file it was applied to
        if not str(e.file).startswith(str(path)):
            raise
        raise ConfigError(run.source + str(e.file)[len(str(path)):], e.key, e.value, e.allowed) from None


def check_built_fits(sc: Any, profile: str | None, source: str | None) -> None:
    """Refuse what ``run`` refuses before simulating (:func:`sim.limits.check_fits`: a request
    past the model's known context length or one the KV pool never holds, which SGLang
    rejects; DP attention whose ranks do not divide the profile's TP group, which SGLang
    asserts at start; weights that leave no KV pool), for a scenario the runs are predicted
    with under ``profile`` (None: its own). Before, these commands checked the context length
    alone: a DP-attention line built against a TP1 profile was predicted with each rank timed
    as if it had the whole GPU, a scenario ``run`` refuses. ``source``: the result line a
    scenario was built from (``FILE:LINE``), which the refusal then names instead of the
    built file, a temporary one (None: a scenario the user gave).

    Raises:
        ConfigError: as :func:`sim.limits.check_fits`.
    """
    from specsched.sim.limits import check_fits

    if profile is not None:   # the runs' profile (its messages name it); its path as the scenario's relative one
        sc = sc.model_copy(update={"profile": profile})
    try:
        check_fits(sc)
    except ConfigError as e:
        if source is None:
            raise
        raise ConfigError(source, f"{e.key} of the scenario built from the line", e.value, e.allowed) from None


VALIDATE_BENCH_HEADER = "metric,predicted,measured,error_pct,measured_ci_low,measured_ci_high"
"""The header of validate-bench's validate.csv (specsched validate's, appended run after run,
is another: cell, arm, metric, ...). Tables written before the measured intervals lack the
last two columns: :data:`OLD_VALIDATE_BENCH_HEADERS`."""
OLD_VALIDATE_BENCH_HEADERS = ("metric,predicted,measured,error_pct",)


def cmd_validate_bench(args: argparse.Namespace) -> int:
    """Predicted (mean over seeds) vs a bench_serving run, for every metric the run has."""
    from specsched.sim.bench_serving import read_bench_one, require_measured

    if args.out:   # a file where the folder goes: refused before the runs, not after them
        o = Path(args.out)
        blocker = o if o.exists() and not o.is_dir() else file_above(o)
        if blocker is not None:
            raise ConfigError("<command line>", "--out", args.out, f"{blocker} is a file: give a folder for the table "
                              "and the runs (validate writes validate.csv, measured/, predicted-seed*/ in it)")
        try:   # a folder no file can be made in (read-only, /proc): before the runs too
            probe_writable(o, args.out)
        except OSError as e:
            raise ConfigError("<command line>", "--out", args.out, f"cannot be written: {e.strerror}") from e
        own = o / "validate.csv"
        if own.is_file():   # specsched validate's appended table (cell, arm, metric, ...) was written over
            with open(own, encoding="utf-8", errors="replace") as f:
                header = f.readline().strip()
            if header not in (VALIDATE_BENCH_HEADER, *OLD_VALIDATE_BENCH_HEADERS, ""):
                raise ConfigError("<command line>", "--out", args.out, f"{own} holds another table ({header[:60]!r}; "
                                  f"this one's is {VALIDATE_BENCH_HEADER!r}): give another folder")
    measured = require_measured(read_bench_one(args.file))
    if args.profile and not args.scenario:   # the scenario is built from the line with it
        check_profile_arg(args.profile)
    with tempfile.TemporaryDirectory() as tmp:   # a built scenario's files, while it runs
        return _validate(args, measured, Path(tmp))


def _validate(args: argparse.Namespace, measured: Any, workdir: Path) -> int:
    from specsched.analysis.from_bench import AGENTIC_DATASET, write_scenario
    from specsched.analysis.io import atomic_write_text
    from specsched.sim.bench_serving import to_run_data
    from specsched.sim.engine import run_scenario
    from specsched.sim.profile import load_profile
    from specsched.sim.results import write_results

    sc, built = _scenario_for(args, measured, workdir)
    profile = load_profile(args.profile, sc.path or None) if args.profile else None
    check_built_fits(sc, args.profile, measured.source if built is not None else None)
    seed0 = sc.seed if args.seed is None else args.seed
    runs = [run_scenario(sc, seed=seed0 + i, profile=profile, warn=False) for i in range(args.seeds)]
    from specsched.sim.grid_range import write_warnings

    write_warnings(n for r in runs for n in r.extra["range_notes"])   # once for every seed
    from specsched.sim.bench_serving import (
        EXTRA_SUMMARY_KEYS,
        STEADY_COMPARED,
        client_counting,
        client_goodput,
        client_percentiles,
        client_record,
        details_itl_per_chunk,
        goodput_slos,
        itl_per_chunk,
        measured_goodput,
        uncompared_percentiles,
    )

    chunk_itl, chunk_tokens = itl_per_chunk(measured), details_itl_per_chunk(measured)
    pred = mean_summary([client_record(r, chunk_itl, chunk_tokens, client_counting(measured))
                         | {"profile": r.summary.get("profile")}
                         | {k: r.summary[k] for k in (*STEADY_COMPARED, *EXTRA_SUMMARY_KEYS)
                            if r.summary.get(k) is not None} for r in runs])
    costs = "; analytic costs, not measured" if runs[0].summary.get("profile_costs") == "analytic" else ""
    rows = comparison_rows(pred, measured.summary)
    skipped = uncompared_percentiles(measured)
    if skipped:   # vLLM --metric-percentiles 99.9: the prediction's own percentiles of its requests
        counting = client_counting(measured)
        extra = mean_summary([client_percentiles(r, skipped, chunk_itl, counting) for r in runs])
        rows = with_percentile_rows(rows, comparison_rows(extra, {k: measured.extra[k] for k in skipped}, tuple(skipped)))
        skipped = [k for k in skipped if not isinstance(extra.get(k), float) or extra[k] != extra[k]]
    goodput = measured_goodput(measured)
    slos = goodput_slos(measured)
    if goodput and slos:   # SGLang --goodput: the prediction's requests judged by the line's SLOs
        from specsched.analysis.from_bench import successes

        counting = client_counting(measured)
        n_ok = successes(measured) if measured.num_prompts else None
        sent = measured.num_prompts if n_ok is not None and sc.workload.num_requests == n_ok else None
        extra = mean_summary([client_goodput(r, slos, float(r.summary.get("duration") or float("nan")), counting, sent)
                              for r in runs])
        rows += comparison_rows(extra, goodput, tuple(goodput))
    elif goodput:
        print(f"note: not compared: {', '.join(goodput)} (the line states no goodput SLOs this model knows: "
              f"goodput_slos_ms = {measured.extra.get('goodput_slos_ms')!r})")
    if not rows:
        raise ConfigError(measured.source, "<metrics>", "none", "the line has no bench_serving metric to compare")
    with_measured_intervals(rows, measured)
    n_pred, n_meas = sc.workload.num_requests, measured.num_prompts
    title = (f"validate-bench {measured.source} vs {Path(sc.path).name or sc.name} / {sc.arm} "
             f"(profile {pred.get('profile')}{costs}; predicted = mean of {args.seeds} seed(s))")
    print(format_rows(rows, title))
    if built is not None:
        from specsched.analysis.from_bench import SETUP_MISMATCH

        warn_mismatches(built[0]["assumptions"])
        for note in built[0]["assumptions"]:
            if not note.startswith(SETUP_MISMATCH):   # said once, as the warning above
                print(f"assumed: {note}")
    tokens = token_total_note(rows, built[0]["assumptions"] if built is not None else None)
    if tokens:
        print(tokens)
    noise = interval_note(rows, measured.summary.get("completed"))
    if noise:
        print(noise)
    if chunk_itl:
        why = ("SGLang's sglang backend before 0.4.3.post3, whose lines have no accept_length: later ones split a "
               "chunk of n tokens into n gaps" if measured.chunk_itl_client
               else "SGLang's sglang backend splits a chunk of n tokens into n gaps")
        from specsched.sim.bench_serving import measured_client

        print(f"note: the line's client (backend {measured_client(measured)['backend']}) records one ITL per streamed chunk: "
              f"the predicted ITL is per chunk too ({why})")
    ratio = measured.summary.get("steady_concurrency_ratio")
    if ratio is not None and sc.workload.steady_state_concurrency_ratio is None:
        print(f"note: the line is followed by its steady-state window (steady_state_serving, ratio {ratio:g}); the "
              "scenario predicts none, so the steady_* rows have no prediction (--set "
              f"workload.steady_state_concurrency_ratio={ratio:g} predicts it)")
    if measured.unmeasured:   # null or NaN in the line: no row, so say which
        print(f"note: not compared: {', '.join(measured.unmeasured)} (the line gives no number: null, NaN or an "
              f"infinity, an empty sample)")
    if skipped:   # a percentile the prediction has no sample for (an ITL without chunks): said, not dropped
        print(f"note: not compared: {', '.join(skipped)} (the prediction has no sample for them)")
    from specsched.analysis.from_bench import successes

    n_ok = successes(measured) if n_meas else None
    if n_ok is not None and n_ok < n_meas and n_pred == n_meas:
        print(f"note: {n_meas - n_ok} of the measured run's {n_meas} requests failed and the scenario sends all "
              f"{n_meas}: bench_serving counts only successful ones in completed and the throughputs, so the "
              f"prediction's are high by that share (`specsched scenario from-bench FILE` writes one that sends the "
              f"{n_ok} that succeeded)")
    elif n_meas is not None and n_pred is not None and n_pred not in (n_meas, n_ok):
        print(f"note: the scenario sends {n_pred} requests, the measured run {n_meas}"
              + (f" ({n_ok} succeeded)" if n_ok != n_meas else ""))
    arrival_notes(sc, measured, n_ok, n_meas)
    length_notes(sc, measured)
    if built is None:
        server_notes(sc, measured)
        from specsched.analysis.from_bench import speculation_mismatch

        # a --scenario without a drafter against a speculative run (or the reverse) read as the model's error
        contradiction = speculation_mismatch(measured, sc.server, sc.acceptance,
                                             f"the scenario {Path(sc.path).name or sc.name}")
        if contradiction is not None:
            warn_mismatches([contradiction])
    if (built is None and sc.workload.kind != "trace" and measured.details is not None and measured.details.start_s is not None
            and measured.args.get("dataset_name") != AGENTIC_DATASET):   # never replayed as single requests
        # a --scenario drawing its own arrivals against a line that holds its send times: one
        # draw's luck (near saturation, tens of % in throughput and TTFT) reads as the model's error
        print("note: the line holds its requests' send times; the scenario draws new arrivals "
              "(`specsched scenario from-bench FILE --arrivals details` writes one that replays them, "
              "as validate without --scenario does)")
    stem = f"{validate_bench_stem(measured.source.rsplit(':', 1)[0])}-line{measured.source.rsplit(':', 1)[1]}"
    out = Path(args.out) if args.out else Path("results") / "validate-bench" / stem
    import pandas as pd

    table = pd.DataFrame(rows)
    from specsched.analysis.io import atomic_write

    atomic_write(out / "validate.csv", lambda tmp: table.to_csv(tmp, index=False))
    # the table's reader gets the note on its token rows too
    atomic_write_text(out / "validate.md", markdown_rows(rows, title) + (f"\n{tokens.removeprefix('note: ')}.\n"
                                                                         if tokens else ""))
    mrun = to_run_data(measured)
    write_results(mrun, out / "measured")
    for i, r in enumerate(runs):
        write_results(r, out / f"predicted-seed{seed0 + i}")
    _drop_stale_predictions(out, {f"predicted-seed{seed0 + i}" for i in range(len(runs))})
    built_note = ""
    scenario_files: list[Path] = []
    if built is not None:   # the scenario built from the line, to rerun or edit (before --arm/--set)
        scenario_files = write_scenario(dict(built[0]), built[1], out / "from-bench.yaml")
        built_note = f"; scenario: {scenario_files[0]}"
    plotted = bool(args.plot)
    _drop_stale_outputs(out, set(scenario_files), plotted)
    print(f"table: {out / 'validate.csv'}, {out / 'validate.md'}; runs: {out}/measured, {out}/predicted-seed*{built_note}")
    if args.plot:
        from specsched.analysis import plots

        if mrun.requests.empty:   # its summary's percentiles as crosses beside the prediction's distributions
            print("note: no per-request details in the line (bench_serving --output-details): its median, p90, p95 "
                  "and p99 are drawn as crosses beside the predicted distributions")
            groups, marks = {"predicted": runs}, {"measured": [mrun]}
        else:
            groups, marks = {"predicted": runs, "measured": [mrun]}, None   # the legend says "pooled over k runs"
        for name, fig in (("ttft", plots.plot_ttft(groups, log_x=args.log_x, marks=marks)),
                          ("tpot_itl", plots.plot_tpot_itl(groups, log_x=args.log_x, marks=marks))):
            for p in plots.save_figure(fig, out / "plots" / name):
                print(p)
            plots.plt.close(fig)
    return 0


def _drop_stale_predictions(out: Path, written: set[str]) -> None:
    """Remove the ``predicted-seed<N>`` results folders in ``out`` that this run did not write:
    an earlier validate into the same folder with more seeds (or other first seed) left them,
    and ``out/predicted-seed*``, as the command names its runs, then mixed that run's
    predictions (another profile, another line) with this one's. Only results folders (with
    ``summary.json``) of that name are removed."""
    import re
    import shutil

    for d in out.glob("predicted-seed*"):
        if d.name not in written and re.fullmatch(r"predicted-seed\d+", d.name) and (d / "summary.json").is_file():
            shutil.rmtree(d)


STALE_SCENARIO_FILES = ("from-bench.yaml", "from-bench-input-lengths.csv", "from-bench-output-lengths.csv",
                        "from-bench-trace.csv", "from-bench-profile.yaml")
"""What :func:`analysis.from_bench.write_scenario` may write for validate's built scenario."""
PLOT_NAMES = ("ttft", "tpot_itl")
"""The figures ``validate --plot`` writes into ``OUT/plots/``."""


def _drop_stale_outputs(out: Path, scenario_files: set[Path], plotted: bool) -> None:
    """Remove the built scenario's files (:data:`STALE_SCENARIO_FILES`) and the ``plots/``
    figures (:data:`PLOT_NAMES`) that an earlier validate into ``out`` wrote and this one does
    not: a run against ``--scenario S`` (no scenario built) or without ``--plot`` left the
    earlier run's from-bench.yaml and figures beside this run's table, read as this
    comparison's scenario and prediction. Only those names are removed."""
    for name in STALE_SCENARIO_FILES:
        p = out / name
        if p.is_file() and p not in scenario_files:
            p.unlink()
    if not plotted and (out / "plots").is_dir():
        for p in (out / "plots").iterdir():
            if p.is_file() and p.stem in PLOT_NAMES:
                p.unlink()
        if not any((out / "plots").iterdir()):
            (out / "plots").rmdir()


def validate_measured(args: argparse.Namespace) -> int:
    """``specsched validate --measured FILE[:LINE] [--scenario S | S] [--profile P]``: the same
    comparison as ``validate-bench`` (the issue's spelling of it)."""
    if args.seeds < 1:
        raise ConfigError("<command line>", "--seeds", args.seeds, "must be >= 1")
    ns = argparse.Namespace(file=args.measured, scenario=args.scenario_file or args.scenario, profile=args.profile,
                            arm=args.arm, set=args.set, seeds=args.seeds, seed=args.seed, lengths="args",
                            arrivals=getattr(args, "arrivals", None), out=args.out, plot=args.plot, log_x=args.log_x,
                            **{k: getattr(args, k, None) for k in ("dataset_path", "dataset_offset",
                                                                    "agentic_max_turns", "num_prompts",
                                                                    "mooncake_num_rounds", "mooncake_slowdown_factor")})
    return cmd_validate_bench(ns)


def add_parsers(sub: Any) -> None:
    """Register ``scenario from-bench`` and ``validate-bench``."""
    s = sub.add_parser("scenario", help="make scenarios (from-bench: from a bench_serving result)")
    ssub = s.add_subparsers(dest="scenario_command", required=True, metavar="{from-bench}")
    f = ssub.add_parser("from-bench", help="write a scenario reproducing a bench_serving run's arguments",
                        description="Write a scenario YAML from a bench_serving result line: arrivals "
                                    "(rate, max_concurrency, burstiness), num_prompts, lengths (random range "
                                    "ratio, ShareGPT-like, or the run's own details) and the server arguments "
                                    "in server_info. Example: specsched scenario from-bench runs.jsonl:3 --profile h200-1b")
    f.add_argument("file", metavar="FILE[:LINE]", help="bench_serving result file (JSONL or vLLM JSON), optionally :LINE")
    f.add_argument("--profile", required=True, help="profile name or path the scenario uses")
    f.add_argument("--out", help="scenario YAML to write (default <name>.yaml; an existing folder: <folder>/<name>.yaml)")
    f.add_argument("--name", help="scenario name (default: the line's tag or FILE-lineN)")
    f.add_argument("--burstiness", type=float, help="gamma shape of the arrival gaps (vLLM's --burstiness; 1 = Poisson)")
    f.add_argument("--template", help="scenario whose server and acceptance blocks are kept")
    f.add_argument("--lengths", choices=("args", "details"), default="args",
                   help="args: from the run's dataset arguments (default); details: histograms of its input_lens/output_lens")
    f.add_argument("--arrivals", choices=("rate", "details"), default="rate",
                   help="rate: arrivals drawn at the line's rate (default; a vLLM line at rate inf whose own arrivals "
                        "spread over the run, a --dataset-name timed_trace run, and a trace replay's line with send times "
                        "replay them); details: the run's "
                        "own arrivals and lengths as a trace (vllm bench serve --save-detailed lines: start_times "
                        "less queue_times)")
    add_agentic_options(f)
    # here too, as after every other command (`scenario -q from-bench` still works): SUPPRESS
    # keeps an absent -q from overriding the parent's
    f.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="print only the files written (the assumptions are in the scenario; a setup-mismatch warning still goes to stderr)")
    f.set_defaults(func=cmd_from_bench)

    v = sub.add_parser("validate-bench", help="predicted vs a real server's bench_serving run, metric by metric",
                       description="Simulate a scenario over seeds and compare with a bench_serving result "
                                   "line. Example: specsched validate-bench runs.jsonl:2 --scenario s.yaml --plot")
    v.add_argument("file", metavar="FILE[:LINE]", help="bench_serving result file, optionally :LINE")
    v.add_argument("--scenario", help="scenario YAML (default: built from the line with --profile)")
    v.add_argument("--profile", help="profile (overrides the scenario's; required without --scenario)")
    v.add_argument("--arm", default="base", help="arm of the scenario (default base)")
    v.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    v.add_argument("--seeds", type=seed_count, default=3, help="seeds to average the prediction over (default 3)")
    v.add_argument("--seed", type=nonnegative_int, help="first seed (default the scenario's)")
    v.add_argument("--lengths", choices=("args", "details"), default="args", help=argparse.SUPPRESS)
    v.add_argument("--arrivals", choices=("auto", "rate", "details"), default=None,
                   help="a scenario built from the line (no --scenario): auto (default) replays the line's own send "
                        "times and lengths where it has them (vllm bench serve --save-detailed, specsched's own "
                        "lines), as calibrate --from does, else draws arrivals at its rate; rate draws (but for a vLLM "
                        "line at rate inf whose arrivals spread over the run: a timed_trace run); details always "
                        "replays")
    v.add_argument("--out", help="output folder (default results/validate-bench/<file>-line<N>; a results directory's bench_serving.jsonl: <scenario>-<run>-line<N>)")
    v.add_argument("--plot", action="store_true", help="overlay measured TTFT/TPOT/ITL distributions on the prediction")
    v.add_argument("--log-x", action="store_true", help="logarithmic latency axes in the plots")
    add_agentic_options(v)
    v.set_defaults(func=cmd_validate_bench)
